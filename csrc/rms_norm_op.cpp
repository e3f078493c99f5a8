// rms_norm, the op over rms_norm.cu's kernel: checks the arguments (each error names the argument
// and the rule) and launches on the current stream.
#include "rms_norm.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "gemm.h"
#include "knobs.h"

namespace cute_gemm {

at::Tensor rms_norm(const at::Tensor& x, const std::optional<at::Tensor>& weight, double eps,
                    bool round_before_weight) {
  constexpr const char* op = "rms_norm";
  TORCH_CHECK_VALUE(x.dim() >= 1, op, ": x must have at least one dimension (the normalized one), got a 0-D tensor");
  const auto dt = x.scalar_type();
  TORCH_CHECK_TYPE(dt == at::kHalf || dt == at::kBFloat16 || dt == at::kFloat, op,
                   ": x must be float16, bfloat16 or float32, got ", dt);
  TORCH_CHECK_VALUE(x.is_cuda() && x.layout() == at::kStrided, op, ": x must be a dense CUDA tensor, got ",
                    x.device(), " ", x.layout());
  const int64_t D = x.size(-1);
  if (weight.has_value()) {
    TORCH_CHECK_TYPE(weight->scalar_type() == dt, op, ": weight must have x's dtype ", dt, ", got ",
                     weight->scalar_type());
    TORCH_CHECK_VALUE(weight->dim() == 1 && weight->size(0) == D, op,
                      ": weight must be 1-D with x's last dimension D = ", D, " entries, got shape ", weight->sizes());
    TORCH_CHECK_VALUE(weight->device() == x.device(), op, ": weight must be on x's device ", x.device(), ", got ",
                      weight->device());
  }
  at::Tensor y = at::empty(x.sizes(), x.options().memory_format(at::MemoryFormat::Contiguous));
  if (y.numel() == 0) return y;
  const int64_t rows = y.numel() / D;
  TORCH_CHECK_VALUE(rows < (int64_t(1) << 31), op, ": at most 2^31 - 1 rows, got ", rows);
  const c10::cuda::CUDAGuard guard(x.device());
  // x as rows of contiguous elements, in place where its strides allow (a reshape's view).
  at::Tensor x2 = x.reshape({rows, D});
  if (x2.stride(1) != 1 && D > 1) x2 = x2.contiguous();
  const at::Tensor w = weight.has_value() ? weight->contiguous() : at::Tensor();
  // PDL where the sm_90a code runs: the kernel's wait is compiled for sm_90 and later, so code of an
  // older arch (compute_80 JIT-compiled for a newer GPU) would launch early and not wait.
  const Device d = device_of(*at::cuda::getCurrentDeviceProperties(), x.get_device(), false);
  const bool pdl = d.sm90a_built && d.major == 9 && d.minor == 0 && env_int("CUTE_GEMM_PDL", 0, 1) != 0;
  const RowDType rt = dt == at::kHalf ? RowDType::kF16 : dt == at::kBFloat16 ? RowDType::kBF16 : RowDType::kF32;
  C10_CUDA_CHECK(rms_norm_rows(x2.data_ptr(), x2.stride(0), w.defined() ? w.data_ptr() : nullptr, y.data_ptr(), D,
                               rt, rows, D, float(eps), round_before_weight, pdl,
                               at::cuda::getCurrentCUDAStream().stream()));
  return y;
}

}  // namespace cute_gemm
