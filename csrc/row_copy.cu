#include "row_copy.h"

#include "pdl.h"

#include <algorithm>

namespace cute_gemm {
namespace {

constexpr int kThreads = 256;

// The 8 elements at element offset s (0..7) of the 16 in w[0..7] (two 16-byte vectors, 32-bit
// words, little-endian: element 2i is w[i]'s low half).
template <int s>
__device__ __forceinline__ uint4 shifted(const uint32_t (&w)[8]) {
  uint32_t o[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    if constexpr (s % 2 == 0) {
      o[i] = w[s / 2 + i];
    } else {
      o[i] = __funnelshift_r(w[s / 2 + i], w[s / 2 + i + 1], 16);
    }
  }
  return make_uint4(o[0], o[1], o[2], o[3]);
}

// Blocks of 32 x 8 threads: x, the destination row's aligned vectors (counted from the one that
// holds the row's first element), 32 per block; y, rows (over the batch), 8 per block, walked by
// the grid's y. A row of N elements touches at most N / 8 + 2 vectors: rows of a few hundred
// elements or more waste little of a block (short rows, K = 20 say, leave most threads idle).
// Several copies in one launch: the grid's z picks one; the x and y extents are the largest
// copy's, and a block past its own copy's vectors leaves at once.
struct RowCopies {
  RowCopy c[kMaxRowCopies];
};

template <bool kBatched>
__global__ void __launch_bounds__(kThreads) copy_rows16_kernel(RowCopies copies) {
  pdl_launch_dependents();  // the GEMM that reads these copies may set up meanwhile (gemm.cpp)
  const RowCopy& job = copies.c[blockIdx.z];
  const RowView dst = job.dst, src = job.src;
  const int64_t rows = job.rows, total_rows = job.batch * job.rows, cols = job.cols;
  const int64_t t = int64_t(blockIdx.x) * 32 + threadIdx.x;
  if (8 * t >= cols + 8) return;  // past the row's last vector, whatever the row's alignment
  for (int64_t row = int64_t(blockIdx.y) * 8 + threadIdx.y; row < total_rows; row += int64_t(gridDim.y) * 8) {
    const int64_t b = kBatched ? row / rows : 0, r = kBatched ? row % rows : row;
    uint16_t* drow = static_cast<uint16_t*>(dst.ptr) + b * dst.batch_stride + r * dst.ld;
    const uint16_t* srow = static_cast<const uint16_t*>(src.ptr) + b * src.batch_stride + r * src.ld;
    const int lead = int((reinterpret_cast<uintptr_t>(drow) / 2) % 8);  // elements before the row's start
    const int64_t c0 = 8 * t - lead;  // the column of this vector's first element
    if (c0 >= cols) continue;
    uint16_t* dvec = reinterpret_cast<uint16_t*>(reinterpret_cast<uintptr_t>(drow) + 2 * c0);  // 16-byte aligned
    if (c0 >= 0 && c0 + 8 <= cols) {
      const uint16_t* s = srow + c0;
      const int shift = int((reinterpret_cast<uintptr_t>(s) / 2) % 8);  // the same for the whole row
      const uint4* q = reinterpret_cast<const uint4*>(s - shift);
      uint32_t w[8];
      const uint4 v0 = q[0];
      w[0] = v0.x, w[1] = v0.y, w[2] = v0.z, w[3] = v0.w;
      if (shift != 0) {  // the elements reach into the next vector (which then holds some of them)
        const uint4 v1 = q[1];
        w[4] = v1.x, w[5] = v1.y, w[6] = v1.z, w[7] = v1.w;
      } else {
        w[4] = w[5] = w[6] = w[7] = 0;
      }
      uint4 out;
      switch (shift) {
        case 0: out = shifted<0>(w); break;
        case 1: out = shifted<1>(w); break;
        case 2: out = shifted<2>(w); break;
        case 3: out = shifted<3>(w); break;
        case 4: out = shifted<4>(w); break;
        case 5: out = shifted<5>(w); break;
        case 6: out = shifted<6>(w); break;
        default: out = shifted<7>(w); break;
      }
      *reinterpret_cast<uint4*>(dvec) = out;
    } else {
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const int64_t c = c0 + e;
        if (c >= 0 && c < cols) drow[c] = srow[c];
      }
    }
  }
}

}  // namespace

cudaError_t copy_rows16(const RowCopy* copies, int count, cudaStream_t stream) {
  RowCopies jobs;
  int n = 0;
  bool batched = false;
  unsigned gx = 0, gy = 0;
  for (int i = 0; i < count; ++i) {
    const RowCopy& c = copies[i];
    if (c.batch * c.rows <= 0 || c.cols <= 0) continue;
    if (n == kMaxRowCopies) return cudaErrorInvalidValue;
    jobs.c[n++] = c;
    batched |= c.batch > 1;
    const int64_t vectors = c.cols / 8 + 2;  // a row's aligned vectors, at most
    gx = std::max(gx, unsigned((vectors + 31) / 32));
    gy = std::max(gy, unsigned(std::min<int64_t>((c.batch * c.rows + 7) / 8, 65535)));
  }
  if (n == 0) return cudaSuccess;
  const dim3 grid(gx, gy, unsigned(n));
  const dim3 block(32, kThreads / 32);
  if (batched) {
    copy_rows16_kernel<true><<<grid, block, 0, stream>>>(jobs);
  } else {
    copy_rows16_kernel<false><<<grid, block, 0, stream>>>(jobs);
  }
  return cudaGetLastError();
}

}  // namespace cute_gemm
