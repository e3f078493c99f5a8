// The ceiling of the SM80 family's instruction on this GPU: mma.sync.m16n8k16 (16-bit operands,
// fp32 accumulators, the only tensor-core instruction the sm80 kernels issue), on every SM, in
// TFLOP/s. Two forms:
//  - "registers": operands held in registers, independent accumulator chains per warp: the issue
//    rate alone;
//  - "ldmatrix": each k16 step of a 64x64 warp tile (the sm80 rows' warp tile) loads its A and B
//    fragments from shared memory with ldmatrix.x4 (8 of them) and issues its 32 mma.sync, the
//    main loop of csrc/sm80/kernel.h without the global loads and barriers: what the family could
//    reach were its global loads free.
// Each form over several warps per SM; the best is the ceiling docs/tuning.md compares the sm80
// family and cuBLAS with (bench/bench_mm.py --family sm80 on the large shapes, same GPU). The
// clock is not pinned: run it right after the benchmark, as the GEMMs ran.
// Build and run on the GPU machine:
//   nvcc -std=c++17 -O3 -arch=native bench/mma_peak.cu -o /tmp/mma_peak && /tmp/mma_peak
#include <cstdio>

#include <cuda_runtime.h>

#include "check_cuda.h"

namespace {

constexpr int kFlopsPerMma = 2 * 16 * 8 * 16;

// One m16n8k16 (bf16 or f16 by kBf16) into the four fp32 accumulators c.
template <bool kBf16>
__device__ __forceinline__ void mma(float (&c)[4], const unsigned (&a)[4], const unsigned (&b)[2]) {
  if constexpr (kBf16) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
}

__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned smem_addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr));
}

// Operands from registers: kChains independent accumulators per warp, `iters` rounds of one mma each.
template <bool kBf16, int kChains>
__global__ void mma_registers(int iters, float* sink) {
  unsigned a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = 0x3c003c00u ^ (threadIdx.x * 0x00010001u + i);
  for (int i = 0; i < 2; ++i) b[i] = 0x3c003c00u ^ (threadIdx.x * 0x00020002u + i);
  float c[kChains][4] = {};
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int j = 0; j < kChains; ++j) mma<kBf16>(c[j], a, b);
  }
  float s = 0.f;
#pragma unroll
  for (int j = 0; j < kChains; ++j) s += c[j][0] + c[j][1] + c[j][2] + c[j][3];
  if (s == 1.2345f) *sink = s;  // never true in practice; keeps the work alive
}

// A 64x64 warp tile per k16 step: A (64 rows x 16 k) in 4 ldmatrix.x4, B (64 columns x 16 k) in 4,
// then 4 x 8 mma.sync; the fragments come from a 16 KB shared buffer each warp walks. Lane l
// supplies the 16-byte row at l * 16: each 8x8 matrix's eight rows are 128 contiguous bytes, all 32
// banks once (no conflicts, as a swizzled tile gives the kernel).
template <bool kBf16>
__global__ void mma_ldmatrix(int iters, float* sink) {
  __shared__ __align__(128) unsigned char buf[16384];
  for (int i = threadIdx.x; i < int(sizeof(buf) / 4); i += blockDim.x) {
    reinterpret_cast<unsigned*>(buf)[i] = 0x3c003c00u ^ unsigned(i);
  }
  __syncthreads();
  const unsigned base = unsigned(__cvta_generic_to_shared(buf));
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const unsigned lane_off = unsigned(lane * 16);
  float c[4][8][4] = {};
  for (int it = 0; it < iters; ++it) {
    const unsigned step = unsigned(((it + warp) & 7) * 2048);  // 8 k16 steps of 2 KB (64 rows)
    unsigned a[4][4], b[4][4];
#pragma unroll
    for (int i = 0; i < 4; ++i) ldmatrix_x4(a[i], base + ((step + i * 512 + lane_off) & 16383));
#pragma unroll
    for (int j = 0; j < 4; ++j) ldmatrix_x4(b[j], base + ((step + 8192 + j * 512 + lane_off) & 16383));
#pragma unroll
    for (int i = 0; i < 4; ++i) {
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const unsigned bj[2] = {b[j / 2][(j % 2) * 2], b[j / 2][(j % 2) * 2 + 1]};
        mma<kBf16>(c[i][j], a[i], bj);
      }
    }
  }
  float s = 0.f;
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) s += c[i][j][0] + c[i][j][1] + c[i][j][2] + c[i][j][3];
  if (s == 1.2345f) *sink = s;
}

