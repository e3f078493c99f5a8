// The decode GEMV (gemv.h): a warp per weight row at a time (up to 8 on a row of a weight with few
// rows), 16-byte streaming loads of the row, the few rows of A from the L1, fp32 sums reduced
// across the warp (and the row's warps), the GEMM kernels' epilogue.
#include "gemv.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "epilogue.h"
#include "pdl.h"

namespace cute_gemm {
namespace {

constexpr int kWarps = 8;  // a block's warps, each on weight rows of its own
constexpr int kThreads = 32 * kWarps;
// Blocks per SM the grid asks for, and the 16-byte loads of a weight row each lane has in flight:
// 64 KB of a weight in flight per SM, past what the HBM's latency needs at the H200's rate per
// SM, in 16 warps of up to 128 registers (32 warps of 4 loads each ran alike at one row, and
// spilled at four). The 8-row kernels (CUTE_GEMM_GEMV=1 only) keep 4 loads and spill 12-16 bytes
// (32 with 8 loads).
constexpr int kBlocksPerSm = 2;
constexpr int unroll_for(int rows) { return rows >= 8 ? 4 : 8; }
constexpr int kVec = 8;  // elements per 16-byte load

// The 8 elements of a 16-byte vector as floats (bf16: the upper half of a float's bits).
__device__ __forceinline__ void to_floats(const uint4& v, float (&f)[kVec], __nv_bfloat16) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    f[2 * i] = __uint_as_float(w[i] << 16);
    f[2 * i + 1] = __uint_as_float(w[i] & 0xffff0000u);
  }
}
__device__ __forceinline__ void to_floats(const uint4& v, float (&f)[kVec], __half) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const float2 p = __half22float2(*reinterpret_cast<const __half2*>(&w[i]));
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}

// Rows of A as the kernel reads them: kRows of them, row r at a + r lda for the call's rows; the
// kernel's rows past them read its last row again (and their sums are dropped): no branch between
// a weight vector's loads of A, which ptxas then issues together (with a branch per row, the
// 4-row kernel ran at half the speed of the same loop without one).
template <class T, int kRows>
struct RowsOfA {
  const T* a;
  int64_t lda;
  int rows;
  __device__ __forceinline__ const T* row(int r) const { return a + (r < rows ? r : rows - 1) * lda; }
  // acc[r] += w . A(r, k .. k + 7) (w: the weight's 8 elements at k).
  __device__ __forceinline__ void fma(float (&acc)[kRows], const float (&w)[kVec], int64_t k) const {
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      float x[kVec];
      to_floats(__ldg(reinterpret_cast<const uint4*>(row(r) + k)), x, T());
#pragma unroll
      for (int i = 0; i < kVec; ++i) acc[r] = fmaf(w[i], x[i], acc[r]);
    }
  }
};

// acc[r] += B's row w (and acc2[r] += w2's, gated) . A(r, :) over all of K, this thread's share
// of the row's `threads` (the lanes of the warps that share the row): elements 8 t + 8 threads i.
// The weight's loads stream (ld.global.cs: evict-first, a weight is read once per call); kUnroll
// of them are issued before their sums.
template <class T, int kRows, bool kGated>
__device__ __forceinline__ void row_dot(const T* w, const T* w2, const RowsOfA<T, kRows>& A, int k_total, int t,
                                        int threads, float (&acc)[kRows], float (&acc2)[kRows]) {
  constexpr int kUnroll = unroll_for(kRows);
  const int64_t step = int64_t(threads) * kVec;
  int64_t k = int64_t(t) * kVec;
  for (; k + (kUnroll - 1) * step + kVec <= k_total; k += kUnroll * step) {
    uint4 v[kUnroll], v2[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      v[u] = __ldcs(reinterpret_cast<const uint4*>(w + k + u * step));
      if constexpr (kGated) v2[u] = __ldcs(reinterpret_cast<const uint4*>(w2 + k + u * step));
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float f[kVec];
      to_floats(v[u], f, T());
      A.fma(acc, f, k + u * step);
      if constexpr (kGated) {
        to_floats(v2[u], f, T());
        A.fma(acc2, f, k + u * step);
      }
    }
  }
  for (; k + kVec <= k_total; k += step) {  // the rest in single vectors
    float f[kVec];
    to_floats(__ldcs(reinterpret_cast<const uint4*>(w + k)), f, T());
    A.fma(acc, f, k);
    if constexpr (kGated) {
      to_floats(__ldcs(reinterpret_cast<const uint4*>(w2 + k)), f, T());
      A.fma(acc2, f, k);
    }
  }
  if (k < k_total) {  // K % 8 != 0: the last elements one by one (one thread)
    for (int64_t e = k; e < k_total; ++e) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r < A.rows) {
          const float x = float(A.a[r * A.lda + e]);
          acc[r] = fmaf(float(w[e]), x, acc[r]);
          if constexpr (kGated) acc2[r] = fmaf(float(w2[e]), x, acc2[r]);
        }
      }
    }
  }
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int d = 16; d > 0; d /= 2) v += __shfl_xor_sync(0xffffffffu, v, d);
  return v;
}

// C(r, n) from the row's sums: the GEMM kernels' epilogue (epilogue.h: act(alpha acc + beta X),
// or act(gate) * up in the gated kernel), rounded once to C's type.
template <class T, bool kGated>
__device__ __forceinline__ void store(const GemmParams& p, int r, int64_t n, float acc, float acc2) {
  float v = acc;
  if constexpr (kGated) {
    with_activation(p.act, [&](auto a) { v = activate<decltype(a)::value>(v); });
    v *= acc2;
  } else {
    v *= p.alpha;
    if (p.x != nullptr) {
      const int64_t at = r * p.x_ldm + n * p.x_ldn;
      v += p.beta * (p.x_f32 ? static_cast<const float*>(p.x)[at] : float(static_cast<const T*>(p.x)[at]));
    }
    with_activation(p.act, [&](auto a) { v = activate<decltype(a)::value>(v); });
  }
  const int64_t at = r * p.ldc + n * p.ldc_col;
  if (p.c_f32) {
    static_cast<float*>(p.c)[at] = v;
  } else {
    static_cast<T*>(p.c)[at] = T(v);
  }
}

