// rms_norm.h's kernel: one block per row, two passes over it (the second from the L1 and L2), fp32
// sums reduced across the block.
#include "rms_norm.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "pdl.h"

namespace cute_gemm {
namespace {

// 256 threads: a 4096-element bf16 row (a Llama-3-8B hidden state) is two 16-byte loads each.
constexpr int kThreads = 256;

// Loads of kVec elements (16 bytes where x, y and w allow, else one).
template <class T, int kVec>
struct alignas(sizeof(T) * kVec) Vec {
  T v[kVec];
};

template <class T, int kVec>
__global__ void __launch_bounds__(kThreads) rms_norm_kernel(const T* x, int64_t ldx, const T* w, T* y, int64_t ldy,
                                                            int64_t cols, float eps, bool round_first) {
  __shared__ float partial[kThreads / 32];
  // The previous kernel may write x (or still read what y overwrites); the next one, where launched
  // with PDL (an SM90 GEMM of this row), may be scheduled now.
  pdl_launch_dependents_then_wait();
  const T* xr = x + int64_t(blockIdx.x) * ldx;
  T* yr = y + int64_t(blockIdx.x) * ldy;
  const int64_t vecs = cols / kVec;
  const auto* xv = reinterpret_cast<const Vec<T, kVec>*>(xr);

  float s = 0.f;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < vecs; i += kThreads) {
    const Vec<T, kVec> v = xv[i];
#pragma unroll
    for (int j = 0; j < kVec; ++j) s = fmaf(float(v.v[j]), float(v.v[j]), s);
  }
  for (int64_t c = vecs * kVec + threadIdx.x; c < cols; c += kThreads) s = fmaf(float(xr[c]), float(xr[c]), s);
#pragma unroll
  for (int d = 16; d > 0; d /= 2) s += __shfl_xor_sync(0xffffffffu, s, d);
  if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = s;
  __syncthreads();
  s = 0.f;
#pragma unroll
  for (int i = 0; i < kThreads / 32; ++i) s += partial[i];  // the same order in every thread
  const float r = rsqrtf(s / float(cols) + eps);

  // (x * r) * w in fp32, as torch's, rounded once; round_first: x * r rounded to T before w
  // multiplies it (Hugging Face's LlamaRMSNorm family), then rounded again.
  auto* yv = reinterpret_cast<Vec<T, kVec>*>(yr);
  const auto* wv = reinterpret_cast<const Vec<T, kVec>*>(w);
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < vecs; i += kThreads) {
    const Vec<T, kVec> v = xv[i];
    Vec<T, kVec> g;
    if (w != nullptr) g = wv[i];
    Vec<T, kVec> out;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      float n = float(v.v[j]) * r;
      if (round_first) n = float(T(n));
      out.v[j] = T(w != nullptr ? n * float(g.v[j]) : n);
    }
    yv[i] = out;
  }
  for (int64_t c = vecs * kVec + threadIdx.x; c < cols; c += kThreads) {
    float n = float(xr[c]) * r;
    if (round_first) n = float(T(n));
    yr[c] = T(w != nullptr ? n * float(w[c]) : n);
  }
}

template <class T>
cudaError_t launch(const void* x, int64_t ldx, const void* w, void* y, int64_t ldy, int64_t rows, int64_t cols,
                   float eps, bool round_first, bool pdl, cudaStream_t stream) {
  constexpr int kWide = 16 / sizeof(T);
  auto aligned = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; };
  const bool wide = aligned(x) && aligned(y) && (w == nullptr || aligned(w)) &&
                    (rows == 1 || (ldx * int64_t(sizeof(T)) % 16 == 0 && ldy * int64_t(sizeof(T)) % 16 == 0));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(unsigned(rows));
  config.blockDim = dim3(kThreads);
  config.stream = stream;
  cudaLaunchAttribute attr[1] = {pdl_attribute()};
  config.attrs = attr;
  config.numAttrs = pdl ? 1 : 0;
  const T* xt = static_cast<const T*>(x);
  const T* wt = static_cast<const T*>(w);
  T* yt = static_cast<T*>(y);
  const cudaError_t e =
      wide ? cudaLaunchKernelEx(&config, rms_norm_kernel<T, kWide>, xt, ldx, wt, yt, ldy, cols, eps, round_first)
           : cudaLaunchKernelEx(&config, rms_norm_kernel<T, 1>, xt, ldx, wt, yt, ldy, cols, eps, round_first);
  return e != cudaSuccess ? e : cudaGetLastError();
}

}  // namespace

cudaError_t rms_norm_rows(const void* x, int64_t ldx, const void* w, void* y, int64_t ldy, RowDType dtype,
                          int64_t rows, int64_t cols, float eps, bool round_before_weight, bool pdl,
                          cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const bool r = round_before_weight;
  switch (dtype) {
    case RowDType::kF16: return launch<__half>(x, ldx, w, y, ldy, rows, cols, eps, r, pdl, stream);
    case RowDType::kBF16: return launch<__nv_bfloat16>(x, ldx, w, y, ldy, rows, cols, eps, r, pdl, stream);
    default: return launch<float>(x, ldx, w, y, ldy, rows, cols, eps, r, pdl, stream);
  }
}

}  // namespace cute_gemm
