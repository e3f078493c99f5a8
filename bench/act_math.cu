// The epilogue's activation math (csrc/epilogue.h, activate<A>) on its own, on the GPU:
//  1. accuracy over every fp32 input (all 2^32 bit patterns) against a float64 reference written so
//     that it has no cancellation (gelu = x erfc(-x/sqrt2)/2, gelu_tanh = x / (1 + e^(-2u)),
//     silu = x / (1 + e^-x)), next to torch's own fp32 formula for the same function: the largest
//     error in fp32 ulps, and how many inputs round to another bf16 / fp16 value than the reference;
//     special values (+-inf, NaN, -0) must come out as torch's formula gives them (exit status 1
//     otherwise). The ulp column tops out at 2^24 for every function but relu: each flushes some
//     tiny tail (|result| near the fp32 subnormals) to 0; the 16-bit counts are the telling ones;
//  2. cost: each function applied over and over to registers, in SM cycles (clock64) per warp-wide
//     application on one SM sub-partition, so clock changes do not move it.
// Build and run on the GPU machine (CUTLASS_PATH as in scripts/gpu_check.sh):
//   nvcc -std=c++20 -O3 -DNDEBUG --expt-relaxed-constexpr -arch=native -Icsrc \
//        -I$CUTLASS_PATH/include bench/act_math.cu -o /tmp/act_math && /tmp/act_math
#include <cstdio>
#include <cstring>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "check_cuda.h"
#include "epilogue.h"

using cute_gemm::Activation;
using cute_gemm::activate;

namespace {

// The functions compared: cute_gemm's activate<A>, and torch's fp32 formulas
// (aten/src/ATen/native/cuda/ActivationGeluKernel.cu, ActivationSiluKernel.cu).
enum Fn { kRelu, kGelu, kGeluTanh, kSilu, kTorchGelu, kTorchGeluTanh, kTorchSilu, kFnCount };
const char* const kFnNames[kFnCount] = {"relu", "gelu", "gelu_tanh", "silu",
                                        "torch gelu", "torch gelu_tanh", "torch silu"};

template <int F>
__device__ __forceinline__ float fn(float v) {
  if constexpr (F == kRelu) return activate<Activation::kRelu>(v);
  if constexpr (F == kGelu) return activate<Activation::kGelu>(v);
  if constexpr (F == kGeluTanh) return activate<Activation::kGeluTanh>(v);
  if constexpr (F == kSilu) return activate<Activation::kSilu>(v);
  if constexpr (F == kTorchGelu) return 0.5f * v * (1.f + erff(v * 0.70710678118654752f));
  if constexpr (F == kTorchGeluTanh) {
    const float inner = 0.79788456080286536f * (v + 0.044715f * (v * v * v));
    return 0.5f * v * (1.f + tanhf(inner));
  }
  if constexpr (F == kTorchSilu) return v / (1.f + expf(-v));
  return v;
}

__device__ double reference(int f, double v) {
  switch (f) {
    case kRelu: return v > 0 ? v : 0;
    case kGelu: case kTorchGelu: return 0.5 * v * erfc(-v * 0.70710678118654752440);
    case kGeluTanh: case kTorchGeluTanh:
      return v / (1.0 + exp(-2.0 * 0.79788456080286536 * (v + 0.044715 * v * v * v)));
    default: return v / (1.0 + exp(-v));
  }
}

struct Stats {
  unsigned long long bf16_off, fp16_off;  // inputs rounding to another 16-bit value than the reference
  unsigned int max_ulp;                   // largest fp32 error in ulps of the reference (capped)
};

__device__ unsigned int ulps(float y, double r) {
  const float rf = float(r);
  if (y == rf) return 0;
  if (!isfinite(rf) || !isfinite(y)) return 0xffffffffu;
  int e;
  frexp(r == 0 ? 1e-300 : r, &e);
  // ulp of an fp32 value in [2^(e-1), 2^e): 2^(e-24), and never below the smallest subnormal.
  const double ulp = ldexp(1.0, max(e - 24, -149));
  return (unsigned int)min(fabs(double(y) - r) / ulp, 4.0e9);
}

template <int F>
__global__ void accuracy(Stats* out) {
  unsigned int bf16_off = 0, fp16_off = 0, max_ulp = 0;
  const unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x; i < (1ull << 32); i += stride) {
    const float v = __uint_as_float(unsigned(i));
    if (!isfinite(v)) continue;  // the special values are checked on their own
    const float y = fn<F>(v);
    const double r = reference(F, v);
    max_ulp = max(max_ulp, ulps(y, r));
    const float rf = float(r);
    bf16_off += __bfloat16_as_ushort(__float2bfloat16_rn(y)) != __bfloat16_as_ushort(__float2bfloat16_rn(rf));
    fp16_off += __half_as_ushort(__float2half_rn(y)) != __half_as_ushort(__float2half_rn(rf));
  }
  bf16_off = __reduce_add_sync(0xffffffffu, bf16_off);
  fp16_off = __reduce_add_sync(0xffffffffu, fp16_off);
  max_ulp = __reduce_max_sync(0xffffffffu, max_ulp);
  if (threadIdx.x % 32 == 0) {
    atomicAdd(&out->bf16_off, (unsigned long long)bf16_off);
    atomicAdd(&out->fp16_off, (unsigned long long)fp16_off);
    atomicMax(&out->max_ulp, max_ulp);
  }
}