// The block's warps take kWarps / split weight rows at a time, split warps a row (each a share of
// its K, their sums met in shared memory in warp order); the grid's blocks take the next rows.
template <class T, int kRows, bool kGated>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) gemv_kernel(const GemmParams p, int split) {
  __shared__ float partial[kWarps][2 * kRows];  // a warp's sums of its share (gated: gate's, then up's)
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t n_rows = kGated ? p.n / 2 : p.n;
  const int rows_per_block = kWarps / split, part = warp % split;
  const RowsOfA<T, kRows> A{static_cast<const T*>(p.a), p.lda, p.m};
  // The next kernel, where launched with PDL (a decode step's RMSNorm, rms_norm.h), may be scheduled
  // now onto SMs this grid leaves or frees; its wait still waits for this grid to complete. This
  // kernel itself launches plainly: with PDL and the start of its weight prefetched into the L2
  // before the wait, the decode step at one token ran 2 % slower (docs/tuning.md, section 25).
  pdl_launch_dependents();
  // 64-bit: N may come within a grid's worth of rows of 2^31. The bound is the block's, so that its
  // warps meet at the barriers below the same number of times.
  for (int64_t n0 = int64_t(blockIdx.x) * rows_per_block; n0 < n_rows; n0 += int64_t(gridDim.x) * rows_per_block) {
    const int64_t n = n0 + warp / split;
    float acc[kRows] = {}, acc2[kRows] = {};
    if (n < n_rows) {
      const T* w = static_cast<const T*>(p.b) + n * p.ldb;
      const T* w2 = kGated ? static_cast<const T*>(p.b2) + n * p.ldb : nullptr;
      row_dot<T, kRows, kGated>(w, w2, A, p.k, part * 32 + lane, split * 32, acc, acc2);
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      acc[r] = warp_sum(acc[r]);
      if constexpr (kGated) acc2[r] = warp_sum(acc2[r]);
    }
    if (split == 1) {
      // Lane r stores row r's value (the sums are in every lane after the butterfly), all of the
      // rows' lanes in one pass through the epilogue: with a branch per row the warp ran the
      // epilogue once per row in turn.
      float mine = acc[0], mine2 = acc2[0];
#pragma unroll
      for (int r = 1; r < kRows; ++r) {
        mine = lane == r ? acc[r] : mine;
        mine2 = lane == r ? acc2[r] : mine2;
      }
      if (lane < kRows && lane < p.m && n < n_rows) store<T, kGated>(p, lane, n, mine, mine2);
      continue;
    }
    if (lane == 0) {
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        partial[warp][r] = acc[r];
        partial[warp][kRows + r] = acc2[r];
      }
    }
    __syncthreads();
    if (part == 0 && lane < kRows && lane < p.m && n < n_rows) {
      float sum = 0.f, sum2 = 0.f;
      for (int s = 0; s < split; ++s) {
        sum += partial[warp + s][lane];
        sum2 += partial[warp + s][kRows + lane];
      }
      store<T, kGated>(p, lane, n, sum, sum2);
    }
    __syncthreads();  // the partials are read before the next rows' overwrite them
  }
}

template <class T, bool kGated>
cudaError_t launch_rows(const GemmParams& p, int sms, cudaStream_t stream) {
  const int n_rows = kGated ? p.n / 2 : p.n;
  // Warps per row: where the weight has fewer rows than half the warps the grid holds, a row's K
  // is shared by up to all of a block's warps, so that more of them stream it (a warp alone on a
  // long row is bound by its own loads in flight).
  const int64_t warps = int64_t(sms) * kBlocksPerSm * kWarps;
  int split = 1;
  while (split < kWarps && int64_t(n_rows) * split * 2 <= warps) split *= 2;
  auto go = [&](auto rows) {
    constexpr int kRows = decltype(rows)::value;
    const int64_t per_block = kWarps / split;
    const int64_t blocks = std::min<int64_t>((int64_t(n_rows) + per_block - 1) / per_block, int64_t(sms) * kBlocksPerSm);
    gemv_kernel<T, kRows, kGated><<<unsigned(std::max<int64_t>(blocks, 1)), kThreads, 0, stream>>>(p, split);
    return cudaGetLastError();
  };
  if (p.m <= 1) return go(std::integral_constant<int, 1>{});
  if (p.m <= 2) return go(std::integral_constant<int, 2>{});
  if (p.m <= 4) return go(std::integral_constant<int, 4>{});
  return go(std::integral_constant<int, 8>{});
}

}  // namespace

cudaError_t gemv(const GemmParams& p, DType d, int sms, cudaStream_t stream) {
  if (p.m < 1 || p.m > kGemvMostRows || p.batch != 1 || d == DType::kTF32) return cudaErrorInvalidValue;
  const bool gated = p.b2 != nullptr;
  if (d == DType::kBF16) {
    return gated ? launch_rows<__nv_bfloat16, true>(p, sms, stream) : launch_rows<__nv_bfloat16, false>(p, sms, stream);
  }
  return gated ? launch_rows<__half, true>(p, sms, stream) : launch_rows<__half, false>(p, sms, stream);
}

}  // namespace cute_gemm
