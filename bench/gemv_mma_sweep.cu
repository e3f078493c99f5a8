// The decode GEMV's forms at 1 to 16 rows of x (docs/tuning.md sections 23 and 25), bf16 x @ w.t():
// the CUDA-core main loop with P weight rows a warp (x's vectors loaded and converted once for them,
// U loads of each row in flight), and mma.sync m16n8k16 forms (x's rows as the MMA's A, one 16-row
// tile; G groups of 8 weight rows as its B; lane 4g + q loads the 16 bytes at 8q of row g's next 32
// elements, S such steps of each group in flight; the weight's loads evict-first (h0), the same with
// the L2's 256-byte prefetch hint (h1), or read-only, no L1, with the hint (h2); up to 8 warps share
// a row's K, s in the names). With the argument `ring`: forms that stage the weight in a ring in
// shared memory through 16-byte cp.async instead (gemv_ring below), beside the CUDA-core loop. Each
// form is checked against an fp32 reference and timed over weight copies of 400 MB (128 MB with
// `ring`) in one CUDA graph; microseconds per call. One nvcc command, no extension build:
//
//     nvcc -O3 -std=c++17 -arch=sm_90a bench/gemv_mma_sweep.cu -o /tmp/gemv_mma_sweep && /tmp/gemv_mma_sweep [ring]
#include <cuda_bf16.h>
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cstdlib>
#include <cmath>
#include <cstring>
#include <type_traits>

#include "check_cuda.h"

constexpr int kWarps = 8, kThreads = 256, kBlocks = 2;

template <int kHint>
__device__ __forceinline__ uint4 ldw(const void* p) {
  uint4 v;
  if constexpr (kHint == 0) {
    v = __ldcs(reinterpret_cast<const uint4*>(p));
  } else if constexpr (kHint == 1) {
    asm volatile("ld.global.cs.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  } else {
    asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  }
  return v;
}

__device__ __forceinline__ void to_floats(const uint4& v, float (&f)[8]) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; ++i) { f[2*i] = __uint_as_float(w[i] << 16); f[2*i+1] = __uint_as_float(w[i] & 0xffff0000u); }
}

// ---- CUDA cores: a warp on kP weight rows at once, x's 8 elements loaded and converted once for them.
template <int kRows, int kP, int kU>
__global__ void __launch_bounds__(kThreads, kBlocks) gemv_cc(const __nv_bfloat16* a, int m, const __nv_bfloat16* b,
                                                             __nv_bfloat16* c, int n_rows, int K) {
  const int lane = threadIdx.x % 32;
  constexpr int kStep = 256;
  for (int n = (blockIdx.x * kWarps + threadIdx.x / 32) * kP; n < n_rows; n += gridDim.x * kWarps * kP) {
    float acc[kP][kRows] = {};
    const __nv_bfloat16* w[kP];
#pragma unroll
    for (int p = 0; p < kP; ++p) w[p] = b + int64_t(min(n + p, n_rows - 1)) * K;
    int64_t k = lane * 8;
    for (; k + (kU - 1) * kStep + 8 <= K; k += kU * kStep) {
      uint4 v[kU][kP];
#pragma unroll
      for (int u = 0; u < kU; ++u)
#pragma unroll
        for (int p = 0; p < kP; ++p) v[u][p] = ldw<0>(w[p] + k + u * kStep);
#pragma unroll
      for (int u = 0; u < kU; ++u) {
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float x[8]; to_floats(__ldg(reinterpret_cast<const uint4*>(a + int64_t(min(r, m - 1)) * K + k + u * kStep)), x);
#pragma unroll
          for (int p = 0; p < kP; ++p) {
            float f[8]; to_floats(v[u][p], f);
#pragma unroll
            for (int i = 0; i < 8; ++i) acc[p][r] = fmaf(f[i], x[i], acc[p][r]);
          }
        }
      }
    }
    for (; k + 8 <= K; k += kStep) {
#pragma unroll
      for (int p = 0; p < kP; ++p) {
        float f[8]; to_floats(ldw<0>(w[p] + k), f);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          float x[8]; to_floats(__ldg(reinterpret_cast<const uint4*>(a + int64_t(min(r, m - 1)) * K + k)), x);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[p][r] = fmaf(f[i], x[i], acc[p][r]);
        }
      }
    }
