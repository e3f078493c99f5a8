"""The Python face of the operators registered by csrc/bindings.cpp, and what makes them
first-class PyTorch ops: fake (meta) implementations for torch.compile and meta tensors, and the
out= overloads' functionalization (their autograd formulas are C++, in csrc/bindings.cpp).

Argument rules live in one place, the C++ ops (csrc/gemm.cpp), so torch.ops.cute_gemm.* and the
functions here refuse the same inputs with the same messages. The fake implementations repeat
the shape and dtype rules (with the same exception types), since on meta and fake tensors they
run instead of the C++ code.
"""

import math

import torch

# The epilogue activations of addmm, in the order the error messages list them.
ACTIVATIONS = (None, "relu", "gelu", "gelu_tanh", "silu")
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def mm(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor | None = None,
       out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """C = a @ b, like torch.mm, on CUDA tensors (fp32 accumulation).

    a: (M, K), b: (K, N), both float16, both bfloat16 or both float32, same device; any strides.
    Returns a new contiguous (M, N) tensor of dtype out_dtype (None: a's dtype; for 16-bit inputs
    also torch.float32, straight from the accumulators). M or N = 0 gives an empty result, K = 0
    zeros. out=: write into this (M, N) tensor of the result dtype (any strides) and return it.
    """
    _require_tensor("mm", "a", a)
    _require_tensor("mm", "b", b)
    if out is None:
        return torch.ops.cute_gemm.mm.default(a, b, out_dtype=out_dtype)
    _check_out_call("mm", out, a, b)
    return torch.ops.cute_gemm.mm.out(a, b, out_dtype=out_dtype, out=out)


def addmm(input: torch.Tensor, a: torch.Tensor, b: torch.Tensor, *, beta=1, alpha=1,
          activation: str | None = None, out: torch.Tensor | None = None,
          out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """act(beta * input + alpha * (a @ b)), like torch.addmm followed by an activation, all in
    one kernel (the scaling, the add and the activation run in the GEMM's epilogue).

    a, b, out, out_dtype: as in mm. input broadcasts to (M, N) with torch's rules: a bias (N,) or
    (1, N), a column (M, 1), a full (M, N) C, or a 0-D tensor; its dtype is a's, or float32 when
    out_dtype is float32. beta = 0 ignores input (NaN in it does not propagate). activation: None,
    "relu", "gelu" (erf form, F.gelu's default), "gelu_tanh" (F.gelu(approximate="tanh")), "silu".
    """
    _require_tensor("addmm", "input", input)
    _require_tensor("addmm", "a", a)
    _require_tensor("addmm", "b", b)
    for name, value in (("beta", beta), ("alpha", alpha)):
        if isinstance(value, complex):
            raise ValueError(f"addmm: {name} must be a real number, got the complex number {value.real} + "
                             f"{value.imag}j")
    if out is None:
        return torch.ops.cute_gemm.addmm.default(input, a, b, beta=beta, alpha=alpha, activation=activation,
                                                 out_dtype=out_dtype)
    _check_out_call("addmm", out, input, a, b)
    return torch.ops.cute_gemm.addmm.out(input, a, b, beta=beta, alpha=alpha, activation=activation,
                                         out_dtype=out_dtype, out=out)


def bmm(a: torch.Tensor, b: torch.Tensor, *, out: torch.Tensor | None = None,
        out_dtype: torch.dtype | None = None) -> torch.Tensor:
    """C[i] = a[i] @ b[i], like torch.bmm, in one launch.

    a: (B, M, K), b: (B, K, N) with the same B (no broadcasting; expand() an operand for that:
    stride-0 batches are read in place). dtypes, out and out_dtype as in mm; the result is
    (B, M, N).
    """
    _require_tensor("bmm", "a", a)
    _require_tensor("bmm", "b", b)
    if out is None:
        return torch.ops.cute_gemm.bmm.default(a, b, out_dtype=out_dtype)
    _check_out_call("bmm", out, a, b)
    return torch.ops.cute_gemm.bmm.out(a, b, out_dtype=out_dtype, out=out)


def matmul(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """a @ b with torch.matmul's rules, as one mm or one bmm.

    1-D operands are treated as torch.matmul treats them (a vector is a row on the left, a
    column on the right, and that dimension is dropped from the result). When b is 1-D or 2-D,
    a's leading dimensions fold into M: one mm. Otherwise the batch dimensions broadcast and the
    operands are expanded (stride 0 where broadcast) to one bmm. Differentiable through mm/bmm.
    """
    _require_tensor("matmul", "a", a)
    _require_tensor("matmul", "b", b)
    if a.dim() == 0 or b.dim() == 0:
        raise ValueError(f"matmul: both arguments must be at least 1-D, got shapes {_shape(a)} and {_shape(b)}")
    k = a.shape[-1]
    k_b = b.shape[0] if b.dim() == 1 else b.shape[-2]
    if k != k_b:
        which = "only" if b.dim() == 1 else "second-to-last"
        raise ValueError(f"matmul: a's last dimension (K) must equal b's {which} dimension, got shapes {_shape(a)} "
                         f"and {_shape(b)}")

    if b.dim() <= 2:
        # (..., M, K) @ (K, N) or (K,): every leading dimension of a is more rows of one mm.
        n = b.shape[1] if b.dim() == 2 else 1
        rows = math.prod(a.shape[:-1])
        c = mm(a.reshape(rows, k), b.reshape(k, n))
        return c.reshape(a.shape[:-1] + b.shape[1:])

    a_mk = a.unsqueeze(0) if a.dim() == 1 else a  # a vector on the left is a one-row matrix
    try:
        batch = torch.broadcast_shapes(a_mk.shape[:-2], b.shape[:-2])
    except RuntimeError:
        raise ValueError(f"matmul: the batch dimensions of a and b do not broadcast, got shapes {_shape(a)} "
                         f"and {_shape(b)}") from None
    m, n = a_mk.shape[-2], b.shape[-1]
    count = math.prod(batch)
    a3 = a_mk.expand(*batch, m, k).reshape(count, m, k)
    b3 = b.expand(*batch, k, n).reshape(count, k, n)
    c = bmm(a3, b3).reshape(*batch, m, n)
    return c.squeeze(-2) if a.dim() == 1 else c


class Explanation(dict):
    """The plan a call would run (cute_gemm.explain): a dict of the plan's fields, printed as its
    "key=value" lines."""

    _INTS = ("row", "splits", "stream_k_tiles", "batch", "rows", "l2_hint")
    _BOOLS = ("tf32", "swapped", "folded_batches", "pdl", "fast_hbm", "autotune")

    def __init__(self, text: str):
        super().__init__()
        self.text = text
        for line in text.splitlines():
            key, _, value = line.partition("=")
            self[key] = int(value) if key in self._INTS else value == "true" if key in self._BOOLS else value

    def __str__(self) -> str:
        return self.text


def explain(a: torch.Tensor, b: torch.Tensor, input: torch.Tensor | None = None, *, beta=1, alpha=1,
            activation: str | None = None, out: torch.Tensor | None = None,
            out_dtype: torch.dtype | None = None) -> Explanation:
    """What mm(a, b) (2-D), addmm(input, a, b, ...) (with input) or bmm(a, b) (3-D) would run on
    these tensors, without running anything: the kernel family, the tile row of its table
    (csrc/sm90/configs.h, csrc/sm80/configs.h) and the rule that chose it, K slices, the stream-K
    tail, which operands are copied, where C is written, and whether the autotune cache may
    replace the row (CUTE_GEMM_AUTOTUNE=1). The same checks as the op: a bad argument raises the
    op's error. The CUTE_GEMM_* development knobs apply as they would to the call. The tensors are
    taken as given: under torch.autocast, where the op casts its inputs first, pass them cast
    (contiguous, in the autocast dtype) to see the plan of the cast call.

        >>> print(cute_gemm.explain(x, w.t()))       # route=kernel, rule=..., family=sm90, row=2, ...
        >>> cute_gemm.explain(x, w.t())["row"]          # (a decode call's GEMV has none: family=gemv)
    """
    _require_tensor("explain", "a", a)
    _require_tensor("explain", "b", b)
    if input is not None:
        _require_tensor("explain", "input", input)
        for name, value in (("beta", beta), ("alpha", alpha)):
            if isinstance(value, complex):
                raise ValueError(f"addmm: {name} must be a real number, got the complex number {value.real} + "
                                 f"{value.imag}j")
    if out is not None:
        _require_tensor("explain", "out", out)
        op = "bmm" if a.dim() == 3 else "addmm" if input is not None else "mm"
        _check_out_call(op, out, *((input, a, b) if input is not None else (a, b)))
    return Explanation(torch.ops.cute_gemm.explain(a, b, input, beta=beta, alpha=alpha, activation=activation,
                                                   out_dtype=out_dtype, out=out))


def _require_tensor(op: str, name: str, value) -> None:
    # For a non-tensor the dispatcher raises a RuntimeError about casting; a Python caller
    # expects a TypeError that names the argument.
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"{op}: {name} must be a torch.Tensor, got {type(value).__name__}")


def _check_out_call(op: str, out, *inputs) -> None:
    _require_tensor(op, "out", out)
    # The out overloads have no autograd formula: without this check the call would succeed and
    # the graph would silently end at out.
    if torch.is_grad_enabled() and any(t.requires_grad for t in (*inputs, out)):
        raise RuntimeError(f"{op}(): functions with out=... arguments don't support automatic differentiation, "
                           "but one of the arguments requires grad")


def _shape(t: torch.Tensor) -> list:
    return list(t.shape)


# ------------------------------------------------------------------------------ fake tensors
# Shape rules go through torch._check_value / _check_type (ValueError / TypeError, as the C++
# ops raise), which accept the symbolic sizes of torch.compile's dynamic shapes.

def _check_operand(op: str, name: str, x, dims: int, shape: str) -> None:
    torch._check_value(x.dim() == dims, lambda: f"{op}: {name} must be {dims}-D {shape}, got shape {_shape(x)}")
    torch._check_type(x.dtype in _DTYPES, lambda: f"{op}: {name} must be float16, bfloat16 or float32, got {x.dtype}")


def _result_dtype(op: str, a, b, out_dtype) -> torch.dtype:
    torch._check_type(a.dtype == b.dtype, lambda: f"{op}: a and b must have the same dtype, got a {a.dtype} and "
                      f"b {b.dtype}")
    torch._check_value(a.device == b.device, lambda: f"{op}: a and b must be on the same device, got a on "
                       f"{a.device} and b on {b.device}")
    if out_dtype is None:
        return a.dtype
    torch._check_type(out_dtype in (a.dtype, torch.float32), lambda: f"{op}: out_dtype must be None, {a.dtype} "
                      f"(the inputs' dtype) or torch.float32, got {out_dtype}")
    return out_dtype


def _mm_meta(op: str, a, b, out_dtype):
    _check_operand(op, "a", a, 2, "(M, K)")
    _check_operand(op, "b", b, 2, "(K, N)")
    torch._check_value(a.shape[1] == b.shape[0], lambda: f"{op}: a's columns (K) must equal b's rows, got a "
                       f"{_shape(a)} and b {_shape(b)}")
    return (a.shape[0], b.shape[1]), _result_dtype(op, a, b, out_dtype)


def _addmm_meta(input, a, b, activation, out_dtype):
    shape, dtype = _mm_meta("addmm", a, b, out_dtype)
    torch._check_value(activation in ACTIVATIONS, lambda: "addmm: activation must be one of "
                       f"{', '.join(map(repr, ACTIVATIONS))}, got {activation!r}")
    fits = input.dim() <= 2 and all(d == 1 or d == want for d, want in zip(reversed(input.shape), reversed(shape)))
    torch._check_value(fits, lambda: f"addmm: input must broadcast to the result's shape (M, N) = {list(shape)} "
                       f"(a bias of N elements, (1, N), (M, 1) or (M, N)), got shape {_shape(input)}")
    torch._check_type(input.dtype == a.dtype or (input.dtype == torch.float32 and dtype == torch.float32),
                      lambda: f"addmm: input must have a's dtype {a.dtype}"
                      f"{' or torch.float32' if dtype == torch.float32 else ''}, got {input.dtype}")
    torch._check_value(input.device == a.device, lambda: f"addmm: input must be on a's device {a.device}, got "
                       f"{input.device}")
    return shape, dtype


def _bmm_meta(a, b, out_dtype):
    _check_operand("bmm", "a", a, 3, "(B, M, K)")
    _check_operand("bmm", "b", b, 3, "(B, K, N)")
    torch._check_value(a.shape[0] == b.shape[0], lambda: f"bmm: a and b must have the same batch size, got a "
                       f"{_shape(a)} and b {_shape(b)}")
    torch._check_value(a.shape[2] == b.shape[1], lambda: f"bmm: a's columns (K) must equal b's rows, got a "
                       f"{_shape(a)} and b {_shape(b)}")
    return (a.shape[0], a.shape[1], b.shape[2]), _result_dtype("bmm", a, b, out_dtype)


def _gated_meta(x, w_gate, w_up, activation):
    op = "gated_mm"
    _check_operand(op, "x", x, 2, "(M, K)")
    _check_operand(op, "w_gate", w_gate, 2, "(F, K)")
    _check_operand(op, "w_up", w_up, 2, "(F, K)")
    for name, w in (("w_gate", w_gate), ("w_up", w_up)):
        torch._check_value(w.device == x.device, lambda: f"{op}: x and {name} must be on the same device, got x on "
                           f"{x.device} and {name} on {w.device}")
        torch._check_type(w.dtype == x.dtype, lambda: f"{op}: x and {name} must have the same dtype, got x {x.dtype} "
                          f"and {name} {w.dtype}")
    torch._check_value(w_gate.shape[1] == x.shape[1], lambda: f"{op}: w_gate's columns (K) must equal x's, got x "
                       f"{_shape(x)} and w_gate {_shape(w_gate)}")
    torch._check_value(w_up.shape == w_gate.shape, lambda: f"{op}: w_up must have w_gate's shape {_shape(w_gate)}, "
                       f"got {_shape(w_up)}")
    torch._check_value(activation in ACTIVATIONS, lambda: f"{op}: activation must be one of "
                       f"{', '.join(map(repr, ACTIVATIONS))}, got {activation!r}")
    return (x.shape[0], w_gate.shape[0]), x.dtype


def _checked_out(op: str, out, a, shape, dtype):
    # The order of the C++ checks: device, dtype, shape.
    torch._check_value(out.device == a.device, lambda: f"{op}: out must be on the inputs' device {a.device}, got "
                       f"{out.device}")
    torch._check_type(out.dtype == dtype, lambda: f"{op}: out must have the result dtype {dtype}, got {out.dtype}")
    torch._check_value(out.dim() == len(shape) and all(o == s for o, s in zip(out.shape, shape)),
                       lambda: f"{op}: out must have shape {list(shape)}, got {_shape(out)}")
    return out


@torch.library.register_fake("cute_gemm::mm")
def _mm_fake(a, b, *, out_dtype=None):
    shape, dtype = _mm_meta("mm", a, b, out_dtype)
    return a.new_empty(shape, dtype=dtype)


@torch.library.register_fake("cute_gemm::mm.out")
def _mm_out_fake(a, b, *, out_dtype=None, out):
    return _checked_out("mm", out, a, *_mm_meta("mm", a, b, out_dtype))


@torch.library.register_fake("cute_gemm::addmm")
def _addmm_fake(input, a, b, *, beta=1, alpha=1, activation=None, out_dtype=None):
    shape, dtype = _addmm_meta(input, a, b, activation, out_dtype)
    return a.new_empty(shape, dtype=dtype)


@torch.library.register_fake("cute_gemm::addmm.out")
def _addmm_out_fake(input, a, b, *, beta=1, alpha=1, activation=None, out_dtype=None, out):
    return _checked_out("addmm", out, a, *_addmm_meta(input, a, b, activation, out_dtype))


@torch.library.register_fake("cute_gemm::bmm")
def _bmm_fake(a, b, *, out_dtype=None):
    shape, dtype = _bmm_meta(a, b, out_dtype)
    return a.new_empty(shape, dtype=dtype)


@torch.library.register_fake("cute_gemm::gated_mm")
def _gated_mm_fake(x, w_gate, w_up, *, activation="silu"):
    shape, dtype = _gated_meta(x, w_gate, w_up, activation)
    return x.new_empty(shape, dtype=dtype)


@torch.library.register_fake("cute_gemm::mm_row_sums")
def _mm_row_sums_fake(a, b):
    shape, dtype = _mm_meta("mm_row_sums", a, b, None)
    return a.new_empty(shape, dtype=dtype), a.new_empty((a.shape[0],), dtype=dtype)


@torch.library.register_fake("cute_gemm::bmm.out")
def _bmm_out_fake(a, b, *, out_dtype=None, out):
    return _checked_out("bmm", out, a, *_bmm_meta(a, b, out_dtype))


@torch.library.register_fake("cute_gemm::rms_norm")
def _rms_norm_fake(x, weight, eps, round_before_weight=False):
    # The C++ checks' order and types (csrc/rms_norm_op.cpp).
    op = "rms_norm"
    torch._check_value(x.dim() >= 1, lambda: f"{op}: x must have at least one dimension (the normalized one), got "
                       "a 0-D tensor")
    torch._check_type(x.dtype in _DTYPES, lambda: f"{op}: x must be float16, bfloat16 or float32, got {x.dtype}")
    if weight is not None:
        torch._check_type(weight.dtype == x.dtype, lambda: f"{op}: weight must have x's dtype {x.dtype}, got "
                          f"{weight.dtype}")
        torch._check_value(weight.dim() == 1 and weight.shape[0] == x.shape[-1], lambda: f"{op}: weight must be 1-D "
                           f"with x's last dimension D = {x.shape[-1]} entries, got shape {_shape(weight)}")
    return x.new_empty(x.shape)


# ---------------------------------------------------------------------------------- autograd
# The functional overloads only (out= overloads are not differentiable, as in torch): the formulas
# are registered in C++ (csrc/bindings.cpp), where a call that needs no gradient skips them.
# Gradients are GEMMs of the same library: a transposed view (b.t(), a.mT) is read in place by
# the kernels, so dA = dC @ B^T and dB = A^T @ dC need no copies.
# rms_norm's (cute_gemm.nn.RMSNorm runs it where no gradient is needed, torch's own otherwise) is
# here: torch's formula in float32, for direct calls of the op (round_before_weight's rounding passes
# the gradient through, as a dtype cast does in torch).


def _rms_norm_setup(ctx, inputs, output):
    x, weight, eps, *_ = inputs
    ctx.save_for_backward(x, weight)
    ctx.eps = eps


def _rms_norm_backward(ctx, grad):
    x, weight = ctx.saved_tensors
    xf = x.float()
    r = torch.rsqrt(xf.square().mean(-1, keepdim=True) + ctx.eps)
    n = xf * r  # the normalized x
    g = grad.float()
    gw = g * weight.float() if weight is not None else g
    dx = r * (gw - n * (gw * n).mean(-1, keepdim=True)) if ctx.needs_input_grad[0] else None
    dw = (g * n).reshape(-1, x.shape[-1]).sum(0) if weight is not None and ctx.needs_input_grad[1] else None
    # None for eps, and for round_before_weight where the call passed it (the dispatcher drops an
    # argument equal to its default).
    rest = (None,) * (len(ctx.needs_input_grad) - 2)
    return (dx.to(x.dtype) if dx is not None else None), (dw.to(weight.dtype) if dw is not None else None), *rest


torch.library.register_autograd("cute_gemm::rms_norm", _rms_norm_backward, setup_context=_rms_norm_setup)


# ---------------------------------------------------------------------------- functionalization
# torch.compile and AOTAutograd functionalize graphs, and torch's fallback for that refuses a
# custom op whose output aliases an input (the out overloads' Tensor(a!) return). Under
# functionalization an out= call is therefore the functional op plus a copy into out, after the
# same shape and dtype checks the op makes (in eager, the C++ out kernels run as they are).

def _mm_out_functional(a, b, *, out_dtype=None, out):
    result = torch.ops.cute_gemm.mm.default(a, b, out_dtype=out_dtype)
    return _checked_out("mm", out, a, result.shape, result.dtype).copy_(result)


def _addmm_out_functional(input, a, b, *, beta=1, alpha=1, activation=None, out_dtype=None, out):
    result = torch.ops.cute_gemm.addmm.default(input, a, b, beta=beta, alpha=alpha, activation=activation,
                                               out_dtype=out_dtype)
    return _checked_out("addmm", out, a, result.shape, result.dtype).copy_(result)


def _bmm_out_functional(a, b, *, out_dtype=None, out):
    result = torch.ops.cute_gemm.bmm.default(a, b, out_dtype=out_dtype)
    return _checked_out("bmm", out, a, result.shape, result.dtype).copy_(result)


_functionalize_lib = torch.library.Library("cute_gemm", "IMPL")
_functionalize_lib.impl("mm.out", _mm_out_functional, "Functionalize")
_functionalize_lib.impl("addmm.out", _addmm_out_functional, "Functionalize")
_functionalize_lib.impl("bmm.out", _bmm_out_functional, "Functionalize")
