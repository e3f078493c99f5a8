// The SM90 (TMA + mbarrier ring + WGMMA, warp-specialized, persistent) tile configurations:
// one table read by the kernel traits and the host dispatch, as for SM80.
#pragma once

#include "tile_scheduler.h"

namespace cute_gemm::sm90 {

struct TileConfig {
  int bm, bn, bk;
  int stages;     // shared-memory ring depth
  int consumers;  // math warpgroups; each owns bm / consumers rows of the tile
  const char* name;
};

// One row per line, "/* index */ {...}": csrc/instantiations/generate.py and the tests parse it.
inline constexpr TileConfig kConfigs[] = {
    /* 0 */ {128, 256, 64, 3, 2, "128x256x64_s3_c2"},  // cooperative: 2 x (64x256) per tile
    /* 1 */ {128, 128, 64, 5, 2, "128x128x64_s5_c2"},  // 2 x (64x128): deeper ring, twice the tiles
};
inline constexpr int kNumConfigs = sizeof(kConfigs) / sizeof(kConfigs[0]);

// Host rule, from the H100 runs in docs/tuning.md: the 128x256 tile once its tiles fill the GPU,
// else the 128x128 tile with its deeper ring, which makes twice the blocks (128x8192x8192: 0.66x
// torch.mm against 0.38x with the large tile and 0.56x with the sm80 family).
inline int choose_config(int m, int n, int num_sms) {
  return tiles_fill_gpu(m, n, kConfigs[0].bm, kConfigs[0].bn, num_sms) ? 0 : 1;
}

}  // namespace cute_gemm::sm90
