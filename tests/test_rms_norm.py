"""cute_gemm.nn.RMSNorm and its op, torch.ops.cute_gemm.rms_norm (csrc/rms_norm.cu): torch's
results against float64 over dtypes, odd sizes, strides and misaligned rows; where the module runs
the kernel and where torch's; gradients of the op; torch.compile, CUDA graphs; and the kernels
around it (launched with PDL, it starts while the one before runs) reading what was written. In
place of Hugging Face's LlamaRMSNorm (RMSNorm.from_llama): that module's results (the normalized x
rounded before the weight multiplies it).

CPU: the module (torch's path there), optimize, state_dict, the op's errors and fake tensors.
"""

import zlib

import pytest
import torch
import torch.nn.functional as F

import cute_gemm

gpu = pytest.mark.gpu
DTYPES = [torch.float16, torch.bfloat16, torch.float32]
DTYPE_IDS = ["f16", "bf16", "f32"]
# ||out - ref|| / ||ref||: one rounding to the dtype (fp32 sums).
REL_BOUND = {torch.float16: 1e-3, torch.bfloat16: 8e-3, torch.float32: 1e-6}
F32_EPS = torch.finfo(torch.float32).eps


@pytest.fixture(autouse=True)
def _seed(request):
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))


def rel_err(x, ref):
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def reference(x, weight, eps):
    x64 = x.double()
    y = x64 * torch.rsqrt(x64.square().mean(-1, keepdim=True) + eps)
    return y * weight.double() if weight is not None else y


class LlamaRMSNorm(torch.nn.Module):
    """Hugging Face transformers' LlamaRMSNorm, as its modeling file writes it."""

    def __init__(self, hidden_size, eps=1e-6):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(hidden_size))
        self.variance_epsilon = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.variance_epsilon)
        return self.weight * hidden_states.to(input_dtype)


class HFLlamaRMSNorm(LlamaRMSNorm):
    pass


HFLlamaRMSNorm.__name__ = "LlamaRMSNorm"  # the class as it comes from transformers
HFLlamaRMSNorm.__module__ = "transformers.models.llama.modeling_llama"


def llama_norm(d, dtype, device="cpu"):
    norm = HFLlamaRMSNorm(d, eps=1e-5).to(device=device, dtype=dtype)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    return norm


# ======================================================================================= CPU

def test_module_is_torchs_on_cpu_and_shares_the_weight():
    norm = torch.nn.RMSNorm(24, eps=1e-5)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    ours = cute_gemm.nn.RMSNorm.from_torch(norm)
    assert ours.weight is norm.weight and ours.eps == 1e-5 and ours.normalized_shape == (24,)
    assert list(ours.state_dict()) == list(norm.state_dict())
    x = torch.randn(3, 24)
    assert torch.equal(ours(x), norm(x))  # CPU: torch's F.rms_norm itself
    plain = cute_gemm.nn.RMSNorm.from_torch(torch.nn.RMSNorm(24, elementwise_affine=False))
    assert plain.weight is None and torch.equal(plain(x), F.rms_norm(x, (24,)))
    loaded = cute_gemm.nn.RMSNorm(24)
    loaded.load_state_dict(norm.state_dict())
    assert torch.equal(loaded.weight, norm.weight)


def test_optimize_swaps_rms_norms_only_of_torchs_class():
    class MyNorm(torch.nn.RMSNorm):  # a subclass may compute anything: left as it is
        pass

    model = torch.nn.ModuleDict({"a": torch.nn.RMSNorm(8), "b": MyNorm(8), "c": torch.nn.LayerNorm(8)})
    weight = model["a"].weight
    cute_gemm.optimize(model)
    assert type(model["a"]) is cute_gemm.nn.RMSNorm and model["a"].weight is weight
    assert type(model["b"]) is MyNorm and type(model["c"]) is torch.nn.LayerNorm


