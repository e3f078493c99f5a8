// The consumers' main loop of the SM90 kernel: WGMMA from the shared-memory ring into fp32
// accumulators, each consumer warpgroup on its kRowsPerConsumer-row slice of the tile. Per k-tile:
// wait for the slot, issue its WGMMAs, run the caller's work for that k-tile (the epilogue's
// deferred stores of the previous tile, sm90/epilogue_c.h) while they run, then wait until only
// this batch is in flight, so that the previous batch's slot goes back to the producer while the
// tensor cores work. Included by sm90/kernel.h only.
#pragma once

#include <cute/tensor.hpp>

#include "sm90/kernel_parts.h"
#include "sm90/trace.h"

namespace cute_gemm::sm90 {

template <class Tr, class ThrMma, class FragA, class FragB>
struct Mainloop {
  typename Tr::SharedStorage& smem;
  typename Tr::TiledMma mma;
  ThrMma thr_mma;
  FragA tCrA;  // WGMMA shared-memory descriptors: (MMA,MMA_M,MMA_K,PIPE)
  FragB tCrB;  // (MMA,MMA_N,MMA_K,PIPE)
  bool lane0;  // one arrival per warp on the "empty" barriers
  uint32_t loads = 0;  // slots consumed (the trace's argument)

  // The fp32 accumulators of this thread: (MMA,MMA_M,MMA_N).
  CUTE_DEVICE auto accumulators() const {
    return partition_fragment_C(mma, make_shape(Int<Tr::kBM>{}, Int<Tr::kBN>{}));
  }
  // (row, col) in the tile of each accumulator.
  CUTE_DEVICE auto coordinates() const {
    return thr_mma.partition_C(make_identity_tensor(make_shape(Int<Tr::kBM>{}, Int<Tr::kBN>{})));
  }

  // One lane per warp releases a slot, to every block of the cluster, once the warp's WGMMAs
  // that read it are complete.
  CUTE_DEVICE void release(int stage) {
    CUTE_UNROLL
    for (int c = 0; c < Tr::kCluster; ++c) {
      if constexpr (Tr::kCluster > 1) {
        EmptyBarrier::arrive(&smem.empty[stage], c, lane0);
      } else if (lane0) {
        EmptyBarrier::arrive(&smem.empty[stage]);
      }
    }
  }

  // k-tiles [unit.kb, unit.ke) into acc (overwritten), and into sums where they are on
  // (sm90/row_sums.h: A x ones in the same batches), calling during(kt) once each k-tile's WGMMAs
  // are issued. The operand fences keep the compiler from touching the accumulators meanwhile.
  template <class Acc, class Sums, class During>
  CUTE_DEVICE void run(RingState<Tr::kStages>& ring, const Unit& unit, Acc& acc, Sums& sums, Tracer& trace,
                       During&& during) {
    mma.accumulate_ = GMMA::ScaleOut::Zero;
    int prev_stage = -1;
    warpgroup_fence_operand(acc);
    auto issue = [&] {
      trace(kTrFullWait, loads);
      FullBarrier::wait(&smem.full[ring.stage], ring.phase);
      // The narrow producer's cp.async wrote the slot through the generic proxy; WGMMA reads it
      // through the async proxy. The barrier makes the writes visible to this thread, the proxy
      // fence then orders them before its WGMMAs (the PTX memory model's rule; Triton emits the
      // same fence before a wgmma on cp.async-filled tiles). TMA fills need none.
      if constexpr (Tr::kCpAsync) cutlass::arch::fence_view_async_shared();
      trace(kTrFull, loads++);
      // A batch with the row sums' WGMMAs is a copy of its own: with a branch around them inside
      // the batch, ptxas fenced the accumulators again (C7519) before them.
      auto batch = [&](auto with_sums) {
        warpgroup_arrive();
        CUTE_UNROLL
        for (int kb = 0; kb < size<2>(tCrA); ++kb) {
          gemm(mma, tCrA(_, _, kb, ring.stage), tCrB(_, _, kb, ring.stage), acc);
          mma.accumulate_ = GMMA::ScaleOut::One;
          if constexpr (decltype(with_sums)::value) sums.issue(tCrA(_, _, kb, ring.stage), kb);
        }
        warpgroup_commit_batch();
      };
      if (sums.on) {
        batch(cute::true_type{});
      } else {
        batch(cute::false_type{});
      }
    };
    auto retire = [&] {
      warpgroup_wait<1>();
      trace(kTrRetired);
      if (prev_stage >= 0) release(prev_stage);
      prev_stage = ring.stage;
      ring.advance();
    };
    // One loop issues every k-tile: with a call site per event of during(), ptxas stopped inlining
    // issue() and put the accumulators in local memory.
    for (int kt = unit.kb; kt < unit.ke; ++kt) {
      issue();
      during(kt);
      retire();
    }
    warpgroup_wait<0>();
    warpgroup_fence_operand(acc);
    sums.end();
    if (prev_stage >= 0) release(prev_stage);
  }
};

// Consumer thread ctid's (0 .. 128 kConsumers - 1) main loop over the ring in smem.
template <class Tr>
CUTE_DEVICE auto make_mainloop(typename Tr::SharedStorage& smem, int ctid) {
  Tensor sA = make_tensor(make_smem_ptr(smem.a), typename Tr::SmemLayoutA{});  // (BM,BK,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(smem.b), typename Tr::SmemLayoutB{});  // (BN,BK,PIPE)
  typename Tr::TiledMma mma;
  auto thr_mma = mma.get_thread_slice(ctid);
  Tensor tCrA = thr_mma.make_fragment_A(thr_mma.partition_A(sA));
  Tensor tCrB = thr_mma.make_fragment_B(thr_mma.partition_B(sB));
  return Mainloop<Tr, decltype(thr_mma), decltype(tCrA), decltype(tCrB)>{smem, mma, thr_mma, tCrA, tCrB,
                                                                        ctid % 32 == 0};
}

}  // namespace cute_gemm::sm90
