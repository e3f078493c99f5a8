"""cute_gemm as a first-class PyTorch op: mm's out= and out_dtype, addmm with its fused epilogue,
bmm, matmul, autograd, nn.Linear, opcheck, torch.compile, streams and CUDA graphs (GPU), and the
registration, the fake (meta) implementations and the Python-level errors (CPU).

Every GPU result is compared with a float64 reference: relative Frobenius error within a bound
tied to the output dtype and, where torch computes the same thing in the same dtype, within twice
torch's own error. out= tensors are filled with NaN first, so an element left unwritten fails.
"""

import itertools
import zlib
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.utils._python_dispatch import TorchDispatchMode

import cute_gemm
from cute_gemm._build_paths import config_names
from kernel_kinds import kernel_names, sm90_kernel_kinds, sm90_kind

ops = torch.ops.cute_gemm
gpu = pytest.mark.gpu

DTYPES = [torch.float16, torch.bfloat16]
DTYPE_IDS = ["f16", "bf16"]
# Bound on ||out - ref|| / ||ref||: rounding of the output to its dtype dominates (fp32 accumulate);
# float32 outputs (out_dtype, or float32 inputs without TF32) carry only the accumulation error.
REL_BOUND = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-4}
TF32_BOUND = 1e-2
ACTS = {
    None: lambda z: z,
    "relu": F.relu,
    "gelu": F.gelu,
    "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"),
    "silu": F.silu,
}
LAYOUTS = ["nn", "nt", "tn", "tt"]
SHAPES = [(1, 1, 1), (7, 7, 7), (1, 574, 129), (127, 129, 7), (129, 127, 574), (574, 574, 127)]  # (M, N, K)


@pytest.fixture(autouse=True)
def _seed(request):
    # Fresh inputs per test, the same ones on every run of that test.
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))


def operand(rows, cols, major="n", dtype=torch.bfloat16):
    """A (rows, cols) CUDA operand: row-major ("n") or the transposed view of a (cols, rows) tensor ("t")."""
    if major == "n":
        return torch.randn(rows, cols, device="cuda").to(dtype)
    return torch.randn(cols, rows, device="cuda").to(dtype).t()


def randn(*shape, dtype=torch.bfloat16):
    return torch.randn(shape, device="cuda").to(dtype)


def nan_out(shape, dtype):
    return torch.full(shape, float("nan"), dtype=dtype, device="cuda")


def poisoned(fn, shape, dtype):
    """fn() right after a NaN-filled block of the result's size was freed: the caching allocator
    hands that block out next, so an element the kernel leaves unwritten shows up as NaN (best
    effort: an op that allocates a temporary first gets the block for that)."""
    nan_out(shape, dtype)
    return fn()


def rel_err(x, ref):
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def check(out, ref, dtype, theirs=None, bound=None):
    """out against the float64 reference ref; theirs: torch's result in the same dtype, if any."""
    assert out.shape == ref.shape and out.dtype == dtype, (out.shape, ref.shape, out.dtype, dtype)
    assert not out.isnan().any(), "unwritten (NaN-poisoned) or NaN output elements"
    err = rel_err(out, ref)
    assert err <= (bound or REL_BOUND[dtype]), err
    # The same rounding budget as torch: an fp16 accumulator or a dropped k-block would blow it.
    # Not for a handful of elements, where one of them rounding the other way decides it.
    if theirs is not None and ref.numel() >= 32:
        err_torch = rel_err(theirs, ref)
        assert err <= 2 * err_torch + 1e-5, (err, err_torch)


def addmm_ref(input, a, b, beta=1, alpha=1, activation=None):
    z = alpha * (a.double() @ b.double())
    if beta != 0:
        z = z + beta * input.double()
    return ACTS[activation](z)


def grads_vs_reference(fn, ref_fn, inputs):
    """Gradients of fn at inputs and of ref_fn at float64 copies of them, for one random upstream
    gradient drawn in fn's output dtype (so both graphs see the same numbers)."""
    xs = [x.detach().requires_grad_() for x in inputs]
    out = fn(*xs)
    grad = torch.randn_like(out)
    got = torch.autograd.grad(out, xs, grad)
    xs64 = [x.detach().double().requires_grad_() for x in inputs]
    ref = ref_fn(*xs64)
    want = torch.autograd.grad(ref, xs64, grad.double())
    for x, g, w in zip(inputs, got, want):
        assert g.shape == x.shape and g.dtype == x.dtype
        assert not g.isnan().any()
        dtype = x.dtype
        assert rel_err(g, w) <= 2 * REL_BOUND[dtype], (rel_err(g, w), x.shape)
    return out, ref


# ======================================================================================= CPU
# These run wherever the extension is built, GPU or not (as in CI).

SCHEMAS = {
    "mm.default": "cute_gemm::mm(Tensor a, Tensor b, *, ScalarType? out_dtype=None) -> Tensor",
    "mm.out": "cute_gemm::mm.out(Tensor a, Tensor b, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)",
    "addmm.default": "cute_gemm::addmm(Tensor input, Tensor a, Tensor b, *, float beta=1., float alpha=1., "
                     "str? activation=None, ScalarType? out_dtype=None) -> Tensor",
    "addmm.out": "cute_gemm::addmm.out(Tensor input, Tensor a, Tensor b, *, float beta=1., float alpha=1., "
                 "str? activation=None, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)",
    "bmm.default": "cute_gemm::bmm(Tensor a, Tensor b, *, ScalarType? out_dtype=None) -> Tensor",
    "bmm.out": "cute_gemm::bmm.out(Tensor a, Tensor b, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)",
    "gated_mm.default": "cute_gemm::gated_mm(Tensor x, Tensor w_gate, Tensor w_up, *, str? activation=\"silu\") "
                        "-> Tensor",
    "mm_row_sums.default": "cute_gemm::mm_row_sums(Tensor a, Tensor b) -> (Tensor, Tensor)",
    "softmax_cross_entropy_.default": "cute_gemm::softmax_cross_entropy_(Tensor(a!) logits, Tensor target, "
                                      "int ignore_index, Tensor? scale=None) -> Tensor",
}


@pytest.mark.parametrize("name", list(SCHEMAS))
def test_schema_is_registered(name):
    packet, overload = name.split(".")
    assert str(getattr(getattr(ops, packet), overload)._schema) == SCHEMAS[name]


def test_public_api():
    assert set(cute_gemm.__all__) == {"mm", "addmm", "bmm", "matmul", "explain", "nn", "optimize",
                                      "linear_cross_entropy"}
    assert issubclass(cute_gemm.nn.Linear, torch.nn.Linear)


def meta(*shape, dtype=torch.bfloat16):
    return torch.empty(shape, dtype=dtype, device="meta")


def test_meta_shapes_of_every_op():
    a, b = meta(5, 7), meta(7, 3)
    for dtype in (None, torch.bfloat16, torch.float32):
        want = dtype or torch.bfloat16
        c = ops.mm(a, b, out_dtype=dtype)
        assert c.shape == (5, 3) and c.dtype == want and c.device.type == "meta"
        out = meta(5, 3, dtype=want)
        assert ops.mm.out(a, b, out_dtype=dtype, out=out) is out
        c = ops.bmm(meta(4, 5, 7), meta(4, 7, 3), out_dtype=dtype)
        assert c.shape == (4, 5, 3) and c.dtype == want
        out = meta(4, 5, 3, dtype=want)
        assert ops.bmm.out(meta(4, 5, 7), meta(4, 7, 3), out_dtype=dtype, out=out) is out
    for shape in [(3,), (1, 3), (5, 1), (5, 3), ()]:
        c = ops.addmm(meta(*shape), a, b, beta=0.5, alpha=2, activation="gelu")
        assert c.shape == (5, 3) and c.dtype == torch.bfloat16
        out = meta(5, 3)
        assert ops.addmm.out(meta(*shape), a, b, activation="relu", out=out) is out
    c = ops.addmm(meta(3, dtype=torch.float32), a, b, out_dtype=torch.float32)
    assert c.shape == (5, 3) and c.dtype == torch.float32


def test_mm_row_sums_meta_and_refusals():
    c, sums = ops.mm_row_sums(meta(5, 7).t(), meta(5, 3))  # a = dY^T (7 x 5), b = x (5 x 3)
    assert (c.shape, sums.shape, sums.dtype) == ((7, 3), (7,), torch.bfloat16)
    with pytest.raises(ValueError, match=r"mm_row_sums: a's columns \(K\) must equal b's rows"):
        ops.mm_row_sums(meta(5, 7), meta(5, 3))
    with pytest.raises(RuntimeError, match="mm_row_sums: not differentiable"):
        ops.mm_row_sums(meta(5, 7).requires_grad_(), meta(7, 3))


def test_fake_tensor_mode_through_the_python_api():
    with FakeTensorMode():
        x = torch.empty(2, 9, 16, dtype=torch.float16)
        w = torch.empty(24, 16, dtype=torch.float16)
        bias = torch.empty(24, dtype=torch.float16)
        y = cute_gemm.addmm(bias, x.reshape(18, 16), w.t(), activation="silu")
        assert y.shape == (18, 24) and y.dtype == torch.float16
        assert cute_gemm.matmul(x, w.t()).shape == (2, 9, 24)
        assert cute_gemm.bmm(x, x.mT, out_dtype=torch.float32).dtype == torch.float32