#pragma unroll
    for (int p = 0; p < kP; ++p)
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
#pragma unroll
        for (int d = 16; d > 0; d /= 2) acc[p][r] += __shfl_xor_sync(0xffffffffu, acc[p][r], d);
        if (lane == r && r < m && n + p < n_rows) c[int64_t(r) * n_rows + n + p] = __float2bfloat16(acc[p][r]);
      }
  }
}

// ---- mma.sync m16n8k16: x rows as A (m16 per tile), kG groups of 8 weight rows as B; lane 4g+q loads
// 16 bytes at 8q of row g's next 32 elements; kS such steps of each group in flight.
__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0, uint32_t b1) {
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// The sums of a unit's parts (warps warp - part .. warp - part + splits - 1) added in part order in
// shared memory: the first part's registers get them. Every warp of the block calls it.
template <int kRegs, int kW>
__device__ __forceinline__ void meet_parts(float* flat, float (&sums)[kRegs][kW][32], int warp, int lane, int part,
                                           int splits) {
#pragma unroll
  for (int i = 0; i < kRegs; ++i) sums[i][warp][lane] = flat[i];
  __syncthreads();
  if (part == 0) {
#pragma unroll
    for (int i = 0; i < kRegs; ++i) {
      float v = sums[i][warp][lane];
      for (int s = 1; s < splits; ++s) v += sums[i][warp + s][lane];
      flat[i] = v;
    }
  }
  __syncthreads();
}

template <int kRows, int kG, int kS, int kHint>
__global__ void __launch_bounds__(kThreads, kBlocks) gemv_mma(const __nv_bfloat16* a, int m, const __nv_bfloat16* b,
                                                              __nv_bfloat16* c, int n_rows, int K, int splits) {
  constexpr int kTiles = kRows > 16 ? 2 : 1;
  constexpr bool kUpper = kRows > 8;
  constexpr int kRegs = kG * kTiles * 4;
  __shared__ float sums[kRegs][kWarps][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, q = lane % 4;
  const int part = warp % splits, per_block = kWarps / splits;
  const int unit_rows = 8 * kG;
  const int64_t units = (n_rows + unit_rows - 1) / unit_rows;
  auto a_row = [&](int r) { return a + int64_t(r < m ? r : m - 1) * K; };
  const int64_t steps = K / 32;
  for (int64_t first = int64_t(blockIdx.x) * per_block; first < units; first += int64_t(gridDim.x) * per_block) {
    const int64_t unit = first + warp / splits;
    float acc[kG][kTiles][4] = {};
    if (unit < units) {
      const __nv_bfloat16* xa[kTiles][2];
#pragma unroll
      for (int t = 0; t < kTiles; ++t) { xa[t][0] = a_row(16 * t + g); xa[t][1] = a_row(16 * t + g + 8); }
      const __nv_bfloat16* w[kG];
#pragma unroll
      for (int j = 0; j < kG; ++j) w[j] = b + min(unit * unit_rows + 8 * j + g, int64_t(n_rows - 1)) * K + 8 * q;
      auto step = [&](const uint4 (&wv)[kG], int64_t k) {
#pragma unroll
        for (int t = 0; t < kTiles; ++t) {
          const uint4 lo = __ldg(reinterpret_cast<const uint4*>(xa[t][0] + k + 8 * q));
          const uint4 hi = kUpper ? __ldg(reinterpret_cast<const uint4*>(xa[t][1] + k + 8 * q)) : make_uint4(0, 0, 0, 0);
#pragma unroll
          for (int j = 0; j < kG; ++j) {
            mma16816(acc[j][t], lo.x, hi.x, lo.y, hi.y, wv[j].x, wv[j].y);
            mma16816(acc[j][t], lo.z, hi.z, lo.w, hi.w, wv[j].z, wv[j].w);
          }
        }
      };
      int64_t st = int64_t(part) * kS;
      for (; st + kS <= steps; st += int64_t(splits) * kS) {
        uint4 v[kS][kG];
#pragma unroll
        for (int u = 0; u < kS; ++u)
#pragma unroll
          for (int j = 0; j < kG; ++j) v[u][j] = ldw<kHint>(w[j] + (st + u) * 32);
#pragma unroll
        for (int u = 0; u < kS; ++u) step(v[u], (st + u) * 32);
      }
      for (st = steps / kS * kS + part; st < steps; st += splits) {
        uint4 v[kG];
#pragma unroll
        for (int j = 0; j < kG; ++j) v[j] = ldw<kHint>(w[j] + st * 32);
        step(v, st * 32);
      }
    }
    if (splits > 1) meet_parts(&acc[0][0][0], sums, warp, lane, part, splits);
    if (part != 0 || unit >= units) continue;
#pragma unroll
    for (int j = 0; j < kG; ++j)
#pragma unroll
      for (int t = 0; t < kTiles; ++t)
#pragma unroll
        for (int h = 0; h < 2; ++h) {
          const int r = 16 * t + g + 8 * h;
          if (r >= m) continue;
#pragma unroll
          for (int cc = 0; cc < 2; ++cc) {
            const int64_t n = unit * unit_rows + 8 * j + 2 * q + cc;
            if (n < n_rows) c[r * int64_t(n_rows) + n] = __float2bfloat16(acc[j][t][2 * h + cc]);
          }
        }
  }
}

// ---- a ring in shared memory: each warp owns kTW tiles of 16 weight rows (the MMA's A, its 16
// rows) over a part of K and streams them through its own kS-stage ring of 16-byte cp.async
// copies (kSK elements of each row a stage: 32 lanes x 16 bytes cover whole 128-byte lines of
// rows), so the bytes in flight are set by shared memory, not by registers. The MMA's 8 columns
// are x's rows (kTok = 8 or 16: one or two blocks of them). A lane reads row g's and row g + 8's
// 16 bytes at 8q of each 32-element step from shared memory (chunks swizzled so that the 8 lanes
// of a phase hit 8 distinct bank groups) and x's row g's 16 bytes at the same k from the L1; the
// MMA takes the 16 k of each half in an order both operands share.
template <int kHint>
__device__ __forceinline__ void cp_async16(uint32_t dst, const void* src, int bytes) {
  if constexpr (kHint == 0) {
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes));
  } else {
    asm volatile("cp.async.cg.shared.global.L2::256B [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(bytes));
  }
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N)); }
__device__ __forceinline__ int swz(int row, int chunk) { return chunk ^ ((row & 1) << 2); }

