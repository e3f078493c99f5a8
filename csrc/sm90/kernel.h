// The SM90 GEMM kernel: the multistage ring of the SM80 family rebuilt from Hopper parts.
// Warpgroup 0 (one elected thread) is the producer: TMA loads of A/B tiles into a kStages
// shared-memory ring, each slot guarded by a "full" mbarrier (transaction bytes) and an "empty"
// mbarrier (consumer arrivals). Warpgroups 1..kConsumers are consumers: WGMMA from shared memory
// with fp32 accumulators; the two consumers interleave on the tensor cores while each waits
// for its own batch. The grid is persistent (one block per SM) and walks tiles in the grouped
// order of tile_scheduler.h; the producer runs ahead into the next tile while consumers store C.
// Included only by csrc/instantiations/sm90_*.cu.
#pragma once

#include <cuda_runtime.h>

#include <cutlass/arch/reg_reconfig.h>

#include "sm90/launch.h"
#include "sm90/traits.h"
#include "tile_scheduler.h"

// WGMMA and setmaxnreg exist only in the arch-specific sm_90a target; other targets get a stub.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CUTE_GEMM_SM90_ENABLED 1
#endif

namespace cute_gemm::sm90 {

template <class Tr>
struct KernelParams {
  typename Tr::TmaA tma_a;
  typename Tr::TmaB tma_b;
  typename Tr::TmaC tma_c;  // built only when p.c_vector_ok
  GemmParams p;
};

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

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads, 1) gemm_kernel(CUTE_GRID_CONSTANT KernelParams<Tr> const params) {
#if defined(CUTE_GEMM_SM90_ENABLED)
  using T = typename Tr::Element;
  using FullBarrier = cutlass::arch::ClusterTransactionBarrier;
  using EmptyBarrier = cutlass::arch::ClusterBarrier;
  constexpr int kBM = Tr::kBM, kBN = Tr::kBN, kBK = Tr::kBK, kStages = Tr::kStages;
  constexpr int kConsumerThreads = 128 * Tr::kConsumers;
  const GemmParams& p = params.p;

  extern __shared__ char smem_raw[];
  auto& smem = *reinterpret_cast<typename Tr::SharedStorage*>((reinterpret_cast<uintptr_t>(smem_raw) + 1023) &
                                                              ~uintptr_t(1023));

  const int warp_group = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    CUTE_UNROLL
    for (int s = 0; s < kStages; ++s) {
      FullBarrier::init(&smem.full[s], 1);                   // the producer's arrive + TMA bytes
      EmptyBarrier::init(&smem.empty[s], kConsumerThreads);  // every consumer thread
    }
    cutlass::arch::fence_barrier_init();
    cute::prefetch_tma_descriptor(params.tma_a.get_tma_descriptor());
    cute::prefetch_tma_descriptor(params.tma_b.get_tma_descriptor());
    if (p.c_vector_ok) cute::prefetch_tma_descriptor(params.tma_c.get_tma_descriptor());
  }
  __syncthreads();

  const int num_m = (p.m + kBM - 1) / kBM;
  const int num_n = (p.n + kBN - 1) / kBN;
  const int64_t num_tiles = int64_t(num_m) * num_n;
  const int k_tiles = (p.k + kBK - 1) / kBK;

  Tensor sA = make_tensor(make_smem_ptr(smem.a), typename Tr::SmemLayoutA{});  // (BM,BK,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(smem.b), typename Tr::SmemLayoutB{});  // (BN,BK,PIPE)
  RingState<kStages> ring;

  if (warp_group == 0) {
    // ---------------------------------------------------------------- producer
    cutlass::arch::warpgroup_reg_dealloc<Tr::kProducerRegs>();
    if (threadIdx.x == 0) {
      Tensor mA = params.tma_a.get_tma_tensor(make_shape(p.m, p.k));  // (M,K) TMA coordinates
      Tensor mB = params.tma_b.get_tma_tensor(make_shape(p.n, p.k));  // (N,K)
      for (int64_t t = blockIdx.x; t < num_tiles; t += gridDim.x) {
        const TileCoord tile = grouped_tile(t, num_m, num_n, p.group_m);
        Tensor gA = local_tile(mA, make_tile(Int<kBM>{}, Int<kBK>{}), make_coord(tile.m, _));  // (BM,BK,k)
        Tensor gB = local_tile(mB, make_tile(Int<kBN>{}, Int<kBK>{}), make_coord(tile.n, _));  // (BN,BK,k)
        auto [tAgA, tAsA] = tma_partition(params.tma_a, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sA),
                                          group_modes<0, 2>(gA));  // (TMA,k), (TMA,PIPE)
        auto [tBgB, tBsB] = tma_partition(params.tma_b, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sB),
                                          group_modes<0, 2>(gB));  // (TMA,k), (TMA,PIPE)
        for (int kt = 0; kt < k_tiles; ++kt) {
          // Wait until every consumer released this slot (a fresh barrier passes parity 1).
          EmptyBarrier::wait(&smem.empty[ring.stage], ring.phase ^ 1);
          FullBarrier::arrive_and_expect_tx(&smem.full[ring.stage], Tr::kTmaBytesPerStage);
          // Boxes past M, N or K are zero-filled by TMA and still count their full bytes.
          copy(params.tma_a.with(smem.full[ring.stage]), tAgA(_, kt), tAsA(_, ring.stage));
          copy(params.tma_b.with(smem.full[ring.stage]), tBgB(_, kt), tBsB(_, ring.stage));
          ring.advance();
        }
      }
    }
  } else {
    // ---------------------------------------------------------------- consumers
    cutlass::arch::warpgroup_reg_alloc<Tr::kConsumerRegs>();
    const int ctid = threadIdx.x - 128;     // 0 .. kConsumerThreads-1
    const int consumer = warp_group - 1;    // which 64-row slice of the tile
    typename Tr::TiledMma mma;
    auto thr_mma = mma.get_thread_slice(ctid);
    Tensor tCsA = thr_mma.partition_A(sA);        // (MMA,MMA_M,MMA_K,PIPE)
    Tensor tCsB = thr_mma.partition_B(sB);        // (MMA,MMA_N,MMA_K,PIPE)
    Tensor tCrA = thr_mma.make_fragment_A(tCsA);  // WGMMA shared-memory descriptors
    Tensor tCrB = thr_mma.make_fragment_B(tCsB);
    Tensor sC = make_tensor(make_smem_ptr(smem.c), typename Tr::SmemLayoutC{});      // (BM,BN) padded
    Tensor sCt = make_tensor(make_smem_ptr(smem.c), typename Tr::SmemLayoutCTma{});  // (BM,BN) swizzled
    Tensor tCsC = thr_mma.partition_C(sC);                                           // (MMA,MMA_M,MMA_N)
    Tensor tCsCt = thr_mma.partition_C(sCt);                                         // (MMA,MMA_M,MMA_N)
    Tensor acc = thr_mma.partition_fragment_C(sC);  // (MMA,MMA_M,MMA_N) fp32

    Tensor mC = make_tensor(make_gmem_ptr(static_cast<T*>(p.c)), make_shape(p.m, p.n),
                            make_stride(p.ldc, Int<1>{}));  // (M,N)
    Tensor cC = make_identity_tensor(shape(mC));
    typename Tr::GmemCopyC s2g;
    auto s2g_thr = s2g.get_thread_slice(ctid % 128);
    auto slice = make_tile(Int<Tr::kRowsPerConsumer>{}, Int<kBN>{});
    Tensor tSsC = s2g_thr.partition_S(local_tile(sC, slice, make_coord(consumer, 0)));  // (CPY,CPY_M,CPY_N)
    Tensor sCslice = local_tile(sCt, slice, make_coord(consumer, 0));                  // (64,BN) swizzled
    Tensor mCt = params.tma_c.get_tma_tensor(make_shape(p.m, p.n));                   // (M,N) TMA coordinates
    const uint32_t epilogue_barrier = 1 + consumer;  // named barrier per consumer warpgroup

    for (int64_t t = blockIdx.x; t < num_tiles; t += gridDim.x) {
      const TileCoord tile = grouped_tile(t, num_m, num_n, p.group_m);

      // Main loop: wait for a slot, issue its WGMMAs, wait for them, release the slot. The two
      // consumer warpgroups interleave on the tensor cores, so waiting per k-tile costs little;
      // keeping one batch in flight instead made ptxas serialize every WGMMA (warning C7514,
      // measured 5-8 % slower, docs/tuning.md).
      mma.accumulate_ = GMMA::ScaleOut::Zero;
      for (int kt = 0; kt < k_tiles; ++kt) {
        FullBarrier::wait(&smem.full[ring.stage], ring.phase);
        // The operand fences keep the compiler from touching the accumulators while WGMMAs
        // are in flight.
        warpgroup_fence_operand(acc);
        warpgroup_arrive();
        CUTE_UNROLL
        for (int kb = 0; kb < size<2>(tCrA); ++kb) {
          gemm(mma, tCrA(_, _, kb, ring.stage), tCrB(_, _, kb, ring.stage), acc);
          mma.accumulate_ = GMMA::ScaleOut::One;
        }
        warpgroup_commit_batch();
        warpgroup_wait<0>();
        warpgroup_fence_operand(acc);
        EmptyBarrier::arrive(&smem.empty[ring.stage]);
        ring.advance();
      }

      // Epilogue, on this warpgroup's 64-row slice. The first barrier keeps the previous
      // tile's readers of the staging buffer (threads, or the TMA store) ahead of these writes.
      const bool leader = ctid % 128 == 0;
      if (p.c_vector_ok) {
        if (leader) tma_store_wait<0>();
        cutlass::arch::NamedBarrier::sync(128, epilogue_barrier);
        CUTE_UNROLL
        for (int i = 0; i < size(acc); ++i) {
          tCsCt(i) = T(acc(i));
        }
        tma_store_fence();  // make these generic-proxy writes visible to the TMA (async proxy)
        cutlass::arch::NamedBarrier::sync(128, epilogue_barrier);
        if (leader) {
          Tensor gC = local_tile(mCt, slice, make_coord(tile.m * Tr::kConsumers + consumer, tile.n));
          auto [tTgC, tTsC] = tma_partition(params.tma_c, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sCslice),
                                            group_modes<0, 2>(gC));
          copy(params.tma_c, tTsC, tTgC);
          tma_store_arrive();
        }
      } else {
        cutlass::arch::NamedBarrier::sync(128, epilogue_barrier);
        CUTE_UNROLL
        for (int i = 0; i < size(acc); ++i) {
          tCsC(i) = T(acc(i));
        }
        cutlass::arch::NamedBarrier::sync(128, epilogue_barrier);
        auto coord = make_coord(tile.m * Tr::kConsumers + consumer, tile.n);
        store_tile(s2g, tSsC, s2g_thr.partition_D(local_tile(mC, slice, coord)),
                   s2g_thr.partition_D(local_tile(cC, slice, coord)), p.m, p.n, false);
      }
    }
    // The TMA store reads shared memory asynchronously: finish before the block exits.
    if (p.c_vector_ok && ctid % 128 == 0) tma_store_wait<0>();
  }
