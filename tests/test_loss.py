"""cute_gemm.linear_cross_entropy: a model's head and its cross-entropy loss in one op.

CPU: argument errors, each naming the argument and the rule. GPU: the loss and the gradients of
x, weight and bias against float64 references (every dtype and reduction, odd sizes, ignored
targets), bad targets, autocast, a second backward, torch.compile, CUDA graphs and opcheck.
"""

import zlib

import pytest
import torch
import torch.nn.functional as F

import cute_gemm

gpu = pytest.mark.gpu
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
DTYPE_IDS = ["f16", "bf16", "f32"]


@pytest.fixture(autouse=True)
def _seed(request):
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))


def rel_err(x, ref):
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def inputs(n, v, d, dtype, device="cuda", bias=False, ignored=0):
    x = torch.randn(n, d, device=device).to(dtype).requires_grad_()
    w = (torch.randn(v, d, device=device) / d ** 0.5).to(dtype).requires_grad_()
    b = (torch.randn(v, device=device) * 0.1).to(dtype).requires_grad_() if bias else None
    t = torch.randint(0, v, (n,), device=device)
    if ignored:
        t[torch.randperm(n, device=device)[:ignored]] = -100
    return x, w, b, t


def losses_and_grads(fn, x, w, b, t, reduction):
    """fn's loss and the gradients of x, w (and b) for a random upstream gradient."""
    loss = fn(x, w, b, t, reduction)
    up = torch.rand_like(loss) + 0.5  # not 1: the upstream gradient must be applied
    params = [x, w] + ([b] if b is not None else [])
    return loss, torch.autograd.grad(loss, params, up.to(loss.dtype)), up


def float64_reference(x, w, b, t, reduction, up):
    """The loss in float64 and its gradients for up, of those of x, w, b that require grad."""
    leaves = [v.detach().double().requires_grad_() if v is not None else None for v in (x, w, b)]
    loss = F.cross_entropy(F.linear(*leaves), t, reduction=reduction)
    wanted = [v64 for v, v64 in zip((x, w, b), leaves) if v is not None and v.requires_grad]
    return loss.detach(), torch.autograd.grad(loss, wanted, up.double())


def ours(x, w, b, t, reduction):
    return cute_gemm.linear_cross_entropy(x, w, t, b, reduction=reduction)


def torch_way(x, w, b, t, reduction):
    """What a user writes: F.linear in the inputs' dtype, the loss on float32 logits."""
    return F.cross_entropy(F.linear(x, w, b).float(), t, reduction=reduction)


# =========================================================================================== CPU