template <int kTok, int kTW, int kS, int kSK, int kW, int kHint>
__global__ void __launch_bounds__(32 * kW) gemv_ring(const __nv_bfloat16* a, int m, const __nv_bfloat16* b,
                                                     __nv_bfloat16* c, int n_rows, int K, int splits) {
  constexpr int kRowsW = 16 * kTW, kChunks = kSK / 8, kSlot = kRowsW * kChunks, kPerLane = kSlot / 32;
  constexpr int kTB = kTok / 8, kRegs = kTW * kTB * 4;
  extern __shared__ uint4 smem[];
  __shared__ float sums[kRegs][kW][32];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, q = lane % 4;
  uint4* ring = smem + warp * kS * kSlot;
  const uint32_t ring_s = uint32_t(__cvta_generic_to_shared(ring));
  const int part = warp % splits, per_block = kW / splits;
  const int64_t units = (n_rows + kRowsW - 1) / kRowsW;
  const int64_t stages = (K + kSK - 1) / kSK;
  const __nv_bfloat16* xr[kTB];
#pragma unroll
  for (int tb = 0; tb < kTB; ++tb) xr[tb] = a + int64_t(min(8 * tb + g, m - 1)) * K;
  for (int64_t first = int64_t(blockIdx.x) * per_block; first < units; first += int64_t(gridDim.x) * per_block) {
    const int64_t unit = first + warp / splits;
    float acc[kTW][kTB][4] = {};
    if (unit < units) {
      const int64_t s0 = stages * part / splits, n = stages * (part + 1) / splits - s0;
      // Lane l copies column l % kChunks of rows l / kChunks + (32 / kChunks) i (past the weight's
      // last row its last again); a chunk at or past K is zero-filled (src-size < 16).
      const int col = lane % kChunks, row0 = lane / kChunks;
      auto issue = [&](int64_t st, int slot) {
        const int64_t k = st * kSK + col * 8;
        const int bytes = k + 8 <= K ? 16 : (k < K ? int(K - k) * 2 : 0);
        const int64_t koff = bytes > 0 ? k : 0;
#pragma unroll
        for (int i = 0; i < kPerLane; ++i) {
          const int row = row0 + i * (32 / kChunks);
          const __nv_bfloat16* src = b + min(unit * kRowsW + row, int64_t(n_rows - 1)) * K + koff;
          cp_async16<kHint>(ring_s + uint32_t((slot * kSlot + row * kChunks + swz(row, col)) * 16), src, bytes);
        }
      };
      auto compute = [&](int slot, int64_t k0, auto tail) {
        const uint4* S = ring + slot * kSlot;
#pragma unroll
        for (int j = 0; j < kSK / 32; ++j) {
          const int64_t k = k0 + 32 * j + 8 * q;
          uint4 xv[kTB];
#pragma unroll
          for (int tb = 0; tb < kTB; ++tb) {
            if constexpr (decltype(tail)::value) {
              xv[tb] = k + 8 <= K ? __ldg(reinterpret_cast<const uint4*>(xr[tb] + k)) : make_uint4(0, 0, 0, 0);
            } else {
              xv[tb] = __ldg(reinterpret_cast<const uint4*>(xr[tb] + k));
            }
          }
#pragma unroll
          for (int tw = 0; tw < kTW; ++tw) {
            const uint4 lo = S[(16 * tw + g) * kChunks + swz(g, 4 * j + q)];
            const uint4 hi = S[(16 * tw + g + 8) * kChunks + swz(g + 8, 4 * j + q)];
#pragma unroll
            for (int tb = 0; tb < kTB; ++tb) {
              mma16816(acc[tw][tb], lo.x, hi.x, lo.y, hi.y, xv[tb].x, xv[tb].y);
              mma16816(acc[tw][tb], lo.z, hi.z, lo.w, hi.w, xv[tb].z, xv[tb].w);
            }
          }
        }
      };
#pragma unroll
      for (int s = 0; s < kS - 1; ++s) {
        if (s < n) issue(s0 + s, s);
        cp_async_commit();
      }
      for (int i = 0; i < int(n); ++i) {
        cp_async_wait<kS - 2>();
        __syncwarp();
        if (i + kS - 1 < n) issue(s0 + i + kS - 1, (i + kS - 1) % kS);
        cp_async_commit();
        const int64_t k0 = (s0 + i) * kSK;
        if (k0 + kSK <= K) {
          compute(i % kS, k0, std::false_type{});
        } else {
          compute(i % kS, k0, std::true_type{});
        }
      }
      cp_async_wait<0>();
      __syncwarp();
    }
    if (splits > 1) meet_parts(&acc[0][0][0], sums, warp, lane, part, splits);
    if (part != 0 || unit >= units) continue;
    // acc[tw][tb][2 h + cc]: weight row 16 tw + g + 8 h of the unit against x's row 8 tb + 2 q + cc.
#pragma unroll
    for (int tw = 0; tw < kTW; ++tw)
#pragma unroll
      for (int tb = 0; tb < kTB; ++tb)
#pragma unroll
        for (int h = 0; h < 2; ++h)
#pragma unroll
          for (int cc = 0; cc < 2; ++cc) {
            const int r = 8 * tb + 2 * q + cc;
            const int64_t nn = unit * kRowsW + 16 * tw + g + 8 * h;
            if (r < m && nn < n_rows) c[r * int64_t(n_rows) + nn] = __float2bfloat16(acc[tw][tb][2 * h + cc]);
          }
  }
}

