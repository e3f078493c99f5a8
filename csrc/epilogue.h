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

template <Activation A, class T>
CUTE_DEVICE float epilogue_value(float acc, int row, int col, const GemmParams& p) {
  float v = p.alpha * acc;
  if (p.x != nullptr && row < p.m && col < p.n) v += p.beta * load_x<T>(p, row, col);
  return activate<A>(v);
}

// acc: a thread's fp32 accumulators; coord(i): the (row, col) of acc(i) within the tile whose
// first element is (row0, col0). T: the operands' element type (X's type unless x_f32).
// The values go through a local array and one rolled loop: unrolled over 128 accumulators and
// five activations, this code tripled every kernel's compile time (ptxas; 60 s -> 170 s for an
// sm80 kernel), which the CI's 2 cores cannot afford, and gained nothing measurable: the
// epilogue runs while the tensor cores wait either way (docs/tuning.md, fused epilogue).
template <class T, class Acc, class Coord>
CUTE_DEVICE void apply_epilogue(Acc& acc, Coord const& coord, int row0, int col0, const GemmParams& p) {
  constexpr int kSize = decltype(cute::size(acc))::value;
  float v[kSize];
  CUTE_UNROLL
  for (int i = 0; i < kSize; ++i) v[i] = acc(i);
#pragma unroll 1
  for (int i = 0; i < kSize; ++i) {
    const int row = row0 + cute::get<0>(coord(i)), col = col0 + cute::get<1>(coord(i));
    switch (p.act) {
      case Activation::kRelu: v[i] = epilogue_value<Activation::kRelu, T>(v[i], row, col, p); break;
      case Activation::kGelu: v[i] = epilogue_value<Activation::kGelu, T>(v[i], row, col, p); break;
      case Activation::kGeluTanh: v[i] = epilogue_value<Activation::kGeluTanh, T>(v[i], row, col, p); break;
      case Activation::kSilu: v[i] = epilogue_value<Activation::kSilu, T>(v[i], row, col, p); break;
      default: v[i] = epilogue_value<Activation::kNone, T>(v[i], row, col, p); break;
    }
  }
  CUTE_UNROLL
  for (int i = 0; i < kSize; ++i) acc(i) = v[i];
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
