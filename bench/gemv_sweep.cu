// The decode GEMV's launch shape (csrc/gemv.cu; docs/tuning.md section 25): its main loop for
// bf16 x @ w.t() in several forms (warps per block, blocks per SM, 16-byte loads in flight per lane,
// streaming or read-only loads), each timed over weight copies of 400 MB together in one CUDA graph
// so that the weights come from HBM; microseconds per call. One nvcc command, no extension build:
//
//     nvcc -O3 -std=c++17 -arch=sm_90a bench/gemv_sweep.cu -o /tmp/gemv_sweep && /tmp/gemv_sweep
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cstdlib>

#define CK(x)                                                          \
  do {                                                                 \
    cudaError_t e = (x);                                               \
    if (e != cudaSuccess) {                                            \
      std::printf("%s at line %d\n", cudaGetErrorString(e), __LINE__); \
      std::exit(1);                                                    \
    }                                                                  \
  } while (0)

__device__ __forceinline__ void to_floats(const uint4& v, float (&f)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) { f[2*i] = __uint_as_float(w[i] << 16); f[2*i+1] = __uint_as_float(w[i] & 0xffff0000u); }
}

template <int kWarps, int kBlocks, int kUnroll, int kRows, bool kCs>
__global__ void __launch_bounds__(32 * kWarps, kBlocks) gemv(const __nv_bfloat16* a, const __nv_bfloat16* b,
                                                             __nv_bfloat16* c, int n_rows, int K) {
  const int lane = threadIdx.x % 32;
  constexpr int kStep = 256;
  for (int n = blockIdx.x * kWarps + threadIdx.x / 32; n < n_rows; n += gridDim.x * kWarps) {
    const __nv_bfloat16* w = b + int64_t(n) * K;
    float acc[kRows] = {};
    int64_t k = lane * 8;
    for (; k + (kUnroll - 1) * kStep + 8 <= K; k += kUnroll * kStep) {
      uint4 v[kUnroll];
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const uint4* p = reinterpret_cast<const uint4*>(w + k + u * kStep);
        v[u] = kCs ? __ldcs(p) : __ldg(p);
      }
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        float f[8]; to_floats(v[u], f);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float x[8]; to_floats(__ldg(reinterpret_cast<const uint4*>(a + r * K + k + u * kStep)), x);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[r] = fmaf(f[i], x[i], acc[r]);
        }
      }
    }
    for (; k + 8 <= K; k += kStep) {
      float f[8]; to_floats(__ldcs(reinterpret_cast<const uint4*>(w + k)), f);
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        float x[8]; to_floats(__ldg(reinterpret_cast<const uint4*>(a + r * K + k)), x);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[r] = fmaf(f[i], x[i], acc[r]);
      }
    }
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
#pragma unroll
      for (int d = 16; d > 0; d /= 2) acc[r] += __shfl_xor_sync(0xffffffffu, acc[r], d);
      if (lane == r) c[int64_t(r) * n_rows + n] = __float2bfloat16(acc[r]);
    }
  }
}

struct Shape { int m, n, k; };

template <int kWarps, int kBlocks, int kUnroll, int kRows, bool kCs>
double time_us(const Shape& s, int sms, std::vector<__nv_bfloat16*>& ws, __nv_bfloat16* x, __nv_bfloat16* out) {
  const int blocks = std::min<int64_t>((s.n + kWarps - 1) / kWarps, int64_t(sms) * kBlocks);
  cudaStream_t st; CK(cudaStreamCreate(&st));
  cudaGraph_t g; cudaGraphExec_t ge;
  CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (auto* w : ws) gemv<kWarps, kBlocks, kUnroll, kRows, kCs><<<blocks, 32 * kWarps, 0, st>>>(x, w, out, s.n, s.k);
  CK(cudaStreamEndCapture(st, &g));
  CK(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < 3; ++i) CK(cudaGraphLaunch(ge, st));
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  std::vector<float> t;
  for (int i = 0; i < 15; ++i) {
    cudaEventRecord(e0, st); CK(cudaGraphLaunch(ge, st)); cudaEventRecord(e1, st); cudaEventSynchronize(e1);
    float ms; cudaEventElapsedTime(&ms, e0, e1); t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  cudaGraphExecDestroy(ge); cudaGraphDestroy(g); cudaStreamDestroy(st);
  return 1e3 * t[t.size() / 2] / ws.size();
}

// The forms of the table, in its columns' order: W warps per block, B blocks per SM, U loads in flight.
template <int kRows>
void time_forms(const Shape& s, int sms, std::vector<__nv_bfloat16*>& ws, __nv_bfloat16* x, __nv_bfloat16* out,
                double (&r)[9]) {
  r[0] = time_us<8, 4, 4, kRows, true>(s, sms, ws, x, out);
  r[1] = time_us<8, 4, 2, kRows, true>(s, sms, ws, x, out);
  r[2] = time_us<8, 4, 8, kRows, true>(s, sms, ws, x, out);
  r[3] = time_us<8, 8, 2, kRows, true>(s, sms, ws, x, out);
  r[4] = time_us<8, 2, 8, kRows, true>(s, sms, ws, x, out);
  r[5] = time_us<4, 8, 4, kRows, true>(s, sms, ws, x, out);
  r[6] = time_us<16, 2, 4, kRows, true>(s, sms, ws, x, out);
  r[7] = time_us<8, 4, 4, kRows, false>(s, sms, ws, x, out);  // read-only (ld.global.nc) weight loads
  r[8] = time_us<8, 8, 4, kRows, true>(s, sms, ws, x, out);
}

int main() {
  int sms; CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::vector<Shape> shapes = {{1, 4096, 4096}, {1, 6144, 4096}, {1, 4096, 14336}, {1, 14336, 4096}, {1, 28672, 4096},
                               {4, 4096, 4096}, {4, 4096, 14336}};
  printf("%-16s %8s |", "shape", "floor*");
  const char* names[] = {"w8b4u4", "w8b4u2", "w8b4u8", "w8b8u2", "w8b2u8", "w4b8u4", "w16b2u4", "w8b4u4ldg", "w8b8u4"};
  for (auto n : names) printf(" %9s", n);
  printf("   (us per call; floor* = bytes / 3.35 TB/s)\n");
  for (const Shape& s : shapes) {
    const size_t wbytes = size_t(s.n) * s.k * 2;
    const int copies = int(std::max<size_t>(4, (400ull << 20) / wbytes));
    std::vector<__nv_bfloat16*> ws(copies);
    for (auto& w : ws) { CK(cudaMalloc(&w, wbytes)); CK(cudaMemset(w, 0x3c, wbytes)); }
    __nv_bfloat16 *x, *out; CK(cudaMalloc(&x, size_t(s.m) * s.k * 2)); CK(cudaMemset(x, 0x3c, size_t(s.m) * s.k * 2));
    CK(cudaMalloc(&out, size_t(s.m) * s.n * 2));
    double r[9];
    if (s.m == 1) {
      time_forms<1>(s, sms, ws, x, out, r);
    } else {
      time_forms<4>(s, sms, ws, x, out, r);
    }
    char name[64]; snprintf(name, sizeof name, "%dx%dx%d", s.m, s.n, s.k);
    printf("%-16s %8.1f |", name, wbytes / 3.35e6);
    for (double v : r) printf(" %9.1f", v);
    printf("\n");
    for (auto* w : ws) cudaFree(w);
    cudaFree(x); cudaFree(out);
  }
}
