// What every part of the SM90 kernel shares: its parameters, the ring's barriers and (stage, phase)
// state, and the walk of a block over its output tiles. Included by sm90/kernel.h (its sm_90a
// device pass and its host pass), its parts and sm90/run.h.
#pragma once

#include <algorithm>

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "sm90/traits.h"
#include "tile_scheduler.h"

namespace cute_gemm::sm90 {

template <class Tr>
struct KernelParams {
  typename Tr::TmaA tma_a;
  typename Tr::TmaB tma_b;
  typename Tr::TmaC tma_c;  // built only when p.c_vector_ok (16-bit C, 16-byte aligned rows)
  GemmParams p;
  // The gated kernel's B2 (GemmParams::b2); last, so that the other kernels' parameters keep their places.
  std::conditional_t<Tr::kGated, typename Tr::TmaB, char> tma_b2;
};

// A ring slot is "full" once its A and B tiles landed (the producer's arrival and TMA's
// transaction bytes, or every narrow producer thread's cp.async arrival) and "empty" once every
// consumer warp of the cluster is done reading it.
using FullBarrier = cutlass::arch::ClusterTransactionBarrier;
using EmptyBarrier = cutlass::arch::ClusterBarrier;

// (stage, phase) of a ring walked in lockstep by producer and consumers across tiles.
template <int kStages>
struct RingState {
  int stage = 0;
  uint32_t phase = 0;
  CUTE_DEVICE void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

// The kernel's named barriers (0 is __syncthreads'): one per consumer warpgroup (its epilogue's
// staging), one of all consumer threads (split-K), one of the activation warps.
constexpr uint32_t epilogue_barrier_of(int consumer) { return 1 + consumer; }
template <class Tr>
inline constexpr uint32_t kSplitBarrier = 1 + Tr::kConsumers;
template <class Tr>
inline constexpr uint32_t kActBarrier = 2 + Tr::kConsumers;

// threadIdx.x read where it is used: the front end neither hoists an asm volatile nor shares it
// with other reads, so a value derived from it is not held in a register (or spilled) until then
// (ptxas could still move the read; the build's -Xptxas -v report is the check).
CUTE_DEVICE int fresh_tid_x() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t;
}

// The units of work of one block and where their tiles lie. The blocks of a cluster compute
// vertically adjacent tiles (same B tile): the scheduler walks "cluster tiles" of kCluster x 1
// tiles in the grouped order. A block whose tile lies past M (odd tile rows) still loads and
// computes zeros, since its peer needs its half of B; its stores are clipped. Every role walks
// its own copy of `start` (the same units in the same order).
template <class Tr>
struct TileWalk {
  int rank;  // this block's place in its cluster
  int num_cm, num_n, batch_tiles, group;
  WorkCursor start;
  int slot_stride;  // partials per slot group of the split-K / stream-K workspace

  // whole_tiles: the activation warps' kernel, which has no split-K and no stream-K.
  CUTE_DEVICE TileWalk(const GemmParams& p, bool whole_tiles) {
    constexpr int kCluster = Tr::kCluster;
    rank = kCluster > 1 ? int(cute::block_rank_in_cluster()) : 0;
    const int num_m = (p.m + Tr::kBM - 1) / Tr::kBM;
    num_n = (p.n + Tr::kBN - 1) / Tr::kBN;
    num_cm = (num_m + kCluster - 1) / kCluster;
    // Tile and unit counts are 32-bit: the host launches fewer than 2^31 units (sm90::run).
    batch_tiles = num_cm * num_n;  // cluster tiles of one batch
    const int num_cluster_tiles = batch_tiles * p.batch;
    group = std::max(p.group_m / kCluster, 1);
    const int first = blockIdx.x / kCluster, step = gridDim.x / kCluster;
    const int k_tiles = (p.k + Tr::kBK - 1) / Tr::kBK;
    // Split-K and stream-K: every piece of a shared tile leaves its fp32 partial in the workspace
    // and counts itself; the last to arrive sums all of them in piece order and runs the epilogue
    // (sm90/split_k.h).
    const int splits = whole_tiles ? 1 : p.splits;
    start = WorkCursor::make(num_cluster_tiles, k_tiles, splits, whole_tiles ? 0 : p.sk_tiles,
                             whole_tiles ? 0 : p.sk_workers, first, step);
    slot_stride = p.sk_tiles > 0 ? p.sk_slots : splits;
  }
  // Cluster tile t: batch t / batch_tiles, then the grouped order within the batch.
  CUTE_DEVICE BatchTile tile_of(int t) const {
    const TileCoord c = grouped_tile(t % batch_tiles, num_cm, num_n, group);
    return BatchTile{c.m * Tr::kCluster + rank, c.n, int(t / batch_tiles)};
  }
};

}  // namespace cute_gemm::sm90