__global__ void ref_kernel(const __nv_bfloat16* a, int m, const __nv_bfloat16* b, float* c, int n_rows, int K) {
  const int n = blockIdx.x * blockDim.y + threadIdx.y;
  if (n >= n_rows) return;
  for (int r = 0; r < m; ++r) {
    float s = 0.f;
    for (int k = threadIdx.x; k < K; k += 32) s += float(a[int64_t(r) * K + k]) * float(b[int64_t(n) * K + k]);
    for (int d = 16; d > 0; d /= 2) s += __shfl_xor_sync(0xffffffffu, s, d);
    if (threadIdx.x == 0) c[int64_t(r) * n_rows + n] = s;
  }
}

__global__ void fill(__nv_bfloat16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed; h ^= h >> 15; h *= 2246822519u; h ^= h >> 13;
    p[i] = __float2bfloat16((h & 0xffff) / 32768.f - 1.f);
  }
}

struct Shape { int m, n, k; };
struct Ctx { Shape s; int sms; std::vector<__nv_bfloat16*> ws; __nv_bfloat16 *x, *out; float* ref; };

template <class Launch>
void time_it(Ctx& cx, const char* name, Launch launch) {
  CHECK_CUDA(cudaMemset(cx.out, 0xff, size_t(cx.s.m) * cx.s.n * 2));
  launch(cx.ws[0], (cudaStream_t)0);
  CHECK_CUDA(cudaDeviceSynchronize());
  std::vector<__nv_bfloat16> o(size_t(cx.s.m) * cx.s.n);
  std::vector<float> r(o.size());
  CHECK_CUDA(cudaMemcpy(o.data(), cx.out, o.size() * 2, cudaMemcpyDeviceToHost));
  CHECK_CUDA(cudaMemcpy(r.data(), cx.ref, r.size() * 4, cudaMemcpyDeviceToHost));
  double err = 0, mx = 0;
  for (size_t i = 0; i < o.size(); ++i) {  // NaN (an output never written: 0xff bytes) counts as wrong
    const double d = std::fabs(__bfloat162float(o[i]) - r[i]);
    if (!(d <= err)) err = std::isnan(d) ? INFINITY : d;
    mx = std::max(mx, (double)std::fabs(r[i]));
  }
  cudaStream_t st; CHECK_CUDA(cudaStreamCreate(&st));
  cudaGraph_t g; cudaGraphExec_t ge;
  CHECK_CUDA(cudaStreamBeginCapture(st, cudaStreamCaptureModeGlobal));
  for (auto* w : cx.ws) launch(w, st);
  CHECK_CUDA(cudaStreamEndCapture(st, &g));
  CHECK_CUDA(cudaGraphInstantiate(&ge, g, 0));
  for (int i = 0; i < 3; ++i) CHECK_CUDA(cudaGraphLaunch(ge, st));
  cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
  std::vector<float> t;
  for (int i = 0; i < 11; ++i) {
    cudaEventRecord(e0, st); CHECK_CUDA(cudaGraphLaunch(ge, st)); cudaEventRecord(e1, st); CHECK_CUDA(cudaEventSynchronize(e1));
    float ms; cudaEventElapsedTime(&ms, e0, e1); t.push_back(ms);
  }
  std::sort(t.begin(), t.end());
  cudaGraphExecDestroy(ge); cudaGraphDestroy(g); cudaStreamDestroy(st);
  const double us = 1e3 * t[t.size() / 2] / cx.ws.size();
  const double gbs = double(cx.s.n) * cx.s.k * 2 / us / 1e3;
  printf("  %-22s %8.1f us %6.0f GB/s  err %.1e%s\n", name, us, gbs, err / mx, err / mx > 2e-2 ? "  WRONG" : "");
}

