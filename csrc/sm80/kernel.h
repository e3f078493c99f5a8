// The SM80 multistage GEMM kernel: cp.async into a kStages shared-memory ring, ldmatrix with
// register prefetch, mma.sync with fp32 accumulators, and an epilogue staged through shared
// memory. Included only by csrc/instantiations/*.cu.
#pragma once

#include <cuda_runtime.h>

#include "epilogue.h"
#include "sm80/launch.h"
#include "sm80/traits.h"
#include "tile_scheduler.h"

namespace cute_gemm::sm80 {

// Issue the cp.async of k-tile `k_tile` of one operand into ring slot `stage`. Each vector (16
// or 4 bytes) is predicated on its first element being inside (MN, K); the host guarantees
// vectors never straddle the contiguous extent except into zero padding it wrote itself.
template <class Copy, class TS, class TD, class TC, class Bound>
CUTE_DEVICE void load_tile(Copy const& copy_op, TS const& tXgX, TD& tXsX, TC const& tXcX,
                           Bound const& bound, int k_tile, int stage) {
  CUTE_UNROLL
  for (int i = 0; i < size<1>(tXsX); ++i) {
    CUTE_UNROLL
    for (int j = 0; j < size<2>(tXsX); ++j) {
      const bool in = elem_less(tXcX(0, i, j, k_tile), bound);
      copy(copy_op.with(in), tXgX(_, i, j, k_tile), tXsX(_, i, j, stage));
    }
  }
}

template <class Tr>
__global__ void __launch_bounds__(Tr::kThreads, 1) gemm_kernel(GemmParams p) {
  using T = typename Tr::Element;
  constexpr int kBM = Tr::kBM, kBN = Tr::kBN, kBK = Tr::kBK, kStages = Tr::kStages;
  const int tid = threadIdx.x;

  const int num_m = (p.m + kBM - 1) / kBM;
  const int num_n = (p.n + kBN - 1) / kBN;
  // One block per (batch, tile): the batches one after another, each in the grouped order.
  const int64_t tiles = int64_t(num_m) * num_n;
  const int64_t batch = blockIdx.x / tiles;
  const TileCoord tile = grouped_tile(blockIdx.x % tiles, num_m, num_n, p.group_m);

  // Global tensors; B is viewed as (N, K) so both operands are (MN, K).
  Tensor mA = make_tensor(make_gmem_ptr(static_cast<T const*>(p.a) + batch * p.batch_a), make_shape(p.m, p.k),
                          mn_k_stride<Tr::kAKMajor>(p.lda));  // (M,K)
  Tensor mB = make_tensor(make_gmem_ptr(static_cast<T const*>(p.b) + batch * p.batch_b), make_shape(p.n, p.k),
                          mn_k_stride<Tr::kBKMajor>(p.ldb));  // (N,K)
  Tensor mC = make_tensor(make_gmem_ptr(static_cast<T*>(p.c) + batch * p.batch_c), make_shape(p.m, p.n),
                          make_stride(p.ldc, Int<1>{}));  // (M,N)
  // Identity tensors: the (m, k) coordinate of every element, for predicates.
  Tensor cA = make_identity_tensor(shape(mA));
  Tensor cB = make_identity_tensor(shape(mB));
  Tensor cC = make_identity_tensor(shape(mC));

  auto blk_a = make_tile(Int<kBM>{}, Int<kBK>{});
  auto blk_b = make_tile(Int<kBN>{}, Int<kBK>{});
  Tensor gA = local_tile(mA, blk_a, make_coord(tile.m, _));   // (BM,BK,k)
  Tensor gB = local_tile(mB, blk_b, make_coord(tile.n, _));   // (BN,BK,k)
  Tensor gcA = local_tile(cA, blk_a, make_coord(tile.m, _));  // (BM,BK,k)
  Tensor gcB = local_tile(cB, blk_b, make_coord(tile.n, _));  // (BN,BK,k)
  auto blk_c = make_tile(Int<kBM>{}, Int<kBN>{});
  Tensor gC = local_tile(mC, blk_c, make_coord(tile.m, tile.n));   // (BM,BN)
  Tensor gcC = local_tile(cC, blk_c, make_coord(tile.m, tile.n));  // (BM,BN)

  extern __shared__ uint128_t smem_raw[];
  T* smem = reinterpret_cast<T*>(smem_raw);
  Tensor sA = make_tensor(make_smem_ptr(smem), typename Tr::A::SmemLayout{});  // (BM,BK,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(smem + cosize(typename Tr::A::SmemLayout{})),
                          typename Tr::B::SmemLayout{});  // (BN,BK,PIPE)

