"""The Python face of the operators registered by csrc/bindings.cpp.

Argument rules live in one place, the C++ op (csrc/gemm.cpp), so torch.ops.cute_gemm.mm and
cute_gemm.mm refuse the same inputs with the same messages.
"""

import torch


def mm(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C = a @ b, like torch.mm, for 2-D float16/bfloat16 CUDA tensors (fp32 accumulation).

    a: (M, K), b: (K, N), same dtype and device; any strides. Returns a new contiguous (M, N)
    tensor of that dtype. M or N = 0 gives an empty result, K = 0 gives zeros.
    """
    _require_tensor("mm", "a", a)
    _require_tensor("mm", "b", b)
    return torch.ops.cute_gemm.mm.default(a, b)


def _require_tensor(op: str, name: str, value) -> None:
    # For a non-tensor the dispatcher raises a RuntimeError about casting; a Python caller
    # expects a TypeError that names the argument.
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(value).__name__}")


@torch.library.register_fake("cute_gemm::mm")
def _mm_fake(a, b):
    torch._check(a.dim() == 2 and b.dim() == 2, lambda: "mm: a and b must be 2-D")
    torch._check(a.shape[1] == b.shape[0], lambda: f"mm: a's columns (K) must equal b's rows, got {a.shape} and {b.shape}")
    return a.new_empty((a.shape[0], b.shape[1]))
