// The SM90 GEMM kernel: the multistage ring of the SM80 family rebuilt from Hopper parts, as a
// wiring of its collectives. Warpgroup 0 is the producer (sm90/producer.h): TMA loads of A/B tiles
// by one elected thread, or cp.async by all 128 (narrow kernels), into a kStages shared-memory ring,
// each slot guarded by a "full" and an "empty" mbarrier. Warpgroups 1..kConsumers are consumers:
// WGMMA from shared memory into fp32 accumulators (sm90/mainloop.h); the consumers (two; three on
// the 192-row tiles) interleave on the tensor cores while each waits for its own batch. Split-K and
// stream-K pieces meet in sm90/split_k.h; the epilogue (sm90/epilogue_c.h) applies addmm's bias
// and activation and stores C, some of it under the next tile's main loop. The grid is persistent
// (one block per SM) and walks tiles in the grouped order of tile_scheduler.h; the producer runs
// ahead into the next tile while consumers store C. Included only by
// csrc/instantiations/sm90_*.cu; its host launcher in sm90/run.h.
#pragma once

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "sm90/kernel_stub.h"  // another arch's device pass: the kernels' names only
#else

#include <cuda_runtime.h>

#include <cute/arch/cluster_sm90.hpp>
#include <cutlass/arch/reg_reconfig.h>

#include "pdl.h"
#include "sm90/launch.h"
#include "sm90/trace.h"
#include "sm90/traits.h"

// WGMMA and setmaxnreg exist only in the arch-specific sm_90a target: the only device pass that
// reaches here (other arches take kernel_stub.h above); the host pass leaves the body out.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CUTE_GEMM_SM90_ENABLED 1
#endif

#include "sm90/activation_warps.h"
#include "sm90/epilogue_c.h"
#include "sm90/kernel_parts.h"
#include "sm90/mainloop.h"
#include "sm90/producer.h"
#include "sm90/row_sums.h"
#include "sm90/split_k.h"

