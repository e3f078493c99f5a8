"""cute_gemm.nn beyond Linear: GatedMLP (the MLP of Llama, Mistral, Qwen and Gemma), Linear's
residual, and cute_gemm.optimize, which swaps a model's layers in place.

CPU: what optimize swaps and what it leaves, shared Parameters, state_dict keys, training mode,
errors. GPU: values and gradients against float64 references, a model before and after optimize,
the residual's add inside the GEMM, torch.compile and CUDA graphs.
"""

import zlib

import pytest
import torch
import torch.nn.functional as F

import cute_gemm

gpu = pytest.mark.gpu
DTYPES = [torch.float16, torch.bfloat16]
DTYPE_IDS = ["f16", "bf16"]
REL_BOUND = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-4}
GATED = {"silu": F.silu, "gelu": F.gelu, "gelu_tanh": lambda z: F.gelu(z, approximate="tanh")}
GATED_MODULES = {"silu": torch.nn.SiLU, "gelu": torch.nn.GELU, "gelu_tanh": lambda: torch.nn.GELU(approximate="tanh")}


@pytest.fixture(autouse=True)
def _seed(request):
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))


def rel_err(x, ref):
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def randn(*shape, dtype=torch.bfloat16):
    return torch.randn(shape, device="cuda").to(dtype)


# Stand-ins for Hugging Face transformers' modules, with their names and forward.
class LlamaMLP(torch.nn.Module):
    def __init__(self, hidden, inter, act=None, bias=False, device=None, dtype=None):
        super().__init__()
        kw = dict(bias=bias, device=device, dtype=dtype)
        self.gate_proj = torch.nn.Linear(hidden, inter, **kw)
        self.up_proj = torch.nn.Linear(hidden, inter, **kw)
        self.down_proj = torch.nn.Linear(inter, hidden, **kw)
        self.act_fn = act if act is not None else torch.nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class Block(torch.nn.Module):
    """Attention-free pre-norm block: x + proj(norm(x)), then x + mlp(norm(x))."""

    def __init__(self, d, ff, mlp_cls=LlamaMLP, device=None, dtype=None):
        super().__init__()
        self.norm1 = torch.nn.RMSNorm(d, device=device, dtype=dtype)
        self.proj = torch.nn.Linear(d, d, device=device, dtype=dtype)
        self.norm2 = torch.nn.RMSNorm(d, device=device, dtype=dtype)
        self.mlp = mlp_cls(d, ff, device=device, dtype=dtype)

    def forward(self, x):
        x = x + self.proj(self.norm1(x))
        return x + self.mlp(self.norm2(x))


# ======================================================================================= CPU

def test_optimize_swaps_linears_gated_mlps_and_rms_norms_on_the_same_parameters():
    model = torch.nn.Sequential(Block(16, 40), Block(16, 40)).eval()
    params = dict(model.named_parameters())
    keys = list(model.state_dict())
    assert cute_gemm.optimize(model) is model
    for block in model:
        assert type(block.proj) is cute_gemm.nn.Linear
        assert type(block.norm1) is cute_gemm.nn.RMSNorm and type(block.norm2) is cute_gemm.nn.RMSNorm
        assert type(block.mlp) is cute_gemm.nn.GatedMLP and block.mlp.activation == "silu"
        assert all(type(m) is cute_gemm.nn.Linear for m in (block.mlp.gate_proj, block.mlp.up_proj,
                                                             block.mlp.down_proj))
        assert not block.training and not block.mlp.training and not block.mlp.down_proj.training
    assert dict(model.named_parameters()) == params  # the same Parameter objects, under the same names
    assert list(model.state_dict()) == keys
    before = repr(model)
    cute_gemm.optimize(model)
    assert repr(model) == before


@pytest.mark.parametrize("act, name", [(torch.nn.SiLU(), "silu"), (torch.nn.GELU(), "gelu"),
                                       (torch.nn.GELU(approximate="tanh"), "gelu_tanh")])
def test_optimize_reads_the_gated_activation(act, name):
    mlp = LlamaMLP(8, 24, act=act)
    model = cute_gemm.optimize(torch.nn.ModuleDict({"mlp": mlp}))
    assert type(model["mlp"]) is cute_gemm.nn.GatedMLP and model["mlp"].activation == name
    assert model["mlp"].gate_proj.weight is mlp.gate_proj.weight


