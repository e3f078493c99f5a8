// The row copies of the unaligned path (operands.cpp): a 16-bit operand into a buffer with padded,
// 16-byte aligned rows, and a scratch C out into rows that TMA cannot store.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

namespace cute_gemm {

// One batch of a 16-bit matrix view: element (b, r, c) at ptr[b * batch_stride + r * ld + c].
struct RowView {
  void* ptr = nullptr;
  int64_t ld = 0;
  int64_t batch_stride = 0;
};

// One copy: dst(b, r, c) = src(b, r, c) for b < batch, r < rows, c < cols, 16-bit elements whose
// rows are contiguous (column stride 1) in both. Any 2-byte alignment of either side: each thread
// writes one 16-byte aligned vector of a destination row, gathered from the one or two aligned
// 16-byte source vectors that hold its elements and shifted (torch's strided copy moves the
// elements two bytes at a time: its three copies took about 34 us of 2050^3's 88, 2026-11-26,
// docs/tuning.md). The row's partial vectors at either end are written element by element.
struct RowCopy {
  RowView dst, src;
  int64_t batch = 0, rows = 0, cols = 0;
};
inline constexpr int kMaxRowCopies = 2;

// Up to kMaxRowCopies copies in one launch (the unaligned path's A and B copies: one kernel's
// ramp and tail instead of two, 2026-11-26: 2050^3 16.5 -> 11.8 us); the grid's z picks the copy.
cudaError_t copy_rows16(const RowCopy* copies, int count, cudaStream_t stream);

}  // namespace cute_gemm
