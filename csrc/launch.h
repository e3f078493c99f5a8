// A call's kernel launch as its Plan makes it (gemm.cpp prepares the operands): the GemmParams,
// the launch of the plan's row (or an autotune candidate's) with its split-K / stream-K
// workspace, and the autotune's timing.
#pragma once

#include <ATen/core/Tensor.h>
#include <cuda_runtime_api.h>

#include <cstdint>

#include "checks.h"
#include "gemm_params.h"
#include "operands.h"
#include "plan.h"

namespace cute_gemm {

// addmm's input X (M, N), read in place or copied as the plan says (plan.cpp, choose_x), with its
// row and column strides as the epilogue reads them.
struct PlannedX {
  at::Tensor x;
  int64_t ldm = 0, ldn = 1;
};


// GemmParams' epilogue fields (the X term, alpha, beta, the activation) from a call's planned X
// and epilogue: the tile kernels' launch and the decode GEMV's alike.
void set_epilogue(GemmParams& p, const PlannedX& px, const Epilogue& ep);

// A call's kernel launches as the plan and the prepared operands make them: the GemmParams, and
// the launch of a row with K slices (the plan's, or an autotune candidate's).
struct Launch {
  const Plan& plan;
  const Problem& problem;
  GemmParams p;
  DType dtype = DType::kBF16;
  bool a_kmajor = true, b_kmajor = true;  // the kernel's (the swapped path exchanges A and B)
  int64_t batch = 1;
  int64_t elem = 2, c_elem = 2;  // bytes per operand and per C element
  at::TensorOptions float_options;  // the workspace's
  cudaStream_t stream = nullptr;

  cudaError_t operator()(int cfg, int splits) const;
};


// The launch of a plan on the prepared operands, C target and X (target: C itself, or the
// scratch / temporary buffer the plan writes first).
Launch prepared_launch(const Plan& plan, const Problem& problem, const Overrides& o, at::ScalarType in_dtype,
                       const Operand& A, const Operand& B, const at::Tensor& target, const PlannedX& px,
                       const Epilogue& ep);

// The autotune (CUTE_GEMM_AUTOTUNE=1): replaces cfg and splits by the cached or timed choice.
void autotuned(const Launch& launch, const cudaDeviceProp& prop, int& cfg, int& splits);

}  // namespace cute_gemm
