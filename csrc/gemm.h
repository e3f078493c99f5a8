#pragma once

#include <optional>
#include <string>
#include <tuple>

#include <ATen/core/Tensor.h>
#include <c10/util/string_view.h>

namespace cute_gemm {

// The ops of bindings.cpp's schema. All accumulate in fp32; 16-bit inputs run the CuTe kernels,
// float32 inputs torch's own (see gemm_into). M, N, K >= 0, any strides.
//   mm:    (M, K) @ (K, N)
//   addmm: act(beta * input + alpha * (a @ b)), input broadcast to (M, N), fused in the epilogue
//   bmm:   (B, M, K) @ (B, K, N) in one launch; batch strides may be 0
at::Tensor mm(const at::Tensor& a, const at::Tensor& b, std::optional<at::ScalarType> out_dtype);
at::Tensor& mm_out(const at::Tensor& a, const at::Tensor& b, std::optional<at::ScalarType> out_dtype, at::Tensor& out);
//   mm_row_sums: (a @ b, the sums over K of a's rows), both in a's dtype: the weight's and the
//   bias's gradients of nn.Linear's backward in one call (a = dY^T), the sums in the GEMM's kernel
//   where its plan can (plan.cpp, row_sums_in_kernel), else by torch's sum after it
std::tuple<at::Tensor, at::Tensor> mm_row_sums(const at::Tensor& a, const at::Tensor& b);
at::Tensor addmm(const at::Tensor& input, const at::Tensor& a, const at::Tensor& b, double beta,
                 double alpha, std::optional<c10::string_view> activation,
                 std::optional<at::ScalarType> out_dtype);
at::Tensor& addmm_out(const at::Tensor& input, const at::Tensor& a, const at::Tensor& b, double beta,
                      double alpha, std::optional<c10::string_view> activation,
                      std::optional<at::ScalarType> out_dtype, at::Tensor& out);
// The plan a call of mm (2-D a, b), addmm (with input) or bmm (3-D) would run, as "key=value"
// lines (plan.h, describe); no GPU work. out: the out= tensor of the call, if any.
std::string explain(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& input, double beta,
                    double alpha, std::optional<c10::string_view> activation, std::optional<at::ScalarType> out_dtype,
                    const std::optional<at::Tensor>& out);
at::Tensor bmm(const at::Tensor& a, const at::Tensor& b, std::optional<at::ScalarType> out_dtype);
//   gated_mm: act(x @ w_gate^T) * (x @ w_up^T), x (M, K), w_gate and w_up (F, K): nn.GatedMLP's gate
//   and up projections in one kernel (sm90), or in fp32 with torch's ops
at::Tensor gated_mm(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up,
                    std::optional<c10::string_view> activation);
//   softmax_cross_entropy_: the rows' cross-entropy losses of logits (N, V) against target (N,),
//   float32, the logits overwritten with the summed loss's gradient times scale (a one-element
//   float32 tensor on their device; none: 1) (cross_entropy.h, softmax_xent_rows)
at::Tensor softmax_cross_entropy_(at::Tensor& logits, const at::Tensor& target, int64_t ignore_index,
                                  const std::optional<at::Tensor>& scale);
//   rms_norm: x * rsqrt(mean(x^2 over the last dimension) + eps) * weight, x float16, bfloat16 or
//   float32 (..., D), weight (D,) of x's dtype or none: cute_gemm.nn.RMSNorm's kernel, launched with
//   PDL so that it starts beside the kernels around it (rms_norm.h, rms_norm_op.cpp);
//   round_before_weight: x * rsqrt(...) rounded to x's dtype before the weight multiplies it, as
//   Hugging Face's LlamaRMSNorm family computes it
at::Tensor rms_norm(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps,
                    bool round_before_weight);
at::Tensor& bmm_out(const at::Tensor& a, const at::Tensor& b, std::optional<at::ScalarType> out_dtype, at::Tensor& out);

}  // namespace cute_gemm
