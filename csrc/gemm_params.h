// Runtime description of one GEMM launch: plain data, no CuTe types, shared by host and device.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define CUTE_GEMM_HOST_DEVICE __host__ __device__ __forceinline__
#else
#define CUTE_GEMM_HOST_DEVICE inline
#endif

// A development build (setup.py's CUTE_GEMM_LAYOUTS) compiles the kernels of some operand layouts
// only: bit a_kmajor * 2 + b_kmajor of the mask, read by the instantiation files' #if lines and by
// dispatch.cpp's tables. The product builds all four.
#ifndef CUTE_GEMM_LAYOUTS_MASK
#define CUTE_GEMM_LAYOUTS_MASK 15
#endif
#define CUTE_GEMM_LAYOUT_BUILT(AK, BK) (((CUTE_GEMM_LAYOUTS_MASK) >> ((AK) * 2 + (BK))) & 1)

// The build's digest of csrc's headers (setup.py), written into every unit's preprocessed text so
// that a compiler cache keyed on it (ccache) cannot serve an object compiled against other headers.
#ifndef CUTE_GEMM_HEADERS_ID
#define CUTE_GEMM_HEADERS_ID none
#endif
#define CUTE_GEMM_STRINGIFY_(x) #x
#define CUTE_GEMM_STRINGIFY(x) CUTE_GEMM_STRINGIFY_(x)

namespace cute_gemm {

inline constexpr const char kHeadersId[] = CUTE_GEMM_STRINGIFY(CUTE_GEMM_HEADERS_ID);

// kTF32: float32 operands multiplied on the tensor cores as TF32 (torch allow_tf32); C is fp32.
enum class DType : int { kF16 = 0, kBF16 = 1, kTF32 = 2 };

// The epilogue's elementwise function, applied to alpha * acc + beta * X in fp32.
enum class Activation : int { kNone = 0, kRelu = 1, kGelu = 2, kGeluTanh = 3, kSilu = 4 };

// C[l](M, N) = epilogue(A[l](M, K) @ B[l](K, N)) for l < batch. Each operand is addressed through
// one leading-dimension stride and one batch stride; which dimension is contiguous (the
// "major-ness") is a template choice of the kernel, not data.
//   A K-major: A(m, k) = a[m * lda + k]     A M-major: A(m, k) = a[m + k * lda]
//   B K-major: B(k, n) = b[n * ldb + k]     B N-major: B(k, n) = b[n + k * ldb]
//   C row-major: C(m, n) = c[m * ldc + n]   (+ l * batch_* for batch l)
// Strides are 64-bit: operands past 2^31 elements must index correctly.
// The SM90 epilogue's X rows (epilogue.h, add_x_chunk): 32-bit offsets within a tile, up to
// 255 rows * 2^23 + 256 columns < 2^31 (sm90/traits.h asserts it for every tile row). The host
// copies an X of a longer row stride into rows of N elements first.
inline constexpr int64_t kMaxChunkXRowStride = int64_t(1) << 23;

// L2 cache policies of the TMA loads (the values of cute's TMA::CacheHintSm90).
inline constexpr uint64_t kL2EvictNormal = 0x1000000000000000ull;
inline constexpr uint64_t kL2EvictFirst = 0x12F0000000000000ull;
inline constexpr uint64_t kL2EvictLast = 0x14F0000000000000ull;

struct GemmParams {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  int m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  // C's column stride for the element stores (epilogue.h, store_direct): 1, except where the
  // host runs C^T = B^T A^T (the swapped decode path), whose C^T rows are C's columns.
  int64_t ldc_col = 1;
  int batch = 1;
  int64_t batch_a = 0, batch_b = 0, batch_c = 0;  // a batch stride may be 0 (a broadcast operand)
  int group_m = 8;           // GROUP_SIZE_M of the grouped tile order
  int grid_limit = 0;        // persistent kernels: most thread blocks to launch (the SM count)
  bool c_vector_ok = false;  // ldc, batch_c and c's base allow 16-byte stores
  // SM90, 16-bit C whose rows TMA cannot store (not c_vector_ok), written in place, no activation:
  // the consumers stage each C chunk in shared memory as for the TMA store and write its rows
  // themselves, a thread per 16-byte unit of a row (sm90/epilogue_c.h, write_slice), instead of
  // element stores straight from the accumulators.
  bool c_staged = false;