def test_optimize_leaves_what_it_does_not_know():
    class OtherMLP(LlamaMLP):  # a class name optimize does not know: its forward could be anything
        pass
    unknown_act = LlamaMLP(8, 24, act=torch.nn.ReLU())
    model = torch.nn.ModuleDict({"other": OtherMLP(8, 24), "relu_mlp": unknown_act,
                                 "attn": torch.nn.MultiheadAttention(8, 2), "norm": torch.nn.LayerNorm(8)})
    cute_gemm.optimize(model)
    # Not gated MLPs: their Linear layers are swapped one by one.
    for name in ("other", "relu_mlp"):
        assert type(model[name]) is not cute_gemm.nn.GatedMLP
        assert type(model[name].gate_proj) is cute_gemm.nn.Linear
    # Subclasses of nn.Linear (MultiheadAttention's out_proj, which it calls through F) stay.
    assert type(model["attn"].out_proj) is torch.nn.modules.linear.NonDynamicallyQuantizableLinear
    assert type(model["norm"]) is torch.nn.LayerNorm
    # Named by the caller, a class (or its name) is taken as a gated MLP.
    root = OtherMLP(8, 24)
    assert cute_gemm.optimize(root, gated_mlp_classes=(OtherMLP,)) is root  # in place: the root stays
    holder = torch.nn.ModuleDict({"m": OtherMLP(8, 24)})
    cute_gemm.optimize(holder, gated_mlp_classes=("OtherMLP",))
    assert type(holder["m"]) is cute_gemm.nn.GatedMLP


def test_optimize_errors():
    with pytest.raises(ValueError, match=r"^optimize: model must be a torch.nn.Module, got Tensor$"):
        cute_gemm.optimize(torch.randn(2))


def test_gated_mlp_loads_a_llama_mlp_state_dict():
    theirs = LlamaMLP(8, 24, dtype=torch.bfloat16)
    ours = cute_gemm.nn.GatedMLP(8, 24, dtype=torch.bfloat16)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == [
        "gate_proj.weight", "up_proj.weight", "down_proj.weight"]
    ours.load_state_dict(theirs.state_dict())
    assert all(torch.equal(ours.state_dict()[k], v) for k, v in theirs.state_dict().items())
    assert repr(ours).startswith("GatedMLP(\n  hidden_size=8, intermediate_size=24, activation='silu'\n")
    with_bias = cute_gemm.nn.GatedMLP(8, 24, bias=True)
    assert list(with_bias.state_dict()) == ["gate_proj.weight", "gate_proj.bias", "up_proj.weight", "up_proj.bias",
                                            "down_proj.weight", "down_proj.bias"]


def test_gated_mlp_errors():
    with pytest.raises(ValueError, match=r"^GatedMLP: activation must be one of 'silu', 'gelu', 'gelu_tanh', "
                                         r"got 'relu'$"):
        cute_gemm.nn.GatedMLP(8, 24, activation="relu")
    lin = torch.nn.Linear
    with pytest.raises(ValueError, match=r"^GatedMLP.from_linears: gate_proj and up_proj must map hidden -> "
                                         r"intermediate and down_proj intermediate -> hidden, got"):
        cute_gemm.nn.GatedMLP.from_linears(lin(8, 24), lin(8, 24), lin(8, 24))
    with pytest.raises(ValueError, match=r"^GatedMLP.from_linears: the three layers must all have a bias or all"):
        cute_gemm.nn.GatedMLP.from_linears(lin(8, 24), lin(8, 24, bias=False), lin(24, 8))


def test_linear_residual_shape_is_checked_first():
    layer = cute_gemm.nn.Linear(8, 4, bias=False)
    with pytest.raises(ValueError, match=r"^Linear: residual must have the output's shape \[3, 4\], got \[3, 8\]$"):
        layer(torch.randn(3, 8), residual=torch.randn(3, 8))
    with pytest.raises(ValueError, match=r"^Linear: residual must have the output's shape \[3, 4\], got float$"):
        layer(torch.randn(3, 8), residual=1.0)


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, device="meta", dtype=dtype)