@pytest.mark.parametrize("call, kind, words", [
    (lambda x, w, t: cute_gemm.linear_cross_entropy(x, w, t, reduction="avg"), ValueError, "reduction must be"),
    (lambda x, w, t: cute_gemm.linear_cross_entropy(x, w, t.int()), TypeError, "target must be int64"),
    (lambda x, w, t: cute_gemm.linear_cross_entropy(x, w, t[:3]), ValueError, "target must have x's leading shape"),
    (lambda x, w, t: cute_gemm.linear_cross_entropy(x[:, :5], w, t), ValueError, "x must be (..., in_features)"),
    (lambda x, w, t: cute_gemm.linear_cross_entropy(x, w[0], t), ValueError, "weight must be 2-D"),
    (lambda x, w, t: cute_gemm.linear_cross_entropy(x, w, t, w[:, 0][:4]), ValueError, "bias must be (classes,)"),
    (lambda x, w, t: cute_gemm.linear_cross_entropy(x, w.double(), t), TypeError, "one dtype"),
    (lambda x, w, t: cute_gemm.linear_cross_entropy(x.double(), w.double(), t), TypeError,
     "x must be float16, bfloat16 or float32"),
    (lambda x, w, t: cute_gemm.linear_cross_entropy(x, w, t, ignore_index=1.5), TypeError, "ignore_index must be"),
    (lambda x, w, t: cute_gemm.linear_cross_entropy(x.tolist(), w, t), TypeError, "x must be a torch.Tensor"),
])
def test_bad_arguments_name_the_argument(call, kind, words):
    x, w, t = torch.randn(6, 8), torch.randn(10, 8), torch.randint(0, 10, (6,))
    with pytest.raises(kind, match=words.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        call(x, w, t)


def test_cpu_tensors_are_refused_by_name():
    x, w, t = torch.randn(6, 8), torch.randn(10, 8), torch.randint(0, 10, (6,))
    with pytest.raises(ValueError, match="must be CUDA tensors on one device, got x on cpu, weight on cpu"):
        cute_gemm.linear_cross_entropy(x, w, t)


def test_the_kernel_refuses_cpu_tensors():
    with pytest.raises(ValueError, match="must be CUDA tensors"):
        torch.ops.cute_gemm.softmax_cross_entropy_(torch.randn(4, 10), torch.zeros(4, dtype=torch.long), -100)


# =========================================================================================== GPU

@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("n, v, d, bias, ignored", [
    (1, 7, 64, False, 0),
    (7, 127, 72, True, 0),      # rows of 127 elements: not 16-byte aligned, the element-wise kernel
    (129, 4097, 64, False, 5),
    (574, 50304, 128, True, 31),  # a GPT-2 vocabulary
])
def test_matches_float64(dtype, reduction, n, v, d, bias, ignored):
    x, w, b, t = inputs(n, v, d, dtype, bias=bias, ignored=ignored)
    loss, grads, up = losses_and_grads(ours, x, w, b, t, reduction)
    want, want_grads, _ = losses_and_grads(torch_way, x, w, b, t, reduction)
    assert loss.dtype == torch.float32 and loss.shape == want.shape
    ref, ref_grads = float64_reference(x, w, b, t, reduction, up)
    # Within twice torch's own error (the logits rounded to dtype), plus float32's floor; the
    # gradients plus the dtype's epsilon, which one element's rounding reaches at the smallest
    # sizes (g is rounded before the upstream gradient's scaling, torch's after; the GEMMs sum in
    # another order), and at least 1e-6 (8 float32 epsilons): exp2f's argument (x - lse) * log2(e)
    # is rounded with |x - lse| up to about 16, where torch's float32 softmax rounds differently.
    assert rel_err(loss, ref) <= 2 * rel_err(want, ref) + 1e-5, (rel_err(loss, ref), rel_err(want, ref))
    for name, g, g_torch, g_ref in zip(("x", "weight", "bias"), grads, want_grads, ref_grads):
        assert g.dtype == dtype, name
        err, err_torch = rel_err(g, g_ref), rel_err(g_torch, g_ref)
        assert err <= 2 * err_torch + max(torch.finfo(dtype).eps, 1e-6), (name, err, err_torch)
    if ignored:
        rows = (t == -100)
        assert torch.all(grads[0][rows] == 0)


@gpu
def test_ignore_index_and_the_mean_over_the_rest():
    x, w, _, t = inputs(64, 300, 64, torch.bfloat16)
    t[::3] = 7  # a class that is also a valid index: ignore_index need not be negative
    loss = cute_gemm.linear_cross_entropy(x, w, t, ignore_index=7)
    want = F.cross_entropy(F.linear(x, w).float(), t, ignore_index=7)
    # Loose: our logits and cuBLAS's may round differently; a mean over all 64 rows would be 30 % off.
    torch.testing.assert_close(loss, want, rtol=1e-3, atol=0)
    everything = torch.full_like(t, 7)
    assert cute_gemm.linear_cross_entropy(x, w, everything, ignore_index=7).isnan()  # 0 / 0, as torch's


@gpu
def test_a_bad_target_gives_its_row_a_nan_loss():
    x, w, _, t = inputs(5, 40, 64, torch.bfloat16)
    t[2] = 40
    t[3] = -1
    loss = cute_gemm.linear_cross_entropy(x, w, t, reduction="none")
    assert loss[2].isnan() and loss[3].isnan() and loss[[0, 1, 4]].isfinite().all()
    assert cute_gemm.linear_cross_entropy(x, w, t).isnan()


@gpu
@pytest.mark.parametrize("v", [127, 4096])  # the element-wise and the 16-byte kernel
def test_a_nan_logit_makes_its_row_nan_as_torch(v):
    x, w, _, t = inputs(40, v, 64, torch.bfloat16)
    with torch.no_grad():
        w[8:16] = float("nan")  # columns 8-15 of every row: one whole 16-byte vector of the wide kernel
    loss = cute_gemm.linear_cross_entropy(x, w, t, reduction="none")
    want = F.cross_entropy(F.linear(x, w).float(), t, reduction="none")
    assert want.isnan().all() and loss.isnan().all()


@gpu
def test_every_target_ignored_gives_zero_gradients_as_torch():
    x, w, _, t = inputs(16, 300, 64, torch.bfloat16)
    t.fill_(-100)
    loss = cute_gemm.linear_cross_entropy(x, w, t)
    gx, gw = torch.autograd.grad(loss, [x, w])
    assert loss.isnan() and (gx == 0).all() and (gw == 0).all()


@gpu
@pytest.mark.parametrize("reduction, up", [("mean", 1.0), ("sum", 1 / 4096)])
def test_float16_weight_gradient_of_a_frequent_class_stays_finite(reduction, up):
    # 4096 rows of class 0 with features of 100: g^T x summed unscaled would be about -4e5, past
    # float16's 65504; the mean's gradient, and the sum's over the tokens' count (a loss divided by
    # the batch's tokens), are about -100.
    x = torch.full((4096, 64), 100.0, device="cuda", dtype=torch.float16).requires_grad_()
    w = (torch.randn(300, 64, device="cuda") * 1e-3).half().requires_grad_()
    t = torch.zeros(4096, dtype=torch.long, device="cuda")
    up = torch.tensor(up, device="cuda")
    gw, = torch.autograd.grad(cute_gemm.linear_cross_entropy(x, w, t, reduction=reduction), [w], up)
    gw_torch, = torch.autograd.grad(torch_way(x, w, None, t, reduction), [w], up)
    _, (ref,) = float64_reference(x.detach(), w, None, t, reduction, up)
    # Within twice torch's error: g (about 1/300 / 4096 off the target) is subnormal in float16,
    # in torch's gradient of the logits too.
    assert gw.isfinite().all() and rel_err(gw, ref) <= 2 * rel_err(gw_torch, ref) + 1e-3


@gpu
def test_float16_under_a_grad_scalers_factor_as_torch():
    # A GradScaler's 2^16 on the mean over 2048 tokens: (softmax - onehot) / 2048 is mostly below
    # float16's smallest subnormal, so it must meet the factor before it is rounded.
    x, w, _, t = inputs(2048, 8192, 64, torch.float16)
    up = torch.tensor(2.0 ** 16, device="cuda")
    ours = torch.autograd.grad(cute_gemm.linear_cross_entropy(x, w, t), [x, w], up)
    want = torch.autograd.grad(torch_way(x, w, None, t, "mean"), [x, w], up)
    for name, g, g_torch, g_ref in zip(("x", "weight"), ours, want, float64_reference(x, w, None, t, "mean", up)[1]):
        err, err_torch = rel_err(g, g_ref), rel_err(g_torch, g_ref)
        assert g.isfinite().all() and err <= 2 * err_torch + torch.finfo(torch.float16).eps, (name, err, err_torch)


@gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["f16", "bf16"])
@pytest.mark.parametrize("reduction", ["mean", "sum"])
@pytest.mark.parametrize("needs", ["x", "w", "b", "wb", "xb"])
def test_only_the_gradients_asked_for(dtype, reduction, needs):
    x, w, b, t = (v.detach() for v in inputs(129, 1000, 64, dtype, bias=True))
    for name, v in zip("xwb", (x, w, b)):
        v.requires_grad_(name in needs)
    params = [v for v in (x, w, b) if v.requires_grad]
    up = torch.tensor(0.75, device="cuda")
    ours = torch.autograd.grad(cute_gemm.linear_cross_entropy(x, w, t, b, reduction=reduction), params, up)
    want = torch.autograd.grad(torch_way(x, w, b, t, reduction), params, up)
    for g, g_torch, g_ref in zip(ours, want, float64_reference(x, w, b, t, reduction, up)[1]):
        err, err_torch = rel_err(g, g_ref), rel_err(g_torch, g_ref)
        assert g.dtype == dtype and err <= 2 * err_torch + torch.finfo(dtype).eps, (needs, err, err_torch)