constexpr int kSpecials = 7;
__global__ void specials(float* out) {
  const float in[kSpecials] = {__int_as_float(0x7f800000), __int_as_float(0xff800000), __int_as_float(0x7fc00000),
                               -0.f, 0.f, -1e30f, 1e30f};
  const int s = threadIdx.x;
  if (s >= kSpecials) return;
  float* o = out + s * kFnCount;
  o[kRelu] = fn<kRelu>(in[s]);
  o[kGelu] = fn<kGelu>(in[s]);
  o[kGeluTanh] = fn<kGeluTanh>(in[s]);
  o[kSilu] = fn<kSilu>(in[s]);
  o[kTorchGelu] = fn<kTorchGelu>(in[s]);
  o[kTorchGeluTanh] = fn<kTorchGeluTanh>(in[s]);
  o[kTorchSilu] = fn<kTorchSilu>(in[s]);
}

// 8 independent chains per thread (the epilogue unrolls by 8), 8 warps per sub-partition.
constexpr int kIters = 4096, kChains = 8, kThreads = 1024;
template <int F>
__global__ void __launch_bounds__(kThreads) cost(float* sink, long long* cycles) {
  float v[kChains];
  for (int i = 0; i < kChains; ++i) v[i] = 0.25f * float(threadIdx.x % 37 + i) - 4.f;
  __syncthreads();
  const long long t0 = clock64();
  for (int it = 0; it < kIters; ++it) {
#pragma unroll
    for (int i = 0; i < kChains; ++i) v[i] = fmaf(fn<F>(v[i]), 0.5f, -2.f);  // stays in [-4, 2]-ish
  }
  __syncthreads();
  const long long t1 = clock64();
  float s = 0.f;
  for (int i = 0; i < kChains; ++i) s += v[i];
  if (s == 12345.f) sink[threadIdx.x] = s;  // keeps the loop alive
  if (threadIdx.x == 0) cycles[blockIdx.x] = t1 - t0;
}