namespace cute_gemm::sm90 {

// kOffload: the activation warps' kernel, launched by run() (sm90/run.h) where they apply; it has
// no split-K / stream-K and no epilogue math in the consumers, which keeps their registers free.
// kLean: the kernel of the common call (choose_epilogue_kernel, sm90/configs.h): TMA-stored 16-bit C, at most alpha
// and a 16-bit bias row, no activation. It leaves out the general X term, the consumers'
// activations, the staged rows and the element stores, which are most of the general kernel's
// code (21,744 instructions against 3,592 on row 2, docs/tuning.md section 24): the epilogue's
// instruction-cache misses were its largest stall.
// kSums: the lean kernel that also sums A's rows (sm90/row_sums.h), launched for mm_row_sums only,
// so that the lean kernel of every other call stays as it is.
template <class Tr, bool kOffload, bool kLean = false, bool kSums = false>
__global__ void __launch_bounds__(Tr::kThreads, 1) gemm_kernel(CUTE_GRID_CONSTANT KernelParams<Tr> const params) {
#if defined(CUTE_GEMM_SM90_ENABLED)
  const GemmParams& p = params.p;
  static_assert(!kSums || (kLean && Tr::kRowSumsCan), "row sums: the lean kernel of a row that can");

  // The storage starts at the first 1024-byte aligned shared address (128-byte swizzle atoms),
  // found on the 32-bit shared address and added to the shared array itself: the compiler then
  // knows every member is shared memory and addresses it as such (aligned through a generic
  // 64-bit integer, the base took two registers and the C tile's loads went through generic
  // loads; ptxas spilled around the late C pair, 2026-11-26).
  extern __shared__ char smem_raw[];
  auto& smem = *reinterpret_cast<typename Tr::SharedStorage*>(
      smem_raw + ((1024 - (cute::cast_smem_ptr_to_uint(smem_raw) & 1023)) & 1023));

  const int warp_group = threadIdx.x / 128;
  // The row sums' consumers also multiply A by ones on column 0's tiles (sm90/row_sums.h).
  if constexpr (kSums) fill_ones<Tr>(smem);
  if (threadIdx.x == 0) {
    CUTE_UNROLL
    for (int s = 0; s < Tr::kStages; ++s) {
      // The producer's arrive + TMA bytes; a narrow kernel's: each producer thread's cp.async arrival.
      FullBarrier::init(&smem.full[s], Tr::kCpAsync ? Tr::kCopyThreads : 1);
      EmptyBarrier::init(&smem.empty[s], Tr::kEmptyArrivals);  // consumer warps of the cluster
    }
    CUTE_UNROLL
    for (int b = 0; b < 2; ++b) {
      EmptyBarrier::init(&smem.c_ready[b], 128 * Tr::kConsumers);
      EmptyBarrier::init(&smem.c_free[b], 1);
    }
    cutlass::arch::fence_barrier_init();
    if constexpr (!Tr::kCpAsync) {  // the narrow kernels have no A or B descriptors
      cute::prefetch_tma_descriptor(params.tma_a.get_tma_descriptor());
      cute::prefetch_tma_descriptor(params.tma_b.get_tma_descriptor());
    }
    if constexpr (Tr::kGated) cute::prefetch_tma_descriptor(params.tma_b2.get_tma_descriptor());
    if (p.c_vector_ok) cute::prefetch_tma_descriptor(params.tma_c.get_tma_descriptor());
  }
  // Barrier inits must be visible to the peer block before it multicasts or arrives here.
  if constexpr (Tr::kCluster > 1) {
    cute::cluster_sync();
  } else {
    __syncthreads();
  }
  // Programmatic dependent launch (GemmParams::pdl, pdl.h): the previous kernel may have written
  // A, B or the bias, or still read what this one overwrites.
  pdl_launch_dependents_then_wait();

  const TileWalk<Tr> walk(p, kOffload);
  if (warp_group == 0) {
    // The activation warps need more than the producer thread: with no epilogue math of their own
    // the consumers fit in 224 (56 + 2 x 224 = 3 x 168).
    cutlass::arch::warpgroup_reg_dealloc<kOffload ? 56 : Tr::kProducerRegs>();
    if constexpr (Tr::kCpAsync) {
      produce_narrow<Tr>(p, smem, walk);
    } else if (threadIdx.x == 0) {
      produce_tma<Tr>(params, smem, walk);
    } else if (kOffload && threadIdx.x >= 32) {
      run_activation_warps<Tr>(params, smem, walk);
    }
  } else {
    cutlass::arch::warpgroup_reg_alloc<kOffload ? 224 : Tr::kConsumerRegs>();
    const int ctid = threadIdx.x - 128;   // 0 .. 128 * kConsumers - 1
    const int consumer = warp_group - 1;  // which kRowsPerConsumer-row slice of the tile (64; 128 on row 6)
    Tracer trace(p.trace, 1 + consumer, ctid % 128 == 0 && consumer < 2);  // a CUTE_GEMM_TRACE build only (3 roles)
    trace(kTrStart);
    uint32_t units = 0;
    auto mainloop = make_mainloop<Tr>(smem, ctid);
    Tensor acc = mainloop.accumulators();
    auto sums = [&] {
      if constexpr (kSums) {
        return make_row_sums<Tr>(smem, ctid);
      } else {
        return NoRowSums{};
      }
    }();
    auto epilogue = make_epilogue<Tr, kOffload, kLean>(params, smem, trace, mainloop.coordinates(), ctid, consumer);
    RingState<Tr::kStages> ring;
    WorkCursor cursor = walk.start;
    Unit unit;
    while (cursor.next(unit)) {
      const BatchTile tile = walk.tile_of(unit.tile);
      auto events = epilogue.schedule_deferred(unit.kb, unit.ke);
      sums.begin(tile.n == 0);
      mainloop.run(ring, unit, acc, sums, trace, [&](int kt) { epilogue.run_due(events, kt, unit.ke); });
      trace(kTrMainDone, units++);
      sums.store(p, tile.m * Tr::kBM);
      const auto bias = epilogue.load_bias(tile.n * Tr::kBN);
      if (!kOffload && unit.parts > 1) {
        const TilePieces<Tr> pieces(p, walk, unit, tile.m * Tr::kBM, ctid);
        if (!pieces.leave(acc, p, smem, ctid, kSplitBarrier<Tr>)) continue;  // not the last piece: it stores C
        pieces.sum(acc);
      }
      if constexpr (Tr::kGated) {
        epilogue.store_gated_tile(acc, tile);
      } else {
        epilogue.store_tile(acc, tile, bias, cursor.has_next());
      }
      trace(kTrEpilogueDone, units - 1);
    }
    epilogue.finish();
    trace(kTrEnd, mainloop.loads);
  }
  // The peer may still multicast into this block or arrive on its barriers until it is done.
  if constexpr (Tr::kCluster > 1) cute::cluster_sync();
#else
  // Built for an arch without WGMMA: the host launches this family only on sm_90 devices and only
  // when the build targeted sm_90a (CUTE_GEMM_HAS_SM90A, set by setup.py).
  __trap();
#endif
}

}  // namespace cute_gemm::sm90

#include "sm90/run.h"

#endif  // another arch's device pass