@pytest.mark.parametrize("sa, sb", [
    ((7,), (7,)), ((7,), (7, 3)), ((5, 7), (7,)), ((5, 7), (7, 3)), ((2, 5, 7), (7, 3)), ((2, 5, 7), (7,)),
    ((7,), (2, 7, 3)), ((5, 7), (2, 7, 3)), ((2, 3, 5, 7), (3, 7, 4)), ((3, 1, 5, 7), (2, 7, 4)),
    ((0, 5, 7), (7, 3)), ((5, 0), (0, 3)),
], ids=str)
def test_matmul_shapes_match_torch(sa, sb):
    """On meta tensors: the shape logic of matmul (folding, broadcasting, 1-D rules) alone."""
    got = cute_gemm.matmul(meta(*sa), meta(*sb))
    assert got.shape == torch.matmul(meta(*sa), meta(*sb)).shape


@pytest.mark.parametrize("sa, sb, pattern", [
    ((3, 4, 5), (2, 5, 6),
     r"matmul: the batch dimensions of a and b do not broadcast, got shapes \[3, 4, 5\] and \[2, 5, 6\]"),
    ((4, 5), (6, 3),
     r"matmul: a's last dimension \(K\) must equal b's second-to-last dimension, got shapes \[4, 5\] and \[6, 3\]"),
    ((5,), (6,), r"matmul: a's last dimension \(K\) must equal b's only dimension, got shapes \[5\] and \[6\]"),
    ((), (6,), r"matmul: both arguments must be at least 1-D, got shapes \[\] and \[6\]"),
], ids=["batch", "k", "vectors", "0d"])
def test_matmul_shape_errors_name_both_shapes(sa, sb, pattern):
    with pytest.raises(ValueError, match=pattern):
        cute_gemm.matmul(torch.randn(sa), torch.randn(sb))


