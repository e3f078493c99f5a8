// The operands as the kernels read them: in place where their rows are 16-byte vectors
// (plan.h, in_place), else copied once into padded buffers; and the row copies that make those
// buffers and copy a scratch C out.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <optional>
#include <vector>

#include "plan.h"
#include "row_copy.h"

namespace cute_gemm {

// One operand seen as a batch of (MN, K) matrices: A itself, or B transposed.
struct Operand {
  at::Tensor storage;  // keeps a padded copy alive for the launch
  const void* ptr = nullptr;
  int64_t ld = 0;
  int64_t batch_stride = 0;
  bool k_major = true;
  bool copied = false;  // a padded copy made by this call (on the stream, before the kernel)
};

// Elements per 16-byte vector: 8 of 16 bits, 4 of 32 (TF32).
inline int64_t vec_of(const at::Tensor& x) { return 16 / x.element_size(); }

// A 3-D tensor, or a 2-D one as a batch of one, as plan.h sees it.
MatrixView view_of(const at::Tensor& x);

// Row copies held back to be launched together (copy_rows16 with several copies): the unaligned
// path's A and B copies, one kernel instead of two. The tensors they read and write outlive the
// launch (the operands, and the padded buffers that the prepared Operands hold).
struct PendingCopies {
  std::vector<RowCopy> copies;
  void launch();  // on the current stream
};

// dst = src, both (L, R, C) with C contiguous (or of extent 1): the row copy kernel for 16-bit
// elements (row_copy.h) where `fast`, else (and for other element types or strided rows) torch's
// copy_. With `pending`, a row-kernel copy is added to it rather than launched.
void copy_rows(const at::Tensor& dst, const at::Tensor& src, bool fast, PendingCopies* pending = nullptr);

// x (L, MN, K) as the kernels read it: in place (plan.h, in_place, with the same tma, k_major_only
// and narrow), else a padded copy in the operand's own orientation (a plain strided pass), added
// to `pending` where given.
Operand prepare_operand(const at::Tensor& x, bool tma, bool k_major_only = false, bool narrow = false,
                        PendingCopies* pending = nullptr);

}  // namespace cute_gemm
