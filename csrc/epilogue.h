// The fused epilogue shared by every kernel family: C = act(alpha * acc + beta * X), applied to
// a thread's fp32 accumulators in registers before they are converted and stored, so addmm's
// bias/C term and activation cost no extra pass over C. Plus the plain bounded store of fp32
// accumulators (fp32 output, out_dtype=float32).
#pragma once

#include <cute/tensor.hpp>

#include "gemm_params.h"

namespace cute_gemm {

template <Activation A>
CUTE_DEVICE float activate(float v) {
  if constexpr (A == Activation::kRelu) {
    return v > 0.f ? v : (v != v ? v : 0.f);  // NaN stays NaN, as torch.relu
  } else if constexpr (A == Activation::kGelu) {
    return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
  } else if constexpr (A == Activation::kGeluTanh) {
    const float inner = 0.79788456080286536f * (v + 0.044715f * v * v * v);
    return 0.5f * v * (1.f + tanhf(inner));
  } else if constexpr (A == Activation::kSilu) {
    return v / (1.f + __expf(-v));
  } else {
    return v;
  }
}

// X(row, col) in fp32; the caller keeps (row, col) inside (M, N).
template <class T>
CUTE_DEVICE float load_x(const GemmParams& p, int row, int col) {
  const int64_t i = int64_t(row) * p.x_ldm + int64_t(col) * p.x_ldn;
  return p.x_f32 ? static_cast<const float*>(p.x)[i] : float(static_cast<const T*>(p.x)[i]);
}

// act(v) for a runtime activation, as v * g(v) with one formula per family so that one unrolled
// loop serves all of them: silu's g is sigmoid(v) and gelu_tanh's is sigmoid(2y), since
// 0.5 (1 + tanh(y)) = sigmoid(2y); gelu's is Phi(v) = 0.5 (1 + erf(v / sqrt 2)). The branches
// are uniform (one activation per launch). c1, c3: sigmoid's argument c1 v + c3 v^3.
CUTE_DEVICE float activate_any(float v, Activation act, float c1, float c3) {
  if (act == Activation::kRelu) return activate<Activation::kRelu>(v);
  if (act == Activation::kGelu) return activate<Activation::kGelu>(v);
  const float t = fmaf(c3 * v, v * v, c1 * v);
  return v * __fdividef(1.f, 1.f + __expf(-t));  // __fdividef: 0 once e^-t passes 2^126, the limit
}

template <bool kAct, class T, class Acc, class Coord>
CUTE_DEVICE void apply_epilogue_loop(Acc& acc, Coord const& coord, int row0, int col0, const GemmParams& p) {
  const bool has_x = p.x != nullptr;
  const bool silu = p.act == Activation::kSilu;
  const float c1 = silu ? 1.f : 1.5957691216057308f;       // 2 sqrt(2 / pi)
  const float c3 = silu ? 0.f : 0.071354816272600f;     // 2 sqrt(2 / pi) 0.044715
  CUTE_UNROLL
  for (int i = 0; i < cute::size(acc); ++i) {
    const int row = row0 + cute::get<0>(coord(i)), col = col0 + cute::get<1>(coord(i));
    float v = p.alpha * acc(i);
    if (has_x && row < p.m && col < p.n) v += p.beta * load_x<T>(p, row, col);
    if constexpr (kAct) v = activate_any(v, p.act, c1, c3);
    acc(i) = v;
  }
}

// acc: a thread's fp32 accumulators; coord(i): the (row, col) of acc(i) within the tile whose
// first element is (row0, col0). T: the operands' element type (X's type unless x_f32).
// Two unrolled variants, not one per activation: ten 128-value variants tripled every kernel's
// compile time (ptxas; an sm80 kernel 60 s -> 170 s), more than the CI's 2 cores can build in
// time; a rolled loop over a local copy built fast but ran 1.5x slower (local memory).
template <class T, class Acc, class Coord>
CUTE_DEVICE void apply_epilogue(Acc& acc, Coord const& coord, int row0, int col0, const GemmParams& p) {
  if (p.act == Activation::kNone) {
    apply_epilogue_loop<false, T>(acc, coord, row0, col0, p);
  } else {
    apply_epilogue_loop<true, T>(acc, coord, row0, col0, p);
  }
}

// Bounded element stores of a thread's values straight from registers to C(M, N) of element
// type OutT (row-major, ldc), at c_base; used for fp32 C and for C rows that are not 16-byte
// aligned.
template <class OutT, class Acc, class Coord>
CUTE_DEVICE void store_direct(Acc const& acc, Coord const& coord, int row0, int col0, OutT* c_base,
                              const GemmParams& p) {
  CUTE_UNROLL
  for (int i = 0; i < cute::size(acc); ++i) {
    const int row = row0 + cute::get<0>(coord(i)), col = col0 + cute::get<1>(coord(i));
    if (row < p.m && col < p.n) c_base[int64_t(row) * p.ldc + col] = OutT(acc(i));
  }
}

}  // namespace cute_gemm