@pytest.mark.parametrize("call, pattern", [
    (lambda: ops.addmm(meta(4), meta(5, 7), meta(7, 3)),
     r"addmm: input must broadcast to the result's shape \(M, N\) = \[5, 3\] .*, got shape \[4\]"),
    (lambda: ops.addmm(meta(5, 3), meta(5, 7), meta(7, 3), activation="tanh"),
     r"addmm: activation must be one of None, 'relu', 'gelu', 'gelu_tanh', 'silu', got 'tanh'"),
    (lambda: ops.mm(meta(5, 7), meta(8, 3)),
     r"mm: a's columns \(K\) must equal b's rows, got a \[5, 7\] and b \[8, 3\]"),
    (lambda: ops.bmm(meta(2, 5, 7), meta(3, 7, 3)), r"bmm: a and b must have the same batch size"),
    (lambda: ops.mm.out(meta(5, 7), meta(7, 3), out=meta(3, 5)), r"mm: out must have shape \[5, 3\], got \[3, 5\]"),
], ids=["bias_length", "activation", "k", "batch", "out_shape"])
def test_fake_impls_raise_value_errors(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call()


def test_fake_impls_raise_type_errors_for_dtypes():
    with pytest.raises(TypeError, match=r"mm: out_dtype must be None, torch.bfloat16 \(the inputs' dtype\) or "
                                         r"torch.float32, got torch.float16"):
        ops.mm(meta(5, 7), meta(7, 3), out_dtype=torch.float16)
    with pytest.raises(TypeError, match=r"bmm: out must have the result dtype torch.float32, got torch.bfloat16"):
        ops.bmm.out(meta(2, 5, 7), meta(2, 7, 3), out_dtype=torch.float32, out=meta(2, 5, 3))
    with pytest.raises(TypeError, match=r"addmm: input must have a's dtype"):
        ops.addmm(meta(3, dtype=torch.float32), meta(5, 7), meta(7, 3))


@pytest.mark.parametrize("call, pattern", [
    (lambda: cute_gemm.addmm([1.0], torch.randn(2, 2), torch.randn(2, 2)),
     "addmm: input must be a torch.Tensor, got list"),
    (lambda: cute_gemm.addmm(torch.randn(2), torch.randn(2, 2), 2.0), "addmm: b must be a torch.Tensor, got float"),
    (lambda: cute_gemm.bmm(None, torch.randn(1, 2, 2)), "bmm: a must be a torch.Tensor, got NoneType"),
    (lambda: cute_gemm.matmul(torch.randn(2, 2), (1, 2)), "matmul: b must be a torch.Tensor, got tuple"),
    (lambda: cute_gemm.mm(torch.randn(2, 2), torch.randn(2, 2), out=[0.0]), "mm: out must be a torch.Tensor, got list"),
], ids=["addmm_input", "addmm_b", "bmm_a", "matmul_b", "mm_out"])
def test_non_tensor_arguments_are_type_errors(call, pattern):
    with pytest.raises(TypeError, match=pattern):
        call()


@pytest.mark.parametrize("op", ["mm", "addmm", "bmm"])
def test_out_with_inputs_that_require_grad_is_refused_before_the_op(op):
    args = {"mm": (meta(5, 7), meta(7, 3)), "addmm": (meta(3), meta(5, 7), meta(7, 3)),
            "bmm": (meta(2, 5, 7), meta(2, 7, 3))}[op]
    out = meta(*((2, 5, 3) if op == "bmm" else (5, 3)))
    fn = getattr(cute_gemm, op)
    args[-1].requires_grad_()
    pattern = rf"{op}\(\): functions with out=\.\.\. arguments don't support automatic differentiation"
    with pytest.raises(RuntimeError, match=pattern):
        fn(*args, out=out)
    with torch.no_grad():  # as torch: allowed where no graph is recorded
        assert fn(*args, out=out) is out


@pytest.mark.parametrize("op", ["mm", "addmm", "bmm"])
def test_cpu_tensors_reach_the_ops_checks(op):
    args = {"mm": (torch.randn(5, 7), torch.randn(7, 3)),
            "addmm": (torch.randn(3), torch.randn(5, 7), torch.randn(7, 3)),
            "bmm": (torch.randn(2, 5, 7), torch.randn(2, 7, 3))}[op]
    args = [x.to(torch.bfloat16) for x in args]
    with pytest.raises(ValueError, match=rf"^{op}: .*CUDA"):
        getattr(cute_gemm, op)(*args)


def test_linear_state_dict_round_trip_with_torch_linear():
    ours = cute_gemm.nn.Linear(16, 24, activation="gelu", dtype=torch.bfloat16)
    theirs = torch.nn.Linear(16, 24, dtype=torch.bfloat16)
    assert list(ours.state_dict()) == list(theirs.state_dict()) == ["weight", "bias"]
    theirs.load_state_dict(ours.state_dict())
    assert all(torch.equal(theirs.state_dict()[k], v) for k, v in ours.state_dict().items())
    fresh = torch.nn.Linear(16, 24, bias=True, dtype=torch.bfloat16)
    ours.load_state_dict(fresh.state_dict())
    assert torch.equal(ours.weight, fresh.weight) and torch.equal(ours.bias, fresh.bias)
    no_bias = cute_gemm.nn.Linear(16, 24, bias=False)
    assert list(no_bias.state_dict()) == ["weight"] and no_bias.bias is None


def test_linear_from_torch_shares_parameters_and_repr():
    theirs = torch.nn.Linear(8, 4)
    ours = cute_gemm.nn.Linear.from_torch(theirs, activation="silu")
    assert ours.weight is theirs.weight and ours.bias is theirs.bias
    assert [p for p in ours.parameters()] == [theirs.weight, theirs.bias]
    assert repr(ours) == "Linear(in_features=8, out_features=4, bias=True, activation='silu')"
    assert cute_gemm.nn.Linear.from_torch(torch.nn.Linear(8, 4, bias=False)).bias is None
    with pytest.raises(ValueError, match=r"Linear: activation must be one of None, 'relu', 'gelu', 'gelu_tanh', "
                                          r"'silu', got 'elu'"):
        cute_gemm.nn.Linear(8, 4, activation="elu")


def _operand(shape, column_major):
    """A meta leaf of `shape`, or the transpose of a contiguous leaf (nn.Linear's weight.t())."""
    if not column_major:
        return meta(*shape).requires_grad_()
    return meta(*shape[:-2], shape[-1], shape[-2]).requires_grad_().transpose(-2, -1)


@pytest.mark.parametrize("b_col", [False, True], ids=["b_rows", "b_cols"])
@pytest.mark.parametrize("a_col", [False, True], ids=["a_rows", "a_cols"])
@pytest.mark.parametrize("op", ["mm", "addmm", "bmm"])
def test_operand_gradients_are_laid_out_as_their_operands(op, a_col, b_col):
    """On meta tensors: each operand's gradient has the operand's strides (row-major, or the
    transpose of a contiguous matrix), as torch.mm's backward gives; so Linear.weight gets its
    GEMM's output as .grad, with no copy in AccumulateGrad and no strided add where gradients sum."""
    batch = (3,) if op == "bmm" else ()
    a, b = _operand((*batch, 5, 7), a_col), _operand((*batch, 7, 4), b_col)
    out = {"mm": lambda: ops.mm(a, b), "bmm": lambda: ops.bmm(a, b),
           "addmm": lambda: ops.addmm(meta(4).requires_grad_(), a, b, alpha=2)}[op]()
    grad_a, grad_b = torch.autograd.grad(out, [a, b], torch.empty_like(out))
    assert (grad_a.shape, grad_a.stride()) == (a.shape, a.stride())
    assert (grad_b.shape, grad_b.stride()) == (b.shape, b.stride())


def test_linear_weight_gradient_needs_no_copy():
    layer = cute_gemm.nn.Linear(7, 5, device="meta", dtype=torch.bfloat16)
    seen = []
    layer.weight.register_hook(lambda g: seen.append(g.stride()))
    layer(meta(2, 3, 7).requires_grad_()).backward(meta(2, 3, 5))
    assert seen == [(7, 1)] and layer.weight.grad.stride() == (7, 1)


# ================================================================================== GPU: mm

@gpu
@pytest.mark.parametrize("out_dtype", [None, torch.float32], ids=["same", "fp32"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_mm_out_and_out_dtype(dtype, layout, out_dtype):
    want = out_dtype or dtype
    for m, n, k in SHAPES:
        a, b = operand(m, k, layout[0], dtype), operand(k, n, layout[1], dtype)
        ref = a.double() @ b.double()
        theirs = torch.mm(a, b) if out_dtype is None else None
        out = nan_out((m, n), want)
        assert cute_gemm.mm(a, b, out=out, out_dtype=out_dtype) is out
        check(out, ref, want, theirs)
        c = poisoned(lambda: cute_gemm.mm(a, b, out_dtype=out_dtype), (m, n), want)
        assert c.is_contiguous()
        check(c, ref, want, theirs)


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_mm_into_strided_out_leaves_the_rest_alone(dtype):
    m, n, k = 129, 127, 200
    a, b = operand(m, k, "n", dtype), operand(k, n, "t", dtype)
    ref = a.double() @ b.double()
    buf = nan_out((n + 3, m + 5), dtype)
    views = [buf[1:n + 1, 2:m + 2].t(),                       # column-major with an offset
             nan_out((m + 3, 2 * n), dtype)[1:m + 1, ::2]]    # column stride 2
    for out in views:
        assert cute_gemm.mm(a, b, out=out) is out
        check(out, ref, dtype)
    # Nothing outside the first view was written.
    mask = torch.ones_like(buf, dtype=torch.bool)
    mask[1:n + 1, 2:m + 2] = False
    assert buf[mask].isnan().all()


@gpu
@pytest.mark.parametrize("family", ["sm90", "sm80"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_mm_into_padded_rows_writes_nothing_else(dtype, family, monkeypatch):
    # out= a view of a larger buffer, written in place: rows of n + 1 elements (element stores)
    # or of a multiple of 16 bytes (TMA / vector stores) with a partial 16-byte unit past n.
    if family == "sm90" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the sm90 family (TMA + WGMMA) needs an sm_90 GPU")
    monkeypatch.setenv("CUTE_GEMM_FAMILY", family)
    for m, n, k in [(129, 127, 200), (129, 128, 200), (64, 63, 64), (300, 1031, 72)]:
        a, b = operand(m, k, "n", dtype), operand(k, n, "t", dtype)
        for pad in (1, 8 - n % 8 + 8):
            buf = nan_out((m + 1, n + pad), dtype)
            out = buf[:m, :n]
            assert cute_gemm.mm(a, b, out=out) is out
            check(out, a.double() @ b.double(), dtype)
            assert buf[:, n:].isnan().all() and buf[m].isnan().all(), ("wrote past the out view", m, n, pad)


@gpu
@pytest.mark.parametrize("make, exc, pattern", [
    (lambda a, b: dict(out=nan_out((64, 40), a.dtype)), ValueError, r"mm: .*out"),
    (lambda a, b: dict(out=nan_out((64, 48), torch.float32)), TypeError, r"mm: .*out"),
    (lambda a, b: dict(out=torch.empty(64, 48, dtype=a.dtype)), ValueError, r"mm: .*out"),
    (lambda a, b: dict(out=a[:, :48]), ValueError, r"mm: .*(overlap|out)"),
    (lambda a, b: dict(out_dtype=torch.float64), TypeError, r"mm: .*out_dtype"),
], ids=["shape", "dtype", "device", "overlaps_a", "bad_out_dtype"])
def test_mm_out_errors(make, exc, pattern):
    a, b = randn(64, 64), randn(64, 48)
    with pytest.raises(exc, match=pattern):
        cute_gemm.mm(a, b, **make(a, b))
    torch.cuda.synchronize()


# =============================================================================== GPU: addmm

INPUT_SHAPES = {"bias": lambda m, n: (n,), "row": lambda m, n: (1, n), "column": lambda m, n: (m, 1),
                "full": lambda m, n: (m, n), "scalar": lambda m, n: ()}
# addmm inputs of every stride the kernels meet: the shapes above (contiguous, then broadcast to
# (M, N)), a column-major C and a bias with a stride (both copied to rows for the sm90 epilogue).
INPUTS = {**{kind: (lambda shape: lambda m, n, dtype: randn(*shape(m, n), dtype=dtype))(shape)
             for kind, shape in INPUT_SHAPES.items()},
          "full_colmajor": lambda m, n, dtype: randn(n, m, dtype=dtype).t(),
          "bias_strided": lambda m, n, dtype: randn(2 * n, dtype=dtype)[::2],
          "bias_offset": lambda m, n, dtype: randn(n + 1, dtype=dtype)[1:]}  # 2-byte aligned


@gpu
@pytest.mark.parametrize("kind", list(INPUTS))
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_addmm_input_broadcasts_and_scales(dtype, kind):
    for (m, n, k), (beta, alpha), layout in [((129, 127, 574), (1, 1), "nt"), ((7, 1, 7), (0.5, -1.5), "tn"),
                                             ((127, 129, 127), (-2.0, 0.25), "nn"), ((1, 520, 64), (1, 1), "nt")]:
        a, b = operand(m, k, layout[0], dtype), operand(k, n, layout[1], dtype)
        input = INPUTS[kind](m, n, dtype)
        ref = addmm_ref(input, a, b, beta, alpha)
        theirs = torch.addmm(input, a, b, beta=beta, alpha=alpha)
        c = poisoned(lambda: cute_gemm.addmm(input, a, b, beta=beta, alpha=alpha), (m, n), dtype)
        check(c, ref, dtype, theirs)
        out = nan_out((m, n), dtype)
        assert cute_gemm.addmm(input, a, b, beta=beta, alpha=alpha, out=out) is out
        check(out, ref, dtype, theirs)


@gpu
@pytest.mark.parametrize("activation", list(ACTS))
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_addmm_activation_matches_torch(dtype, activation):
    for m, n, k in [(129, 127, 574), (574, 129, 7)]:
        a, b = operand(m, k, "n", dtype), operand(k, n, "t", dtype)
        bias = randn(n, dtype=dtype)
        ref = addmm_ref(bias, a, b, 1, 1, activation)
        theirs = ACTS[activation](torch.addmm(bias, a, b))  # unfused: rounds z, then the activation
        c = poisoned(lambda: cute_gemm.addmm(bias, a, b, activation=activation), (m, n), dtype)
        check(c, ref, dtype, theirs)
        # out_dtype=float32: the activation of the fp32 accumulators, unrounded; bias in either dtype.
        for bias_ in (bias, bias.float()):
            out = nan_out((m, n), torch.float32)
            assert cute_gemm.addmm(bias_, a, b, activation=activation, out_dtype=torch.float32, out=out) is out
            check(out, ref, torch.float32)


SM90_CONFIG_NAMES = config_names(Path(__file__).resolve().parents[1] / "csrc" / "sm90" / "configs.h")


def use_sm90_row(monkeypatch, config):
    """Pin the sm90 family and its tile config row `config`; skip where the GPU lacks the family."""
    if torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the sm90 family (TMA + WGMMA) needs an sm_90 GPU")
    monkeypatch.setenv("CUTE_GEMM_FAMILY", "sm90")
    monkeypatch.setenv("CUTE_GEMM_SM90_CONFIG", str(config))


@gpu
@pytest.mark.parametrize("config", range(len(SM90_CONFIG_NAMES)), ids=SM90_CONFIG_NAMES)
@pytest.mark.parametrize("kind", ["bias", "bias_offset", "full", "full_colmajor", "column"])
def test_addmm_epilogue_on_every_sm90_tile(config, kind, monkeypatch):
    """The sm90 epilogue walks a tile's accumulators in 64-column chunks: every tile config, on
    shapes with several tiles per block and edge tiles in M and N, for the TMA-store path, the
    fp32 output and C rows that are not 16-byte aligned (with an activation through a scratch C,
    without one written from the staging)."""
    use_sm90_row(monkeypatch, config)
    for (m, n, k), activation, dtype in [((300, 520, 200), "gelu", torch.bfloat16),
                                         ((1500, 1104, 72), "silu", torch.float16),
                                         ((129, 1031, 64), None, torch.bfloat16)]:
        a, b = operand(m, k, "n", dtype), operand(k, n, "t", dtype)
        input = INPUTS[kind](m, n, dtype)
        beta, alpha = (1, 1) if kind == "bias" else (0.5, -1.5)
        ref = addmm_ref(input, a, b, beta, alpha, activation)
        if kind == "bias":  # a float32 bias with float32 output
            check(cute_gemm.addmm(input.float(), a, b, activation=activation, out_dtype=torch.float32), ref,
                  torch.float32)
        call = lambda **kw: cute_gemm.addmm(input, a, b, beta=beta, alpha=alpha, activation=activation, **kw)
        c = poisoned(call, (m, n), dtype)
        check(c, ref, dtype)
        # Each edge column on its own: one wrong column (a bias pair from the wrong lane, the
        # last partial pair) hides in the whole matrix's error.
        for col in (0, 1, n - 2, n - 1):
            assert rel_err(c[:, col], ref[:, col]) <= 4 * REL_BOUND[dtype], col
        check(call(out_dtype=torch.float32), ref, torch.float32)
        # Rows of n + 1 elements (not 16-byte aligned: a scratch C or the staging), and of a multiple of 8
        # elements past n (16-byte rows, a partial 16-byte unit at each row's end).
        for pad in (1, 8 - n % 8 + 8):
            buf = nan_out((m + 1, n + pad), dtype)
            out = buf[:m, :n]
            assert call(out=out) is out
            check(out, ref, dtype)
            assert buf[:, n:].isnan().all() and buf[m].isnan().all(), "wrote past the out view"


@gpu
@pytest.mark.parametrize("config", range(len(SM90_CONFIG_NAMES)), ids=SM90_CONFIG_NAMES)
@pytest.mark.parametrize("activation", [a for a in ACTS if a is not None])
def test_addmm_deferred_stores_on_every_sm90_tile(config, activation, monkeypatch):
    """With more tiles than blocks, the sm90 kernel stores part of a tile's 16-bit C under the
    next tile's main loop (from registers, after the activation); a block's last tile and C rows
    that TMA cannot store (with the activation a padded scratch C, stored and deferred like
    aligned C, then copied out; without one, rows written from the staging, at once). Every path must give the same bits, and match torch's unfused
    act(addmm)."""
    use_sm90_row(monkeypatch, config)
    monkeypatch.setenv("CUTE_GEMM_SPLITS", "1")
    # The consumers' own epilogue (the activation warps' is test_addmm_activation_warps).
    monkeypatch.setenv("CUTE_GEMM_ACT_OFFLOAD", "0")
    # 17 x 17 tiles of 128x256 (289: three per block on 132 SMs), more of every smaller tile;
    # partial tiles in M and N; K = 200: a main loop shorter than the deferred stores.
    m, n, k = 2100, 4200, 200
    for dtype in DTYPES:
        a, b = operand(m, k, "n", dtype), operand(k, n, "t", dtype)
        bias = randn(n, dtype=dtype)
        ref = addmm_ref(bias, a, b, 1, 1, activation)
        theirs = ACTS[activation](torch.addmm(bias, a, b))
        c = poisoned(lambda: cute_gemm.addmm(bias, a, b, activation=activation), (m, n), dtype)
        check(c, ref, dtype, theirs)
        cases = [(activation, c)]
        if activation == "relu":  # once per row and dtype: the plain addmm, deferred and staged
            plain = poisoned(lambda: cute_gemm.addmm(bias, a, b), (m, n), dtype)
            check(plain, addmm_ref(bias, a, b, 1, 1, None), dtype)
            cases.append((None, plain))
        # Rows of n + 2 elements (4-byte aligned, not 16) and n + 1 (every other row 2 bytes past).
        # With an activation: computed into a padded scratch C and copied out; without one:
        # written from the staged chunks by the consumers (nothing deferred).
        for (act, want), pad in itertools.product(cases, (2, 1)):
            buf = nan_out((m, n + pad), dtype)
            other = cute_gemm.addmm(bias, a, b, activation=act, out=buf[:, :n])
            assert torch.equal(other, want), f"aligned and unaligned C rows differ ({act=}, {pad=}): {(other != want).sum().item()} elements"
            assert buf[:, n:].isnan().all()


# (config row, M, N, K, knobs): a 16-bit bias where the sm90 kernel sums K slices (split-K, the
# stream-K tail: added once, by the slice that stores the tile), on several tiles per block,
# three consumers, an odd N (the last pair half outside the row).
BIAS_CASES = [(2, 2100, 4200, 300, {}), (0, 2100, 2200, 1000, {"CUTE_GEMM_SPLITS": "3"}),
              (3, 1100, 2100, 1000, {"CUTE_GEMM_STREAM_K": "1"}), (8, 2100, 4200, 200, {}),
              (12, 1300, 3000, 700, {}), (2, 2100, 4199, 300, {})]


@gpu
@pytest.mark.parametrize("case", BIAS_CASES, ids=lambda c: "row{}-{}x{}x{}-{}".format(*c[:4], "-".join(c[4]) or "whole"))
def test_addmm_bias_with_k_slices(case, monkeypatch):
    """A 16-bit bias row on the sm90 paths of BIAS_CASES: every column right against float64 with
    beta = 1, beta = -2 and alpha = 0.5, and torch's rounding budget."""
    config, m, n, k, knobs = case
    use_sm90_row(monkeypatch, config)
    for knob, value in knobs.items():
        monkeypatch.setenv(knob, value)
    for dtype, (beta, alpha) in itertools.product(DTYPES, [(1, 1), (-2.0, 1), (1, 0.5)]):
        a, b = operand(m, k, "n", dtype), operand(k, n, "t", dtype)
        bias = randn(n, dtype=dtype)
        ref = addmm_ref(bias, a, b, beta, alpha)
        c = poisoned(lambda: cute_gemm.addmm(bias, a, b, beta=beta, alpha=alpha), (m, n), dtype)
        check(c, ref, dtype, torch.addmm(bias, a, b, beta=beta, alpha=alpha))
        # Column by column: a pair from the wrong column, or a bias added by two slices of a tile,
        # hides in the whole matrix's error.
        col_err = ((c.double() - ref).norm(dim=0) / ref.norm(dim=0)).max().item()
        assert col_err <= 4 * REL_BOUND[dtype], col_err


@gpu
@pytest.mark.parametrize("config", [0, 2], ids=[SM90_CONFIG_NAMES[0], SM90_CONFIG_NAMES[2]])
@pytest.mark.parametrize("activation", [a for a in ACTS if a is not None])
def test_addmm_activation_warps(config, activation, monkeypatch):
    """On 128x256 tiles the sm90 kernel hands an activation (and a 16-bit bias) to the producer
    warpgroup's idle warps, which apply it to the staged 16-bit C and store it while the consumers
    run the next tile. Right against float64 and next to torch's unfused act(addmm) on several
    tiles per block, edge tiles, a main loop of a few k-tiles (the deferred chunks' spread is 1)
    and a long one, scaled and unscaled, with and without a bias, into rows padded past N; the same bits on
    every call; and not the bits of the consumers' own epilogue (CUTE_GEMM_ACT_OFFLOAD=0), which
    rounds after the bias, so the path really ran."""
    use_sm90_row(monkeypatch, config)
    monkeypatch.setenv("CUTE_GEMM_SPLITS", "1")
    monkeypatch.setenv("CUTE_GEMM_STREAM_K", "0")
    # Two tiles or more per block (the kernel's rule), partial tiles in M and N (N = 4104: a last
    # tile of 8 columns).
    for (m, n, k), dtype, (beta, alpha), with_bias in [((2100, 4200, 200), torch.bfloat16, (1, 1), True),
                                                       ((2100, 4104, 1500), torch.float16, (0.5, -1.5), True),
                                                       ((2300, 4000, 520), torch.bfloat16, (1, 1.5), False)]:
        a, b = operand(m, k, "n", dtype), operand(k, n, "t", dtype)
        bias = randn(n, dtype=dtype) if with_bias else None
        if with_bias:
            ref = addmm_ref(bias, a, b, beta, alpha, activation)
            call = lambda **kw: cute_gemm.addmm(bias, a, b, beta=beta, alpha=alpha, activation=activation, **kw)
            theirs = ACTS[activation](torch.addmm(bias, a, b, beta=beta, alpha=alpha))
        else:
            ref = ACTS[activation](alpha * (a.double() @ b.double()))
            zeros = torch.zeros(n, dtype=dtype, device="cuda")
            call = lambda **kw: cute_gemm.addmm(zeros, a, b, beta=0, alpha=alpha, activation=activation, **kw)
            theirs = ACTS[activation](alpha * torch.mm(a, b))
        c = poisoned(call, (m, n), dtype)
        check(c, ref, dtype, theirs)
        for col in (0, 1, n - 2, n - 1):
            assert rel_err(c[:, col], ref[:, col]) <= 4 * REL_BOUND[dtype], col
        assert torch.equal(c, call()), "not reproducible"
        buf = nan_out((m + 1, n + 8), dtype)
        assert torch.equal(call(out=buf[:m, :n]), c)
        assert buf[:, n:].isnan().all() and buf[m].isnan().all(), "wrote past the out view"
        assert offload_ran(call), "the activation warps did not run"
        monkeypatch.setenv("CUTE_GEMM_ACT_OFFLOAD", "0")
        own = call()
        assert not offload_ran(call), "CUTE_GEMM_ACT_OFFLOAD=0 ran the activation warps"
        monkeypatch.delenv("CUTE_GEMM_ACT_OFFLOAD")
        check(own, ref, dtype, theirs)


def offload_ran(fn) -> bool:
    """Whether fn() ran the sm90 activation warps' kernel."""
    return "offload" in sm90_kernel_kinds(fn)


@gpu
@pytest.mark.parametrize("config", range(len(SM90_CONFIG_NAMES) + 1), ids=SM90_CONFIG_NAMES + ["sm80"])
@pytest.mark.parametrize("activation", [a for a in ACTS if a is not None])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_addmm_pre_activation_is_rounded_once(dtype, activation, config, monkeypatch):
    """act(beta * input + alpha * acc) is computed from the fp32 accumulators, as torch.addmm
    rounds its result once: an accumulator past float16's range that a small alpha scales back
    into it, and a bias that cancels most of the accumulator, lose nothing to an early rounding.
    Every sm90 row (rows 0 and 2 through the activation warps) and the sm80 family."""
    if config == len(SM90_CONFIG_NAMES):
        monkeypatch.setenv("CUTE_GEMM_FAMILY", "sm80")
    else:
        use_sm90_row(monkeypatch, config)
    monkeypatch.setenv("CUTE_GEMM_SPLITS", "1")
    monkeypatch.setenv("CUTE_GEMM_STREAM_K", "0")
    m, n = 2100, 4200  # 289 tiles of 128x256: two or more per block, as the activation warps need
    # Large accumulators: entries of 64 N(0, 1), K = 256: |acc| past 65504 in about a third of C.
    k = 256
    a = (64 * torch.randn(m, k, device="cuda")).to(dtype)
    b = (64 * torch.randn(n, k, device="cuda")).to(dtype).t()
    bias = randn(n, dtype=dtype)
    alpha = 1 / 64
    ref = addmm_ref(bias, a, b, 1, alpha, activation)
    c = poisoned(lambda: cute_gemm.addmm(bias, a, b, alpha=alpha, activation=activation), (m, n), dtype)
    assert c.isfinite().all(), f"{(~c.isfinite()).sum().item()} non-finite outputs where the result is finite"
    check(c, ref, dtype)
    # A cancelling bias: equal rows of integers, so acc(i, j) = acc(j) is exact (about 4096 +- 100),
    # and bias(j) = -acc(j) rounded to the dtype: z = acc - bias is the rounding's small residue.
    k = 1024
    row = torch.randint(1, 4, (1, k), device="cuda").to(dtype)
    a = row.expand(m, k).contiguous()
    b = torch.randint(0, 5, (n, k), device="cuda").to(dtype).t()
    acc = (row.double() @ b.double()).squeeze(0)
    bias = (-acc).to(dtype)
    ref = addmm_ref(bias, a, b, 1, 1, activation)
    assert ref.abs().max() > 0.5, "the residues should not all be 0"
    c = poisoned(lambda: cute_gemm.addmm(bias, a, b, activation=activation), (m, n), dtype)
    check(c, ref, dtype)


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_addmm_beta_zero_ignores_nan_input(dtype):
    a, b = operand(127, 129, "n", dtype), operand(129, 131, "n", dtype)
    for shape in [(131,), (127, 131)]:
        input = nan_out(shape, dtype)
        for activation in (None, "gelu"):
            ref = addmm_ref(input, a, b, 0, 2.0, activation)
            check(cute_gemm.addmm(input, a, b, beta=0, alpha=2.0, activation=activation), ref, dtype,
                  ACTS[activation](torch.addmm(input, a, b, beta=0, alpha=2.0)))


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_addmm_beta_that_rounds_to_zero_ignores_nan_input(dtype):
    """beta is a float in the kernels (as in torch's cuBLAS call): 1e-50 is 0 there, so input is
    not read, and its NaN does not reach the result."""
    a, b = operand(127, 129, "n", dtype), operand(129, 131, "n", dtype)
    for input in (nan_out((131,), dtype), nan_out((127, 131), dtype)):
        c = cute_gemm.addmm(input, a, b, beta=1e-50)
        theirs = torch.addmm(input, a, b, beta=1e-50)
        assert not theirs.isnan().any()
        check(c, a.double() @ b.double(), dtype, theirs)


@gpu
@pytest.mark.parametrize("op", ["mm", "addmm", "bmm"])
def test_out_bumps_the_version_counter(op):
    """out= writes in place: its version counter moves, so a backward that would read a tensor the
    call overwrote is refused, as after torch.mm(out=)."""
    dtype = torch.bfloat16
    x = randn(64, 32, dtype=dtype).requires_grad_()
    w = randn(32, 48, dtype=dtype)
    y = cute_gemm.mm(x, w)  # saves w for dX
    a, b = randn(32, 16, dtype=dtype), randn(16, 48, dtype=dtype)
    before = w._version
    if op == "mm":
        cute_gemm.mm(a, b, out=w)
    elif op == "addmm":
        cute_gemm.addmm(randn(48, dtype=dtype), a, b, out=w)
    else:
        cute_gemm.bmm(a.unsqueeze(0), b.unsqueeze(0), out=w.unsqueeze(0))
    assert w._version > before
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()


@gpu
def test_out_into_an_inference_tensor_outside_inference_mode_is_refused():
    a, b = randn(64, 32), randn(32, 48)
    with torch.inference_mode():
        out = nan_out((64, 48), torch.bfloat16)
        assert cute_gemm.mm(a, b, out=out) is out  # inside inference mode: allowed, as in torch
    with pytest.raises(RuntimeError, match=r"Inplace update to inference tensor"):
        torch.mm(a, b, out=out)
    with torch.inference_mode():
        out.fill_(float("nan"))
    with pytest.raises(RuntimeError, match=r"mm\.out: out is an inference tensor"):
        cute_gemm.mm(a, b, out=out)
    with torch.inference_mode():
        assert out.isnan().all(), "written before the refusal"


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_out_beside_an_input_in_one_buffer(dtype):
    """out= may share a buffer with an input where no element is shared (column blocks of one
    matrix; batches of one tensor), and addmm(c, a, b, beta=0, out=c) does not read c; a view that
    really shares elements with an input is still refused."""
    m, k, n = 129, 64, 72
    buf = randn(m, k + n + 8, dtype=dtype)
    a, out = buf[:, :k], buf[:, k + 8:]
    b = randn(k, n, dtype=dtype)
    ref = a.double() @ b.double()
    assert cute_gemm.mm(a, b, out=out) is out
    check(out, ref, dtype)
    # The same strides, rows apart by less than a row: elements shared.
    with pytest.raises(ValueError, match="mm: out must not overlap a"):
        cute_gemm.mm(buf[:, :k], b, out=buf[:, k - 8:k - 8 + n])
    # batch blocks: a in batches 0..1, out in batches 2..3 of one (4, M, K) tensor
    t = randn(4, 33, 64, dtype=dtype)
    w = randn(2, 64, 64, dtype=dtype)
    ref = t[:2].double() @ w.double()
    assert cute_gemm.bmm(t[:2], w, out=t[2:]) is not None
    check(t[2:], ref, dtype)
    c = randn(m, n, dtype=dtype)
    assert cute_gemm.addmm(c, a, b, beta=0, out=c) is c
    check(c, a.double() @ b.double(), dtype)
    with pytest.raises(ValueError, match="addmm: out must not overlap input"):
        cute_gemm.addmm(c, a, b, beta=1, out=c)


# Every sm90 row pinned (the swapped decode rows 6, 10 and 11 then run unswapped, on B in either
# layout like the others), and the sm80 family.
BMM_ROWS = [*range(len(SM90_CONFIG_NAMES)), "sm80"]


@gpu
@pytest.mark.parametrize("row", BMM_ROWS, ids=lambda row: row if row == "sm80" else SM90_CONFIG_NAMES[row])
@pytest.mark.parametrize("case", ["a_expanded", "b_expanded_a_mmajor", "matmul_2d_3d", "unaligned_expanded"])
def test_broadcast_batches_are_read_in_place(case, row, monkeypatch):
    """A batch stride of 0 (one matrix for every batch) is read in place, or copied once where its
    rows are not aligned: the call allocates no copy per batch."""
    if row == "sm80":
        monkeypatch.setenv("CUTE_GEMM_FAMILY", "sm80")
    else:
        use_sm90_row(monkeypatch, row)
        monkeypatch.setenv("CUTE_GEMM_SPLITS", "1")  # no split-K workspace in the count
    dtype = torch.bfloat16
    L, m, k, n = 16, 256, 512, 384
    if case == "a_expanded":
        a, b = randn(m, k, dtype=dtype).expand(L, m, k), randn(L, k, n, dtype=dtype)
    elif case == "b_expanded_a_mmajor":
        a, b = randn(L, k, m, dtype=dtype).mT, randn(k, n, dtype=dtype).expand(L, k, n)
    elif case == "matmul_2d_3d":
        a, b = randn(m, k, dtype=dtype), randn(L, k, n, dtype=dtype)
    else:  # K not a multiple of 8: the broadcast matrix is copied, once
        k = 509
        a, b = randn(m, k, dtype=dtype).expand(L, m, k), randn(L, k, n, dtype=dtype)
    call = (lambda: cute_gemm.matmul(a, b)) if case == "matmul_2d_3d" else (lambda: cute_gemm.bmm(a, b))
    call()  # warm: workspaces, descriptors
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    base = torch.cuda.memory_allocated()
    c = call()
    torch.cuda.synchronize()
    extra = torch.cuda.max_memory_allocated() - base - c.numel() * c.element_size()
    once = max(m, n) * (k + 8) * 2 + (1 << 20)  # one padded copy of the broadcast matrix, and slack
    assert extra <= once, f"{extra} bytes beside the result: a copy per batch ({L * m * k * 2} bytes)?"
    a3 = a.expand(L, m, k) if a.dim() == 2 else a
    check(c, a3.double() @ b.double(), dtype, torch.matmul(a, b))


@gpu
def test_empty_and_zero_k():
    dtype = torch.bfloat16
    assert cute_gemm.addmm(randn(5), randn(0, 16), randn(16, 5)).shape == (0, 5)
    assert cute_gemm.bmm(randn(3, 4, 16), randn(3, 16, 0)).shape == (3, 4, 0)
    bias = randn(9)
    c = poisoned(lambda: cute_gemm.addmm(bias, randn(6, 0), randn(0, 9), beta=0.5, activation="relu"), (6, 9), dtype)
    assert torch.equal(c, F.relu(0.5 * bias.double()).to(dtype).expand(6, 9))
    c = poisoned(lambda: cute_gemm.bmm(randn(2, 6, 0), randn(2, 0, 9)), (2, 6, 9), dtype)
    assert torch.equal(c, torch.zeros_like(c))


@gpu
@pytest.mark.parametrize("call, pattern", [
    (lambda a, b: cute_gemm.addmm(randn(47), a, b), r"addmm: .*input"),
    (lambda a, b: cute_gemm.addmm(randn(2, 64, 48), a, b), r"addmm: .*input"),
    (lambda a, b: cute_gemm.addmm(randn(48), a, b, activation="tanh"),
     r"^addmm: activation must be one of None, 'relu', 'gelu', 'gelu_tanh', 'silu', got 'tanh'$"),
], ids=["bias_length", "input_3d", "activation"])
def test_addmm_errors(call, pattern):
    with pytest.raises(ValueError, match=pattern):
        call(randn(64, 32), randn(32, 48))
    torch.cuda.synchronize()


# ================================================================================= GPU: bmm

def bmm_case(name, dtype):
    b_, m, n, k = 3, 127, 129, 574
    if name == "batch1":
        return randn(1, 129, 7, dtype=dtype), randn(1, 7, 574, dtype=dtype)
    if name == "odd":
        return randn(b_, m, k, dtype=dtype), randn(b_, k, n, dtype=dtype)
    if name == "expanded_b":  # one weight for every batch: stride 0
        return randn(b_, m, k, dtype=dtype), randn(k, n, dtype=dtype).expand(b_, k, n)
    if name == "transposed":
        return randn(b_, k, m, dtype=dtype).mT, randn(b_, n, k, dtype=dtype).mT
    if name == "batch_inner":  # batch is not the outermost dimension of the storage
        return randn(m, b_, k, dtype=dtype).permute(1, 0, 2), randn(k, b_, n, dtype=dtype).permute(1, 0, 2)
    raise ValueError(name)


@gpu
@pytest.mark.parametrize("case", ["batch1", "odd", "expanded_b", "transposed", "batch_inner"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_bmm(dtype, case):
    a, b = bmm_case(case, dtype)
    shape = (a.shape[0], a.shape[1], b.shape[2])
    ref = a.double() @ b.double()
    theirs = torch.bmm(a, b)
    c = poisoned(lambda: cute_gemm.bmm(a, b), shape, dtype)
    assert c.is_contiguous()
    check(c, ref, dtype, theirs)
    out = nan_out(shape, dtype)
    assert cute_gemm.bmm(a, b, out=out) is out
    check(out, ref, dtype, theirs)
    out = nan_out(shape, torch.float32)
    assert cute_gemm.bmm(a, b, out=out, out_dtype=torch.float32) is out
    check(out, ref, torch.float32)


# ============================================================================== GPU: matmul

@gpu
@pytest.mark.parametrize("sa, sb", [
    ((129, 574), (574, 127)), ((3, 127, 129), (129, 7)), ((2, 3, 127, 129), (3, 129, 57)),
    ((574,), (574,)), ((129,), (129, 7)), ((127, 129), (129,)), ((129,), (2, 129, 7)), ((127, 129), (2, 129, 7)),
    ((2, 1, 7, 129), (3, 129, 5)),
], ids=str)
def test_matmul_matches_torch(sa, sb):
    a, b = randn(*sa), randn(*sb)
    ref = torch.matmul(a.double(), b.double())
    check(cute_gemm.matmul(a, b), ref, torch.bfloat16, torch.matmul(a, b))


# ============================================================================ GPU: autograd

@gpu
@pytest.mark.parametrize("out_dtype", [None, torch.float32], ids=["same", "fp32"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_mm_grad(dtype, out_dtype):
    grads_vs_reference(lambda a, b: cute_gemm.mm(a, b, out_dtype=out_dtype), torch.mm,
                       [operand(129, 127, "n", dtype), operand(127, 57, "t", dtype)])


@gpu
@pytest.mark.parametrize("kind", ["bias", "full", "full_colmajor"])
@pytest.mark.parametrize("activation", list(ACTS))
def test_addmm_grad(activation, kind):
    m, n, k = 129, 127, 131
    beta, alpha = (1, 1) if kind == "bias" else (0.5, -1.5)
    input = INPUTS[kind](m, n, torch.bfloat16)
    grads_vs_reference(
        lambda i, a, b: cute_gemm.addmm(i, a, b, beta=beta, alpha=alpha, activation=activation),
        lambda i, a, b: addmm_ref(i, a, b, beta, alpha, activation),
        [input, operand(m, k, "n"), operand(k, n, "t")])


@gpu
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_addmm_grad_with_fp32_output(activation):
    grads_vs_reference(
        lambda i, a, b: cute_gemm.addmm(i, a, b, activation=activation, out_dtype=torch.float32),
        lambda i, a, b: addmm_ref(i, a, b, 1, 1, activation),
        [randn(64, dtype=torch.float16), operand(33, 72, "t", torch.float16), operand(72, 64, "n", torch.float16)])


@gpu
def test_bmm_and_matmul_grad():
    grads_vs_reference(cute_gemm.bmm, torch.bmm, [randn(3, 33, 129), randn(3, 64, 129).mT])
    # One weight broadcast over the batch: its gradient is the sum over the batch.
    grads_vs_reference(lambda a, w: cute_gemm.bmm(a, w.expand(3, 129, 57)),
                       lambda a, w: torch.bmm(a, w.expand(3, 129, 57)), [randn(3, 33, 129), randn(129, 57)])
    grads_vs_reference(cute_gemm.matmul, torch.matmul, [randn(2, 1, 33, 129), randn(3, 129, 57)])


@gpu
def test_grad_of_only_one_input():
    a, b = randn(65, 33), randn(33, 47).requires_grad_()
    (ga,) = torch.autograd.grad(cute_gemm.mm(a, b).sum(), [b])
    check(ga, a.double().t() @ torch.ones(65, 47, dtype=torch.float64, device="cuda"), torch.bfloat16)


def _block(cls):
    """LayerNorm, Linear + GELU, Linear, and the residual add: the gradient of x is a sum of two."""
    torch.manual_seed(2)
    norm = torch.nn.LayerNorm(256, device="cuda", dtype=torch.bfloat16)
    fc = torch.nn.Linear(256, 1024, device="cuda", dtype=torch.bfloat16)
    proj = torch.nn.Linear(1024, 256, device="cuda", dtype=torch.bfloat16)
    if cls is not torch.nn.Linear:
        fc, proj = cls.from_torch(fc), cls.from_torch(proj)
    return lambda x: x + proj(F.gelu(fc(norm(x)))), [norm.weight, norm.bias, fc.weight, fc.bias, proj.weight,
                                                     proj.bias]


@gpu
def test_block_backward_runs_what_torch_runs():
    """Forward + backward of a residual block: every gradient has torch.nn.Linear's strides and
    values, and no more kernels run than with torch.nn.Linear (no operand copies, no strided adds)."""
    x = randn(4, 128, 256)
    grad = randn(4, 128, 256)
    results = {}
    for cls in (torch.nn.Linear, cute_gemm.nn.Linear):
        fn, params = _block(cls)
        xi = x.clone().requires_grad_()
        step = lambda: torch.autograd.grad(fn(xi), [xi, *params], grad)  # noqa: E731
        step()  # warm: first-call allocations and lazy inits out of the count
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
            grads = step()
            torch.cuda.synchronize()
        names = [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]
        results[cls] = grads, names
    (theirs, their_kernels), (ours, our_kernels) = results[torch.nn.Linear], results[cute_gemm.nn.Linear]
    for g_t, g in zip(theirs, ours):
        assert g.stride() == g_t.stride() and g.dtype == g_t.dtype
        assert rel_err(g, g_t.double()) <= 2 * REL_BOUND[torch.bfloat16]
    assert len(our_kernels) <= len(their_kernels), (sorted(our_kernels), sorted(their_kernels))


# (M, N, K) of mm_row_sums(a, b): a (M, K) as nn.Linear's backward passes it (dY^T, M-major) unless
# said otherwise; one row, one column, rows past a tile's end, K tails; A's pitch (M elements) a
# multiple of 8 where the kernel can read it in place (456, 1024), else copied.
ROW_SUM_SHAPES = [(1, 1, 1), (7, 129, 574), (129, 127, 131), (456, 400, 2100), (1000, 576, 4097), (1024, 512, 2048)]


class OpNames(TorchDispatchMode):
    """The names of the ops dispatched inside it (the autograd engine's threads included)."""

    def __init__(self):
        super().__init__()
        self.names = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.names.append(str(func))
        return func(*args, **(kwargs or {}))


def cuda_kernels(fn):
    """fn() once to warm up, then the names of the CUDA kernels one more call launches."""
    fn()
    return kernel_names(fn)


@gpu
@pytest.mark.parametrize("a_major", ["t", "n"], ids=["a_mmajor", "a_kmajor"])
@pytest.mark.parametrize("shape", ROW_SUM_SHAPES, ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_mm_row_sums(dtype, shape, a_major):
    m, n, k = shape
    a, b = operand(m, k, a_major, dtype), operand(k, n, "n", dtype)
    c, sums = poisoned(lambda: ops.mm_row_sums(a, b), (m, n), dtype)
    check(c, a.double() @ b.double(), dtype, a @ b)
    check(sums, a.double().sum(1), dtype, a.sum(1))


@gpu
@pytest.mark.parametrize("config", range(len(SM90_CONFIG_NAMES)), ids=SM90_CONFIG_NAMES)
def test_mm_row_sums_on_every_sm90_tile(config, monkeypatch):
    """The kernel's row sums on each row with a lean kernel (one, two and three consumers: 64-,
    128- and 192-row tiles; 2x1 clusters), on a ring that wraps (K = 2100: 33 k-tiles) and blocks
    of several tiles (more tiles than SMs), rows past M; K slices (where the row can) and the rows
    of fewer than 64 columns (the swapped decode rows) take torch's sum: every form exact to the
    dtype. A row-sum kernel (gemm_kernel<Traits, kOffload, kLean, kSums>) is the call's one kernel;
    where torch sums, none runs."""
    use_sm90_row(monkeypatch, config)
    a, b = operand(2056, 2100, "t"), operand(2100, 1000, "n")
    for splits in ("1", "3"):
        monkeypatch.setenv("CUTE_GEMM_SPLITS", splits)
        c, sums = poisoned(lambda: ops.mm_row_sums(a, b), (2056, 1000), torch.bfloat16)
        check(c, a.double() @ b.double(), torch.bfloat16, a @ b)
        check(sums, a.double().sum(1), torch.bfloat16, a.sum(1))
    monkeypatch.setenv("CUTE_GEMM_SPLITS", "1")
    kernels = cuda_kernels(lambda: ops.mm_row_sums(a, b))
    summing = [k for k in kernels if sm90_kind(k) == "row sums"]
    if int(SM90_CONFIG_NAMES[config].split("x")[1]) >= 64:  # the rows with a lean kernel
        assert len(kernels) == 1 and summing == kernels, kernels
    else:
        assert summing == [] and len(kernels) > 1, kernels


@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_mm_row_sums_in_the_kernel_and_by_torch_agree(dtype, monkeypatch):
    """The rule's row (no pin) on the weight gradients of a GPT-2-medium block at 2048 tokens: the
    kernel's sums, and torch's (CUTE_GEMM_ROW_SUMS=0), within the dtype's rounding of each other."""
    for out, inp in ((3072, 1024), (4096, 1024), (1024, 4096)):
        a, b = operand(out, 2048, "t", dtype), operand(2048, inp, "n", dtype)
        c, sums = ops.mm_row_sums(a, b)
        monkeypatch.setenv("CUTE_GEMM_ROW_SUMS", "0")
        c0, sums0 = ops.mm_row_sums(a, b)
        monkeypatch.delenv("CUTE_GEMM_ROW_SUMS")
        assert torch.equal(c, c0)
        ref = a.double().sum(1)
        check(sums, ref, dtype, sums0)


@gpu
@pytest.mark.parametrize("tokens", [1, 129, 2048])
def test_linear_bias_gradient_beside_the_weights(tokens):
    """nn.Linear's backward: the bias's gradient from the weight gradient's call (mm_row_sums), as
    torch's; and where the backward builds a graph (create_graph=True) from the separate ops."""
    theirs = torch.nn.Linear(1024, 768, device="cuda", dtype=torch.bfloat16)
    ours = cute_gemm.nn.Linear.from_torch(theirs)
    x, grad = randn(tokens, 1024), randn(tokens, 768)
    want = torch.autograd.grad(theirs(x), [theirs.weight, theirs.bias], grad)
    with OpNames() as seen:
        got = torch.autograd.grad(ours(x), [ours.weight, ours.bias], grad)
    assert "cute_gemm.mm_row_sums.default" in seen.names, seen.names
    ref_bias = grad.double().sum(0)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.stride() == w.stride() and g.dtype == w.dtype
    check(got[0], grad.double().t() @ x.double(), torch.bfloat16, want[0])
    check(got[1], ref_bias, torch.bfloat16, want[1])
    with OpNames() as seen:
        graph = torch.autograd.grad(ours(x), [ours.bias], grad, create_graph=True)[0]
    assert "cute_gemm.mm_row_sums.default" not in seen.names
    check(graph, ref_bias, torch.bfloat16, want[1])


# ================================================================================ GPU: opcheck

def opcheck_cases():
    def r(*shape, grad=False):
        return randn(*shape, dtype=torch.float16).requires_grad_(grad)
    return {
        "mm": (ops.mm.default, (r(33, 72, grad=True), r(72, 40, grad=True)), {}),
        "mm_fp32": (ops.mm.default, (r(33, 72, grad=True), r(72, 40, grad=True)), {"out_dtype": torch.float32}),
        "mm.out": (ops.mm.out, (r(33, 72), r(40, 72).t()), {"out": r(40, 33).t()}),
        "addmm": (ops.addmm.default, (r(40, grad=True), r(33, 72, grad=True), r(72, 40, grad=True)),
                  {"beta": 0.5, "alpha": 2.0, "activation": "gelu"}),
        "addmm_relu": (ops.addmm.default, (r(33, 40, grad=True), r(33, 72, grad=True), r(72, 40, grad=True)),
                       {"activation": "relu"}),
        "addmm.out": (ops.addmm.out, (r(40), r(33, 72), r(72, 40)),
                      {"activation": "silu", "out_dtype": torch.float32, "out": torch.empty(33, 40, device="cuda")}),
        "bmm": (ops.bmm.default, (r(3, 33, 72, grad=True), r(3, 72, 40, grad=True)), {}),
        "bmm.out": (ops.bmm.out, (r(3, 33, 72), r(3, 72, 40)), {"out": r(3, 33, 40)}),
        "mm_row_sums": (ops.mm_row_sums.default, (r(72, 40).t(), r(72, 33)), {}),
    }


@gpu
@pytest.mark.parametrize("name", ["mm", "mm_fp32", "mm.out", "addmm", "addmm_relu", "addmm.out", "bmm", "bmm.out",
                                  "mm_row_sums"])
def test_opcheck(name):
    op, args, kwargs = opcheck_cases()[name]
    torch.library.opcheck(op, args, kwargs)


# ================================================================== GPU: compile, streams, graphs

@gpu
def test_compiled_mlp_matches_eager():
    dtype = torch.bfloat16
    mlp = torch.nn.Sequential(cute_gemm.nn.Linear(64, 192, activation="gelu", device="cuda", dtype=dtype),
                              cute_gemm.nn.Linear(192, 64, device="cuda", dtype=dtype))
    compiled = torch.compile(mlp, fullgraph=True)
    x = randn(4, 33, 64)
    results = []
    for model in (mlp, compiled):
        xi = x.clone().requires_grad_()
        y = model(xi)
        grads = torch.autograd.grad(y.float().square().mean(), [xi, *mlp.parameters()])
        results.append((y, grads))
    (y, grads), (y_c, grads_c) = results
    assert rel_err(y_c, y.double()) <= REL_BOUND[dtype]
    for g, g_c in zip(grads, grads_c):
        assert g_c.shape == g.shape and rel_err(g_c, g.double()) <= REL_BOUND[dtype]


@gpu
def test_compiled_training_with_dynamic_shapes_compiles_once():
    """Training through torch.compile(dynamic=True) with inputs whose shapes follow M (a full C
    term and an (M, 1) column of addmm, mm, bmm): one graph for several M, and the gradients of
    eager. The C++ autograd keeps input's shape symbolic (concrete sizes recompiled per M)."""
    from torch._dynamo.testing import CompileCounterWithBackend

    dtype = torch.bfloat16  # randn's

    def step(c, col, a, b, a3, b3):
        y = cute_gemm.addmm(c, a, b, activation="gelu") + cute_gemm.addmm(col, a, b) + cute_gemm.mm(a, b)
        return y.float().sum() + cute_gemm.bmm(a3, b3).float().sum()

    torch._dynamo.reset()
    counter = CompileCounterWithBackend("aot_eager")
    compiled = torch.compile(step, backend=counter, dynamic=True)
    for m in (64, 96, 160):
        args = [randn(m, 48), randn(m, 1), randn(m, 128), randn(128, 48), randn(2, m, 32), randn(2, 32, 40)]
        grads = []
        for fn in (step, compiled):
            leaves = [x.detach().clone().requires_grad_() for x in args]
            fn(*leaves).backward()
            grads.append([x.grad for x in leaves])
        for g, g_c in zip(*grads):
            assert g_c.shape == g.shape and rel_err(g_c, g.double()) <= REL_BOUND[dtype]
    assert counter.frame_count == 1, counter.frame_count


@gpu
def test_ops_run_on_the_current_stream():
    """The inputs are written on a side stream after a long sleep; an op launched anywhere but
    that stream would read the old values."""
    dtype = torch.bfloat16
    a, b, bias = randn(257, 129), randn(129, 127), randn(127)
    a3, b3 = randn(3, 65, 129), randn(3, 129, 63)
    new_a, new_a3 = randn(257, 129), randn(3, 65, 129)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = nan_out((257, 127), dtype)
        torch.cuda._sleep(50_000_000)  # tens of milliseconds of GPU time
        a.copy_(new_a)
        a3.copy_(new_a3)
        c_mm = cute_gemm.mm(a, b)
        c_addmm = cute_gemm.addmm(bias, a, b, activation="silu")
        cute_gemm.mm(a, b, out=out)
        c_bmm = cute_gemm.bmm(a3, b3)
    side.synchronize()
    ref = new_a.double() @ b.double()
    check(c_mm, ref, dtype)
    check(out, ref, dtype)
    check(c_addmm, F.silu(ref + bias.double()), dtype)
    check(c_bmm, new_a3.double() @ b3.double(), dtype)


@gpu
def test_cuda_graph_capture_and_replay():
    dtype = torch.bfloat16
    a, b, bias = randn(129, 574), randn(127, 574).t(), randn(127)
    out = nan_out((129, 127), dtype)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the graph
        cute_gemm.mm(a, b)
        cute_gemm.addmm(bias, a, b, activation="gelu")
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        c_mm = cute_gemm.mm(a, b)
        c_addmm = cute_gemm.addmm(bias, a, b, activation="gelu")
        cute_gemm.addmm(bias, a, b, beta=0.5, out=out)
    for _ in range(2):
        a.copy_(torch.randn_like(a))
        b.copy_(torch.randn_like(b))
        bias.copy_(torch.randn_like(bias))
        for c in (c_mm, c_addmm, out):
            c.fill_(float("nan"))
        graph.replay()
        torch.cuda.synchronize()
        ref = a.double() @ b.double()
        check(c_mm, ref, dtype)
        check(c_addmm, F.gelu(ref + bias.double()), dtype)
        check(out, ref + 0.5 * bias.double(), dtype)


# ============================================================================ GPU: float32

@pytest.fixture(params=[False, True], ids=["ieee", "tf32"])
def allow_tf32(request):
    saved = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = request.param
    yield request.param
    torch.backends.cuda.matmul.allow_tf32 = saved


@gpu
@pytest.mark.parametrize("op", ["mm", "addmm", "bmm"])
def test_float32_inputs(op, allow_tf32):
    """Without TF32 the result has float32 precision (torch's own GEMM); with it, TF32's."""
    dtype = torch.float32
    bound = TF32_BOUND if allow_tf32 else 1e-5
    kwargs = {}
    if op == "mm":
        args = operand(129, 574, "n", dtype), operand(574, 127, "t", dtype)
        ref = args[0].double() @ args[1].double()
    elif op == "addmm":
        args = randn(127, dtype=dtype), operand(129, 574, "n", dtype), operand(574, 127, "t", dtype)
        kwargs = {"activation": "gelu"}
        ref = addmm_ref(*args, 1, 1, "gelu")
    else:
        args = randn(3, 65, 129, dtype=dtype), randn(3, 129, 63, dtype=dtype)
        ref = args[0].double() @ args[1].double()
    fn = getattr(cute_gemm, op)
    check(fn(*args, **kwargs), ref, dtype, bound=bound)
    out = nan_out(tuple(ref.shape), dtype)
    assert fn(*args, **kwargs, out=out) is out
    check(out, ref, dtype, bound=bound)
    with pytest.raises(TypeError, match=rf"{op}: .*out_dtype"):
        fn(*args, **kwargs, out_dtype=torch.bfloat16)


# ============================================================================ GPU: autocast

AUTOCAST = [torch.float16, torch.bfloat16]


def autocast_cases(lowp):
    """(name, cute_gemm call, torch's counterpart, float64 reference of the inputs cast to lowp),
    on float32 inputs, one of them already in lowp (autocast casts what is not)."""
    a, b, bias = randn(129, 574, dtype=torch.float32), operand(574, 127, "t", torch.float32), randn(127, dtype=lowp)
    a3, b3 = randn(3, 65, 129, dtype=torch.float32), randn(3, 129, 63, dtype=torch.float32)

    def low(*xs):
        return [x.to(lowp).double() for x in xs]
    return [
        ("mm", lambda: cute_gemm.mm(a, b), lambda: torch.mm(a, b), lambda: torch.mm(*low(a, b))),
        ("addmm", lambda: cute_gemm.addmm(bias, a, b, alpha=0.5, activation="silu"),
         lambda: F.silu(torch.addmm(bias, a, b, alpha=0.5)),
         lambda: addmm_ref(*low(bias, a, b), 1, 0.5, "silu")),
        ("bmm", lambda: cute_gemm.bmm(a3, b3), lambda: torch.bmm(a3, b3), lambda: torch.bmm(*low(a3, b3))),
        ("matmul", lambda: cute_gemm.matmul(a3, b3[0]), lambda: torch.matmul(a3, b3[0]),
         lambda: torch.matmul(*low(a3, b3[0]))),
    ]


@gpu
@pytest.mark.parametrize("case", range(4), ids=["mm", "addmm", "bmm", "matmul"])
@pytest.mark.parametrize("lowp", AUTOCAST, ids=DTYPE_IDS)
def test_autocast_casts_as_torch_does(lowp, case):
    """Inside torch.autocast("cuda") the ops cast their floating-point inputs to the autocast
    dtype, as torch.mm / addmm / bmm do: the result has that dtype and the precision of a GEMM on
    the cast inputs. out_dtype=float32 still gives float32; outside the region nothing is cast."""
    name, ours, theirs, ref = autocast_cases(lowp)[case]
    with torch.autocast("cuda", dtype=lowp):
        got, want = ours(), theirs()
        assert got.dtype == want.dtype == lowp, (name, got.dtype, want.dtype)
        check(got, ref(), lowp, want)
    if name == "mm":
        a, b = randn(33, 72, dtype=torch.float32), randn(72, 40, dtype=torch.float32)
        with torch.autocast("cuda", dtype=lowp):
            wide = cute_gemm.mm(a, b, out_dtype=torch.float32)
        check(wide, a.to(lowp).double() @ b.to(lowp).double(), torch.float32)
        with torch.autocast("cuda", dtype=lowp, enabled=False):
            assert cute_gemm.mm(a, b).dtype == torch.float32


@gpu
@pytest.mark.parametrize("lowp", AUTOCAST, ids=DTYPE_IDS)
def test_autocast_training_matches_torch_linear(lowp):
    """Mixed-precision training: float32 parameters, the forward under autocast. Output dtype,
    values and the float32 gradients of every parameter agree with torch.nn.Linear's."""
    def mlp(cls):
        torch.manual_seed(1)
        return torch.nn.Sequential(cls(129, 192, device="cuda"), torch.nn.GELU(), cls(192, 72, device="cuda"))
    theirs = mlp(torch.nn.Linear)
    ours = torch.nn.Sequential(*[cute_gemm.nn.Linear.from_torch(m) if isinstance(m, torch.nn.Linear) else m
                                 for m in mlp(torch.nn.Linear)])
    x, grad = randn(2, 33, 129, dtype=torch.float32), randn(2, 33, 72, dtype=lowp)
    outs = []
    for model in (ours, theirs):
        with torch.autocast("cuda", dtype=lowp):
            y = model(x)
        y.backward(grad)
        outs.append((y, [p.grad for p in model.parameters()]))
    (y, grads), (y_t, grads_t) = outs
    assert y.dtype == y_t.dtype == lowp
    assert rel_err(y, y_t.double()) <= 2 * REL_BOUND[lowp]
    for (name, p), g, g_t in zip(ours.named_parameters(), grads, grads_t):
        assert g.dtype == g_t.dtype == torch.float32 and g.shape == p.shape, name
        assert rel_err(g, g_t.double()) <= 2 * REL_BOUND[lowp], (name, rel_err(g, g_t.double()))


@gpu
def test_autocast_under_torch_compile():
    lin = cute_gemm.nn.Linear(64, 96, device="cuda")
    x = randn(5, 64, dtype=torch.float32)

    def fn(x):
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return lin(x)
    torch._dynamo.reset()
    eager, compiled = fn(x), torch.compile(fn, fullgraph=True)(x)
    assert eager.dtype == compiled.dtype == torch.bfloat16
    assert rel_err(compiled, eager.double()) <= REL_BOUND[torch.bfloat16]


# ============================================================================ GPU: nn.Linear

@gpu
@pytest.mark.parametrize("bias", [True, False], ids=["bias", "no_bias"])
@pytest.mark.parametrize("activation", [None, "relu", "gelu", "silu"])
def test_linear_matches_torch(activation, bias):
    dtype = torch.bfloat16
    theirs = torch.nn.Linear(129, 72, bias=bias, device="cuda", dtype=dtype)
    ours = cute_gemm.nn.Linear(129, 72, bias=bias, device="cuda", dtype=dtype, activation=activation)
    ours.load_state_dict(theirs.state_dict())
    for x in (randn(2, 33, 129), randn(5, 129), randn(129)):
        ref = ACTS[activation](F.linear(x.double(), theirs.weight.double(),
                                        theirs.bias.double() if bias else None))
        check(ours(x), ref, dtype, ACTS[activation](theirs(x)))


@gpu
def test_linear_grad():
    lin = cute_gemm.nn.Linear(129, 72, device="cuda", dtype=torch.bfloat16, activation="gelu_tanh")

    def ref(x, w, b):
        return F.gelu(F.linear(x, w, b), approximate="tanh")

    def ours(x, w, b):
        return torch.func.functional_call(lin, {"weight": w, "bias": b}, (x,))

    grads_vs_reference(ours, ref, [randn(2, 33, 129), lin.weight, lin.bias])
