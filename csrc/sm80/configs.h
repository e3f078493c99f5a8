// The SM80 (cp.async + ldmatrix + mma.sync) tile configurations: one table read by the kernel
// traits (compile time) and by the host heuristic that picks one per problem (run time).
#pragma once

namespace cute_gemm::sm80 {

struct TileConfig {
  int bm, bn, bk;  // thread-block tile
  int stages;      // depth of the shared-memory ring
  int warps_m, warps_n;
  const char* name;
};

// Both keep a 64x64 warp tile: 4x8 mma.sync atoms per k16 step against 4+4 ldmatrix.x4, the
// ratio that keeps the tensor cores fed from shared memory.
inline constexpr TileConfig kConfigs[] = {
    /* 0 */ {128, 256, 32, 4, 2, 4, "128x256x32_s4_w8"},  // many tiles: fewest bytes per FLOP
    /* 1 */ {128, 128, 32, 4, 2, 2, "128x128x32_s4_w4"},  // few tiles: twice as many blocks
};
inline constexpr int kNumConfigs = sizeof(kConfigs) / sizeof(kConfigs[0]);

// Host rule: the large tile once it gives every SM at least one block, else the small one.
inline int choose_config(int m, int n, int num_sms) {
  const auto& big = kConfigs[0];
  const long long big_tiles = (long long)((m + big.bm - 1) / big.bm) * ((n + big.bn - 1) / big.bn);
  return big_tiles >= num_sms ? 0 : 1;
}

}  // namespace cute_gemm::sm80
