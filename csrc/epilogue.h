// The fused epilogue shared by every kernel family: C = act(alpha * acc + beta * X), applied to
// a thread's fp32 accumulators in registers before they are converted and stored, so addmm's
// bias/C term and activation cost no extra pass over C. Plus the plain bounded store of fp32
// accumulators (fp32 output, out_dtype=float32).
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>

#include "gemm_params.h"

namespace cute_gemm {

template <Activation A>
CUTE_DEVICE float activate(float v) {
  if constexpr (A == Activation::kRelu) {
    return v > 0.f ? v : (v != v ? v : 0.f);  // NaN stays NaN, as torch.relu
  } else if constexpr (A == Activation::kGelu) {
    // gelu(v) = v Phi(v). With t = |v|, the upper tail Q(t) = 1 - Phi(t) = erfc(t/sqrt2)/2 is
    // e^(-t^2/2) s P(s), s = 1 / (1 + 0.325 t), P of degree 7 fitted for relative error (6.8e-7 in
    // exact arithmetic; docs/tuning.md, 2026-11-25): gelu = v (1 - Q) for v >= 0, v Q below. No
    // 1 + erf(v) to cancel where erf is near -1, one reciprocal and one exp2 against erff's longer
    // sequence (bench/act_math.cu measures both). The .approx.ftz forms skip exp2f's and the
    // divide's subnormal fix-ups: e^(-t^2/2) flushes to 0 only where v Q is below 1e-38 anyway.
    // |v| above about 13: Q = 0, so v or -0; v = +inf: inf; v = -inf: -inf * 0 = NaN (torch's
    // formula gives the same: v, -0, inf, NaN).
    const float t = fabsf(v);
    float s, e;
    asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(s) : "f"(fmaf(0.325f, t, 1.f)));
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(e) : "f"(t * -0.72134752044448170f * t));  // e^(-t^2/2)
    float poly = 3.384021276e-02f;
    poly = fmaf(poly, s, -1.135897533e-01f);
    poly = fmaf(poly, s, 8.538937122e-02f);
    poly = fmaf(poly, s, 2.600100142e-02f);
    poly = fmaf(poly, s, 9.352892990e-02f);
    poly = fmaf(poly, s, 1.155022419e-01f);
    poly = fmaf(poly, s, 1.296721647e-01f);
    poly = fmaf(poly, s, 1.296561523e-01f);
    const float q = e * s * poly;
    return v >= 0.f ? v * (1.f - q) : v * q;
  } else if constexpr (A == Activation::kGeluTanh) {
    // 0.5 v (1 + tanh(u)) = v / (1 + e^(-2u)): one exp and a fast divide (silu's cost) instead of
    // tanhf's longer sequence, and no cancellation in 1 + tanh(u) where tanh(u) is near -1 (v below
    // about -3): 21 cycles against 26, 28x fewer bf16 roundings off the exact value (bench/act_math.cu).
    // v below about -9: v / inf = -0 (torch: -0); v = -inf: NaN (torch: -inf * 0 = NaN).
    const float inner = 0.79788456080286536f * (v + 0.044715f * v * v * v);
    return __fdividef(v, 1.f + __expf(-2.f * inner));
  } else if constexpr (A == Activation::kSilu) {
    return __fdividef(v, 1.f + __expf(-v));  // fast divide: -0 for v < -88 (1 + e^-v = inf), as torch
  } else {
    return v;
  }
}

// f(std::integral_constant<Activation, A>{}) for the runtime activation a (not called for none):
// one switch for every form of the epilogue.
template <class F>
CUTE_DEVICE void with_activation(Activation a, F&& f) {
  switch (a) {
    case Activation::kRelu: f(std::integral_constant<Activation, Activation::kRelu>{}); break;
    case Activation::kGelu: f(std::integral_constant<Activation, Activation::kGelu>{}); break;
    case Activation::kGeluTanh: f(std::integral_constant<Activation, Activation::kGeluTanh>{}); break;
    case Activation::kSilu: f(std::integral_constant<Activation, Activation::kSilu>{}); break;
    default: break;
  }
}

// v[i] = alpha * v[i] + beta * X(coord(i)), X of element type XT. Unrolled by 16, so that 16
// independent X loads are in flight at a time (one at a time, the loop waited on each load's
// latency in turn: ~0.7 ms at 4096x14336x4096, docs/tuning.md).
template <class XT, int kSize, class Coord>
CUTE_DEVICE void add_x(float (&v)[kSize], Coord const& coord, int row0, int col0, const GemmParams& p) {
  const XT* x = static_cast<const XT*>(p.x);
#pragma unroll 16
  for (int i = 0; i < kSize; ++i) {
    const int row = row0 + cute::get<0>(coord(i)), col = col0 + cute::get<1>(coord(i));
    const float xv = row < p.m && col < p.n ? float(x[int64_t(row) * p.x_ldm + int64_t(col) * p.x_ldn]) : 0.f;
    v[i] = p.alpha * v[i] + p.beta * xv;
  }
}

