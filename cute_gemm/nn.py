"""Modules built on cute_gemm's ops.

    layer = cute_gemm.nn.Linear(4096, 14336, activation="gelu", device="cuda", dtype=torch.bfloat16)
    y = layer(x)   # gelu(x @ W^T + b): bias and activation fused into the GEMM's epilogue
"""

import math

import torch
import torch.nn.functional as F

from .ops import ACTIVATIONS

_TORCH_ACTIVATIONS = {
    None: lambda y: y,
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"),
    "silu": F.silu,
}


class Linear(torch.nn.Linear):
    """A drop-in torch.nn.Linear: y = act(x @ weight^T + bias) as one cute_gemm.addmm.

    Same constructor (plus the keyword activation: None, "relu", "gelu", "gelu_tanh", "silu"),
    same parameters, same state_dict keys, so load_state_dict works from and to a
    torch.nn.Linear. x: (..., in_features) on CUDA, of the weight's dtype (float16/bfloat16,
    or float32: TF32 or torch's own GEMM, see the README). weight.t() is read in place.
    Without a bias, and in training with gelu/gelu_tanh/silu (backward needs the pre-activation,
    which the fused op would recompute with a second GEMM), the activation runs after the GEMM,
    in torch; inference and relu run it in the epilogue.
    """

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None, *,
                 activation: str | None = None):
        if activation not in ACTIVATIONS:
            raise ValueError(f"Linear: activation must be one of {', '.join(map(repr, ACTIVATIONS))}, "
                             f"got {activation!r}")
        super().__init__(in_features, out_features, bias=bias, device=device, dtype=dtype)
        self.activation = activation

    @classmethod
    def from_torch(cls, linear: torch.nn.Linear, activation: str | None = None) -> "Linear":
        """A Linear that uses linear's own weight and bias Parameters (shared, not copied)."""
        new = cls(linear.in_features, linear.out_features, bias=linear.bias is not None, device="meta",
                  dtype=linear.weight.dtype, activation=activation)
        new.weight = linear.weight
        new.bias = linear.bias
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() == 0 or x.shape[-1] != self.in_features:
            raise ValueError(f"Linear: x must be (..., in_features) with in_features = {self.in_features}, "
                             f"got shape {list(x.shape)}")
        rows = math.prod(x.shape[:-1])
        x2d = x.reshape(rows, self.in_features)
        # Training with gelu/gelu_tanh/silu: their derivative needs the pre-activation z, which the
        # fused op would recompute with a second GEMM in backward; the activation then runs after
        # the GEMM (as torch's does) so z is kept instead. relu's derivative needs only the output.
        needs_z = self.activation not in (None, "relu") and torch.is_grad_enabled() and (
            x.requires_grad or any(p.requires_grad for p in self.parameters()))
        if self.bias is None or needs_z:
            y = (torch.ops.cute_gemm.mm.default(x2d, self.weight.t()) if self.bias is None
                 else torch.ops.cute_gemm.addmm.default(self.bias, x2d, self.weight.t()))
            y = _TORCH_ACTIVATIONS[self.activation](y)
        else:
            y = torch.ops.cute_gemm.addmm.default(self.bias, x2d, self.weight.t(), activation=self.activation)
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, activation={self.activation!r}"