template <int kRows, int kP, int kU>
void cc(Ctx& cx) {
  char name[64]; snprintf(name, sizeof name, "cc r%d P%d U%d", kRows, kP, kU);
  const int blocks = std::min<int64_t>((cx.s.n + kWarps * kP - 1) / (kWarps * kP), int64_t(cx.sms) * kBlocks);
  time_it(cx, name, [&](const __nv_bfloat16* w, cudaStream_t st) {
    gemv_cc<kRows, kP, kU><<<blocks, kThreads, 0, st>>>(cx.x, cx.s.m, w, cx.out, cx.s.n, cx.s.k);
  });
}

template <int kRows, int kG, int kS, int kHint>
void mma(Ctx& cx, int max_splits = 8) {
  const int64_t units = (cx.s.n + 8 * kG - 1) / (8 * kG);
  const int64_t slots = int64_t(cx.sms) * kBlocks;
  const int64_t rounds = cx.s.k / (32 * kS);
  int splits = max_splits;
  while (splits > 1 && (units * splits > slots * kWarps || splits > rounds)) splits /= 2;
  const int64_t per_block = kWarps / splits;
  const int blocks = std::min<int64_t>((units + per_block - 1) / per_block, slots);
  char name[64]; snprintf(name, sizeof name, "mma r%d G%d S%d h%d s%d", kRows, kG, kS, kHint, splits);
  time_it(cx, name, [&](const __nv_bfloat16* w, cudaStream_t st) {
    gemv_mma<kRows, kG, kS, kHint><<<blocks, kThreads, 0, st>>>(cx.x, cx.s.m, w, cx.out, cx.s.n, cx.s.k, splits);
  });
}

