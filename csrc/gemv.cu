// The decode GEMV (gemv.h). Up to 4 rows of A: a warp per weight row at a time, 16-byte streaming
// loads of the row, the few rows of A from the L1, fp32 sums reduced across the warp. 5 to 32 rows:
// a warp per 16 weight rows, their 16-byte loads fed to mma.sync as they come. Both end in the GEMM
// kernels' epilogue.
#include "gemv.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <cute/arch/mma_sm80.hpp>

#include "epilogue.h"

namespace cute_gemm {
namespace {

constexpr int kWarps = 8;  // a block's warps, each on weight rows of its own
constexpr int kThreads = 32 * kWarps;
// Blocks per SM the grid asks for, and the 16-byte loads of a weight row each lane has in flight:
// 64 KB of a weight in flight per SM, past what the HBM's latency needs at the H200's rate per
// SM, in 16 warps of up to 128 registers (the sums and A's values of 8 rows fit; 32 warps of 4
// loads each ran alike at one row, and spilled at four).
constexpr int kBlocksPerSm = 2;
constexpr int kUnroll = 8;
constexpr int kVec = 8;           // elements per 16-byte load
constexpr int kStep = 32 * kVec;  // elements of a row that one warp-wide load reads (512 bytes)

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

// acc[r] += B's row w (and acc2[r] += w2's, gated) . A(r, :) over all of K, this lane's share:
// elements 8 lane + 256 i. The weight's loads stream (ld.global.cs: evict-first, a weight
// is read once per call); kUnroll of them are issued before their sums.
template <class T, int kRows, bool kGated>
__device__ __forceinline__ void row_dot(const T* w, const T* w2, const RowsOfA<T, kRows>& A, int k_total, int lane,
                                        float (&acc)[kRows], float (&acc2)[kRows]) {
  int64_t k = int64_t(lane) * kVec;
  for (; k + (kUnroll - 1) * kStep + kVec <= k_total; k += kUnroll * kStep) {
    uint4 v[kUnroll], v2[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      v[u] = __ldcs(reinterpret_cast<const uint4*>(w + k + u * kStep));
      if constexpr (kGated) v2[u] = __ldcs(reinterpret_cast<const uint4*>(w2 + k + u * kStep));
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      float f[kVec];
      to_floats(v[u], f, T());
      A.fma(acc, f, k + u * kStep);
      if constexpr (kGated) {
        to_floats(v2[u], f, T());
        A.fma(acc2, f, k + u * kStep);
      }
    }
  }
  for (; k + kVec <= k_total; k += kStep) {  // the rest in single vectors
    float f[kVec];
    to_floats(__ldcs(reinterpret_cast<const uint4*>(w + k)), f, T());
    A.fma(acc, f, k);
    if constexpr (kGated) {
      to_floats(__ldcs(reinterpret_cast<const uint4*>(w2 + k)), f, T());
      A.fma(acc2, f, k);
    }
  }
  if (k < k_total) {  // K % 8 != 0: the last elements one by one (one lane)
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

// Warp w of block b takes weight rows b kWarps + w, then a grid's worth of warps further on.
template <class T, int kRows, bool kGated>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) gemv_kernel(const GemmParams p) {
  const int lane = threadIdx.x % 32;
  const int n_rows = kGated ? p.n / 2 : p.n;
  const RowsOfA<T, kRows> A{static_cast<const T*>(p.a), p.lda, p.m};
  // 64-bit: N may come within a grid's worth of warps of 2^31.
  for (int64_t n = int64_t(blockIdx.x) * kWarps + threadIdx.x / 32; n < n_rows; n += int64_t(gridDim.x) * kWarps) {
    const T* w = static_cast<const T*>(p.b) + n * p.ldb;
    const T* w2 = kGated ? static_cast<const T*>(p.b2) + n * p.ldb : nullptr;
    float acc[kRows] = {}, acc2[kRows] = {};
    row_dot<T, kRows, kGated>(w, w2, A, p.k, lane, acc, acc2);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      acc[r] = warp_sum(acc[r]);
      if constexpr (kGated) acc2[r] = warp_sum(acc2[r]);
    }
    // Lane r stores row r's value (the sums are in every lane after the butterfly).
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (lane == r && r < p.m) store<T, kGated>(p, r, n, acc[r], acc2[r]);
    }
  }
}

// ------------------------------------------------------------------ 5 to 32 rows: mma.sync
// At 8 rows the CUDA-core kernel's arithmetic (a conversion and 8 FMAs per weight element) bounds
// it; the tensor cores take that arithmetic here. A warp owns two groups of 8 weight rows (16 rows
// of B, or gated the same 8 rows of B and B2) over its share of K, and the MMA is m16n8k16 with the
// weight as its B (n: the 8 rows of a group) and A's rows as its A (m: 16 rows a tile). In a load
// instruction lane 4 g + q reads the 16 bytes at 8 q of weight row g's next 32 elements (64
// contiguous bytes of each of 8 rows), and the 16 bytes at the same k of A's rows g and g + 8. An
// MMA sums over its 16 k in any order that both operands share, so each lane's registers go to
// the MMAs as loaded: its elements 0-3 fill the k slots (2q, 2q + 1, 2q + 8, 2q + 9) of one MMA and
// elements 4-7 those of the next. No shuffle or shared memory sits between the loads and the MMAs.
constexpr int kMmaSteps = 4;   // 32-element steps of each group a lane has in flight (8 loads)
constexpr int kMmaStep = 32;   // elements of a weight row per load instruction
constexpr int kMostSplits = kWarps;

template <class T>
struct MmaAtom;
template <>
struct MmaAtom<__nv_bfloat16> {
  using type = cute::SM80_16x8x16_F32BF16BF16F32_TN;
};
template <>
struct MmaAtom<__half> {
  using type = cute::SM80_16x8x16_F32F16F16F32_TN;
};

// The 8 elements at k of a row with `valid` of them in it, the rest zero: the last step of a K
// that is not a multiple of 32 (and the whole of a K under 8).
template <class T>
__device__ __forceinline__ uint4 load_part(const T* row, int64_t k, int64_t valid) {
  union {
    uint4 v;
    T e[kVec];
  } u;
  u.v = make_uint4(0, 0, 0, 0);
  for (int i = 0; i < kVec; ++i) {
    if (i < valid) u.e[i] = row[k + i];
  }
  return u.v;
}

// kRows of A: 8 (one MMA tile, its rows 8-15 zero), 16 or 32 (two tiles).
template <class T, int kRows, bool kGated>
struct MmaWarp {
  static constexpr int kTiles = kRows > 16 ? 2 : 1;
  static constexpr bool kUpper = kRows > 8;  // the tiles' rows g + 8 hold A's rows
  const T* a[kTiles][2];                     // A's rows 16 t + g and 16 t + g + 8 (past M: its last)
  const T* w[2];                             // the two groups' weight row g
  float acc[2][kTiles][4] = {};              // [group][tile][C fragment]

