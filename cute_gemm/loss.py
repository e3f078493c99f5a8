"""linear_cross_entropy: a language model's output layer and its cross-entropy loss as one op.

    loss = cute_gemm.linear_cross_entropy(hidden, model.lm_head.weight, labels)
    # = F.cross_entropy(F.linear(hidden, weight).float().flatten(0, -2), labels.flatten())

The usual head computes the logits (tokens x vocabulary: 8192 x 50304 is 824 MB in bfloat16),
copies them to float32, runs log_softmax over the copy and, in backward, its gradient and a copy
back: several passes over the largest tensor of the step. Here the GEMM writes the logits, one
kernel computes each row's loss and overwrites the row with its gradient (softmax minus the
one-hot target, csrc/cross_entropy.cu), and backward is two GEMMs over that gradient. The loss is
float32, computed from the logits in the inputs' dtype exactly as torch's loss on `.float()`
logits; the logits themselves are never returned.
"""

import torch

REDUCTIONS = ("mean", "sum", "none")
_DTYPES = (torch.float16, torch.bfloat16, torch.float32)


def linear_cross_entropy(x: torch.Tensor, weight: torch.Tensor, target: torch.Tensor,
                         bias: torch.Tensor | None = None, *, ignore_index: int = -100,
                         reduction: str = "mean") -> torch.Tensor:
    """F.cross_entropy(F.linear(x, weight, bias).float() over the last dim, target, ...) in float32.

    x (..., in_features) and weight (classes, in_features): CUDA, float16, bfloat16 or float32,
    one dtype (under torch.autocast("cuda") both are cast to its dtype, as F.linear's are); bias
    (classes,) or None; target (...,) int64, x's leading shape. reduction: "mean" (over the targets
    that are not ignore_index), "sum" or "none" (a loss per target, target's shape). A target
    outside [0, classes) other than ignore_index makes its loss NaN (torch stops the process with a
    device-side assert there). Differentiable in x, weight and bias, once (no create_graph=True).
    """
    for name, value in (("x", x), ("weight", weight), ("target", target)):
        if not isinstance(value, torch.Tensor):
            raise TypeError(f"linear_cross_entropy: {name} must be a torch.Tensor, got {type(value).__name__}")
    if bias is not None and not isinstance(bias, torch.Tensor):
        raise TypeError(f"linear_cross_entropy: bias must be a torch.Tensor or None, got {type(bias).__name__}")
    if reduction not in REDUCTIONS:
        raise ValueError(f"linear_cross_entropy: reduction must be one of {', '.join(map(repr, REDUCTIONS))}, "
                         f"got {reduction!r}")
    if not isinstance(ignore_index, int) or isinstance(ignore_index, bool):
        raise TypeError(f"linear_cross_entropy: ignore_index must be an int, got {type(ignore_index).__name__}")
    if weight.dim() != 2:
        raise ValueError(f"linear_cross_entropy: weight must be 2-D (classes, in_features), got shape "
                         f"{list(weight.shape)}")
    if x.dim() < 1 or x.shape[-1] != weight.shape[1]:
        raise ValueError(f"linear_cross_entropy: x must be (..., in_features) with in_features = weight's "
                         f"{weight.shape[1]}, got shape {list(x.shape)}")
    if tuple(target.shape) != tuple(x.shape[:-1]):
        raise ValueError(f"linear_cross_entropy: target must have x's leading shape {list(x.shape[:-1])}, got "
                         f"{list(target.shape)}")
    if target.dtype != torch.int64:
        raise TypeError(f"linear_cross_entropy: target must be int64 (class indices), got {target.dtype}")
    if bias is not None and tuple(bias.shape) != (weight.shape[0],):
        raise ValueError(f"linear_cross_entropy: bias must be (classes,) = [{weight.shape[0]}], got "
                         f"{list(bias.shape)}")
    if torch.is_autocast_enabled("cuda"):
        # As autocast casts F.linear's arguments: floating-point tensors other than float64.
        dtype = torch.get_autocast_dtype("cuda")
        x, weight, bias = (t.to(dtype) if t is not None and t.dtype in _DTYPES else t for t in (x, weight, bias))
    for name, value in (("weight", weight), ("bias", bias)):
        if value is not None and value.dtype != x.dtype:
            raise TypeError(f"linear_cross_entropy: x, weight and bias must have one dtype, got x {x.dtype} and "
                            f"{name} {value.dtype}")
    if x.dtype not in _DTYPES:
        raise TypeError(f"linear_cross_entropy: x must be float16, bfloat16 or float32, got {x.dtype}")
    tensors = [("x", x), ("weight", weight), ("target", target)] + ([("bias", bias)] if bias is not None else [])
    if any(not t.is_cuda or t.device != x.device for _, t in tensors):
        raise ValueError("linear_cross_entropy: x, weight, target and bias must be CUDA tensors on one device, got "
                         + ", ".join(f"{name} on {t.device}" for name, t in tensors))
    loss, _ = torch.ops.cute_gemm.linear_cross_entropy(x.reshape(-1, x.shape[-1]), weight, bias,
                                                       target.reshape(-1), ignore_index, reduction)
    return loss.reshape(target.shape) if reduction == "none" else loss


