#pragma once

#include <ATen/core/Tensor.h>

namespace cute_gemm {

// C = A @ B for 2-D float16/bfloat16 CUDA tensors with fp32 accumulation; any M, N, K >= 0.
at::Tensor mm(const at::Tensor& a, const at::Tensor& b);

}  // namespace cute_gemm
