// CuTe-level pieces shared by every kernel family: element types, the (MN, K) view of an
// operand, and the predicated store of a staged C tile.
#pragma once

#include <atomic>
#include <cuda_runtime.h>

#include <cute/tensor.hpp>
#include <cutlass/numeric_types.h>

#include "gemm_params.h"

namespace cute_gemm {

template <DType D>
struct ElementOf;
template <>
struct ElementOf<DType::kF16> {
  using type = cutlass::half_t;
};
template <>
struct ElementOf<DType::kBF16> {
  using type = cutlass::bfloat16_t;
};
template <>
struct ElementOf<DType::kTF32> {
  using type = cutlass::tfloat32_t;  // fp32 bits in memory; the MMA reads 19 of them
};

// Stride of an operand viewed as (MN, K) with one runtime leading dimension (see GemmParams).
template <bool KMajor>
CUTE_HOST_DEVICE auto mn_k_stride(int64_t ld) {
  if constexpr (KMajor) {
    return cute::make_stride(ld, cute::Int<1>{});
  } else {
    return cute::make_stride(cute::Int<1>{}, ld);
  }
}

// The same with a batch mode: (MN, K, L).
template <bool KMajor>
CUTE_HOST_DEVICE auto mn_k_l_stride(int64_t ld, int64_t batch) {
  if constexpr (KMajor) {
    return cute::make_stride(ld, cute::Int<1>{}, batch);
  } else {
    return cute::make_stride(cute::Int<1>{}, ld, batch);
  }
}

// Shared -> global store of a C tile that a TiledCopy of 16-byte vectors along N partitions.
// Rows past m_bound and columns past n_bound are not written; where the row is not 16-byte
// aligned (vector_ok false) or the vector crosses N, elements are stored one by one.
template <class Copy, class TS, class TG, class TC>
CUTE_DEVICE void store_tile(Copy const& s2g, TS const& tSsC, TG&& tSgC, TC const& tScC, int m_bound, int n_bound,
                            bool vector_ok) {
  using namespace cute;
  constexpr int kVec = decltype(size<0>(tSsC))::value;
  CUTE_UNROLL
  for (int i = 0; i < size<1>(tSsC); ++i) {
    CUTE_UNROLL
    for (int j = 0; j < size<2>(tSsC); ++j) {
      const int m = get<0>(tScC(0, i, j));
      const int n = get<1>(tScC(0, i, j));
      if (m >= m_bound) continue;
      if (vector_ok && n + kVec <= n_bound) {
        copy(s2g, tSsC(_, i, j), tSgC(_, i, j));
      } else {
        CUTE_UNROLL
        for (int v = 0; v < kVec; ++v) {
          if (n + v < n_bound) tSgC(v, i, j) = tSsC(v, i, j);
        }
      }
    }
  }
}

// A launch-time CUDA call whose answer depends only on the kernel and the device, made once per
// device and remembered (devices past 64 ask every time). Tag and Query tell the cached answers
// apart: one set per kernel instantiation and call site. query(int*) -> cudaError_t.
template <class Tag, class Query>
cudaError_t once_per_device(int* result, Query query) {
  static std::atomic<int> cached[64];  // answer + 1 per device; 0: not asked yet
  int device = 0;
  if (cudaError_t e = cudaGetDevice(&device); e != cudaSuccess) return e;
  if (device < 64) {
    if (const int c = cached[device].load(std::memory_order_relaxed); c > 0) {
      *result = c - 1;
      return cudaSuccess;
    }
  }
  if (cudaError_t e = query(result); e != cudaSuccess) return e;
  if (device < 64) cached[device].store(*result + 1, std::memory_order_relaxed);
  return cudaSuccess;
}

// Past 48 KB a kernel must opt in to dynamic shared memory, once per device. Tag: the kernel's
// traits type.
template <class Tag>
cudaError_t opt_in_smem(const void* kernel, int bytes) {
  int done = 0;
  return once_per_device<Tag>(&done, [&](int* r) {
    *r = 1;
    return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes);
  });
}

}  // namespace cute_gemm
