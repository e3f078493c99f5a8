// The RMSNorm of cute_gemm.nn.RMSNorm (the op rms_norm is in rms_norm_op.cpp): one kernel, launched
// with programmatic dependent launch, so that in a decode step it is scheduled while the projection
// before it (the GEMV, gemv.h, or an SM90 GEMM) runs, and the SM90 GEMM after it while it runs.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "row_dtype.h"

namespace cute_gemm {

// y(r, :) = x(r, :) * rsqrt(mean(x(r, :)^2) + eps) * w for rows r of cols elements of type dtype,
// as torch's rms_norm computes it: fp32 arithmetic, rounded once to dtype; with round_before_weight,
// as Hugging Face's LlamaRMSNorm family computes it: x * rsqrt(...) rounded to dtype, then times w
// in fp32 and rounded again. Row r at x + r * ldx and y + r * ldy (in elements), its elements
// contiguous; w: cols elements of dtype, or null (no weight). pdl: launched with programmatic
// dependent launch (pdl.h). One block per row: rows < 2^31.
cudaError_t rms_norm_rows(const void* x, int64_t ldx, const void* w, void* y, int64_t ldy, RowDType dtype,
                          int64_t rows, int64_t cols, float eps, bool round_before_weight, bool pdl,
                          cudaStream_t stream);

}  // namespace cute_gemm
