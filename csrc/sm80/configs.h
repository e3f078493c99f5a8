// The SM80 (cp.async + ldmatrix + mma.sync) tile configurations: one table read by the kernel
// traits (compile time) and by the host heuristic that picks one per problem (run time).
#pragma once

#include <algorithm>

#include "tile_scheduler.h"

namespace cute_gemm::sm80 {

struct TileConfig {
  int bm, bn, bk;  // thread-block tile
  int stages;      // depth of the shared-memory ring
  int warps_m, warps_n;
  const char* name;
};

// Rows 0 and 1 keep a 64x64 warp tile: 4x8 mma.sync atoms per k16 step against 4+4 ldmatrix.x4, the
// ratio that keeps the tensor cores fed from shared memory. Row 2's 32x32 warp tiles trade it for 4x
// row 1's blocks, for the narrow kernels (docs/tuning.md sections 3 and 15). Rows are parsed by
// csrc/instantiations/generate.py and the tests: keep one row per line, "/* index */ {...}".
inline constexpr TileConfig kConfigs[] = {
    /* 0 */ {128, 256, 64, 3, 2, 4, "128x256x64_s3_w8"},  // many tiles
    /* 1 */ {128, 128, 32, 4, 2, 2, "128x128x32_s4_w4"},  // few tiles: twice the blocks
    /* 2 */ {64, 64, 64, 4, 2, 2, "64x64x64_s4_w4"},      // small problems: 4x row 1's blocks
};
inline constexpr int kNumConfigs = sizeof(kConfigs) / sizeof(kConfigs[0]);

// The rows by name (the C tile), as the rules and the host code refer to them.
enum Row : int { k128x256 = 0, k128x128 = 1, k64x64 = 2 };
static_assert(kConfigs[k128x256].bn == 256 && kConfigs[k128x128].bn == 128 && kConfigs[k64x64].bm == 64 && kNumConfigs == 3,
              "the row names match the table");

// Shared memory one block of a configuration takes: the A/B ring, or the C staging tile (padded
// rows) where that is larger, since the epilogue reuses the ring.
constexpr int smem_bytes(const TileConfig& c, int element_bytes = 2) {
  const int ring = (c.bm + c.bn) * c.bk * c.stages;
  const int c_stage = c.bm * (c.bn + 8);
  return element_bytes * (ring > c_stage ? ring : c_stage);
}

// The rows with a plain (16-byte cp.async) kernel, the ones choose_config picks (generate.py reads
// this line). Row 2 is built as a narrow kernel only: no rule takes its plain one, and a pinned
// CUTE_GEMM_SM80_CONFIG=2 runs the narrow kernel (plan.cpp).
inline constexpr int kPlainConfigs[] = {0, 1};
constexpr bool has_plain(int cfg) {
  for (int c : kPlainConfigs) {
    if (c == cfg) return true;
  }
  return false;
}

// TF32 (float32 operands, K-major only) runs this row: its 32-element K tile is one 128-byte row.
inline constexpr int kTf32Config = k128x128;

// The large tile where its tiles fill the GPU (2048^3's 128 tiles on 132 SMs still win with it)
// and it fits the block's shared memory (144 KB: not on sm_86/sm_89, which give a block 99 KB),
// else the 128x128 tile (64 KB), twice the blocks (docs/tuning.md section 3, the rule).
inline int choose_config(int m, int n, int num_sms, int smem_per_block) {
  const bool big_fits = smem_bytes(kConfigs[k128x256]) <= smem_per_block;
  return big_fits && tiles_fill_gpu(m, n, kConfigs[k128x256].bm, kConfigs[k128x256].bn, num_sms) ? k128x256 : k128x128;
}

// The narrow kernels: 4-byte cp.async vectors, for 16-bit operands whose rows are 4-byte but not
// 16-byte aligned (an even K or N that is not a multiple of 8: 574^3, 2050^3), read in place
// instead of copied into padded buffers first (docs/tuning.md section 15). Rows they are built for
// (generate.py reads this line): the few-tile and small-problem rows.
inline constexpr int kNarrowConfigs[] = {1, 2};
constexpr bool has_narrow(int cfg) {
  for (int c : kNarrowConfigs) {
    if (c == cfg) return true;
  }
  return false;
}

// The narrow kernels' row: the 64x64 tile where 128x128 tiles would leave more than half the SMs
// idle or most of their rows empty (M <= 64), else the 128x128 tile. Deeper rings for the 64x64
// tile did not pay (docs/tuning.md section 15, the narrow sm80 kernels; section 23).
inline int choose_narrow_config(int m, int n, long long batch, int num_sms) {
  return m <= 64 || 2 * tile_count(m, n, kConfigs[k128x128].bm, kConfigs[k128x128].bn) * batch <= num_sms ? k64x64
                                                                                                         : k128x128;
}

// Whether the narrow kernels beat the copy path (the operands that need it copied into padded
// buffers, then the default family's kernel), by two time estimates in microseconds fitted to the
// H200 measurements (docs/tuning.md section 15, narrow_pays; tests/test_chooser.py checks each):
//   narrow: 3 + max(FLOP / 100 TFLOP/s, operand bytes / 1.2 TB/s, K x 7 ns)
//   copy:   5 + max(FLOP / R, operand bytes / 3 TB/s, serial) + copied bytes / 0.7 TB/s + 3 per copied operand
// K x 7 ns: a block walks all of K (no split-K in the SM80 family), about 0.45 us per 64-wide k-tile.
// Behind the SM90 family R = 450 TFLOP/s and serial = 0; behind the SM80 family (`sm90_default`
// false: a GPU without sm_90a code, or CUTE_GEMM_FAMILY=sm80) R = 250 TFLOP/s and serial = K x 11 ns
// (row 1's 32-wide k-tiles at about 0.35 us).
// `copy_a` / `copy_b`: which operands the copy path copies.
inline bool narrow_pays(double m, double n, double k, double batch, bool copy_a, bool copy_b, bool sm90_default) {
  const double flop = 2 * m * n * k * batch;
  const double bytes_a = 2 * m * k * batch, bytes_b = 2 * n * k * batch;  // 16-bit operands only
  const double narrow_us = 3 + std::max({flop / 100e6, (bytes_a + bytes_b) / 1.2e6, k * 0.007});
  const double copied = (copy_a ? bytes_a : 0) + (copy_b ? bytes_b : 0);
  const double copy_us = 5 +
                         std::max({flop / (sm90_default ? 450e6 : 250e6), (bytes_a + bytes_b) / 3e6,
                                   sm90_default ? 0.0 : k * 0.011}) +
                         copied / 0.7e6 + 3 * (int(copy_a) + int(copy_b));
  return narrow_us < copy_us;
}

}  // namespace cute_gemm::sm80
