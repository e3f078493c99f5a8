"""Modules built on cute_gemm's ops, and optimize(), which puts them into an existing model.

    layer = cute_gemm.nn.Linear(4096, 14336, activation="gelu", device="cuda", dtype=torch.bfloat16)
    y = layer(x)                # gelu(x @ W^T + b): bias and activation fused into the GEMM's epilogue
    z = layer2(y, residual=x)   # x + y @ W2^T: the residual added in the epilogue
    mlp = cute_gemm.nn.GatedMLP(4096, 14336, device="cuda", dtype=torch.bfloat16)  # Llama's MLP
    norm = cute_gemm.nn.RMSNorm(4096, device="cuda", dtype=torch.bfloat16)  # starts beside its neighbours
    model = cute_gemm.optimize(model)  # its nn.Linear, gated MLPs and RMSNorms swapped in place, same Parameters
"""

import math
import sys

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

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        """act(x @ weight^T + bias), plus residual when given (added after the activation, as
        `residual + layer(x)`; residual: x's leading shape by out_features). A bias-free layer
        without an activation adds a residual of the result's dtype in the GEMM's epilogue (addmm's
        C term, read once); otherwise the add runs after the GEMM, as torch's would."""
        if x.dim() == 0 or x.shape[-1] != self.in_features:
            raise ValueError(f"Linear: x must be (..., in_features) with in_features = {self.in_features}, "
                             f"got shape {list(x.shape)}")
        rows = math.prod(x.shape[:-1])
        x2d = x.reshape(rows, self.in_features)
        if residual is not None:
            out_shape = (*x.shape[:-1], self.out_features)
            if not isinstance(residual, torch.Tensor) or tuple(residual.shape) != out_shape:
                got = list(residual.shape) if isinstance(residual, torch.Tensor) else type(residual).__name__
                raise ValueError(f"Linear: residual must have the output's shape {list(out_shape)}, got {got}")
            if self.bias is None and self.activation is None and residual.dtype == self._result_dtype(x):
                y = torch.ops.cute_gemm.addmm.default(residual.reshape(rows, self.out_features), x2d, self.weight.t())
                return y.reshape(out_shape)
            return residual + self.forward(x)
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

    def _result_dtype(self, x: torch.Tensor) -> torch.dtype:
        # What the layer returns for x: under autocast its dtype, else the weight's (the ops refuse a
        # mismatch of x and weight themselves, with their own message).
        if torch.is_autocast_enabled("cuda") and x.is_cuda:
            return torch.get_autocast_dtype("cuda")
        return self.weight.dtype

    def extra_repr(self) -> str:
        return f"{super().extra_repr()}, activation={self.activation!r}"


# The gated activations of GatedMLP, as torch computes them.
GATED_ACTIVATIONS = ("silu", "gelu", "gelu_tanh")