template <int kTok, int kTW, int kS, int kSK, int kW, int kHint>
void ring(Ctx& cx) {
  constexpr int kRowsW = 16 * kTW;
  const size_t smem = size_t(kW) * kS * kRowsW * kSK * 2;
  auto kern = gemv_ring<kTok, kTW, kS, kSK, kW, kHint>;
  CHECK_CUDA(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize, int(smem)));
  int per_sm = 0;
  CHECK_CUDA(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kern, 32 * kW, smem));
  const int64_t units = (cx.s.n + kRowsW - 1) / kRowsW, stages = (cx.s.k + kSK - 1) / kSK;
  const int64_t warps = int64_t(cx.sms) * per_sm * kW;
  int splits = 1;
  while (splits < kW && units * splits * 2 <= warps && splits * 2 <= stages) splits *= 2;
  const int64_t per_block = kW / splits;
  const int blocks = int(std::min<int64_t>((units + per_block - 1) / per_block, int64_t(cx.sms) * per_sm));
  char name[64];
  snprintf(name, sizeof name, "ring t%d T%d S%d K%d W%d h%d s%d b%d", kTok, kTW, kS, kSK, kW, kHint, splits, per_sm);
  time_it(cx, name, [&](const __nv_bfloat16* w, cudaStream_t st) {
    kern<<<blocks, 32 * kW, smem, st>>>(cx.x, cx.s.m, w, cx.out, cx.s.n, cx.s.k, splits);
  });
}

template <int kTok>
void ring_forms(Ctx& cx) {
  ring<kTok, 1, 4, 128, 4, 0>(cx);
  ring<kTok, 1, 4, 128, 4, 1>(cx);
  ring<kTok, 1, 6, 128, 4, 0>(cx);
  ring<kTok, 1, 8, 64, 4, 0>(cx);
  ring<kTok, 1, 3, 128, 8, 0>(cx);
  ring<kTok, 1, 4, 128, 8, 0>(cx);
  ring<kTok, 2, 4, 128, 4, 0>(cx);
  ring<kTok, 2, 3, 128, 4, 0>(cx);
  ring<kTok, 1, 4, 128, 2, 0>(cx);
  ring<kTok, 1, 4, 256, 2, 0>(cx);
}

