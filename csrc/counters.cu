#include "counters.h"

#include <algorithm>

#include "pdl.h"

namespace cute_gemm {
namespace {

__global__ void zero_counters_kernel(int* counters, int64_t n) {
  // The previous kernel may still read memory these counters reuse (torch's caching allocator).
  pdl_launch_dependents_then_wait();
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    counters[i] = 0;
  }
}

}  // namespace

cudaError_t zero_counters(int* counters, int64_t n, bool pdl, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  constexpr int kThreads = 256;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(unsigned(std::min<int64_t>((n + kThreads - 1) / kThreads, 256)));
  config.blockDim = dim3(kThreads);
  config.stream = stream;
  cudaLaunchAttribute attr[1] = {pdl_attribute()};
  config.attrs = attr;
  config.numAttrs = pdl ? 1 : 0;
  if (cudaError_t e = cudaLaunchKernelEx(&config, zero_counters_kernel, counters, n); e != cudaSuccess) return e;
  return cudaGetLastError();
}

}  // namespace cute_gemm
