// CHECK_CUDA for the standalone benchmark programs (act_math.cu, gemv_mma_sweep.cu, mma_peak.cu): a
// failed CUDA call prints where and why, and the program exits with status 2.
#pragma once

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CHECK_CUDA(x)                                                                        \
  do {                                                                                       \
    cudaError_t e_ = (x);                                                                    \
    if (e_ != cudaSuccess) {                                                                 \
      std::fprintf(stderr, "%s:%d: %s\n", __FILE__, __LINE__, cudaGetErrorString(e_));        \
      std::exit(2);                                                                          \
    }                                                                                        \
  } while (0)