#else
  // Built for an arch without WGMMA: the host launches this family only on sm_90 devices and only
  // when the build targeted sm_90a (CUTE_GEMM_HAS_SM90A, set by setup.py).
  __trap();
#endif
}

template <DType D, bool AKMajor, bool BKMajor, int Cfg>
cudaError_t run(const GemmParams& p, cudaStream_t stream) {
  using Tr = KernelTraits<D, AKMajor, BKMajor, Cfg>;
  using T = typename Tr::Element;
  auto* kernel = &gemm_kernel<Tr>;
  constexpr int smem = Tr::kSmemBytes;

  if (cudaError_t e = opt_in_smem<Tr>(reinterpret_cast<const void*>(kernel), smem); e != cudaSuccess) return e;

  Tensor mA = make_tensor(make_gmem_ptr(static_cast<T const*>(p.a)),
                          make_layout(make_shape(p.m, p.k), mn_k_stride<AKMajor>(p.lda)));
  Tensor mB = make_tensor(make_gmem_ptr(static_cast<T const*>(p.b)),
                          make_layout(make_shape(p.n, p.k), mn_k_stride<BKMajor>(p.ldb)));
  KernelParams<Tr> params{
      make_tma_atom(SM90_TMA_LOAD{}, mA, typename Tr::SmemLayoutA{}(_, _, 0), make_shape(Int<Tr::kBM>{}, Int<Tr::kBK>{})),
      make_tma_atom(SM90_TMA_LOAD{}, mB, typename Tr::SmemLayoutB{}(_, _, 0), make_shape(Int<Tr::kBN>{}, Int<Tr::kBK>{})),
      {},
      p};
  if (p.c_vector_ok) {  // TMA needs 16-byte aligned rows; otherwise the kernel stores C itself
    Tensor mC = make_tensor(make_gmem_ptr(static_cast<T*>(p.c)), make_layout(make_shape(p.m, p.n), make_stride(p.ldc, Int<1>{})));
    params.tma_c = make_tma_atom(SM90_TMA_STORE{}, mC, typename Tr::SmemLayoutCSlice{},
                                 make_shape(Int<Tr::kRowsPerConsumer>{}, Int<Tr::kBN>{}));
  }

  const long long tiles = (long long)((p.m + Tr::kBM - 1) / Tr::kBM) * ((p.n + Tr::kBN - 1) / Tr::kBN);
  const int grid = int(tiles < p.grid_limit ? tiles : p.grid_limit);
  kernel<<<dim3(grid), dim3(Tr::kThreads), smem, stream>>>(params);
  return cudaGetLastError();
}

}  // namespace cute_gemm::sm90

#define CUTE_GEMM_SM90_INSTANTIATE(D, AK, BK, CFG) \
  template cudaError_t cute_gemm::sm90::run<D, AK, BK, CFG>(const cute_gemm::GemmParams&, cudaStream_t);