@gpu
def test_the_kernel_scales_its_gradient_by_scale():
    logits = torch.randn(33, 1000, device="cuda", dtype=torch.bfloat16)
    t = torch.randint(0, 1000, (33,), device="cuda")
    plain, scaled = logits.clone(), logits.clone()
    loss = torch.ops.cute_gemm.softmax_cross_entropy_(plain, t, -100)
    scale = torch.tensor(0.3, device="cuda")
    torch.testing.assert_close(torch.ops.cute_gemm.softmax_cross_entropy_(scaled, t, -100, scale), loss)
    # (softmax - onehot) * scale within one bfloat16 rounding (2^-8 of the value) of float64's.
    want = (torch.softmax(logits.double(), -1) - F.one_hot(t, 1000).double()) * 0.3
    assert ((scaled.double() - want).abs() <= want.abs() * 2 ** -8 * 1.01 + 1e-12).all()
    with pytest.raises(TypeError, match="scale must be float32"):
        torch.ops.cute_gemm.softmax_cross_entropy_(logits.clone(), t, -100, scale.double())
    with pytest.raises(ValueError, match="scale must be one element on logits' device"):
        torch.ops.cute_gemm.softmax_cross_entropy_(logits.clone(), t, -100, torch.ones(2, device="cuda"))