def test_optimize_swaps_llama_norms_with_their_results():
    """transformers' LlamaRMSNorm family by name, a class of the caller's by rms_norm_classes; a
    same-named class of another module is left alone. On the CPU the swapped module runs
    LlamaRMSNorm's code: the same bits and gradients, a float32 weight's promotion included."""
    class Other(torch.nn.Module):  # named like transformers' but not from it: may compute anything
        def __init__(self):
            super().__init__()
            self.weight, self.variance_epsilon = torch.nn.Parameter(torch.ones(8)), 1e-6

    Other.__name__ = "LlamaRMSNorm"
    model = torch.nn.ModuleDict({"hf": llama_norm(8, torch.bfloat16), "mine": LlamaRMSNorm(8), "other": Other(),
                                 "f32": llama_norm(8, torch.float32)})
    originals = {k: m for k, m in model.items()}
    keys = list(model.state_dict())
    cute_gemm.optimize(model, rms_norm_classes=(LlamaRMSNorm,))
    assert type(model["other"]) is Other and list(model.state_dict()) == keys
    for k in ("hf", "mine", "f32"):
        new = model[k]
        assert type(new) is cute_gemm.nn.RMSNorm and new.weight is originals[k].weight
        assert new.round_before_weight and new.eps == originals[k].variance_epsilon
    x = (torch.randn(3, 8) * 4).to(torch.bfloat16).requires_grad_()
    for k in ("hf", "f32"):
        out, ref = model[k](x), originals[k](x)
        assert out.dtype == ref.dtype and torch.equal(out, ref)
        g = torch.randn_like(ref)
        assert all(torch.equal(a, b) for a, b in zip(torch.autograd.grad(out, (x, model[k].weight), g),
                                                    torch.autograd.grad(ref, (x, originals[k].weight), g)))
    assert "round_before_weight=True" in repr(model["hf"]) and model["hf"].variance_epsilon == 1e-5
    # Not LlamaRMSNorm's state or not its forward: left as they are.
    hooked, patched, extra = llama_norm(8, torch.bfloat16), llama_norm(8, torch.bfloat16), llama_norm(8, torch.bfloat16)
    hooked.register_forward_hook(lambda *args: None)
    patched.forward = lambda x: x
    extra.register_buffer("scale", torch.ones(8))
    model = torch.nn.ModuleDict({"hooked": hooked, "patched": patched, "extra": extra})
    cute_gemm.optimize(model)
    assert [type(m) for m in model.values()] == [HFLlamaRMSNorm] * 3
    for norm in (torch.nn.LayerNorm(8), extra, torch.nn.RMSNorm(8, eps=1e-6)):
        with pytest.raises(ValueError, match=r"^RMSNorm.from_llama: norm must have a 1-D Parameter weight as its "
                                             r"only state and a number variance_epsilon"):
            cute_gemm.nn.RMSNorm.from_llama(norm)


def test_op_errors_name_the_argument():
    x = torch.randn(2, 8, device="meta", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"^rms_norm: x must be a dense CUDA tensor, got cpu"):
        torch.ops.cute_gemm.rms_norm(torch.randn(2, 8, dtype=torch.bfloat16), None, 1e-6)
    with pytest.raises(TypeError, match=r"^rms_norm: x must be float16, bfloat16 or float32, got torch.float64"):
        torch.ops.cute_gemm.rms_norm(x.double(), None, 1e-6)
    with pytest.raises(TypeError, match=r"^rms_norm: weight must have x's dtype torch.bfloat16, got torch.float32"):
        torch.ops.cute_gemm.rms_norm(x, torch.ones(8, device="meta"), 1e-6)
    with pytest.raises(ValueError, match=r"^rms_norm: weight must be 1-D with x's last dimension D = 8 entries, "
                                         r"got shape \[4\]"):
        torch.ops.cute_gemm.rms_norm(x, torch.ones(4, device="meta", dtype=torch.bfloat16), 1e-6)
    with pytest.raises(ValueError, match=r"^rms_norm: x must have at least one dimension"):
        torch.ops.cute_gemm.rms_norm(torch.ones((), device="meta"), None, 1e-6)
    y = torch.ops.cute_gemm.rms_norm(x.expand(3, 2, 8), torch.ones(8, device="meta", dtype=torch.bfloat16), 1e-6)
    assert y.shape == (3, 2, 8) and y.dtype == torch.bfloat16 and y.is_contiguous()
    y = torch.ops.cute_gemm.rms_norm(x, None, 1e-6, round_before_weight=True)
    assert y.shape == (2, 8) and y.dtype == torch.bfloat16


# ======================================================================================= GPU

