// The ops' argument rules: operands, out= tensors, addmm's input and activation. Each
// check raises torch's ValueError or TypeError naming the op, the argument and the rule.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

#include <cstdint>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "gemm_params.h"

namespace cute_gemm {

// The kernels count M, N and K in 32-bit ints and round them up to whole tiles (of at most 256),
// so a dimension stops 256 short of 2^31.
constexpr int64_t kMaxDim = std::numeric_limits<int>::max() - 255;

// Numbers in messages are formatted with std::to_string, never through std::ostream: an
// extension built by a toolchain that links its own libstdc++ copy (seen on an H100 machine's
// /opt/gcc) crashes formatting integers with the other copy's locale facets.
inline std::string num(int64_t v) { return std::to_string(v); }
std::string shape_str(at::IntArrayRef sizes);

// The epilogue of an op, as the host sees it: X (expanded to (M, N)) is used when defined.
struct Epilogue {
  at::Tensor x;
  double alpha = 1.0, beta = 0.0;
  Activation act = Activation::kNone;
  // gated_mm: C = act(a @ b) * (a @ b2), b2 (L, K, N) beside b (the up projection's weight beside
  // the gate's); no X, alpha 1.
  at::Tensor b2;
  // mm_row_sums: also row_sums (M,) = the sums over K of a's rows, in a's dtype; no X, alpha 1.
  at::Tensor row_sums;
};

// a (…, M, K) and b (…, K, N): the rules every op shares. Returns the result dtype.
at::ScalarType check_pair(const char* op, const at::Tensor& a, const at::Tensor& b, int dims,
                          std::optional<at::ScalarType> out_dtype);
// out= of an op: exactly the result's shape, dtype and device, no overlap with any input.
void check_out(const char* op, const at::Tensor& out, at::IntArrayRef shape, at::ScalarType dtype,
               const at::Tensor& a, std::initializer_list<std::pair<const char*, const at::Tensor*>> inputs);
// An activation argument: None, "relu", "gelu", "gelu_tanh" or "silu".
Activation parse_activation(const char* op, std::optional<c10::string_view> name);
// gated_mm's operands: x (M, K), w_gate and w_up (F, K) of one dtype and device (mm's rules for x
// and w_gate.t()). Returns the result dtype.
at::ScalarType check_gated(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up);
// addmm's epilogue from its arguments, checked: input broadcast to (M, N), ignored where beta is 0.
Epilogue addmm_epilogue(const at::Tensor& input, const at::Tensor& a, const at::Tensor& b, double beta,
                        double alpha, std::optional<c10::string_view> activation, at::ScalarType dtype);

}  // namespace cute_gemm
