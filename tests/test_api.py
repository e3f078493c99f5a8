"""Op registration and argument errors. CPU-only cases run anywhere; the rest need a GPU."""

import pytest
import torch

import cute_gemm


def test_op_is_registered_with_schema():
    op = torch.ops.cute_gemm.mm.default
    assert str(op._schema) == "cute_gemm::mm(Tensor a, Tensor b, *, ScalarType? out_dtype=None) -> Tensor"


def test_cpu_tensors_are_refused_with_the_argument_named():
    a = torch.randn(4, 8, dtype=torch.bfloat16)
    b = torch.randn(8, 3, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"mm: a must be a CUDA tensor, got device cpu"):
        cute_gemm.mm(a, b)


def test_explain_checks_as_the_op_does():
    a = torch.randn(4, 8, dtype=torch.bfloat16)
    b = torch.randn(8, 3, dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"mm: a must be a CUDA tensor, got device cpu"):
        cute_gemm.explain(a, b)
    with pytest.raises(ValueError, match=r"addmm: a must be a CUDA tensor"):
        cute_gemm.explain(a, b, torch.randn(3, dtype=torch.bfloat16))
    with pytest.raises(TypeError, match="explain: b must be a torch.Tensor, got int"):
        cute_gemm.explain(a, 3)


@pytest.mark.parametrize("to_sparse", [torch.Tensor.to_sparse, torch.Tensor.to_sparse_csr], ids=["coo", "csr"])
def test_sparse_tensors_are_refused(to_sparse):
    a = to_sparse(torch.randn(4, 8, dtype=torch.float16))
    with pytest.raises(ValueError, match=r"mm: a must be a dense \(strided\) tensor, got layout Sparse"):
        cute_gemm.mm(a, torch.randn(8, 3, dtype=torch.float16))


def test_non_tensor_argument_is_a_type_error():
    with pytest.raises(TypeError, match="mm: a must be a torch.Tensor, got list"):
        cute_gemm.mm([[1.0]], torch.randn(1, 1))
    with pytest.raises(TypeError, match="mm: b must be a torch.Tensor, got int"):
        cute_gemm.mm(torch.randn(1, 1), 3)


def test_meta_tensors_give_the_output_shape():
    a = torch.empty(5, 7, dtype=torch.float16, device="meta")
    b = torch.empty(7, 3, dtype=torch.float16, device="meta")
    out = torch.ops.cute_gemm.mm(a, b)
    assert out.shape == (5, 3) and out.dtype == torch.float16 and out.device.type == "meta"


def _cuda(*shape, dtype=torch.bfloat16):
    return torch.randn(*shape, device="cuda").to(dtype)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "make, exc, pattern",
    [
        (lambda: (_cuda(4, 8), torch.randn(8, 3, dtype=torch.bfloat16)), ValueError,
         r"mm: b must be a CUDA tensor, got device cpu"),
        (lambda: (_cuda(4, 8, dtype=torch.float64), _cuda(8, 3, dtype=torch.float64)), TypeError,
         r"mm: a must be float16, bfloat16 or float32, got Double"),
        (lambda: (_cuda(4, 8, dtype=torch.float16), _cuda(8, 3)), TypeError,
         r"mm: a and b must have the same dtype, got a Half and b BFloat16"),
        (lambda: (_cuda(4, 8), torch.randint(0, 3, (8, 3), device="cuda")), TypeError,
         r"mm: b must be float16, bfloat16 or float32, got Long"),
        (lambda: (_cuda(8), _cuda(8, 3)), ValueError, r"mm: a must be 2-D \(M, K\), got shape \[8\]"),
        (lambda: (_cuda(4, 8), _cuda(2, 8, 3)), ValueError, r"mm: b must be 2-D \(K, N\), got shape \[2, 8, 3\]"),
        (lambda: (_cuda(4, 8), _cuda(9, 3)), ValueError,
         r"mm: a's columns \(K\) must equal b's rows, got a \[4, 8\] and b \[9, 3\]"),
        (lambda: (_cuda(4, 8).to_sparse(), _cuda(8, 3)), ValueError, r"mm: a must be a dense \(strided\) tensor"),
    ],
    ids=["b_on_cpu", "float64", "mixed_dtypes", "int64", "a_1d", "b_3d", "k_mismatch", "sparse"],
)
def test_bad_inputs_raise_clear_errors(make, exc, pattern):
    a, b = make()
    with pytest.raises(exc, match=pattern):
        cute_gemm.mm(a, b)
    torch.cuda.synchronize()  # the context is still usable


@pytest.mark.gpu
def test_opcheck():
    a = _cuda(33, 72, dtype=torch.float16)
    b = _cuda(72, 40, dtype=torch.float16)
    torch.library.opcheck(torch.ops.cute_gemm.mm.default, (a, b))


@pytest.mark.gpu
def test_torchs_newer_precision_setting():
    """torch.backends.cuda.matmul.fp32_precision, set where the old allow_tf32 switch cannot say
    it: 16-bit calls run as ever (they never read it) and float32 calls take torch's own matmul,
    which follows it."""
    matmul = torch.backends.cuda.matmul
    if not hasattr(matmul, "fp32_precision"):
        pytest.skip("this torch has no fp32_precision setting")
    saved = matmul.fp32_precision
    try:
        matmul.fp32_precision = "tf32"
        for dtype, bound in ((torch.bfloat16, 1e-2), (torch.float32, 5e-3)):
            a, b = _cuda(96, 72, dtype=dtype), _cuda(72, 40, dtype=dtype)
            ref = a.double() @ b.double()
            out = cute_gemm.mm(a, b)
            assert ((out.double() - ref).norm() / ref.norm()).item() <= bound
            plan = cute_gemm.explain(a, b)
            if dtype == torch.bfloat16:
                assert plan["route"] == "kernel"
            else:  # TF32 kernels where torch's old switch can say so, else torch's matmul
                assert plan["route"] == "torch" or plan["tf32"], str(plan)
    finally:
        matmul.fp32_precision = saved


@pytest.mark.gpu
def test_explain_refuses_what_the_op_refuses():
    a, b, x = _cuda(8, 8), _cuda(8, 8), _cuda(8, 8)
    with pytest.raises(ValueError, match="addmm: out must not overlap input"):
        cute_gemm.explain(a, b, x, out=x)
    assert cute_gemm.explain(a, b, x, beta=0, out=x)["route"] == "kernel"  # beta = 0 ignores input, as addmm does
    with pytest.raises(ValueError, match="addmm: beta must be a real number"):
        cute_gemm.explain(a, b, x, beta=1j)
    w = _cuda(8, 8).requires_grad_()
    with pytest.raises(RuntimeError, match=r"mm\(\): functions with out=\.\.\. arguments"):
        cute_gemm.explain(w, b, out=torch.empty(8, 8, device="cuda", dtype=torch.bfloat16))