template <int F>
void run(int sms, float* sink, long long* cycles, Stats* stats) {
  CHECK_CUDA(cudaMemset(stats, 0, sizeof(Stats)));
  accuracy<F><<<sms * 8, 256>>>(stats);
  CHECK_CUDA(cudaGetLastError());
  cost<F><<<sms, kThreads>>>(sink, cycles);  // one block of 32 warps per SM
  CHECK_CUDA(cudaGetLastError());
  cost<F><<<sms, kThreads>>>(sink, cycles);  // the second run is the one read (clocks settled)
  Stats h;
  CHECK_CUDA(cudaMemcpy(&h, stats, sizeof(h), cudaMemcpyDeviceToHost));
  long long* c = new long long[sms];
  CHECK_CUDA(cudaMemcpy(c, cycles, sizeof(long long) * sms, cudaMemcpyDeviceToHost));
  double mean = 0;
  for (int i = 0; i < sms; ++i) mean += double(c[i]) / sms;
  delete[] c;
  // cycles / (applications per sub-partition): 8 warps x kIters x kChains on each of 4.
  const double per_warp_app = mean / (double(kThreads / 32 / 4) * kIters * kChains);
  std::printf("| %-15s | %10.3g | %12llu | %12llu | %6.2f |\n", kFnNames[F], double(h.max_ulp), h.bf16_off,
              h.fp16_off, per_warp_app);
}

bool same(float a, float b) {
  if (a != a || b != b) return a != a && b != b;
  return std::memcmp(&a, &b, sizeof(float)) == 0;  // -0 and +0 apart
}

}  // namespace

int main() {
  int dev = 0, sms = 0;
  CHECK_CUDA(cudaGetDevice(&dev));
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, dev));
  std::printf("%s, %d SMs. Over all 2^32 fp32 inputs (finite): the largest error in fp32 ulps of a float64\n"
              "reference, the inputs whose bf16 / fp16 rounding differs from the reference's; cost in SM\n"
              "cycles per warp-wide application on one sub-partition (8 chains in flight).\n\n", prop.name, sms);
  std::printf("| %-15s | %10s | %12s | %12s | %6s |\n|---|---|---|---|---|\n", "function", "max ulp",
              "bf16 off", "fp16 off", "cycles");
  float* sink;
  long long* cycles;
  Stats* stats;
  CHECK_CUDA(cudaMalloc(&sink, sizeof(float) * kThreads));
  CHECK_CUDA(cudaMalloc(&cycles, sizeof(long long) * sms));
  CHECK_CUDA(cudaMalloc(&stats, sizeof(Stats)));
  run<kRelu>(sms, sink, cycles, stats);
  run<kGelu>(sms, sink, cycles, stats);
  run<kGeluTanh>(sms, sink, cycles, stats);
  run<kSilu>(sms, sink, cycles, stats);
  run<kTorchGelu>(sms, sink, cycles, stats);
  run<kTorchGeluTanh>(sms, sink, cycles, stats);
  run<kTorchSilu>(sms, sink, cycles, stats);

  float* d;
  CHECK_CUDA(cudaMalloc(&d, sizeof(float) * kSpecials * kFnCount));
  specials<<<1, 32>>>(d);
  float h[kSpecials * kFnCount];
  CHECK_CUDA(cudaMemcpy(h, d, sizeof(h), cudaMemcpyDeviceToHost));
  const char* const names[kSpecials] = {"+inf", "-inf", "nan", "-0", "+0", "-1e30", "1e30"};
  const int pairs[3][2] = {{kGelu, kTorchGelu}, {kGeluTanh, kTorchGeluTanh}, {kSilu, kTorchSilu}};
  int bad = 0;
  std::printf("\nspecial values, cute_gemm / torch's formula:\n");
  for (int s = 0; s < kSpecials; ++s) {
    std::printf("  %-6s", names[s]);
    for (const auto& p : pairs) {
      const float a = h[s * kFnCount + p[0]], b = h[s * kFnCount + p[1]];
      const bool ok = same(a, b);
      bad += !ok;
      std::printf("  %s %g / %g%s", kFnNames[p[0]], a, b, ok ? "" : " DIFFERS");
    }
    std::printf("\n");
  }
  CHECK_CUDA(cudaDeviceSynchronize());
  std::printf("%s\n", bad ? "FAILED: special values differ from torch's formula" : "special values: as torch");
  return bad ? 1 : 0;
}
