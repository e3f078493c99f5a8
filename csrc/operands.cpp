#include "operands.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

namespace cute_gemm {

// A 3-D tensor, or a 2-D one as a batch of one, as plan.h sees it.
MatrixView view_of(const at::Tensor& x) {
  MatrixView v;  // a 2-D x is the batch of one (1, R, C), without a view of it made
  const int lead = 3 - int(x.dim());
  for (int d = lead; d < 3; ++d) {
    v.size[d] = x.size(d - lead);
    v.stride[d] = x.stride(d - lead);
  }
  if (lead == 1) v.stride[0] = v.size[1] * v.stride[1];
  v.addr = reinterpret_cast<uintptr_t>(x.data_ptr());
  v.element_size = int(x.element_size());
  return v;
}

namespace {

// x (L, MN, K) read in place by the kernels (plan.h, in_place), or nullopt.
std::optional<Operand> operand_in_place(const at::Tensor& x, bool tma, bool k_major_only, bool narrow) {
  const InPlace ip = in_place(view_of(x), tma, k_major_only, narrow);
  if (!ip.ok) return std::nullopt;
  return Operand{x, x.data_ptr(), ip.ld, ip.batch_stride, ip.k_major};
}

}  // namespace

void PendingCopies::launch() {
  if (copies.empty()) return;
  C10_CUDA_CHECK(copy_rows16(copies.data(), int(copies.size()), at::cuda::getCurrentCUDAStream().stream()));
  copies.clear();
}

void copy_rows(const at::Tensor& dst, const at::Tensor& src, bool fast, PendingCopies* pending) {
  TORCH_INTERNAL_ASSERT(dst.dim() == 3 && dst.sizes() == src.sizes(), "copy_rows: (L, R, C) views of one shape");
  const bool rows_contiguous = (dst.stride(2) == 1 || dst.size(2) == 1) && (src.stride(2) == 1 || src.size(2) == 1);
  if (!fast || dst.element_size() != 2 || src.scalar_type() != dst.scalar_type() || !rows_contiguous) {
    dst.copy_(src);
    return;
  }
  const RowCopy copy{{dst.data_ptr(), dst.stride(1), dst.stride(0)},
                     {const_cast<void*>(src.data_ptr()), src.stride(1), src.stride(0)},
                     dst.size(0),
                     dst.size(1),
                     dst.size(2)};
  if (pending != nullptr && int(pending->copies.size()) < kMaxRowCopies) {
    pending->copies.push_back(copy);
    return;
  }
  C10_CUDA_CHECK(copy_rows16(&copy, 1, at::cuda::getCurrentCUDAStream().stream()));
}

Operand prepare_operand(const at::Tensor& x, bool tma, bool k_major_only, bool narrow,
                        PendingCopies* pending) {
  // (The narrow kernels read the padded copies' 16-byte rows too: a pinned narrow-only SM80 row
  // runs on operands of any strides.)
  if (std::optional<Operand> op = operand_in_place(x, tma, k_major_only, narrow)) return *op;
  const int64_t batch = x.size(0), mn = x.size(1), k = x.size(2);
  if (batch > 1 && x.stride(0) == 0) {  // one matrix for every batch: copied once, still broadcast
    Operand op = prepare_operand(x.narrow(0, 0, 1), tma, k_major_only, narrow, pending);
    op.batch_stride = 0;
    return op;
  }
  const int64_t kVec = vec_of(x);

  // Keep the operand's own orientation so the copy is a plain strided pass. The padding of a
  // K-major buffer is zeroed for the SM80 family: the last cp.async vector of a row straddles K,
  // and that kernel only zero-fills vectors that start past K. TMA (SM90) bounds its boxes by K
  // itself and never reads the padding: no zeroing pass (574^3: one kernel fewer of five).
  const bool k_major = copy_is_k_major(view_of(x), k_major_only);
  if (k_major) {
    const int64_t ld = round_up(k, kVec);
    at::Tensor buf = at::empty({batch, mn, ld}, x.options());
    if (ld > k && !tma) buf.narrow(2, k, ld - k).zero_();
    copy_rows(buf.narrow(2, 0, k), x, true, pending);
    return {buf, buf.data_ptr(), ld, mn * ld, true, true};
  }
  const int64_t ld = round_up(mn, kVec);
  at::Tensor buf = at::empty({batch, k, ld}, x.options());  // rows past MN feed no stored output
  copy_rows(buf.narrow(2, 0, mn), x.transpose(1, 2), true, pending);
  return {buf, buf.data_ptr(), ld, k * ld, false, true};
}

}  // namespace cute_gemm