@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", [(1, 4096), (1, 1027), (7, 127), (129, 574), (4, 1), (2, 3, 4097), (64, 8)])
@pytest.mark.parametrize("affine", [True, False], ids=["weight", "no_weight"])
def test_op_matches_float64(shape, dtype, affine):
    x = (torch.randn(shape, device="cuda") * 3 + 0.5).to(dtype)
    w = torch.empty(shape[-1], device="cuda").uniform_(0.5, 1.5).to(dtype) if affine else None
    poison = torch.full(shape, float("nan"), device="cuda", dtype=dtype)  # the result lands on freed NaNs
    del poison
    out = torch.ops.cute_gemm.rms_norm(x, w, 1e-6)
    ref = reference(x, w, 1e-6)
    assert out.shape == x.shape and out.dtype == dtype and out.is_contiguous() and not out.isnan().any()
    assert rel_err(out, ref) <= REL_BOUND[dtype]
    # torch's own within one rounding of the dtype
    torch.testing.assert_close(out, F.rms_norm(x, (shape[-1],), w, 1e-6), rtol=REL_BOUND[dtype] * 2, atol=1e-5)


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_op_reads_strided_and_misaligned_rows(dtype):
    base = torch.randn(9, 1030, device="cuda").to(dtype)
    w = torch.randn(1024, device="cuda").to(dtype)
    for x in (base[:, 1:1025],          # rows that start off 16-byte boundaries
              base[::2, :1024],         # a row stride of two rows
              base[:, :1024].t().contiguous().t(),  # column-major: copied to rows
              base[:8, :1024].view(2, 4, 1024).transpose(0, 1)):  # not viewable as rows: reshaped
        out = torch.ops.cute_gemm.rms_norm(x, w, 1e-5)
        assert out.shape == x.shape and rel_err(out, reference(x, w, 1e-5)) <= REL_BOUND[dtype]
    misaligned_w = torch.randn(1025, device="cuda").to(dtype)[1:]
    out = torch.ops.cute_gemm.rms_norm(base[:, :1024], misaligned_w, 1e-5)
    assert rel_err(out, reference(base[:, :1024], misaligned_w, 1e-5)) <= REL_BOUND[dtype]


@gpu
def test_op_empty_and_special_values():
    x = torch.randn(0, 16, device="cuda", dtype=torch.bfloat16)
    assert torch.ops.cute_gemm.rms_norm(x, None, 1e-6).shape == (0, 16)
    x = torch.zeros(2, 16, device="cuda", dtype=torch.bfloat16)
    assert torch.equal(torch.ops.cute_gemm.rms_norm(x, None, 1e-6), x)  # 0 * rsqrt(eps)
    x[1, 3] = float("nan")
    out = torch.ops.cute_gemm.rms_norm(x, None, 1e-6)
    assert not out[0].isnan().any() and out[1].isnan().all()  # as torch's: NaN spreads over its row only


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_op_gradients_are_torchs(dtype):
    x = torch.randn(5, 257, device="cuda").to(dtype).requires_grad_()
    w = torch.randn(257, device="cuda").to(dtype).requires_grad_()
    g = torch.randn(5, 257, device="cuda").to(dtype)
    dx, dw = torch.autograd.grad(torch.ops.cute_gemm.rms_norm(x, w, 1e-6), (x, w), g)
    x64, w64 = x.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    rx, rw = torch.autograd.grad(F.rms_norm(x64, (257,), w64, 1e-6), (x64, w64), g.double())
    assert dx.dtype == dtype and dw.dtype == dtype
    assert rel_err(dx, rx) <= 4 * REL_BOUND[dtype] and rel_err(dw, rw) <= 4 * REL_BOUND[dtype]


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("shape", [(1, 4096), (7, 127), (129, 574), (2, 3, 4097)])
def test_llama_norm_is_its_module(shape, dtype):
    """In place of LlamaRMSNorm the kernel rounds the normalized x before the weight: its 16-bit
    results are the module's but for a rare element one rounding apart (where the two sums of x^2,
    added in other orders, round x * r to neighbouring values), where torch's one rounding differs
    in many; float32 results (no rounding before the weight) within a few of its ulps."""
    hf = llama_norm(shape[-1], dtype, "cuda")
    ours = cute_gemm.nn.RMSNorm.from_llama(hf)
    x = (torch.randn(shape, device="cuda") * 3 + 0.5).to(dtype)
    with torch.no_grad():
        out, ran = ours_ran(lambda: ours(x))
        ref = hf(x)
        once = torch.ops.cute_gemm.rms_norm(x, hf.weight, 1e-5)
    assert ran and out.dtype == dtype and not out.isnan().any()
    assert rel_err(out, reference(x, hf.weight, 1e-5)) <= 2 * REL_BOUND[dtype]
    torch.testing.assert_close(out, ref, rtol=4 * torch.finfo(dtype).eps, atol=0)
    if dtype != torch.float32:
        differ = (out != ref).float().mean().item()
        assert differ <= 5e-3, differ
        if x.numel() >= 4096:
            assert (once != ref).float().mean().item() > max(10 * differ, 0.05)
    if shape == (1, 4096) and dtype == torch.bfloat16:  # once: each dtype and shape would compile anew
        with torch.no_grad():
            assert torch.equal(torch.compile(ours, fullgraph=True)(x), out)
    # The op's gradient with the rounding is the one without it (a cast passes it through; the
    # backward returns a gradient for each argument the call passed, the flag included).
    xg = x.detach().requires_grad_()
    w = hf.weight.detach().requires_grad_()
    g = torch.randn_like(out)
    grads = torch.autograd.grad(torch.ops.cute_gemm.rms_norm(xg, w, 1e-5, True), (xg, w), g)
    plain = torch.autograd.grad(torch.ops.cute_gemm.rms_norm(xg, w, 1e-5), (xg, w), g)
    assert all(torch.equal(a, b) for a, b in zip(grads, plain))


