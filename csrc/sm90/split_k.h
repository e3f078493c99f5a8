// The sum of a tile's pieces under split-K and stream-K (GemmParams::splits, sk_tiles): every
// piece leaves its fp32 partial in the workspace and counts itself; the last to arrive, whichever
// it is, sums all of them in piece order and runs the epilogue. Nobody waits for another block (no
// deadlock, whatever is resident), and the sum's order is fixed (bitwise reproducible). Included
// by sm90/kernel.h only.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "sm90/kernel_parts.h"

namespace cute_gemm::sm90 {

// Piece unit.part of the unit.parts pieces of this block's tile (rows from row0), for consumer
// thread ctid. A partial is one kBM x kBN fp32 slot per piece, value i of consumer thread ctid at
// i * kThreadsC + ctid (coalesced). A warp's accumulators are 16 rows of its 64-row WGMMA atom:
// warps whose rows all lie past M (small M, decode) neither write nor read them.
template <class Tr>
struct TilePieces {
  static constexpr int kTileValues = Tr::kBM * Tr::kBN;
  static constexpr int kThreadsC = 128 * Tr::kConsumers;
  const Unit& unit;
  int64_t tile_id;  // this block's tile, numbered across the cluster and the batch
  float* slots;     // the tile's slot group, at this thread's first value
  bool rows_inside;

  CUTE_DEVICE TilePieces(const GemmParams& p, const TileWalk<Tr>& walk, const Unit& unit_, int row0, int ctid)
      : unit(unit_) {
    tile_id = int64_t(unit.slot_tile) * Tr::kCluster + walk.rank;
    slots = p.workspace + tile_id * walk.slot_stride * int64_t(kTileValues) + ctid;
    // The warp's first row is derived from %tid.x read here: hoisted out of the unit loop, the
    // value was held across it and ptxas spilled it (4 bytes, fp16 kernels: the register peak
    // is the 16-bit bias path's).
    const int tid = fresh_tid_x();
    rows_inside = row0 + (tid / 128 - 1) * Tr::kRowsPerConsumer + (tid % 128) / 32 * 16 < p.m;
  }

  // Stores acc as this piece's partial and counts it; returns whether this piece was the last to
  // arrive (then sum() adds the others'). barrier: a named barrier of all consumer threads.
  template <class Acc>
  CUTE_DEVICE bool leave(const Acc& acc, const GemmParams& p, typename Tr::SharedStorage& smem, int ctid,
                         uint32_t barrier) const {
    if (rows_inside) {
      float* slot = slots + unit.part * int64_t(kTileValues);
      CUTE_UNROLL
      for (int i = 0; i < size(acc); ++i) slot[i * kThreadsC] = acc(i);
    }
    cutlass::arch::NamedBarrier::sync(kThreadsC, barrier);
    if (ctid == 0) {
      // Release the block's partial (ordered before this thread by the barrier), count it,
      // and acquire the others' if this was the last slice to arrive. Every piece has then
      // counted: the last leaves the counter zeroed for the next launch (the default stream's
      // counters serve each split launch on it in turn, launch.cpp).
      __threadfence();
      const bool last = atomicAdd(p.flags + tile_id, 1) == unit.parts - 1;
      if (last) p.flags[tile_id] = 0;
      smem.split_last = last;
      __threadfence();
    }
    cutlass::arch::NamedBarrier::sync(kThreadsC, barrier);
    return smem.split_last;
  }

  // The last piece to arrive, whichever it is, sums all pieces in piece order: the same bits every
  // time. Pieces 0 and 1 keep their own values and add the other's (p0 + p1 is p1 + p0 to the
  // bit): one partial fewer through L2, the only read of a two-piece tile.
  template <class Acc>
  CUTE_DEVICE void sum(Acc& acc) const {
    if (rows_inside) {
      int s = 2;
      if (unit.part < 2) {
        const float* other = slots + (1 - unit.part) * int64_t(kTileValues);
        CUTE_UNROLL
        for (int i = 0; i < size(acc); ++i) acc(i) += __ldcg(other + i * kThreadsC);  // L2: another SM wrote it
      } else {
        CUTE_UNROLL
        for (int i = 0; i < size(acc); ++i) acc(i) = __ldcg(slots + i * kThreadsC);
        s = 1;
      }
      for (; s < unit.parts; ++s) {
        const float* slot = slots + s * int64_t(kTileValues);
        CUTE_UNROLL
        for (int i = 0; i < size(acc); ++i) acc(i) += __ldcg(slot + i * kThreadsC);
      }
    }
  }
};

}  // namespace cute_gemm::sm90
