// softmax_cross_entropy_, the op over cross_entropy.cu's kernel: checks the arguments (each error
// names the argument and the rule) and launches on the current stream.
#include "cross_entropy.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "gemm.h"

namespace cute_gemm {

at::Tensor softmax_cross_entropy_(at::Tensor& logits, const at::Tensor& target, int64_t ignore_index,
                                  const std::optional<at::Tensor>& scale) {
  constexpr const char* op = "softmax_cross_entropy_";
  TORCH_CHECK_VALUE(logits.dim() == 2, op, ": logits must be 2-D (N, V), got ", logits.dim(), "-D");
  TORCH_CHECK_VALUE(target.dim() == 1 && target.size(0) == logits.size(0), op,
                    ": target must be 1-D with logits' N = ", logits.size(0), " entries, got shape ", target.sizes());
  const auto dt = logits.scalar_type();
  TORCH_CHECK_TYPE(dt == at::kHalf || dt == at::kBFloat16 || dt == at::kFloat, op,
                   ": logits must be float16, bfloat16 or float32, got ", dt);
  TORCH_CHECK_TYPE(target.scalar_type() == at::kLong, op, ": target must be int64 (torch.long), got ",
                   target.scalar_type());
  TORCH_CHECK_VALUE(logits.is_cuda() && target.is_cuda() && logits.device() == target.device(), op,
                    ": logits and target must be CUDA tensors on one device, got ", logits.device(), " and ",
                    target.device());
  if (scale.has_value()) {
    TORCH_CHECK_TYPE(scale->scalar_type() == at::kFloat, op, ": scale must be float32, got ", scale->scalar_type());
    TORCH_CHECK_VALUE(scale->numel() == 1 && scale->device() == logits.device(), op,
                      ": scale must be one element on logits' device ", logits.device(), ", got shape ",
                      scale->sizes(), " on ", scale->device());
  }
  TORCH_CHECK_VALUE(logits.size(1) > 0, op, ": logits must have at least one column (class)");
  TORCH_CHECK_VALUE(logits.stride(1) == 1 || logits.size(1) == 1, op,
                    ": logits' rows must be contiguous (column stride 1), got strides ", logits.strides());
  TORCH_CHECK_VALUE(logits.size(0) < (int64_t(1) << 31), op, ": at most 2^31 - 1 rows, got ", logits.size(0));
  const c10::cuda::CUDAGuard guard(logits.device());
  at::Tensor loss = at::empty({logits.size(0)}, logits.options().dtype(at::kFloat));
  const at::Tensor t = target.contiguous();
  const RowDType xt = dt == at::kHalf ? RowDType::kF16 : dt == at::kBFloat16 ? RowDType::kBF16 : RowDType::kF32;
  C10_CUDA_CHECK(softmax_xent_rows(logits.data_ptr(), xt, logits.size(0), logits.size(1), logits.stride(0),
                                   t.data_ptr<int64_t>(), ignore_index,
                                   scale.has_value() ? scale->data_ptr<float>() : nullptr, loss.data_ptr<float>(),
                                   at::cuda::getCurrentCUDAStream().stream()));
  return loss;
}

}  // namespace cute_gemm