@gpu
def test_double_backward_is_refused():
    x, w, _, t = inputs(8, 50, 64, torch.float32)
    loss = cute_gemm.linear_cross_entropy(x, w, t)
    with pytest.raises(RuntimeError, match="double backward"):
        torch.autograd.grad(loss, [x], create_graph=True)


@gpu
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_leading_dims_and_a_second_backward(reduction):
    x, w, _, t = inputs(12, 500, 64, torch.bfloat16)
    x3, t3 = x.detach().view(3, 4, 64).requires_grad_(), t.view(3, 4)
    per_token = cute_gemm.linear_cross_entropy(x3, w, t3, reduction="none")
    assert per_token.shape == (3, 4)
    torch.testing.assert_close(per_token, F.cross_entropy(F.linear(x, w).float(), t, reduction="none").view(3, 4),
                               rtol=2e-3, atol=2e-3)
    loss = cute_gemm.linear_cross_entropy(x3, w, t3, reduction=reduction)
    up = torch.rand_like(loss) + 0.5
    loss.backward(up, retain_graph=True)
    first = x3.grad.clone()
    loss.backward(up)  # the saved gradient of the logits is still intact
    torch.testing.assert_close(x3.grad, 2 * first, rtol=0, atol=0)


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_logit_rows_start_on_16_bytes(dtype):
    # 127 classes: rows padded to 128 elements, so that the GEMM's aligned stores and the loss
    # kernel's 16-byte loads serve them.
    x, w, _, t = inputs(5, 127, 64, dtype)
    _, g = torch.ops.cute_gemm.linear_cross_entropy(x, w, None, t, -100, "mean")
    assert g.shape == (5, 127) and g.stride(1) == 1 and g.stride(0) * g.element_size() % 16 == 0
    assert g.data_ptr() % 16 == 0


@gpu
def test_autocast_casts_like_f_linear():
    x, w, b, t = inputs(33, 1000, 64, torch.float32, bias=True)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        loss = cute_gemm.linear_cross_entropy(x, w, t, b)
        want = F.cross_entropy(F.linear(x, w, b).float(), t)
    assert loss.dtype == torch.float32
    torch.testing.assert_close(loss, want, rtol=1e-3, atol=0)
    gx, gw, gb = torch.autograd.grad(loss, [x, w, b])
    tx, tw, tb = torch.autograd.grad(want, [x, w, b])
    assert gx.dtype == gw.dtype == gb.dtype == torch.float32
    for g, g_torch in ((gx, tx), (gw, tw), (gb, tb)):
        assert rel_err(g, g_torch.double()) <= 1e-2


@gpu
def test_autocast_leaves_float64_alone_as_f_linear():
    # Autocast casts float32 and 16-bit tensors, not float64 (F.linear then runs in float64): the
    # op sees float64 and refuses it as it does outside autocast.
    x, w, _, t = inputs(4, 16, 8, torch.float64)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        assert F.linear(x, w).dtype == torch.float64
        with pytest.raises(TypeError, match="x must be float16, bfloat16 or float32, got torch.float64"):
            cute_gemm.linear_cross_entropy(x, w, t)


@gpu
def test_compiles_fullgraph_and_captures_in_a_cuda_graph():
    x, w, _, t = inputs(129, 4097, 64, torch.bfloat16)
    eager = cute_gemm.linear_cross_entropy(x, w, t)
    eager_grads = torch.autograd.grad(eager, [x, w])
    torch._dynamo.reset()
    compiled = torch.compile(lambda x, w, t: cute_gemm.linear_cross_entropy(x, w, t), fullgraph=True)
    got = compiled(x, w, t)
    torch.testing.assert_close(got, eager, rtol=0, atol=0)  # the op is one node: the same kernels
    # Backward's scaling may be fused into another kernel by inductor: bf16's tolerance.
    for g, e in zip(torch.autograd.grad(got, [x, w]), eager_grads):
        torch.testing.assert_close(g, e)
    xs, ws = x.detach().clone(), w.detach().clone()
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        cute_gemm.linear_cross_entropy(xs, ws, t)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = cute_gemm.linear_cross_entropy(xs, ws, t)
    xs.copy_(torch.randn_like(xs))
    graph.replay()
    torch.testing.assert_close(out, cute_gemm.linear_cross_entropy(xs, ws, t), rtol=0, atol=0)


@gpu
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("bias", [False, True])
def test_opcheck(bias, reduction):
    x, w, b, t = inputs(33, 130, 72, torch.float16, bias=bias)  # 130 classes: padded logit rows
    torch.library.opcheck(torch.ops.cute_gemm.linear_cross_entropy.default, (x, w, b, t, -100, reduction))