template <int kRows>
void mma_forms(Ctx& cx) {
  mma<kRows, 2, 4, 0>(cx);
  mma<kRows, 1, 8, 0>(cx);
  mma<kRows, 2, 8, 0>(cx);
  mma<kRows, 4, 4, 0>(cx);
  mma<kRows, 2, 4, 1>(cx);
  mma<kRows, 2, 4, 2>(cx);
  mma<kRows, 1, 8, 2>(cx);
  mma<kRows, 2, 8, 2>(cx);
  mma<kRows, 2, 8, 2>(cx, 1);
}

int main(int argc, char** argv) {
  // `ring` as the argument: the ring forms against the CUDA-core loop of one weight row a warp.
  const bool ring_only = argc > 1 && std::strcmp(argv[1], "ring") == 0;
  int sms; CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  std::vector<Shape> shapes;
  std::vector<std::pair<int, int>> nks{{4096, 4096}, {6144, 4096}, {4096, 14336}, {14336, 4096}};
  if (ring_only) nks.insert(nks.end(), {{1024, 4096}, {28672, 4096}, {1000, 4104}});
  for (int m : {1, 4, 8, 16})
    for (auto nk : nks) shapes.push_back({m, nk.first, nk.second});
  for (const Shape& s : shapes) {
    Ctx cx; cx.s = s; cx.sms = sms;
    const size_t wbytes = size_t(s.n) * s.k * 2;
    const int copies = int(std::max<size_t>(4, ((ring_only ? 128ull : 400ull) << 20) / wbytes));
    cx.ws.resize(copies);
    for (int i = 0; i < copies; ++i) { CHECK_CUDA(cudaMalloc(&cx.ws[i], wbytes)); fill<<<1024, 256>>>(cx.ws[i], wbytes / 2, 7u + i); }
    CHECK_CUDA(cudaMalloc(&cx.x, size_t(s.m) * s.k * 2)); fill<<<64, 256>>>(cx.x, size_t(s.m) * s.k, 99u);
    CHECK_CUDA(cudaMalloc(&cx.out, size_t(s.m) * s.n * 2));
    CHECK_CUDA(cudaMalloc(&cx.ref, size_t(s.m) * s.n * 4));
    ref_kernel<<<(s.n + 7) / 8, dim3(32, 8)>>>(cx.x, s.m, cx.ws[0], cx.ref, s.n, s.k);
    CHECK_CUDA(cudaDeviceSynchronize());
    printf("%dx%dx%d  floor(3.35 TB/s) %.1f us, (4.3 TB/s) %.1f us\n", s.m, s.n, s.k, wbytes / 3.35e6, wbytes / 4.3e6);
    if (ring_only) {
      if (s.m <= 4) { if (s.m == 1) cc<1, 1, 8>(cx); else cc<4, 1, 8>(cx); }
      if (s.m <= 8) ring_forms<8>(cx); else ring_forms<16>(cx);
    } else {
      if (s.m == 1) { cc<1, 1, 8>(cx); cc<1, 2, 4>(cx); mma_forms<8>(cx); }
      if (s.m == 4) { cc<4, 1, 8>(cx); cc<4, 2, 4>(cx); cc<4, 2, 8>(cx); cc<4, 4, 2>(cx); mma_forms<8>(cx); }
      if (s.m == 8) { cc<8, 1, 4>(cx); cc<8, 2, 4>(cx); mma_forms<8>(cx); }
      if (s.m == 16) { mma_forms<16>(cx); }
    }
    for (auto* w : cx.ws) cudaFree(w);
    cudaFree(cx.x); cudaFree(cx.out); cudaFree(cx.ref);
  }
}
