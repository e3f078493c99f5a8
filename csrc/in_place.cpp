// Which operands and C targets the kernels read and write in place (plan.h): the predicates that
// plan_for and operands.cpp share.
#include "plan.h"

namespace cute_gemm {
namespace {

bool vector_ready(uintptr_t addr, int64_t ld, int64_t extent, int64_t vec, int64_t vec_bytes, bool tma) {
  // cp.async (SM80) reads whole vectors (16 bytes, 4 in the narrow kernels), so the extent must
  // be whole vectors; TMA bounds its boxes by the extent itself, but refuses a zero stride (rows
  // of an operand expanded along M or N): such operands take the copy.
  return addr % vec_bytes == 0 && ld % vec == 0 && (tma ? ld > 0 : extent % vec == 0);
}

}  // namespace

// The kernels read 16-byte vectors (cp.async or TMA boxes) along the contiguous dimension, so an
// operand serves in place when that dimension has stride 1, its base, leading stride and batch
// stride are 16-byte aligned and, for cp.async, its extent is a whole number of vectors (no
// vector straddles the edge into unknown memory; TMA stops at the extent). Anything else (other
// strides, an odd storage offset, rows of K % 8 != 0 elements packed back to back; for TMA also a
// zero leading stride) is copied once into a buffer with a padded, aligned leading dimension: the
// documented slower path (operands.cpp, prepare_operand). x: (L, MN, K). k_major_only: the TF32
// kernels, whose MMAs read K-major tiles only. `narrow`: the same test for the narrow kernels'
// 4-byte cp.async vectors (16-bit elements: 4-byte base, even strides and extent).
InPlace in_place(const MatrixView& x, bool tma, bool k_major_only, bool narrow) {
  const int64_t batch = x.size[0], mn = x.size[1], k = x.size[2];
  const int64_t kVec = narrow ? 2 : 16 / x.element_size, kVecBytes = narrow ? 4 : 16;
  // The stride of a size-1 dimension never multiplies a nonzero index: any aligned value serves.
  const bool k_contig = x.stride[2] == 1 || k == 1;
  const bool mn_contig = x.stride[1] == 1 || mn == 1;
  const int64_t ld_k_major = mn == 1 ? round_up(k, kVec) : x.stride[1];
  const int64_t ld_mn_major = k == 1 ? round_up(mn, kVec) : x.stride[2];
  // A single matrix gets the packed batch stride: TMA wants a nonzero multiple of 16 bytes even
  // for a batch mode of extent 1. A batch stride of 0 (one matrix for every batch) is read in
  // place by both families (the SM90 kernel reads batch 0 through TMA, sm90/producer.h).
  auto batch_stride = [&](int64_t ld, bool k_major) { return batch == 1 ? ld * (k_major ? mn : k) : x.stride[0]; };
  auto batch_ok = [&](int64_t bs) { return bs % kVec == 0; };
  if (k_contig && vector_ready(x.addr, ld_k_major, k, kVec, kVecBytes, tma) &&
      batch_ok(batch_stride(ld_k_major, true))) {
    return {true, true, ld_k_major, batch_stride(ld_k_major, true)};
  }
  if (!k_major_only && mn_contig && vector_ready(x.addr, ld_mn_major, mn, kVec, kVecBytes, tma) &&
      batch_ok(batch_stride(ld_mn_major, false))) {
    return {true, false, ld_mn_major, batch_stride(ld_mn_major, false)};
  }
  return {};
}

// The copy keeps the operand's own orientation, so that it is a plain strided pass.
bool copy_is_k_major(const MatrixView& x, bool k_major_only) {
  return k_major_only || !(x.stride[1] == 1 && x.stride[2] != 1);
}

// C is written in place when its rows are contiguous; the kernels' row-major C.
bool c_in_place(const MatrixView& c) {
  const int64_t m = c.size[1], n = c.size[2];
  return (c.stride[2] == 1 || n == 1) && (c.stride[1] >= n || m == 1) && c.stride[1] >= 0 && c.stride[0] >= 0;
}

// C (L, M, N) is written in place and every row starts 16-byte aligned: its base, and its row
// and batch strides where there are several rows or batches.
bool c_rows_start_aligned16(const MatrixView& c) {
  const int64_t elems = 16 / c.element_size;
  return c_in_place(c) && c.addr % 16 == 0 && (c.size[1] == 1 || c.stride[1] % elems == 0) &&
         (c.size[0] == 1 || c.stride[0] % elems == 0);
}

}  // namespace cute_gemm