  // Global -> shared partitions.
  typename Tr::A::GmemCopy g2s_a;
  typename Tr::B::GmemCopy g2s_b;
  auto g2s_thr_a = g2s_a.get_thread_slice(tid);
  auto g2s_thr_b = g2s_b.get_thread_slice(tid);
  Tensor tAgA = g2s_thr_a.partition_S(gA);   // (CPY,CPY_M,CPY_K,k)
  Tensor tAcA = g2s_thr_a.partition_S(gcA);  // (CPY,CPY_M,CPY_K,k)
  Tensor tAsA = g2s_thr_a.partition_D(sA);   // (CPY,CPY_M,CPY_K,PIPE)
  Tensor tBgB = g2s_thr_b.partition_S(gB);   // (CPY,CPY_N,CPY_K,k)
  Tensor tBcB = g2s_thr_b.partition_S(gcB);  // (CPY,CPY_N,CPY_K,k)
  Tensor tBsB = g2s_thr_b.partition_D(sB);   // (CPY,CPY_N,CPY_K,PIPE)
  const auto bound_a = make_coord(p.m, p.k);
  const auto bound_b = make_coord(p.n, p.k);

  // MMA partitions: register fragments for one k-tile.
  typename Tr::TiledMma mma;
  auto thr_mma = mma.get_thread_slice(tid);
  Tensor tCrA = thr_mma.partition_fragment_A(sA(_, _, 0));  // (MMA,MMA_M,MMA_K)
  Tensor tCrB = thr_mma.partition_fragment_B(sB(_, _, 0));  // (MMA,MMA_N,MMA_K)
  Tensor tCrC = thr_mma.partition_fragment_C(gC);           // (MMA,MMA_M,MMA_N)
  clear(tCrC);

  // Shared -> register partitions (ldmatrix), viewing the same fragments.
  auto s2r_a = make_tiled_copy_A(typename Tr::A::SmemCopyAtom{}, mma);
  auto s2r_b = make_tiled_copy_B(typename Tr::B::SmemCopyAtom{}, mma);
  auto s2r_thr_a = s2r_a.get_thread_slice(tid);
  auto s2r_thr_b = s2r_b.get_thread_slice(tid);
  Tensor tXsA = s2r_thr_a.partition_S(sA);   // (CPY,CPY_M,CPY_K,PIPE)
  Tensor tXrA = s2r_thr_a.retile_D(tCrA);    // (CPY,CPY_M,CPY_K)
  Tensor tXsB = s2r_thr_b.partition_S(sB);   // (CPY,CPY_N,CPY_K,PIPE)
  Tensor tXrB = s2r_thr_b.retile_D(tCrB);    // (CPY,CPY_N,CPY_K)

  const int k_tiles = (p.k + kBK - 1) / kBK;
  constexpr int kBlocks = size<2>(tCrA);  // k16 steps per k-tile

  // Prologue: fill kStages-1 slots. Every step commits a group, empty or not, so the counts
  // that cp_async_wait<kStages-2> relies on hold however few k-tiles there are.
  int k_next = 0;
  CUTE_UNROLL
  for (int s = 0; s < kStages - 1; ++s) {
    if (k_next < k_tiles) {
      load_tile(g2s_a, tAgA, tAsA, tAcA, bound_a, k_next, s);
      load_tile(g2s_b, tBgB, tBsB, tBcB, bound_b, k_next, s);
    }
    ++k_next;
    cp_async_fence();
  }
  int read_stage = 0;
  int write_stage = kStages - 1;

  cp_async_wait<kStages - 2>();
  __syncthreads();
  copy(s2r_a, tXsA(_, _, 0, read_stage), tXrA(_, _, 0));
  copy(s2r_b, tXsB(_, _, 0, read_stage), tXrB(_, _, 0));

