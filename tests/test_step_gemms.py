"""scripts/step_gemms.py's labels and kernel names (no GPU)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
torch = pytest.importorskip("torch")
import step_gemms as S  # noqa: E402


def test_a_linear_and_its_backward_are_labelled_by_shape_and_layout():
    x = torch.randn(5, 4, requires_grad=True)
    w = torch.randn(8, 4, requires_grad=True)
    bias = torch.randn(8, requires_grad=True)
    grad = torch.randn(5, 8)
    label = S.Label()
    with label:
        torch.nn.functional.linear(x, w, bias).backward(grad)
    # forward x @ w^T (w read transposed), dX = dY @ w, dW = dY^T @ x
    assert sorted(label.calls) == ["5x4x8 nn mm", "5x8x4 nt addmm", "8x4x5 tn mm"]
    assert torch.allclose(x.grad, grad @ w) and torch.allclose(w.grad, grad.t() @ x)


def test_batched_and_other_ops():
    a, b = torch.randn(3, 5, 4), torch.randn(3, 4, 6).transpose(1, 2).contiguous().transpose(1, 2)
    assert S.describe(torch.ops.aten.bmm.default, (a, b)) == "3x5x6x4 nt bmm"
    assert S.describe(torch.ops.aten.add.Tensor, (a, a)) is None


def test_mm_row_sums_is_labelled_as_its_gemm():
    class MmRowSums:
        def __str__(self):
            return "cute_gemm.mm_row_sums.default"

    dy, x = torch.randn(5, 8), torch.randn(5, 4)  # nn.Linear's backward: dY^T (out x tokens) @ x
    assert S.describe(MmRowSums(), (dy.t(), x)) == "8x4x5 tn mm_row_sums"


def test_gated_mm_is_labelled_with_both_projections_columns():
    class GatedMm:  # the op's name as the dispatch mode prints it (no build needed)
        def __str__(self):
            return "cute_gemm.gated_mm.default"

    x, w_gate, w_up = torch.randn(16, 64), torch.randn(96, 64), torch.randn(96, 64)
    # x @ [w_gate; w_up]^T: 2 x 96 columns over K = 64, the weights read transposed
    assert S.describe(GatedMm(), (x, w_gate, w_up)) == "16x192x64 nt gated_mm"


def test_kernel_names_are_cut_to_what_tells_them_apart():
    name = ("void cute_gemm::sm90::gemm_kernel<cute_gemm::sm90::KernelTraits<(cute_gemm::DType)1, false, true, 12, "
            "false>, {}>(cute_gemm::sm90::KernelParams<...>)")  # kOffload, kLean, kSums
    assert S.short(name.format("false, false, false")) == "cute 1,false,true,12,false"
    assert S.short(name.format("false, true, false")) == "cute 1,false,true,12,false lean"
    assert S.short(name.format("true, false, false")) == "cute 1,false,true,12,false offload"
    assert S.short(name.format("false, true, true")) == "cute 1,false,true,12,false lean row sums"
    assert S.short("nvjet_sm90_tst_128x192_64x5_2x1_v_bz_coopB_NTN") == "nvjet_sm90_tst_128x192_64x5_2x1_v_bz_coopB_NTN"
    assert S.ratio(2.0, 4.0) == "0.50"
    assert S.ratio(0.0, 4.0) == S.ratio(2.0, 0.0) == "-"


def test_variants_table_lists_each_variant_against_torchs_call(capsys):
    # variant_times' rows: torch's call, the rule's and each variant's us alone, keyed "shape layout op"
    times = {"8x4x5 tn mm": {"torch": 10.0, "auto": 12.5, "sm90:2": 8.0, "sm90:9/2": float("nan")}}
    S.print_variants(times, ["sm90:2", "sm90:9/2"])
    row = capsys.readouterr().out.splitlines()[-1].split()
    # torch 10.0, auto 12.5 (0.80), sm90:2 8.0 (1.25), a variant that could not run: nan (-)
    assert row[:3] == ["8x4x5", "tn", "10.0"]
    assert row[3:] == ["12.5", "(0.80)", "8.0", "(1.25)", "nan", "(-)"]


def test_variants_are_bench_mms():
    assert S.BENCH_MM.parse_variants("sm90:0,sm90:9/2,sk") == ["sm90:0", "sm90:9/2", "sk"]


def test_variant_times_pairs_torchs_call_and_sets_each_variants_knobs(monkeypatch):
    import os

    seen = []

    def fake_alone(call, reps=10, seconds=None):
        seen.append((call, os.environ.get("CUTE_GEMM_SM90_CONFIG"), os.environ.get("CUTE_GEMM_PDL")))
        return float(len(seen))

    monkeypatch.setattr(S, "alone_us", fake_alone)
    monkeypatch.setenv("CUTE_GEMM_PDL", "0")  # what the script sets: kept under every variant
    cute = {"8x4x5 tn mm": "cute-call"}
    torch_calls = {"8x4x5 tn addmm": "torch-call", "5x4x8 nn mm": "other"}  # the same GEMM through another op
    times = S.variant_times(cute, torch_calls, ["sm90:2"])
    assert times == {"8x4x5 tn mm": {"torch": 1.0, "auto": 2.0, "sm90:2": 3.0}}
    assert seen == [("torch-call", None, "0"), ("cute-call", None, "0"), ("cute-call", "2", "0")]
    assert "CUTE_GEMM_SM90_CONFIG" not in os.environ  # restored
