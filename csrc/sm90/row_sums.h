// The row-sum warps of the SM90 kernel (GemmParams::row_sums): the sums over K of A's rows, written
// beside C. nn.Linear's backward computes the weight's gradient as g^T x, A = g^T, whose row sums
// are the bias's gradient: torch reads g once more for them in a reduction kernel of its own. Here
// warps 1-3 of the producer warpgroup (idle in the other kernels but the activation warps') read
// each A tile of a tile column 0 from the ring while the consumers multiply it. Included by
// sm90/kernel.h only.
#pragma once

#include <cute/tensor.hpp>

#include "sm90/kernel_parts.h"

namespace cute_gemm::sm90 {

// The kernels that can: a 16-bit M-major A loaded by TMA (the weight gradient's g^T; in a K-major
// A a row is spread over 16-byte units of one row and would need another walk), no cluster (a
// slot's release would then also wait on the peer's warps), whole tiles (the host sets row_sums
// only on plans without K slices or a stream-K tail: a partial row sum would need the pieces'
// sum), and not the activation warps' kernel, which uses the same warps.
template <class Tr, bool kOffload>
inline constexpr bool kRowSumsCan = !Tr::kAKMajor && Tr::kCluster == 1 && !Tr::kCpAsync && !Tr::kGated && !kOffload &&
                                    sizeof(typename Tr::Element) == 2;
// One warp per 64 rows of the tile (at most three: rows 8 and 12's 192-row tiles).
template <class Tr>
inline constexpr int kRowSumWarps = Tr::kBM / 64;

// Warp w (1 .. kRowSumWarps) sums rows 64 (w - 1) .. 64 w - 1 of every tile of column 0: lane l
// holds 4 rows, half of a 16-byte unit of an M-major smem row (rows 4 (l % 16) ..), k rows
// l / 16, l / 16 + 2, ... of each k-tile, in fp32; at the tile's end the two k phases meet by a
// shuffle (the same bits every run: a + b is b + a), and lanes 0-15 store their 4 sums rounded to
// A's type. (Eight rows a lane, 16-byte loads, spilled in the 32 to 40 registers of the producer
// warpgroup, sm90/traits.h.) The warp waits for every slot and releases it once (a tile of another
// column included: the empty barriers count these warps in every launch that has them).
template <class Tr>
CUTE_DEVICE void sum_rows_of_a(const GemmParams& p, typename Tr::SharedStorage& smem, const TileWalk<Tr>& walk) {
  using E = typename Tr::Element;
  constexpr int kBM = Tr::kBM, kBK = Tr::kBK, kRows = 4, kPhases = 32 / (64 / kRows);
  static_assert(kBM % 64 == 0 && kBK % kPhases == 0 && sizeof(E) == 2, "64-row warps over 16-bit k rows");
  Tensor sA = make_tensor(make_smem_ptr(smem.a), typename Tr::SmemLayoutA{});  // (BM,BK,PIPE)
  const int warp = threadIdx.x / 32 - 1, lane = threadIdx.x % 32;
  const int row = 64 * warp + kRows * (lane % (64 / kRows));  // this lane's first row in the tile
  const int phase = lane / (64 / kRows);
  E* out = static_cast<E*>(p.row_sums);
  RingState<Tr::kStages> ring;
  WorkCursor cursor = walk.start;
  Unit unit;
  while (cursor.next(unit)) {
    const BatchTile tile = walk.tile_of(unit.tile);
    const bool mine = tile.n == 0;
    float sum[kRows] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll 1
    for (int kt = unit.kb; kt < unit.ke; ++kt) {
      FullBarrier::wait(&smem.full[ring.stage], ring.phase);
      if (mine) {
        // Two loads in flight: one at a time waits a shared-memory latency per 8 bytes (the slot's
        // rows could take longer than its WGMMAs); four spilled next to three consumers.
#pragma unroll 2
        for (int k = phase; k < kBK; k += kPhases) {
          // Four rows of one k row: half of a 16-byte unit of the 128-byte swizzled smem row (the
          // swizzle permutes whole units).
          const uint2 v = *reinterpret_cast<const uint2*>(&sA(row, k, ring.stage));
          const E* e = reinterpret_cast<const E*>(&v);
          CUTE_UNROLL
          for (int i = 0; i < kRows; ++i) sum[i] += float(e[i]);
        }
      }
      __syncwarp();  // every lane's reads done before the slot goes back
      if (lane == 0) EmptyBarrier::arrive(&smem.empty[ring.stage]);
      ring.advance();
    }
    if (mine) {
      static_assert(kPhases == 2, "one shuffle joins the phases");
      CUTE_UNROLL
      for (int i = 0; i < kRows; ++i) sum[i] += __shfl_xor_sync(0xffffffffu, sum[i], 16);
      const int m0 = tile.m * kBM + row;
      if (phase == 0) {
        CUTE_UNROLL
        for (int i = 0; i < kRows; ++i) {
          if (m0 + i < p.m) out[m0 + i] = E(sum[i]);
        }
      }
    }
  }
}

}  // namespace cute_gemm::sm90