// v[i] = act(v[i]), unrolled by 8: eight independent exp chains at a time hide each
// other's latency, while the code stays 8 copies of the activation, not 128 (fully unrolled, the
// 128 copies of each activation tripled ptxas time, sm80 kernel 60 s -> 170 s, past what the CI's
// 2 cores can build in its 90 minutes).
template <Activation A, int kSize>
CUTE_DEVICE void activate_all(float (&v)[kSize]) {
#pragma unroll 8
  for (int i = 0; i < kSize; ++i) v[i] = activate<A>(v[i]);
}

// acc: a thread's fp32 accumulators; coord(i): the (row, col) of acc(i) within the tile whose
// first element is (row0, col0). T: the operands' element type (X's type unless x_f32). The
// values go through a local array, so the loops above can index them at run time.
template <class T, class Acc, class Coord>
CUTE_DEVICE void apply_epilogue(Acc& acc, Coord const& coord, int row0, int col0, const GemmParams& p) {
  constexpr int kSize = decltype(cute::size(acc))::value;
  float v[kSize];
  CUTE_UNROLL
  for (int i = 0; i < kSize; ++i) v[i] = acc(i);
  if (p.x != nullptr) {
    if (p.x_f32) {
      add_x<float>(v, coord, row0, col0, p);
    } else {
      add_x<T>(v, coord, row0, col0, p);
    }
  } else if (p.alpha != 1.f) {
#pragma unroll 8
    for (int i = 0; i < kSize; ++i) v[i] *= p.alpha;
  }
  with_activation(p.act, [&](auto a) { activate_all<decltype(a)::value>(v); });
  CUTE_UNROLL
  for (int i = 0; i < kSize; ++i) acc(i) = v[i];
}

// The same epilogue on one chunk of a thread's values: v(i) (i < size(v), a compile-time index)
// sits at (row0, col0) + coord(i), whose offsets from the thread's first value are constants.
// X must be row-major or a broadcast row (x_ldn == 1, 0 <= x_ldm < kMaxChunkXRowStride of
// gemm_params.h; the host copies any other X to that form): each load's address is then one of two row pointers (a bias:
// one) plus a constant, so the values stay in registers and all of a chunk's loads are in flight
// at once (apply_epilogue's local array costs a round trip through local memory per value), and
// a bias is loaded once per column, not per value. Rows past M are never stored, so a bias checks
// only the column. Per-value 64-bit offsets, or a rolled loop for other strides, raise the
// consumers' register peak past the 168 that 384 threads allow: ptxas spills.
template <class XT, class V, class Coord>
CUTE_DEVICE void add_x_chunk(V& v, Coord const& coord, int row0, int col0, const GemmParams& p) {
  const XT* base = static_cast<const XT*>(p.x) + int64_t(row0) * p.x_ldm + col0;
  const int ldm = int(p.x_ldm);
  const bool bias = ldm == 0;
  CUTE_UNROLL
  for (int i = 0; i < cute::size(v); ++i) {
    const int r = cute::get<0>(coord(i)), c = cute::get<1>(coord(i));
    const bool inside = col0 + c < p.n && (bias || row0 + r < p.m);
    const float xv = inside ? float(base[r * ldm + c]) : 0.f;
    v(i) = p.alpha * v(i) + p.beta * xv;
  }
}

template <Activation A, class V>
CUTE_DEVICE void activate_chunk(V& v) {
  CUTE_UNROLL
  for (int i = 0; i < cute::size(v); ++i) v(i) = activate<A>(v(i));
}

// A 16-bit bias (x_ldm == 0, x_ldn == 1, a 4-byte aligned base: the host makes it so) in registers:
// when a tile's epilogue starts, lane L of every warp loads columns (2L, 2L + 1) of each chunk of
// the tile (64 columns; of a 32-column chunk only lanes 0-15's pairs are used) as one 32-bit pair,
// all chunks at once (one load latency per tile), and the epilogue fetches each value's pair from
// its lane with a shuffle. (Loaded per chunk and per value, the bias cost 25 % of the GEMM at
// 4096x14336x4096: the tensor cores waited on each chunk's loads.)
template <class T>
CUTE_DEVICE uint32_t load_bias_pair(const GemmParams& p, int col) {
  const T* bias = static_cast<const T*>(p.x);
  if (col + 1 < p.n) return __ldg(reinterpret_cast<const unsigned int*>(bias + col));
  if (col < p.n) return __ldg(reinterpret_cast<const unsigned short*>(bias + col));
  return 0u;
}

template <class T>
CUTE_DEVICE float pair_half(uint32_t pair, int half) {
  const uint32_t bits = half ? pair >> 16 : pair & 0xffffu;
  if constexpr (sizeof(T) == 2 && std::is_same_v<T, cutlass::half_t>) {
    return __half2float(__ushort_as_half(static_cast<unsigned short>(bits)));
  } else {
    return __uint_as_float(bits << 16);  // bfloat16: the top half of a float
  }
}