  // Split-K (SM90 family): each output tile's K range in `splits` slices, computed by different
  // blocks; each leaves its fp32 partial in `workspace` (kBM x kBN floats per tile and slice) and
  // counts itself in flags[tile] (zero at the launch; the last piece to count sums them and zeroes it).
  int splits = 1;
  float* workspace = nullptr;
  int* flags = nullptr;
  // Stream-K tail (SM90 family, splits == 1): the last sk_tiles cluster tiles of the launch are not
  // given whole to blocks; their k-tiles, sk_tiles x k_tiles in tile order, are cut into sk_workers
  // equal segments, one per (virtual) worker, so that the last wave ends at the same time on every
  // SM. A tile cut between workers sums their partials as split-K does: slot group t (t-th stream-K
  // tile, cluster rank r) holds sk_slots fp32 kBM x kBN partials at (t * cluster + r) * sk_slots,
  // counted in flags[t * cluster + r].
  int sk_tiles = 0;
  int sk_workers = 0;
  int sk_slots = 0;

  // Epilogue: C(m, n) = act(alpha * acc(m, n) + beta * X(m, n)), X(m, n) = x[m * x_ldm + n * x_ldn]
  // (a bias is x_ldm = 0, x_ldn = 1). x == nullptr: no X term. Without X, alpha or activation
  // (the common case) the kernels skip the epilogue math.
  const void* x = nullptr;
  int64_t x_ldm = 0, x_ldn = 0;
  float alpha = 1.f, beta = 0.f;
  Activation act = Activation::kNone;
  bool x_f32 = false;  // X holds fp32 values (else the operands' type)
  bool c_f32 = false;  // C is fp32 (else the operands' type)
  // SM90: the activation warps apply bias and activation where they can (sm90/activation_warps.h);
  // CUTE_GEMM_ACT_OFFLOAD=0 keeps them in the consumers (tests and benchmarks compare the two).
  bool act_offload = true;
  // SM90: launch with programmatic dependent launch (PDL), so that back-to-back calls overlap one
  // kernel's launch and prologue with the previous kernel's tail (sm90/kernel.h waits before it
  // touches global memory). CUTE_GEMM_PDL=0 launches plainly (tests and benchmarks compare).
  bool pdl = true;

  // SM90 TMA loads: the L2 eviction priority of A's and B's (and B2's) lines, as the cache-policy
  // operand of cp.async.bulk.tensor (cute's TMA::CacheHintSm90 values). sm90::l2_policies chooses.
  uint64_t l2_policy_a = kL2EvictNormal, l2_policy_b = kL2EvictNormal;

  // Builds with -DCUTE_GEMM_TRACE only (setup.py: CUTE_GEMM_TRACE=1): where the SM90 kernel
  // records its phases (sm90/trace.h; the host takes it from CUTE_GEMM_TRACE_BUF). Unused otherwise.
  unsigned long long* trace = nullptr;

  // SM90 gated kernels (sm90/traits.h, Gated): C(m, f) = act(A B)(m, f) * (A B2)(m, f) for
  // f < n / 2, B and B2 (K, n / 2) each (the gate's and the up projection's weights), read through
  // ldb and batch_b alike; act is `act` above, C has n / 2 columns. Null in every other kernel.
  const void* b2 = nullptr;

  // SM90's lean kernel on A read in place, whole tiles (plan.cpp): the sums over K of A's rows,
  // row_sums[m] (A's type), from the tiles of column 0 (sm90/row_sums.h); nn.Linear's bias
  // gradient beside its weight's. Null in every other launch.
  void* row_sums = nullptr;

  // Whether the epilogue changes the accumulators' values (fp32 C alone stores them as they are).
  CUTE_GEMM_HOST_DEVICE bool epilogue_math() const { return x != nullptr || alpha != 1.f || act != Activation::kNone; }
};

}  // namespace cute_gemm
