// The decode GEMV (gemv.cu): C = epilogue(A @ B) for a few rows of A (a decode step's tokens)
// against a weight B that the call reads once, on the CUDA cores: warps stream rows of the weight
// (B's columns, K-major; a row alone, or a share of its K where the weight has few rows) with
// 16-byte loads, so that each load instruction reads 512 contiguous bytes and the HBM, not the
// tensor cores' tile shapes, sets the time. plan_for decides where it runs (gemv_plan.cpp,
// choose_gemv); gemm_params.h's fields as the GEMM kernels read them.
#pragma once

#include <cuda_runtime_api.h>

#include "gemm_params.h"
#include "plan.h"

namespace cute_gemm {

// Launches the GEMV of p on stream: p.m <= kGemvMostRows rows (plan.h), one problem (batch 1),
// A's rows and B's columns K-contiguous (lda, ldb) and 16-byte aligned (base, and stride where
// there is more than one), any K; C written element by element through ldc and ldc_col, in C's
// type or fp32 (c_f32); the epilogue's X term (any strides), alpha, beta and activation as the
// GEMM kernels apply them. Gated (p.b2 set): C(m, f) = act(A B)(m, f) * (A B2)(m, f) for
// f < p.n / 2. sms: the GPU's multiprocessors (the grid fills them). Launched plainly; its blocks
// let a PDL-launched successor be scheduled from their start (pdl.h).
cudaError_t gemv(const GemmParams& p, DType d, int sms, cudaStream_t stream);

}  // namespace cute_gemm