def test_gated_mm_fake_shapes_and_errors():
    gated = torch.ops.cute_gemm.gated_mm
    out = gated(meta(7, 64), meta(40, 64), meta(40, 64), activation="gelu")
    assert out.shape == (7, 40) and out.dtype == torch.bfloat16
    for args, exc, pattern in [
        ((meta(7, 64), meta(40, 63), meta(40, 63)), ValueError, r"^gated_mm: w_gate's columns \(K\) must equal x's"),
        ((meta(7, 64), meta(40, 64), meta(41, 64)), ValueError, r"^gated_mm: w_up must have w_gate's shape \[40, 64\]"),
        ((meta(7, 64), meta(40, 64), meta(40, 64, dtype=torch.float16)), TypeError,
         r"^gated_mm: x and w_up must have the same dtype"),
        ((meta(7, 64, 1), meta(40, 64), meta(40, 64)), ValueError, r"^gated_mm: x must be 2-D \(M, K\)"),
    ]:
        with pytest.raises(exc, match=pattern):
            gated(*args)
    with pytest.raises(ValueError, match=r"^gated_mm: activation must be one of None, 'relu', 'gelu'"):
        gated(meta(7, 64), meta(40, 64), meta(40, 64), activation="tanh")


def test_gated_mm_checks_reach_cpu_tensors_and_refuse_gradients():
    x, w = torch.randn(3, 8, dtype=torch.bfloat16), torch.randn(4, 8, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"^gated_mm: x must be a CUDA tensor"):
        torch.ops.cute_gemm.gated_mm(x, w, w)
    with pytest.raises(RuntimeError, match=r"gated_mm: not differentiable"):
        torch.ops.cute_gemm.gated_mm(x, w.requires_grad_(), w)


# ======================================================================================= GPU

def gated_ref(x, w_gate, w_up, activation):
    x64 = x.double()
    return GATED[activation](x64 @ w_gate.double().t()) * (x64 @ w_up.double().t())


@gpu
@pytest.mark.parametrize("activation", list(GATED))
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("m, f, k", [(1, 8, 64), (7, 1024, 4096), (127, 4104, 512), (574, 64, 129), (129, 127, 64),
                                     (4097, 2048, 256)])
def test_gated_mm_matches_float64(monkeypatch, m, f, k, dtype, activation):
    """act(x w_gate^T) * (x w_up^T): the fused sm90 kernel where x, the weights and C are read and
    written in place (K and F multiples of 8; (7, 1024, 4096) with K slices), elsewhere (K = 129,
    F = 127) two GEMMs with float32 results and the product; both within the dtype's rounding of the
    float64 product and twice torch's own error. The output is allocated where a NaN-filled block of
    its size was just freed (unwritten elements show). (One row would take the decode GEMV, which
    tests/test_gemv.py covers.)"""
    monkeypatch.setenv("CUTE_GEMM_GEMV", "0")
    x, w_gate, w_up = randn(m, k, dtype=dtype), randn(f, k, dtype=dtype), randn(f, k, dtype=dtype)
    torch.full((m, f), float("nan"), dtype=dtype, device="cuda")
    out = torch.ops.cute_gemm.gated_mm(x, w_gate, w_up, activation=activation)
    ref = gated_ref(x, w_gate, w_up, activation)
    theirs = GATED[activation](x @ w_gate.t()) * (x @ w_up.t())
    assert out.shape == (m, f) and out.dtype == dtype and not out.isnan().any()
    err, err_torch = rel_err(out, ref), rel_err(theirs, ref)
    assert err <= 2 * REL_BOUND[dtype] and err <= 2 * err_torch + 1e-5, (err, err_torch)