class GatedMLP(torch.nn.Module):
    """down_proj(act(gate_proj(x)) * up_proj(x)): the MLP of Llama, Mistral and Qwen (SwiGLU,
    act = silu) and of Gemma (GeGLU, act = gelu_tanh), with cute_gemm's Linear layers.

    Its submodules have those models' names and shapes (gate_proj and up_proj: hidden_size ->
    intermediate_size, down_proj: back), so a checkpoint's MLP weights load with load_state_dict as
    they are, and state_dict gives them back under the same keys. forward(x, residual=None) adds
    residual to the result (in down_proj's epilogue where Linear can, see Linear.forward).
    """

    def __init__(self, hidden_size: int, intermediate_size: int, bias: bool = False, device=None, dtype=None, *,
                 activation: str = "silu"):
        if activation not in GATED_ACTIVATIONS:
            raise ValueError(f"GatedMLP: activation must be one of {', '.join(map(repr, GATED_ACTIVATIONS))}, "
                             f"got {activation!r}")
        super().__init__()
        self.hidden_size, self.intermediate_size, self.activation = hidden_size, intermediate_size, activation
        self.gate_proj = Linear(hidden_size, intermediate_size, bias=bias, device=device, dtype=dtype)
        self.up_proj = Linear(hidden_size, intermediate_size, bias=bias, device=device, dtype=dtype)
        self.down_proj = Linear(intermediate_size, hidden_size, bias=bias, device=device, dtype=dtype)

    @classmethod
    def from_linears(cls, gate_proj: torch.nn.Linear, up_proj: torch.nn.Linear, down_proj: torch.nn.Linear,
                     activation: str = "silu") -> "GatedMLP":
        """A GatedMLP on these three layers' own Parameters (shared, not copied)."""
        hidden, inter = gate_proj.in_features, gate_proj.out_features
        shapes = [(m.in_features, m.out_features) for m in (gate_proj, up_proj, down_proj)]
        if shapes != [(hidden, inter), (hidden, inter), (inter, hidden)]:
            raise ValueError("GatedMLP.from_linears: gate_proj and up_proj must map hidden -> intermediate and "
                             f"down_proj intermediate -> hidden, got (in, out) = {shapes}")
        if len({m.bias is None for m in (gate_proj, up_proj, down_proj)}) != 1:
            raise ValueError("GatedMLP.from_linears: the three layers must all have a bias or all have none")
        new = cls(hidden, inter, bias=gate_proj.bias is not None, device="meta", dtype=gate_proj.weight.dtype,
                  activation=activation)
        new.gate_proj = Linear.from_torch(gate_proj)
        new.up_proj = Linear.from_torch(up_proj)
        new.down_proj = Linear.from_torch(down_proj)
        return new

    def forward(self, x: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        if x.dim() == 0 or x.shape[-1] != self.hidden_size:
            raise ValueError(f"GatedMLP: x must be (..., hidden_size) with hidden_size = {self.hidden_size}, "
                             f"got shape {list(x.shape)}")
        # Without biases and where no gradient is needed, gate and up are one kernel
        # (torch.ops.cute_gemm.gated_mm: act(gate) * up in its epilogue, on the sm90 family; two
        # GEMMs with float32 results and the product elsewhere). Training runs them as two GEMMs and
        # torch's product, whose backward needs both projections; so do projections with forward
        # hooks (tensor parallelism's, which make x a DTensor, or a user's), which the one kernel
        # would skip.
        weights = (self.gate_proj.weight, self.up_proj.weight)
        needs_grad = torch.is_grad_enabled() and (x.requires_grad or any(w.requires_grad for w in weights))
        hooked = any(m._forward_hooks or m._forward_pre_hooks for m in (self.gate_proj, self.up_proj))
        if self.gate_proj.bias is None and not needs_grad and not hooked:
            rows = math.prod(x.shape[:-1])
            h = torch.ops.cute_gemm.gated_mm.default(x.reshape(rows, self.hidden_size), *weights,
                                                     activation=self.activation)
            h = h.reshape(*x.shape[:-1], self.intermediate_size)
        else:
            h = _TORCH_ACTIVATIONS[self.activation](self.gate_proj(x)) * self.up_proj(x)
        return self.down_proj(h, residual=residual)

    def extra_repr(self) -> str:
        return (f"hidden_size={self.hidden_size}, intermediate_size={self.intermediate_size}, "
                f"activation={self.activation!r}")


def _is_dtensor(t) -> bool:
    # Whoever makes DTensors has imported torch.distributed.tensor (cute_gemm does not import it).
    module = sys.modules.get("torch.distributed.tensor")
    return module is not None and isinstance(t, module.DTensor)


class RMSNorm(torch.nn.RMSNorm):
    """A drop-in torch.nn.RMSNorm: same constructor, weight Parameter and state_dict, and torch's
    results (float32 arithmetic, rounded once to x's dtype).

    Where no gradient is needed (inference, a decode step), float16, bfloat16 and float32 CUDA
    inputs with a weight of their dtype (or none) over one normalized dimension run cute_gemm's
    kernel (torch.ops.cute_gemm.rms_norm), launched with programmatic dependent launch: in a decode
    step it is scheduled while the projection before it runs, and an SM90 GEMM after it while it
    runs. Everything else (training, autocast, CPU, DTensors) runs torch's F.rms_norm.

    RMSNorm.from_llama(norm) takes the place of a Hugging Face LlamaRMSNorm (and its copies in
    LLAMA_RMS_NORM_CLASSES) with that module's results within one rounding: the normalized x rounded
    to x's dtype before the weight multiplies it (round_before_weight), its code where the kernel
    does not run.
    """

    # Hugging Face's LlamaRMSNorm rounding: x * rsqrt(mean(x^2) + eps) rounded to x's dtype, then
    # times the weight (rounded again); torch's rms_norm rounds once.
    round_before_weight = False

    @classmethod
    def from_torch(cls, norm: torch.nn.RMSNorm) -> "RMSNorm":
        """An RMSNorm that uses norm's own weight Parameter (shared, not copied)."""
        dtype = norm.weight.dtype if norm.weight is not None else None
        new = cls(norm.normalized_shape, eps=norm.eps, elementwise_affine=norm.elementwise_affine, device="meta",
                  dtype=dtype)
        new.weight = norm.weight
        return new

    @classmethod
    def from_llama(cls, norm: torch.nn.Module) -> "RMSNorm":
        """An RMSNorm with the results of norm, a module that computes as Hugging Face's LlamaRMSNorm:
        weight * (x.float() * rsqrt(x.float().pow(2).mean(-1, keepdim=True) + variance_epsilon)).to(x.dtype),
        with a 1-D weight Parameter (its only state), which the new module shares; state_dict keeps
        its one key, weight."""
        if not _is_llama_norm(norm):
            raise ValueError("RMSNorm.from_llama: norm must have a 1-D Parameter weight as its only state and a "
                             f"number variance_epsilon (Hugging Face's LlamaRMSNorm), got {type(norm).__name__}")
        weight, eps = norm.weight, norm.variance_epsilon
        new = cls(weight.shape[0], eps=float(eps), device="meta", dtype=weight.dtype)
        new.weight = weight
        new.round_before_weight = True
        return new

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self._kernel_serves(x):
            # eps=None is torch's float32 epsilon for these dtypes (its default, at float32 arithmetic).
            eps = self.eps if self.eps is not None else torch.finfo(torch.float32).eps
            return torch.ops.cute_gemm.rms_norm.default(x, self.weight, eps, self.round_before_weight)
        if self.round_before_weight:  # Hugging Face's LlamaRMSNorm.forward, as it is written there
            h = x.to(torch.float32)
            h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
            return self.weight * h.to(x.dtype)
        return super().forward(x)

    def extra_repr(self) -> str:
        return super().extra_repr() + (", round_before_weight=True" if self.round_before_weight else "")

    @property
    def variance_epsilon(self):
        """eps under the name Hugging Face's RMSNorm modules give it."""
        return self.eps

    def _kernel_serves(self, x: torch.Tensor) -> bool:
        w = self.weight
        needs_grad = torch.is_grad_enabled() and (x.requires_grad or (w is not None and w.requires_grad))
        # DTensors (tensor parallelism; torch's rms_norm has their sharding rules) and nested tensors
        # run torch's.
        plain = not x.is_nested and not _is_dtensor(x) and not _is_dtensor(w)
        return (plain and x.is_cuda and x.dtype in (torch.float16, torch.bfloat16, torch.float32) and not needs_grad
                and len(self.normalized_shape) == 1 and x.dim() >= 1 and x.shape[-1] == self.normalized_shape[0]
                and (w is None or w.dtype == x.dtype) and not torch.is_autocast_enabled("cuda"))


# The gated MLP classes optimize() recognises by name: each computes exactly
# down_proj(act_fn(gate_proj(x)) * up_proj(x)) (Hugging Face transformers' modeling files).
GATED_MLP_CLASSES = ("LlamaMLP", "MistralMLP", "Qwen2MLP", "Qwen3MLP", "GemmaMLP", "Gemma2MLP")

# The RMSNorm classes of Hugging Face transformers' modeling files that optimize() recognises by name
# (in a transformers module): each computes LlamaRMSNorm's forward (RMSNorm.from_llama) as current
# transformers writes it (older versions cast to a 16-bit weight's dtype instead: the same results
# where the weight has x's dtype). Gemma's (1 + weight) and OLMo-2's (one rounding) differ and are
# not among them.
LLAMA_RMS_NORM_CLASSES = ("LlamaRMSNorm", "MistralRMSNorm", "MixtralRMSNorm", "Qwen2RMSNorm", "Qwen3RMSNorm")


def _is_llama_norm(norm: torch.nn.Module) -> bool:
    """Whether norm has LlamaRMSNorm's state (a 1-D weight Parameter, no other parameter, buffer or
    submodule, and a number variance_epsilon) and its class's own forward (no forward set on the
    instance, no accelerate hook, no forward hooks), and is not a torch.nn.RMSNorm (torch's
    rounding): what from_llama can take the place of."""
    weight = getattr(norm, "weight", None)
    return (not isinstance(norm, torch.nn.RMSNorm) and isinstance(weight, torch.nn.Parameter) and weight.dim() == 1
            and [n for n, _ in norm.named_parameters()] == ["weight"] and not list(norm.buffers())
            and not list(norm.children()) and isinstance(getattr(norm, "variance_epsilon", None), (int, float))
            and "forward" not in vars(norm) and not hasattr(norm, "_hf_hook")
            and not norm._forward_hooks and not norm._forward_pre_hooks)


def _gated_activation(act) -> str | None:
    """The GatedMLP activation that the module act computes, or None."""
    name = type(act).__name__
    if isinstance(act, torch.nn.SiLU) or name in ("SiLUActivation",):
        return "silu"
    if isinstance(act, torch.nn.GELU):
        return "gelu_tanh" if act.approximate == "tanh" else "gelu"
    if name in ("PytorchGELUTanh", "GELUTanh", "NewGELUActivation", "GELUPytorchTanh"):
        return "gelu_tanh"
    if name == "GELUActivation":
        return "gelu"
    return None


def optimize(model: torch.nn.Module, *, gated_mlp_classes: tuple = (), rms_norm_classes: tuple = ()) -> torch.nn.Module:
    """Swaps model's torch.nn.Linear layers for cute_gemm.nn.Linear, its gated MLPs for
    cute_gemm.nn.GatedMLP and its RMSNorm layers for cute_gemm.nn.RMSNorm, in place, on the same
    Parameters; returns model.

    A gated MLP is a module of a class named in GATED_MLP_CLASSES (or in gated_mlp_classes: classes
    or class names whose forward is down_proj(act_fn(gate_proj(x)) * up_proj(x))) with nn.Linear
    layers gate_proj, up_proj and down_proj and an act_fn that is SiLU or a GELU. An RMSNorm layer is
    a torch.nn.RMSNorm (RMSNorm.from_torch), or a module of a transformers class named in
    LLAMA_RMS_NORM_CLASSES or in rms_norm_classes (classes, or class names, whose forward is
    LlamaRMSNorm's) with LlamaRMSNorm's state and no hooks or forward of its own (an accelerate
    device_map's, a patched forward): RMSNorm.from_llama. Where nothing matches, nothing changes; a
    model optimized twice is left as it is. Optimizer state stays valid (the Parameters are the same
    objects) and state_dict keeps its keys.
    """
    if not isinstance(model, torch.nn.Module):
        raise ValueError(f"optimize: model must be a torch.nn.Module, got {type(model).__name__}")
    names = set(GATED_MLP_CLASSES) | {c if isinstance(c, str) else c.__name__ for c in gated_mlp_classes}
    norm_classes = {c for c in rms_norm_classes if not isinstance(c, str)}
    norm_names = {c for c in rms_norm_classes if isinstance(c, str)}

    def llama_norm(child: torch.nn.Module) -> bool:
        cls = type(child)
        named = cls in norm_classes or cls.__name__ in norm_names or (
            cls.__name__ in LLAMA_RMS_NORM_CLASSES and cls.__module__.startswith("transformers."))
        return named and _is_llama_norm(child)

    def swapped(child: torch.nn.Module) -> torch.nn.Module | None:
        if isinstance(child, (Linear, GatedMLP, RMSNorm)):
            return None
        if type(child).__name__ in names:
            layers = [getattr(child, n, None) for n in ("gate_proj", "up_proj", "down_proj")]
            act = _gated_activation(getattr(child, "act_fn", None))
            if act is not None and all(type(m) is torch.nn.Linear for m in layers):
                return GatedMLP.from_linears(*layers, activation=act)
        if type(child) is torch.nn.Linear:
            return Linear.from_torch(child)
        if type(child) is torch.nn.RMSNorm:
            return RMSNorm.from_torch(child)
        if llama_norm(child):
            return RMSNorm.from_llama(child)
        return None

    def walk(module: torch.nn.Module) -> None:
        for name, child in list(module.named_children()):
            new = swapped(child)
            if new is None:
                walk(child)
            else:
                new.train(child.training)
                setattr(module, name, new)

    walk(model)
    return model
