// Runtime description of one GEMM launch: plain data, no CuTe types, shared by host and device.
#pragma once

#include <cstdint>

namespace cute_gemm {

enum class DType : int { kF16 = 0, kBF16 = 1 };

// C(M, N) = A(M, K) @ B(K, N). Each operand is addressed through one leading-dimension stride;
// which dimension is contiguous (the "major-ness") is a template choice of the kernel, not data.
//   A K-major: A(m, k) = a[m * lda + k]     A M-major: A(m, k) = a[m + k * lda]
//   B K-major: B(k, n) = b[n * ldb + k]     B N-major: B(k, n) = b[n + k * ldb]
//   C row-major: C(m, n) = c[m * ldc + n]
// Strides are 64-bit: operands past 2^31 elements must index correctly.
struct GemmParams {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  int m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int group_m = 8;           // GROUP_SIZE_M of the grouped tile order
  int grid_limit = 0;        // persistent kernels: most thread blocks to launch (the SM count)
  bool c_vector_ok = false;  // ldc and c's base allow 16-byte stores
};

}  // namespace cute_gemm