  for (int kt = 0; kt < k_tiles; ++kt) {
    CUTE_UNROLL
    for (int ik = 0; ik < kBlocks; ++ik) {
      if (ik == kBlocks - 1) {
        // The next slot must have landed before its first ldmatrix below; the barrier also
        // orders every read of the slot that the next ik == 0 overwrites before that write.
        cp_async_wait<kStages - 2>();
        __syncthreads();
        read_stage = read_stage + 1 == kStages ? 0 : read_stage + 1;
      }
      // Register prefetch: k-block ik+1 (of this or the next slot) while the MMAs use ik.
      const int ik_next = (ik + 1) % kBlocks;
      copy(s2r_a, tXsA(_, _, ik_next, read_stage), tXrA(_, _, ik_next));
      copy(s2r_b, tXsB(_, _, ik_next, read_stage), tXrB(_, _, ik_next));
      if (ik == 0) {
        if (k_next < k_tiles) {
          load_tile(g2s_a, tAgA, tAsA, tAcA, bound_a, k_next, write_stage);
          load_tile(g2s_b, tBgB, tBsB, tBcB, bound_b, k_next, write_stage);
        }
        ++k_next;
        write_stage = write_stage + 1 == kStages ? 0 : write_stage + 1;
        cp_async_fence();
      }
      gemm(mma, tCrC, tCrA(_, _, ik), tCrB(_, _, ik), tCrC);
    }
  }

  // Epilogue. Bias/C term, scaling and activation on the fp32 accumulators (addmm); then fp32
  // C goes straight from registers, 16-bit C through shared memory in 16-byte row vectors.
  Tensor tCcC = thr_mma.partition_C(gcC);  // (MMA,MMA_M,MMA_N) (m, n) of each accumulator
  if (p.epilogue_math()) apply_epilogue<T>(tCrC, tCcC, 0, 0, p);
  // Drain the (empty) trailing cp.async groups and let every warp finish its last ldmatrix
  // before the ring's memory is reused for C.
  cp_async_wait<0>();
  if (p.c_f32) {
    // This batch's fp32 C, from gC's offset rather than the batch index: keeping that alive
    // through the main loop cost a register spill in the 128x256 kernels.
    const int64_t batch_offset =
        (raw_pointer_cast(gC.data()) - static_cast<T*>(p.c)) - (int64_t(tile.m) * kBM * p.ldc + int64_t(tile.n) * kBN);
    store_direct(tCrC, tCcC, 0, 0, static_cast<float*>(p.c) + batch_offset, p);
    return;
  }
  __syncthreads();

  Tensor sC = make_tensor(make_smem_ptr(smem), typename Tr::SmemLayoutC{});  // (BM,BN)
  Tensor tCsC = thr_mma.partition_C(sC);                                       // (MMA,MMA_M,MMA_N)
  CUTE_UNROLL
  for (int i = 0; i < size(tCrC); ++i) {
    tCsC(i) = T(tCrC(i));
  }
  __syncthreads();

  // Shared -> global in 16-byte row vectors; rows past M and columns past N are not written.
  typename Tr::GmemCopyC s2g;
  auto s2g_thr = s2g.get_thread_slice(tid);
  store_tile(s2g, s2g_thr.partition_S(sC), s2g_thr.partition_D(gC), s2g_thr.partition_D(gcC), p.m, p.n,
             p.c_vector_ok);
}

template <DType D, bool AKMajor, bool BKMajor, int Cfg, int VecBytes>
cudaError_t run(const GemmParams& p, cudaStream_t stream) {
  using Tr = KernelTraits<D, AKMajor, BKMajor, Cfg, VecBytes>;
  auto* kernel = &gemm_kernel<Tr>;
  constexpr int smem = Tr::kSmemBytes;

  if (cudaError_t e = opt_in_smem<Tr>(reinterpret_cast<const void*>(kernel), smem); e != cudaSuccess) return e;

  const long long num_m = (p.m + Tr::kBM - 1) / Tr::kBM;
  const long long num_n = (p.n + Tr::kBN - 1) / Tr::kBN;
  // The host keeps batch * tiles below 2^31 (gridDim.x's limit).
  kernel<<<dim3(unsigned(num_m * num_n * p.batch)), dim3(Tr::kThreads), smem, stream>>>(p);
  return cudaGetLastError();
}

}  // namespace cute_gemm::sm80

// One explicit instantiation of run<> per (dtype, A major-ness, B major-ness, config), and of the
// narrow (4-byte cp.async) kernels for the rows of kNarrowConfigs.
#define CUTE_GEMM_SM80_INSTANTIATE(D, AK, BK, CFG) \
  template cudaError_t cute_gemm::sm80::run<D, AK, BK, CFG>(const cute_gemm::GemmParams&, cudaStream_t);
#define CUTE_GEMM_SM80N_INSTANTIATE(D, AK, BK, CFG) \
  template cudaError_t cute_gemm::sm80::run<D, AK, BK, CFG, 4>(const cute_gemm::GemmParams&, cudaStream_t);