@gpu
@pytest.mark.parametrize("splits", [1, 3])
@pytest.mark.parametrize("row", [0, 1, 2, 4])
def test_gated_mm_rows_pinned(monkeypatch, row, splits):
    """Every gated row (128x256, alone and in 2x1 clusters; 128x128; the decode rows' 64x128), whole
    and in three K slices, on tiles that M and F leave partly empty (300 rows: in 2x1 clusters, a
    block whose tile lies past M): the pinned kernel runs (its name) and matches float64."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the gated kernels are the sm90 family's")
    monkeypatch.setenv("CUTE_GEMM_SM90_CONFIG", str(row))
    monkeypatch.setenv("CUTE_GEMM_SPLITS", str(splits))
    for dtype in DTYPES:
        x, w_gate, w_up = randn(300, 2048, dtype=dtype), randn(1000, 2048, dtype=dtype), randn(1000, 2048, dtype=dtype)
        torch.full((300, 1000), float("nan"), dtype=dtype, device="cuda")
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            out = torch.ops.cute_gemm.gated_mm(x, w_gate, w_up)
            torch.cuda.synchronize()
        names = [e.name for e in prof.events() if "gemm_kernel" in e.name]
        assert len(names) == 1 and f", {row}, false, true>" in names[0], names
        assert rel_err(out, gated_ref(x, w_gate, w_up, "silu")) <= 2 * REL_BOUND[dtype]


@gpu
def test_gated_mm_stream_k_tail(monkeypatch):
    """CUTE_GEMM_STREAM_K=1 gives the gated kernel a stream-K tail (tests/test_plan.py checks that
    the plan has one): 1 x 9000 on row 4 is 141 tiles of 64x128 on 132 SMs, every tile's K range cut
    between blocks whose partials the last one sums before act(gate) * up. The output is allocated
    where a NaN-filled block of its size was just freed (unwritten elements show)."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the gated kernels are the sm90 family's")
    monkeypatch.setenv("CUTE_GEMM_STREAM_K", "1")
    monkeypatch.setenv("CUTE_GEMM_GEMV", "0")  # (one row would take the decode GEMV)
    for m in (1, 40):
        x, w_gate, w_up = randn(m, 2048), randn(9000, 2048), randn(9000, 2048)
        torch.full((m, 9000), float("nan"), dtype=x.dtype, device="cuda")
        out = torch.ops.cute_gemm.gated_mm(x, w_gate, w_up)
        assert not out.isnan().any() and rel_err(out, gated_ref(x, w_gate, w_up, "silu")) <= 2 * REL_BOUND[x.dtype]


@gpu
def test_gated_mm_is_one_kernel_where_it_fits():
    x, w_gate, w_up = randn(33, 512), randn(1024, 512), randn(1024, 512)
    torch.ops.cute_gemm.gated_mm(x, w_gate, w_up)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        torch.ops.cute_gemm.gated_mm(x, w_gate, w_up)
        torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    if torch.cuda.get_device_capability() == (9, 0):
        assert len(kernels) == 1 and "gemm_kernel" in kernels[0], kernels


@gpu
@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("activation", list(GATED))
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("rows, hidden, inter", [(1, 64, 129), (7, 127, 72), (574, 128, 4096)])
def test_gated_mlp_matches_float64(rows, hidden, inter, dtype, activation, grad):
    """Where a gradient is needed (grad), gate and up are two GEMMs and torch's product; without
    (no_grad), one gated_mm."""
    mlp = cute_gemm.nn.GatedMLP(hidden, inter, device="cuda", dtype=dtype, activation=activation)
    x = randn(rows, hidden, dtype=dtype)
    w = [m.weight.double() for m in (mlp.gate_proj, mlp.up_proj, mlp.down_proj)]
    ref = (GATED[activation](x.double() @ w[0].t()) * (x.double() @ w[1].t())) @ w[2].t()
    theirs = LlamaMLP(hidden, inter, act=GATED_MODULES[activation](), device="cuda", dtype=dtype)
    theirs.load_state_dict(mlp.state_dict())
    with torch.set_grad_enabled(grad):
        out = mlp(x)
    assert out.dtype == dtype and out.shape == (rows, hidden) and not out.isnan().any()
    err, err_torch = rel_err(out, ref), rel_err(theirs(x), ref)
    assert err <= 2 * REL_BOUND[dtype] and err <= 2 * err_torch + 1e-5, (err, err_torch)


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_gated_mlp_gradients_match_float64(dtype):
    mlp = cute_gemm.nn.GatedMLP(129, 200, device="cuda", dtype=dtype)
    x, res = randn(3, 7, 129, dtype=dtype).requires_grad_(), randn(3, 7, 129, dtype=dtype).requires_grad_()
    out = mlp(x, residual=res)
    grad = torch.randn_like(out)
    params = [x, res, *mlp.parameters()]
    got = torch.autograd.grad(out, params, grad)
    xs = [p.detach().double().requires_grad_() for p in params]
    ref = xs[1] + (F.silu(xs[0] @ xs[2].t()) * (xs[0] @ xs[3].t())) @ xs[4].t()
    want = torch.autograd.grad(ref, xs, grad.double())
    for p, g, w in zip(params, got, want):
        assert g.shape == p.shape and g.dtype == p.dtype and g.stride() == p.stride()
        assert rel_err(g, w) <= 2 * REL_BOUND[dtype], rel_err(g, w)


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_linear_residual_is_added_in_the_epilogue(dtype):
    """A bias-free Linear with a residual of its dtype is one GEMM kernel (addmm's C term), and the
    result is residual + x W^T within the dtype's rounding; the residual's gradient is the output's."""
    # K = 128 and N = 72: rows of 16-byte vectors, read and written in place (no operand copies).
    layer = cute_gemm.nn.Linear(128, 72, bias=False, device="cuda", dtype=dtype)
    x, res = randn(2, 33, 128, dtype=dtype), randn(2, 33, 72, dtype=dtype)
    ref = res.double() + x.double() @ layer.weight.double().t()
    with torch.no_grad():
        layer(x, residual=res)  # warm-up: plan caches, first-call allocations
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            out = layer(x, residual=res)
            torch.cuda.synchronize()
    kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
    assert len(kernels) == 1, kernels
    assert out.dtype == dtype and rel_err(out, ref) <= REL_BOUND[dtype]
    res.requires_grad_()
    out = layer(x, residual=res)
    grad = torch.randn_like(out)
    (g,) = torch.autograd.grad(out, [res], grad)
    assert torch.equal(g, grad)