@torch.library.custom_op("cute_gemm::linear_cross_entropy", mutates_args=())
def _linear_cross_entropy(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, target: torch.Tensor,
                          ignore_index: int, reduction: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(the loss, g) for x (N, K): g is the loss's gradient with respect to the logits for "mean" in
    bfloat16 and float32, else that of the summed loss (of each row's, for "none"). It is what
    backward multiplies; linear_cross_entropy drops it."""
    logits = _logits_buffer(x, weight)
    if bias is None:
        torch.ops.cute_gemm.mm.out(x, weight.t(), out=logits)
    else:
        torch.ops.cute_gemm.addmm.out(bias, x, weight.t(), out=logits)
    # The mean's 1 / count scales the gradient in the kernel, in float32 before its one rounding, as
    # torch's loss scales its float32 gradient before the copy back to 16 bits. Not in float16: there
    # most of (softmax - onehot) / count is below its smallest subnormal, and an upstream factor
    # applied later (a GradScaler's 2^16, say) could not bring it back.
    count = (target != ignore_index).sum() if reduction == "mean" else None
    scale = None
    if count is not None and x.dtype != torch.float16:
        scale = count.clamp_min(1).float().reciprocal()  # all ignored: g is zeros, the loss 0 / 0 = NaN as torch's
    rows = torch.ops.cute_gemm.softmax_cross_entropy_(logits, target, ignore_index, scale)  # logits -> gradient
    if reduction == "none":
        return rows, logits
    return (rows.sum() / count if count is not None else rows.sum()), logits


@_linear_cross_entropy.register_fake
def _linear_cross_entropy_fake(x, weight, bias, target, ignore_index, reduction):
    loss = x.new_empty((x.shape[0],) if reduction == "none" else (), dtype=torch.float32)
    return loss, _logits_buffer(x, weight)


def _logits_buffer(x, weight):
    """An (N, V) tensor for the logits whose rows start on 16-byte boundaries: rows of V elements
    padded to a multiple of 16 bytes (GPT-2's 50,257 classes, say), so that the GEMM writes them
    with its aligned stores and the loss kernel reads them 16 bytes at a time, as it does for a V
    that is already a multiple."""
    per_16_bytes = 16 // x.element_size()
    pitch = -(-weight.shape[0] // per_16_bytes) * per_16_bytes
    return x.new_empty((x.shape[0], pitch))[:, :weight.shape[0]]


@torch.library.register_fake("cute_gemm::softmax_cross_entropy_")
def _softmax_cross_entropy_fake(logits, target, ignore_index, scale=None):
    return logits.new_empty((logits.shape[0],), dtype=torch.float32)


def _setup_context(ctx, inputs, output):
    x, weight, bias, target, ignore_index, reduction = inputs
    ctx.save_for_backward(x, weight, target, output[1])
    ctx.ignore_index, ctx.reduction = ignore_index, reduction
    ctx.mark_non_differentiable(output[1])
    ctx.set_materialize_grads(False)  # else autograd hands backward an (N, V) tensor of zeros for output[1]


def _backward(ctx, grad_loss, _grad_of_gradient):
    # The saved g is the loss's gradient with respect to the logits in the inputs' dtype; the
    # upstream gradient scales g's rows into a new tensor for "none" (in float32, rounded once; g
    # stays valid for another backward), else it is one factor s on the GPU (no host sync; 1 for
    # loss.backward(), where every product with it is exact).
    if grad_loss is None:
        return None, None, None, None, None, None
    if torch.is_grad_enabled():  # only inside a create_graph=True backward
        raise RuntimeError("linear_cross_entropy: double backward (create_graph=True) is not supported; "
                           "use F.cross_entropy(F.linear(x, weight, bias).float(), target) for it")
    x, weight, target, g = ctx.saved_tensors
    need_x, need_w, need_b = ctx.needs_input_grad[:3]
    if ctx.reduction == "none":
        g, s = torch.mul(g, grad_loss[:, None], out=torch.empty_like(g)), None
    elif g.dtype == torch.float16:
        return _float16_backward(ctx, grad_loss, x, weight, target, g)
    else:
        s = grad_loss
    # 16-bit GEMMs over g, as torch's; s scales x before d W = g^T (x s): tokens x in_features
    # elements rather than d W's classes x in_features (a sixth at GPT-2-medium's 50,304 classes and
    # 8192 tokens), through torch's strided kernel for a 0-dim CUDA factor.
    xs = x * s if s is not None and need_w else x
    dx = torch.ops.cute_gemm.mm(g, weight) if need_x else None
    dw = db = None
    if need_w and need_b:
        dw, db = torch.ops.cute_gemm.mm_row_sums(g.t(), xs)
    elif need_w:
        dw = torch.ops.cute_gemm.mm(g.t(), xs)
    elif need_b:
        db = g.sum(0)
    if s is not None:
        for grad in (dx, db):
            if grad is not None:
                grad.mul_(s)
    return dx, dw, db, None, None, None


def _float16_backward(ctx, grad_loss, x, weight, target, g):
    # float16's g is unscaled (see the forward): the GEMMs write float32, which s / count scales
    # before their one rounding, as torch rounds (softmax - onehot) * s / count once. A 16-bit
    # g^T x, unscaled, passes 65504 where a frequent class meets large features.
    f = grad_loss.float()
    if ctx.reduction == "mean":  # every target ignored: g is zeros, and so are the gradients
        f = f / (target != ctx.ignore_index).sum().clamp_min(1)

    def scaled(t):
        return torch.mul(t, f, out=torch.empty_like(t, dtype=g.dtype))

    need_x, need_w, need_b = ctx.needs_input_grad[:3]
    dx = scaled(torch.ops.cute_gemm.mm(g, weight, out_dtype=torch.float32)) if need_x else None
    dw = scaled(torch.ops.cute_gemm.mm(g.t(), x, out_dtype=torch.float32)) if need_w else None
    db = scaled(g.sum(0, dtype=torch.float32)) if need_b else None
    return dx, dw, db, None, None, None


_linear_cross_entropy.register_autograd(_backward, setup_context=_setup_context)
