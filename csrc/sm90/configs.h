// The SM90 (TMA + mbarrier ring + WGMMA, warp-specialized, persistent) tile configurations:
// one table read by the kernel traits and the host dispatch, as for SM80.
#pragma once

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

// Host rule, from the H100 runs in docs/tuning.md: this family once its tiles give at least three
// quarters of the SMs a block; few-tile problems go to the SM80 family, whose 128x128 tile makes
// twice as many blocks (128x8192x8192: 0.57x torch.mm there against 0.41x here).
inline bool worth_it(int m, int n, int num_sms) {
  const auto& c = kConfigs[0];
  const long long tiles = (long long)((m + c.bm - 1) / c.bm) * ((n + c.bn - 1) / c.bn);
  return 4 * tiles >= 3 * (long long)num_sms;
}

}  // namespace cute_gemm::sm90
