#include "cross_entropy.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

namespace cute_gemm {
namespace {

// One block per row. 1024 threads, at most 32 registers each (__launch_bounds__' second
// argument): two blocks fill an SM's 2048 threads and 64K registers, so about 2 x 132 rows are in
// flight on an H100/H200 (a 50,304-column bf16 row is 100 KB: 26 MB), and the second pass over a
// row reads it from L2, not HBM (Llama-3's 128,256-column rows, 67 MB in flight, overflow it).
constexpr int kThreads = 1024;
constexpr float kLog2e = 1.4426950408889634f;

// Loads of kVec elements (16 bytes where the row and its start are 16-byte aligned, else one).
template <class T, int kVec>
struct alignas(sizeof(T) * kVec) Vec {
  T v[kVec];
};

// (m, s) with s = sum exp(x - m) over the values seen: the merge of two such pairs. Both sides are
// rescaled to a finite reference (0 while both maxima are -inf: exp2 of -inf - -inf would be NaN),
// so an empty side adds 0 and a NaN carried in s is never dropped: a row with a NaN logit gets a
// NaN loss, as torch's.
__device__ __forceinline__ float finite_ref(float mx) { return mx == -INFINITY ? 0.f : mx; }

__device__ __forceinline__ void merge(float& m, float& s, float m2, float s2) {
  const float mx = fmaxf(m, m2), ref = finite_ref(mx);
  s = s * exp2f((m - ref) * kLog2e) + s2 * exp2f((m2 - ref) * kLog2e);
  m = mx;
}

template <class T, int kVec>
__global__ void __launch_bounds__(kThreads, 2) softmax_xent_kernel(T* logits, int64_t ld, int64_t cols,
                                                                const int64_t* target, int64_t ignore_index,
                                                                const float* scale, float* loss) {
  __shared__ float sm[32], ss[32];
  __shared__ float target_logit;
  const int64_t row = blockIdx.x;
  T* p = logits + row * ld;
  const int64_t t = target[row];
  const bool ignored = t == ignore_index;
  const bool bad = !ignored && (t < 0 || t >= cols);
  if (threadIdx.x == 0) target_logit = ignored || bad ? 0.f : float(p[t]);  // read before pass 2 writes

  // Pass 1: the row's max and sum of exponentials, online, per thread, then over the block.
  const int64_t vecs = cols / kVec;
  auto* pv = reinterpret_cast<Vec<T, kVec>*>(p);
  float m = -INFINITY, s = 0.f;
#pragma unroll 4  // four loads in flight per thread
  for (int64_t i = threadIdx.x; i < vecs; i += kThreads) {
    const Vec<T, kVec> x = pv[i];
    float f[kVec], mx = -INFINITY;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      f[j] = float(x.v[j]);
      mx = fmaxf(mx, f[j]);
    }
    // As merge: a NaN value makes add NaN (fmaxf skips it in the max), and s keeps it.
    const float base = fmaxf(m, mx), ref = finite_ref(base);
    float add = 0.f;
#pragma unroll
    for (int j = 0; j < kVec; ++j) add += exp2f((f[j] - ref) * kLog2e);
    s = s * exp2f((m - ref) * kLog2e) + add;
    m = base;
  }
  for (int64_t c = vecs * kVec + threadIdx.x; c < cols; c += kThreads) merge(m, s, float(p[c]), 1.f);
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, off), s2 = __shfl_xor_sync(0xffffffffu, s, off);
    merge(m, s, m2, s2);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) sm[warp] = m, ss[warp] = s;
  __syncthreads();
  m = lane < kThreads / 32 ? sm[lane] : -INFINITY;
  s = lane < kThreads / 32 ? ss[lane] : 0.f;
#pragma unroll
  for (int off = 16; off > 0; off /= 2) {
    const float m2 = __shfl_xor_sync(0xffffffffu, m, off), s2 = __shfl_xor_sync(0xffffffffu, s, off);
    merge(m, s, m2, s2);
  }
  const float lse = m + logf(s);  // every thread holds the same value
  if (threadIdx.x == 0) loss[row] = ignored ? 0.f : bad ? NAN : lse - target_logit;

  // Pass 2: (softmax - onehot) * scale in place, in float32 and rounded once (zeros for an ignored
  // row, NaN for a bad target).
  const float fill = ignored ? 0.f : NAN;
  const float k = scale != nullptr ? *scale : 1.f;
  const bool plain = !ignored && !bad;
#pragma unroll 4
  for (int64_t i = threadIdx.x; i < vecs; i += kThreads) {
    Vec<T, kVec> x = pv[i];
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const int64_t c = i * kVec + j;
      const float g = plain ? (exp2f((float(x.v[j]) - lse) * kLog2e) - (c == t ? 1.f : 0.f)) * k : fill;
      x.v[j] = T(g);
    }
    pv[i] = x;
  }
  for (int64_t c = vecs * kVec + threadIdx.x; c < cols; c += kThreads) {
    p[c] = T(plain ? (exp2f((float(p[c]) - lse) * kLog2e) - (c == t ? 1.f : 0.f)) * k : fill);
  }
}

template <class T>
cudaError_t launch(void* logits, int64_t rows, int64_t cols, int64_t ld, const int64_t* target,
                   int64_t ignore_index, const float* scale, float* loss, cudaStream_t stream) {
  constexpr int kWide = 16 / sizeof(T);
  T* p = static_cast<T*>(logits);
  const bool wide = reinterpret_cast<uintptr_t>(p) % 16 == 0 && (ld * int64_t(sizeof(T))) % 16 == 0;
  const dim3 grid(static_cast<unsigned>(rows));
  if (wide) {
    softmax_xent_kernel<T, kWide><<<grid, kThreads, 0, stream>>>(p, ld, cols, target, ignore_index, scale, loss);
  } else {
    softmax_xent_kernel<T, 1><<<grid, kThreads, 0, stream>>>(p, ld, cols, target, ignore_index, scale, loss);
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t softmax_xent_rows(void* logits, RowDType dtype, int64_t rows, int64_t cols, int64_t ld,
                              const int64_t* target, int64_t ignore_index, const float* scale, float* loss,
                              cudaStream_t stream) {
  if (rows <= 0) return cudaSuccess;
  switch (dtype) {
    case RowDType::kF16: return launch<__half>(logits, rows, cols, ld, target, ignore_index, scale, loss, stream);
    case RowDType::kBF16:
      return launch<__nv_bfloat16>(logits, rows, cols, ld, target, ignore_index, scale, loss, stream);
    default: return launch<float>(logits, rows, cols, ld, target, ignore_index, scale, loss, stream);
  }
}

}  // namespace cute_gemm
