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
};
inline constexpr int kNumConfigs = sizeof(kConfigs) / sizeof(kConfigs[0]);

// Host rule, from the H100 runs in docs/tuning.md: this family once its tiles fill the GPU;
// few-tile problems go to the SM80 family, whose 128x128 tile makes twice the blocks
// (128x8192x8192: 0.57x torch.mm there against 0.39x here).
inline bool worth_it(int m, int n, int num_sms) {
  return tiles_fill_gpu(m, n, kConfigs[0].bm, kConfigs[0].bn, num_sms);
}

}  // namespace cute_gemm::sm90