// v(i) = alpha * v(i) + beta * bias(col): the chunk's bias pairs are in `pair` of lanes 0..31.
// fp16: each lane converts and scales its own pair once, and a value takes its column's float
// from its lane with one shuffle that feeds the FFMA. A lane sends the half of its own value i's
// column parity, which is the receiver's too: in WGMMA's C layout value i of lane L sits at
// column 2 (L % 4) + i % 2 plus a multiple of 8, so the parity is i's alone. bfloat16: a value
// takes the 16-bit pair and converts its half (a shift or a mask). Each form is the one under
// which ptxas fits the 128x256 kernels in their 168 registers: fp16 shuffling pairs spilled 6-12
// bytes, bfloat16 shuffling floats 4-16 (2026-11-26). fp16 computes beta * bias, then one FFMA;
// bfloat16 alpha * v + beta * bias as nvcc contracts it, as before.
// The source lane and the parity come from the value's offset d from the thread's first column
// c0 (a constant once coordinates fold) and c0 / 2: c0 = 2 (L % 4) is even, so the two columns of
// a pair, and the two rows that share them, name the same lane and ptxas issues one shuffle for
// all four values. With the lane computed from the column itself, (c0 + 9) / 2 did not read as
// (c0 + 8) / 2 and each pair took two shuffles (bf16 8192x4096x1024 addmm: 124.4 -> 120.8 us,
// docs/tuning.md section 24).
template <class T, class V, class Coord>
CUTE_DEVICE void add_bias_pairs(V& v, Coord const& coord, uint32_t pair, const GemmParams& p) {
  const int c0 = cute::get<1>(coord(0));
  if constexpr (std::is_same_v<T, cutlass::half_t>) {
    const float lo = p.beta * pair_half<T>(pair, 0), hi = p.beta * pair_half<T>(pair, 1);
    CUTE_UNROLL
    for (int i = 0; i < cute::size(v); ++i) {
      const int d = cute::get<1>(coord(i)) - c0;
      const float b = __shfl_sync(0xffffffffu, (d & 1) ? hi : lo, (c0 >> 1) + (d >> 1));
      v(i) = p.alpha * v(i) + b;
    }
  } else {
    CUTE_UNROLL
    for (int i = 0; i < cute::size(v); ++i) {
      const int d = cute::get<1>(coord(i)) - c0;
      const uint32_t held = __shfl_sync(0xffffffffu, pair, (c0 >> 1) + (d >> 1));
      v(i) = p.alpha * v(i) + p.beta * pair_half<T>(held, d & 1);
    }
  }
}

// act(alpha * v + beta * X) on one chunk (see add_x_chunk); T: the operands' element type.
// bias16: X is a 16-bit bias whose pairs for this chunk are in `pair` (see load_bias_pair).
// kActivate = false: alpha * v + beta * X only (the activation warps apply act, sm90/activation_warps.h).
// kGeneralX = false: X is a 16-bit bias or absent (the lean sm90 kernel: the general X code left out).
template <class T, bool kActivate = true, bool kGeneralX = true, class V, class Coord>
CUTE_DEVICE void epilogue_chunk(V& v, Coord const& coord, int row0, int col0, bool bias16, uint32_t pair,
                                const GemmParams& p) {
  if (bias16) {
    add_bias_pairs<T>(v, coord, pair, p);
  } else if (kGeneralX && p.x != nullptr) {
    if (p.x_f32) {
      add_x_chunk<float>(v, coord, row0, col0, p);
    } else {
      add_x_chunk<T>(v, coord, row0, col0, p);
    }
  } else if (p.alpha != 1.f) {
    CUTE_UNROLL
    for (int i = 0; i < cute::size(v); ++i) v(i) *= p.alpha;
  }
  if constexpr (kActivate) with_activation(p.act, [&](auto a) { activate_chunk<decltype(a)::value>(v); });
}

// Bounded element stores of a thread's values straight from registers to C(M, N) of element
// type OutT (C(row, col) at row * ldc + col * ldc_col: ldc_col is 1 but for the swapped decode
// path, which computes C^T), at c_base; used for fp32 C, for C rows that are not 16-byte aligned
// and for the swapped path.
template <class OutT, class Acc, class Coord>
CUTE_DEVICE void store_direct(Acc const& acc, Coord const& coord, int row0, int col0, OutT* c_base,
                              const GemmParams& p) {
  CUTE_UNROLL
  for (int i = 0; i < cute::size(acc); ++i) {
    const int row = row0 + cute::get<0>(coord(i)), col = col0 + cute::get<1>(coord(i));
    if (row < p.m && col < p.n) c_base[int64_t(row) * p.ldc + int64_t(col) * p.ldc_col] = OutT(acc(i));
  }
}

}  // namespace cute_gemm