// Milliseconds of one launch of `kernel` (the best of five after a warm-up).
template <class Kernel>
float time_ms(Kernel kernel, int blocks, int threads, int iters, float* sink) {
  cudaEvent_t start, stop;
  CHECK_CUDA(cudaEventCreate(&start));
  CHECK_CUDA(cudaEventCreate(&stop));
  kernel<<<blocks, threads>>>(iters, sink);
  CHECK_CUDA(cudaGetLastError());
  float best = 1e30f;
  for (int rep = 0; rep < 5; ++rep) {
    CHECK_CUDA(cudaEventRecord(start));
    kernel<<<blocks, threads>>>(iters, sink);
    CHECK_CUDA(cudaEventRecord(stop));
    CHECK_CUDA(cudaEventSynchronize(stop));
    float ms = 0.f;
    CHECK_CUDA(cudaEventElapsedTime(&ms, start, stop));
    best = ms < best ? ms : best;
  }
  CHECK_CUDA(cudaEventDestroy(start));
  CHECK_CUDA(cudaEventDestroy(stop));
  return best;
}

template <bool kBf16>
void run(const cudaDeviceProp& prop, float* sink) {
  const char* type = kBf16 ? "bf16" : "f16";
  const int sms = prop.multiProcessorCount;
  float best_reg = 0.f, best_ldm = 0.f;
  // Registers: warps per SM x independent chains per warp.
  for (int warps : {4, 8, 16}) {
    const int iters = 1 << 16;
    auto report = [&](int chains, float ms) {
      const double flops = double(sms) * warps * chains * iters * kFlopsPerMma;
      const float tflops = float(flops / (ms * 1e-3) / 1e12);
      best_reg = tflops > best_reg ? tflops : best_reg;
      std::printf("%-5s registers  %2d warps/SM %d chains   %8.1f TFLOP/s\n", type, warps, chains, tflops);
    };
    report(2, time_ms(mma_registers<kBf16, 2>, sms, 32 * warps, iters, sink));
    report(4, time_ms(mma_registers<kBf16, 4>, sms, 32 * warps, iters, sink));
    report(8, time_ms(mma_registers<kBf16, 8>, sms, 32 * warps, iters, sink));
  }
  // ldmatrix + mma.sync: a 64x64 warp tile per warp (8 warps per SM: the sm80 row 0 block).
  for (int warps : {4, 8}) {
    const int iters = 1 << 13;
    const float ms = time_ms(mma_ldmatrix<kBf16>, sms, 32 * warps, iters, sink);
    const double flops = double(sms) * warps * iters * 32 * kFlopsPerMma;
    const float tflops = float(flops / (ms * 1e-3) / 1e12);
    best_ldm = tflops > best_ldm ? tflops : best_ldm;
    std::printf("%-5s ldmatrix   %2d warps/SM 64x64 tile %8.1f TFLOP/s\n", type, warps, tflops);
  }
  std::printf("%-5s ceiling: registers %.1f, with ldmatrix %.1f TFLOP/s\n", type, best_reg, best_ldm);
}

}  // namespace

int main() {
  cudaDeviceProp prop;
  CHECK_CUDA(cudaGetDeviceProperties(&prop, 0));
  int clock_khz = 0;
  CHECK_CUDA(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
  std::printf("# %s, %d SMs, max SM clock %.0f MHz\n", prop.name, prop.multiProcessorCount, clock_khz / 1e3);
  float* sink = nullptr;
  CHECK_CUDA(cudaMalloc(&sink, sizeof(float)));
  run<true>(prop, sink);
  run<false>(prop, sink);
  CHECK_CUDA(cudaFree(sink));
  return 0;
}