@gpu
def test_linear_residual_follows_torch_dtypes_elsewhere():
    """With a bias, an activation, or a residual of another dtype (float32 under autocast), the add
    runs after the GEMM as `residual + layer(x)`: the same dtype as torch's."""
    dtype = torch.bfloat16
    for kw in ({"bias": True}, {"bias": False, "activation": "relu"}):
        layer = cute_gemm.nn.Linear(64, 48, device="cuda", dtype=dtype, **kw)
        x, res = randn(5, 64, dtype=dtype), randn(5, 48, dtype=dtype)
        torch.testing.assert_close(layer(x, residual=res), res + layer(x))
    layer = cute_gemm.nn.Linear(64, 48, bias=False, device="cuda")
    x, res = randn(5, 64, dtype=torch.float32), randn(5, 48, dtype=torch.float32)
    with torch.autocast("cuda", dtype=dtype):
        out = layer(x, residual=res)
        theirs = res + F.linear(x, layer.weight)
    assert out.dtype == theirs.dtype == torch.float32
    assert rel_err(out, theirs.double()) <= REL_BOUND[dtype]


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_optimized_model_matches_the_original(dtype):
    torch.manual_seed(3)
    model = torch.nn.Sequential(Block(128, 344, device="cuda", dtype=dtype),
                                Block(128, 344, device="cuda", dtype=dtype))
    x = randn(4, 9, 128, dtype=dtype)
    ref64 = torch.func.functional_call(model, {k: v.double() for k, v in model.state_dict().items()},
                                       (x.double(),))
    want = model(x)
    cute_gemm.optimize(model)
    assert type(model[0].mlp) is cute_gemm.nn.GatedMLP
    got = model(x)
    err, err_torch = rel_err(got, ref64), rel_err(want, ref64)
    assert err <= 2 * err_torch + 1e-5, (err, err_torch)


@gpu
def test_gated_mlp_compiles_fullgraph_and_captures_in_a_cuda_graph():
    mlp = cute_gemm.nn.GatedMLP(128, 344, device="cuda", dtype=torch.bfloat16)
    x, res = randn(9, 128), randn(9, 128)
    with torch.no_grad():
        eager = mlp(x, residual=res)
        torch._dynamo.reset()
        compiled = torch.compile(mlp, fullgraph=True)(x, residual=res)
        assert rel_err(compiled, eager.double()) <= REL_BOUND[torch.bfloat16]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream):
            mlp(x, residual=res)
        torch.cuda.current_stream().wait_stream(stream)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            out = mlp(x, residual=res)
        x.copy_(randn(9, 128))
        graph.replay()
        torch.testing.assert_close(out, mlp(x, residual=res), rtol=0, atol=0)
