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

template <Activation A, bool kBias, class T, class Acc, class Coord>
CUTE_DEVICE void apply_epilogue_loop(Acc& acc, Coord const& coord, int row0, int col0, const GemmParams& p) {
  // One element at a time: batching X's loads into registers first made ptxas spill in the
  // consumers, whose 168 registers hold 128 accumulators (device run 5 measured no gain from it).
  const bool has_x = p.x != nullptr;
  CUTE_UNROLL
  for (int i = 0; i < cute::size(acc); ++i) {
    const int row = row0 + cute::get<0>(coord(i)), col = col0 + cute::get<1>(coord(i));
    float v = p.alpha * acc(i);
    // A bias (X's row stride 0): the address is the column's alone, so the compiler loads each
    // of a thread's columns once instead of once per row it holds.
    if (has_x && row < p.m && col < p.n) v += p.beta * load_x<T>(p, kBias ? 0 : row, col);
    acc(i) = activate<A>(v);
  }
}

template <Activation A, class T, class Acc, class Coord>
CUTE_DEVICE void apply_epilogue_as(Acc& acc, Coord const& coord, int row0, int col0, const GemmParams& p) {
  if (p.x_ldm == 0) {
    apply_epilogue_loop<A, true, T>(acc, coord, row0, col0, p);
  } else {
    apply_epilogue_loop<A, false, T>(acc, coord, row0, col0, p);
  }
}

// acc: a thread's fp32 accumulators; coord(i): the (row, col) of acc(i) within the tile whose
// first element is (row0, col0). T: the operands' element type (X's type unless x_f32).
template <class T, class Acc, class Coord>
CUTE_DEVICE void apply_epilogue(Acc& acc, Coord const& coord, int row0, int col0, const GemmParams& p) {
  // One switch outside the loop: each activation gets its own unrolled loop.
  switch (p.act) {
    case Activation::kRelu: apply_epilogue_as<Activation::kRelu, T>(acc, coord, row0, col0, p); break;
    case Activation::kGelu: apply_epilogue_as<Activation::kGelu, T>(acc, coord, row0, col0, p); break;
    case Activation::kGeluTanh: apply_epilogue_as<Activation::kGeluTanh, T>(acc, coord, row0, col0, p); break;
    case Activation::kSilu: apply_epilogue_as<Activation::kSilu, T>(acc, coord, row0, col0, p); break;
    default: apply_epilogue_as<Activation::kNone, T>(acc, coord, row0, col0, p); break;
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
