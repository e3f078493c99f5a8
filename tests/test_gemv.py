"""The decode GEMV (csrc/gemv.cu; csrc/gemv_plan.cpp, choose_gemv): a few rows of x against a weight's
rows, x @ w.t(), on the CUDA cores. Against float64 over rows, odd sizes, padded rows, every
epilogue and gated_mm; where the rule takes it; C written through any strides."""

import pytest
import torch
import torch.nn.functional as F

import cute_gemm

pytestmark = pytest.mark.gpu

DTYPES = [torch.float16, torch.bfloat16]
DTYPE_IDS = ["f16", "bf16"]
# ||out - ref|| / ||ref||: the output's rounding dominates (fp32 sums); float32 outputs carry only
# the sums' own error.
REL_BOUND = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-4}
ACTS = {"relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"), "silu": F.silu}


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def rows(n, k, dtype, pad=0):
    """An (n, k) operand whose rows start on 16-byte boundaries at any k: a view of the first k
    columns of rows padded to a multiple of 8 elements (plus pad more)."""
    width = -(-k // 8) * 8 + pad
    return torch.randn(n, width, device="cuda").to(dtype)[:, :k]


def rel_err(x, ref):
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def poisoned(shape, dtype, call):
    """call()'s result, allocated where a NaN-filled block of its size was just freed."""
    poison = torch.full(shape, float("nan"), dtype=dtype, device="cuda")
    del poison
    return call()


def gemv_family(*args, **kwargs):
    return cute_gemm.explain(*args, **kwargs)["family"]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("m", [1, 2, 3, 4, 5, 8])
@pytest.mark.parametrize("n, k", [(1, 1), (7, 7), (129, 127), (4097, 129), (3, 4104), (256, 8192), (1000, 2050)])
def test_gemv_matches_float64(monkeypatch, m, n, k, dtype):
    """Every row count the kernels have (1, 2, 4, 8, and 3 and 5 on the next ones), K below one
    16-byte load, not a whole number of them, and long; as many weight rows as warps or far more."""
    monkeypatch.setenv("CUTE_GEMM_GEMV", "1")
    x, w = rows(m, k, dtype), rows(n, k, dtype, pad=8)
    assert gemv_family(x, w.t()) == "gemv"
    out = poisoned((m, n), dtype, lambda: cute_gemm.mm(x, w.t()))
    ref = x.double() @ w.double().t()
    assert out.shape == (m, n) and out.dtype == dtype and not out.isnan().any()
    err, err_torch = rel_err(out, ref), rel_err(x @ w.t(), ref)
    assert err <= REL_BOUND[dtype] and err <= 2 * err_torch + 1e-5, (err, err_torch)
    assert torch.equal(out, cute_gemm.mm(x, w.t()))  # the same bits again


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_gemv_epilogues(monkeypatch, dtype):
    """addmm's bias, beta and alpha, inputs (1, N), (M, 1) and (M, N) of any strides, every
    activation; a float32 output; C written into views of any strides (mm's out=)."""
    monkeypatch.setenv("CUTE_GEMM_GEMV", "1")
    m, n, k = 3, 1031, 520
    x, w = rows(m, k, dtype), rows(n, k, dtype)
    prod = x.double() @ w.double().t()
    bias = torch.randn(n, device="cuda").to(dtype)
    full = torch.randn(n, m, device="cuda").to(dtype).t()  # an (M, N) input, column-major
    column = torch.randn(m, 1, device="cuda").to(dtype)
    for inp in (bias, bias[None, :], column, full):
        for act in (None, *ACTS):
            assert gemv_family(x, w.t(), inp, beta=0.5, alpha=2.0, activation=act) == "gemv"
            out = poisoned((m, n), dtype, lambda: cute_gemm.addmm(inp, x, w.t(), beta=0.5, alpha=2.0, activation=act))
            ref = 2.0 * prod + 0.5 * inp.double()
            ref = ACTS[act](ref) if act else ref
            assert not out.isnan().any() and rel_err(out, ref) <= REL_BOUND[dtype], (act, inp.stride())
    f32 = cute_gemm.mm(x, w.t(), out_dtype=torch.float32)
    assert f32.dtype == torch.float32 and rel_err(f32, prod) <= REL_BOUND[torch.float32]
    for out in (torch.full((n, m), float("nan"), dtype=dtype, device="cuda").t(),  # column-major
                torch.full((m, 2 * n), float("nan"), dtype=dtype, device="cuda")[:, ::2]):  # every other column
        cute_gemm.mm(x, w.t(), out=out)
        assert rel_err(out, prod) <= REL_BOUND[dtype], out.stride()


@pytest.mark.parametrize("m", [1, 3, 4])
@pytest.mark.parametrize("n, k", [(1, 1 << 20), (7, 100003), (64, 65536), (300, 16392), (1000, 4104)])
def test_gemv_few_long_rows(monkeypatch, m, n, k):
    """Weights of few long rows (up to 2^20 elements a row, fewer rows than the grid's warps): plain
    and gated, the same bits again."""
    monkeypatch.setenv("CUTE_GEMM_GEMV", "1")
    dtype = torch.bfloat16
    x, w, w2 = rows(m, k, dtype), rows(n, k, dtype), rows(n, k, dtype)
    out = poisoned((m, n), dtype, lambda: cute_gemm.mm(x, w.t()))
    x64 = x.double()
    ref = x64 @ w.double().t()
    assert not out.isnan().any() and rel_err(out, ref) <= REL_BOUND[dtype]
    assert torch.equal(out, cute_gemm.mm(x, w.t()))
    gated = poisoned((m, n), dtype, lambda: torch.ops.cute_gemm.gated_mm(x, w, w2))
    assert rel_err(gated, F.silu(ref) * (x64 @ w2.double().t())) <= 2 * REL_BOUND[dtype]


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_gemv_operand_views(monkeypatch, dtype):
    """One row of x at any row stride (an odd one: one row needs none) and K not a multiple of 8;
    bmm of one batch; a weight whose rows start off 16 bytes goes to the tile kernels (or their
    copies), right either way."""
    monkeypatch.setenv("CUTE_GEMM_GEMV", "1")
    n, k = 777, 1001
    w = rows(n, k, dtype)
    x = torch.randn(2, 1003, device="cuda").to(dtype)[:1, :k]  # row stride 1003, base aligned
    for a, b in ((x, w.t()), (x[:, :1000], w[:, :1000].t())):
        assert gemv_family(a, b) == "gemv"
        ref = a.double() @ b.double()
        assert rel_err(poisoned((1, n), dtype, lambda: cute_gemm.mm(a, b)), ref) <= REL_BOUND[dtype]
    out = cute_gemm.bmm(x[None], w.t()[None])
    assert gemv_family(x[None], w.t()[None]) == "gemv" and out.shape == (1, 1, n)
    assert rel_err(out[0], x.double() @ w.double().t()) <= REL_BOUND[dtype]
    off = torch.randn(n, k + 9, device="cuda").to(dtype)[:, 1:k + 1]  # rows 2 bytes past 16
    assert gemv_family(x, off.t()) != "gemv"
    assert rel_err(cute_gemm.mm(x, off.t()), x.double() @ off.double().t()) <= REL_BOUND[dtype]


@pytest.mark.parametrize("activation", ["silu", "gelu", "gelu_tanh"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("m, f, k", [(1, 14336, 4096), (3, 1000, 2050), (8, 7, 9)])
def test_gemv_gated(monkeypatch, m, f, k, dtype, activation):
    """gated_mm: act(x w_gate^T) * (x w_up^T) from both weights' rows in one pass."""
    monkeypatch.setenv("CUTE_GEMM_GEMV", "1")
    x, w_gate, w_up = rows(m, k, dtype), rows(f, k, dtype), rows(f, k, dtype)
    out = poisoned((m, f), dtype, lambda: torch.ops.cute_gemm.gated_mm(x, w_gate, w_up, activation=activation))
    x64 = x.double()
    ref = ACTS[activation](x64 @ w_gate.double().t()) * (x64 @ w_up.double().t())
    theirs = ACTS[activation](x @ w_gate.t()) * (x @ w_up.t())
    assert not out.isnan().any()
    err, err_torch = rel_err(out, ref), rel_err(theirs, ref)
    assert err <= 2 * REL_BOUND[dtype] and err <= 2 * err_torch + 1e-5, (err, err_torch)


def test_gemv_by_rule(monkeypatch):
    """Unpinned on sm_90: x @ w.t() with at most 4 rows runs the GEMV (its kernel, nothing else);
    5 rows, x @ w (the weight N-major), a pinned family or CUTE_GEMM_GEMV=0 keep the tile kernels."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the rule takes the GEMV on sm_90 GPUs only")
    for knob in ("CUTE_GEMM_GEMV", "CUTE_GEMM_FAMILY", "CUTE_GEMM_SM90_CONFIG", "CUTE_GEMM_SWAP_CONFIG",
                 "CUTE_GEMM_SPLITS"):
        monkeypatch.delenv(knob, raising=False)
    w = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    for m in (1, 4):
        x = torch.randn(m, 4096, device="cuda", dtype=torch.bfloat16)
        assert gemv_family(x, w.t()) == "gemv"
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            cute_gemm.mm(x, w.t())
            torch.cuda.synchronize()
        kernels = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        assert len(kernels) == 1 and "gemv_kernel" in kernels[0], kernels
    x = torch.randn(5, 4096, device="cuda", dtype=torch.bfloat16)
    assert gemv_family(x, w.t()) == "sm90" and gemv_family(x[:1], w) == "sm90"
    monkeypatch.setenv("CUTE_GEMM_GEMV", "0")
    assert gemv_family(x[:1], w.t()) == "sm90"
    monkeypatch.setenv("CUTE_GEMM_GEMV", "")
    monkeypatch.setenv("CUTE_GEMM_FAMILY", "sm80")
    assert gemv_family(x[:1], w.t()) == "sm80"


def test_gemv_in_a_graph_and_on_a_side_stream(monkeypatch):
    """A plain launch on the current stream: captured in a CUDA graph and replayed on new inputs,
    and on a side stream, it gives the eager call's bits."""
    monkeypatch.setenv("CUTE_GEMM_GEMV", "1")
    x, w = rows(2, 4096, torch.bfloat16), rows(6144, 4096, torch.bfloat16)
    want = cute_gemm.mm(x, w.t())
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        again = cute_gemm.mm(x, w.t())
        cute_gemm.mm(x, w.t())  # (warm before the capture)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = cute_gemm.mm(x, w.t())
    x.copy_(torch.randn_like(x))
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(again, want)
    assert torch.equal(out, cute_gemm.mm(x, w.t()))
