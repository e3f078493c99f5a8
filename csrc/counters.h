// The arrival counters of split-K and stream-K (SM90 family): zeroed where they are made (the
// default stream's buffer, launch.cpp) or before the launch (a call's own); the kernel leaves them zeroed.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace cute_gemm {

// Zero `n` counters on `stream` with a small kernel rather than a memset. With `pdl` it is a
// programmatic dependent launch (as the GEMM kernel after it): it waits for the previous kernel
// before writing and lets the GEMM launch at once, so that a split call keeps the overlap that a
// memset node between two kernels would break (2026-11-25, docs/tuning.md).
cudaError_t zero_counters(int* counters, int64_t n, bool pdl, cudaStream_t stream);

}  // namespace cute_gemm