def ours_ran(call):
    """call()'s result, and whether it ran cute_gemm's norm kernel."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        out = call()
        torch.cuda.synchronize()
    return out, any("cute_gemm" in e.name and "rms_norm" in e.name for e in prof.events())


@gpu
def test_module_runs_the_kernel_only_where_no_gradient_is_needed():
    norm = cute_gemm.nn.RMSNorm(64, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(3, 64, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        inference, ran = ours_ran(lambda: norm(x))
    assert ran
    y, ran = ours_ran(lambda: norm(x))  # the weight needs a gradient: torch's, with its backward
    assert not ran and y.requires_grad
    torch.testing.assert_close(inference, y.detach(), rtol=1e-2, atol=1e-3)
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.float16):
        out, ran = ours_ran(lambda: norm(x))  # autocast: torch's module, its rules
        expected = torch.nn.RMSNorm.forward(norm, x)
    assert not ran and out.dtype == expected.dtype and torch.equal(out, expected)


@gpu
def test_module_under_compile_and_in_a_cuda_graph():
    norm = cute_gemm.nn.RMSNorm(4096, device="cuda", dtype=torch.bfloat16).eval()
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(4, 4096, device="cuda", dtype=torch.bfloat16)
    ref = reference(x, norm.weight, torch.finfo(torch.float32).eps)
    with torch.no_grad():
        compiled = torch.compile(norm, fullgraph=True)
        assert rel_err(compiled(x), ref) <= REL_BOUND[torch.bfloat16]
        norm(x)  # warm-up outside the capture
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = norm(x)
        x.copy_(torch.randn_like(x))
        graph.replay()
        assert rel_err(out, reference(x, norm.weight, F32_EPS)) <= REL_BOUND[torch.bfloat16]


@gpu
@pytest.mark.parametrize("rows", [1, 4, 16])
def test_projection_after_the_norm_reads_what_was_written(rows):
    """A decode step's chain: a GEMM that writes x (an SM90 kernel, which lets its successor start
    early), the norm of x (PDL: it must wait for x), and the projection of the norm (the GEMV
    up to 4 rows, launched plainly; an SM90 GEMM with PDL at 16, which must wait for the norm).
    The writing GEMM multiplies by an identity: an exact copy."""
    d, n = 4096, 6144
    norm = cute_gemm.nn.RMSNorm(d, device="cuda", dtype=torch.bfloat16)
    eye = torch.eye(d, device="cuda", dtype=torch.bfloat16)
    w = torch.randn(n, d, device="cuda", dtype=torch.bfloat16)
    x = torch.randn(rows, d, device="cuda", dtype=torch.bfloat16)
    with torch.no_grad():
        for _ in range(3):
            fresh = torch.randn_like(x)
            torch.cuda.synchronize()
            cute_gemm.mm(fresh, eye, out=x)
            y = cute_gemm.mm(norm(x), w.t())
            ref = reference(fresh, norm.weight, F32_EPS) @ w.double().t()
            assert rel_err(y, ref) <= 2 * REL_BOUND[torch.bfloat16]