  // One 32-element step at k from registers: wv[j] the groups' 16 bytes, A's loaded here.
  __device__ __forceinline__ void mma(const uint4 (&wv)[2], int64_t k) {
    using Atom = typename MmaAtom<T>::type;
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      const uint4 lo = __ldg(reinterpret_cast<const uint4*>(a[t][0] + k));
      const uint4 hi = kUpper ? __ldg(reinterpret_cast<const uint4*>(a[t][1] + k)) : make_uint4(0, 0, 0, 0);
      mma_pair<Atom>(wv, lo, hi, t);
    }
  }
  template <class Atom>
  __device__ __forceinline__ void mma_pair(const uint4 (&wv)[2], const uint4& lo, const uint4& hi, int t) {
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float(&d)[4] = acc[j][t];
      Atom::fma(d[0], d[1], d[2], d[3], lo.x, hi.x, lo.y, hi.y, wv[j].x, wv[j].y, d[0], d[1], d[2], d[3]);
      Atom::fma(d[0], d[1], d[2], d[3], lo.z, hi.z, lo.w, hi.w, wv[j].z, wv[j].w, d[0], d[1], d[2], d[3]);
    }
  }

  // This warp's part `part` of `parts` of K: rounds of kMmaSteps steps taken in turn by the parts,
  // then the steps left one by one, then (part 0) the last elements of a K that is not a multiple
  // of 32, zero-filled.
  __device__ __forceinline__ void run(int64_t k_total, int q, int part, int parts) {
    const int64_t steps = k_total / kMmaStep;
    const int64_t lane_k = int64_t(q) * kVec;
    int64_t st = int64_t(part) * kMmaSteps;
    for (; st + kMmaSteps <= steps; st += int64_t(parts) * kMmaSteps) {
      uint4 v[kMmaSteps][2];
#pragma unroll
      for (int u = 0; u < kMmaSteps; ++u) {
#pragma unroll
        for (int j = 0; j < 2; ++j) v[u][j] = __ldcs(reinterpret_cast<const uint4*>(w[j] + (st + u) * kMmaStep + lane_k));
      }
#pragma unroll
      for (int u = 0; u < kMmaSteps; ++u) mma(v[u], (st + u) * kMmaStep + lane_k);
    }
    for (st = steps / kMmaSteps * kMmaSteps + part; st < steps; st += parts) {
      uint4 v[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) v[j] = __ldcs(reinterpret_cast<const uint4*>(w[j] + st * kMmaStep + lane_k));
      mma(v, st * kMmaStep + lane_k);
    }
    const int64_t k = steps * kMmaStep + lane_k, valid = k_total - k;
    if (part == 0 && steps * kMmaStep < k_total) {
      const uint4 wv[2] = {load_part(w[0], k, valid), load_part(w[1], k, valid)};
      using Atom = typename MmaAtom<T>::type;
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        mma_pair<Atom>(wv, load_part(a[t][0], k, valid), kUpper ? load_part(a[t][1], k, valid) : make_uint4(0, 0, 0, 0), t);
      }
    }
  }
};

