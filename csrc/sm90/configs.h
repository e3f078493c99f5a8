// The SM90 (TMA + mbarrier ring + WGMMA, warp-specialized, persistent) tile configurations:
// one table read by the kernel traits and the host dispatch, as for SM80.
#pragma once

namespace cute_gemm::sm90 {

struct TileConfig {
  int bm, bn, bk;
  int stages;     // shared-memory ring depth
  int consumers;  // math warpgroups; each owns bm / consumers rows of the tile
  int mma_batches_in_flight;  // WGMMA batches left running while waiting for the next slot
  const char* name;
};

// One row per line, "/* index */ {...}": csrc/instantiations/generate.py and the tests parse it.
inline constexpr TileConfig kConfigs[] = {
    /* 0 */ {128, 256, 64, 3, 2, 0, "128x256x64_s3_c2_w0"},  // cooperative: 2 x (64x256) per tile
    /* 1 */ {128, 256, 64, 3, 2, 1, "128x256x64_s3_c2_w1"},
};
inline constexpr int kNumConfigs = sizeof(kConfigs) / sizeof(kConfigs[0]);

}  // namespace cute_gemm::sm90