// Warp w of a block takes part w % splits of K for unit (block's first) + w / splits; a unit is 16
// weight rows (8 of B and B2's, gated). With splits > 1 the parts' sums meet in shared memory,
// added in part order (the same result whatever the warps' timing).
template <class T, int kRows, bool kGated>
__global__ void __launch_bounds__(kThreads, kBlocksPerSm) gemv_mma_kernel(const GemmParams p, int splits) {
  using Warp = MmaWarp<T, kRows, kGated>;
  constexpr int kTiles = Warp::kTiles, kRegs = 2 * kTiles * 4;
  __shared__ float sums[kRegs][kWarps][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, q = lane % 4;
  const int part = warp % splits, units_per_block = kWarps / splits;
  const int n_rows = kGated ? p.n / 2 : p.n;
  const int unit_rows = kGated ? 8 : 16;
  const int64_t units = (int64_t(n_rows) + unit_rows - 1) / unit_rows;
  const T* a = static_cast<const T*>(p.a);
  auto a_row = [&](int r) { return a + int64_t(r < p.m ? r : p.m - 1) * p.lda; };
  for (int64_t first = int64_t(blockIdx.x) * units_per_block; first < units;
       first += int64_t(gridDim.x) * units_per_block) {
    const int64_t unit = first + warp / splits;
    Warp wp;
    // Weight rows n0(j) + g, past the weight's last row its last (their sums are dropped).
    auto n0 = [&](int j) { return kGated ? unit * 8 : unit * 16 + 8 * j; };
    if (unit < units) {
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        wp.a[t][0] = a_row(16 * t + g);
        wp.a[t][1] = a_row(16 * t + g + 8);
      }
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        const T* b = static_cast<const T*>(kGated && j == 1 ? p.b2 : p.b);
        wp.w[j] = b + std::min<int64_t>(n0(j) + g, n_rows - 1) * p.ldb;
      }
      wp.run(p.k, q, part, splits);
    }
    if (splits > 1) {
      float* flat = &wp.acc[0][0][0];
#pragma unroll
      for (int i = 0; i < kRegs; ++i) sums[i][warp][lane] = flat[i];
      __syncthreads();
      if (part == 0) {
#pragma unroll
        for (int i = 0; i < kRegs; ++i) {
          float v = sums[i][warp][lane];
          for (int s = 1; s < splits; ++s) v += sums[i][warp + s][lane];
          flat[i] = v;
        }
      }
      __syncthreads();
    }
    if (part != 0 || unit >= units) continue;
    // C fragment: acc[j][t][2 h + c] is A's row 16 t + g + 8 h against weight row n0(j) + 2 q + c.
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int r = 16 * t + g + 8 * h;
        if (r >= p.m) continue;
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          if constexpr (kGated) {
            const int64_t n = n0(0) + 2 * q + c;
            if (n < n_rows) store<T, true>(p, r, n, wp.acc[0][t][2 * h + c], wp.acc[1][t][2 * h + c]);
          } else {
#pragma unroll
            for (int j = 0; j < 2; ++j) {
              const int64_t n = n0(j) + 2 * q + c;
              if (n < n_rows) store<T, false>(p, r, n, wp.acc[j][t][2 * h + c], 0.f);
            }
          }
        }
      }
    }
  }
}

template <class T, bool kGated>
cudaError_t launch_rows(const GemmParams& p, int sms, cudaStream_t stream) {
  const int n_rows = kGated ? p.n / 2 : p.n;
  const int64_t slots = int64_t(sms) * kBlocksPerSm;  // blocks resident at once
  auto go = [&](auto rows) {
    constexpr int kRows = decltype(rows)::value;
    const int64_t blocks = std::min<int64_t>((int64_t(n_rows) + kWarps - 1) / kWarps, slots);
    gemv_kernel<T, kRows, kGated><<<unsigned(std::max<int64_t>(blocks, 1)), kThreads, 0, stream>>>(p);
    return cudaGetLastError();
  };
  // Units of 16 weight rows: K split in as many parts (up to a block's warps) as let every unit's
  // parts run at once, and no more parts than rounds of K.
  auto go_mma = [&](auto rows) {
    constexpr int kRows = decltype(rows)::value;
    const int unit_rows = kGated ? 8 : 16;
    const int64_t units = (int64_t(n_rows) + unit_rows - 1) / unit_rows;
    const int64_t rounds = p.k / (kMmaStep * kMmaSteps);
    int splits = kMostSplits;
    while (splits > 1 && (units * splits > slots * kWarps || splits > rounds)) splits /= 2;
    const int64_t per_block = kWarps / splits;
    const int64_t blocks = std::min<int64_t>((units + per_block - 1) / per_block, slots);
    gemv_mma_kernel<T, kRows, kGated><<<unsigned(std::max<int64_t>(blocks, 1)), kThreads, 0, stream>>>(p, splits);
    return cudaGetLastError();
  };
  if (p.m <= 1) return go(std::integral_constant<int, 1>{});
  if (p.m <= 2) return go(std::integral_constant<int, 2>{});
  if (p.m <= 4) return go(std::integral_constant<int, 4>{});
  if (p.m <= 8) return go_mma(std::integral_constant<int, 8>{});
  if (p.m <= 16) return go_mma(std::integral_constant<int, 16>{});
  return go_mma(std::integral_constant<int, 32>{});
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
