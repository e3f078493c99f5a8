"""bench/bench_ops.py on CPU: arguments, tables and the no-GPU message. The timing is not a test."""

import os
import re
import subprocess
import sys
from pathlib import Path

import bench_scripts
import pytest

BENCH, bench = bench_scripts.load("bench_ops")


def usage_error(capsys, argv) -> str:
    return bench_scripts.usage_error(bench, capsys, argv)


def test_defaults():
    args = bench.parse_args([])
    assert args.section == ["fused", "mlp", "gated", "bias", "loss"]
    assert args.shapes == [(4096, 14336, 4096), (16384, 4096, 4096)]
    assert args.activations == ["gelu"] and args.mlp_activation == "gelu"
    assert args.mlp == (8192, 4096, 14336) and args.dtype == "bf16" and args.layout == "nt"
    assert args.json == Path("bench/out/ops.json")
    assert args.gated == [(1, 14336, 4096), (16, 14336, 4096), (64, 14336, 4096), (2048, 14336, 4096)]
    assert args.gated_activation == "silu" and args.after_op is None
    assert args.bias == [(3072, 1024, 8192), (1024, 1024, 8192), (4096, 1024, 8192), (1024, 4096, 8192)]


def test_lists_and_their_errors(capsys):
    assert bench.parse_args(["--activations", "all"]).activations == ["none", "relu", "gelu", "gelu_tanh", "silu"]
    with pytest.raises(SystemExit):  # the bias alone is a fused-section choice, not an MLP activation
        bench.parse_args(["--mlp-activation", "none"])
    assert bench.parse_args(["--activations", "silu, relu,silu"]).activations == ["silu", "relu"]
    assert bench.parse_args(["--section", "mlp"]).section == ["mlp"]
    assert bench.parse_args(["--shapes", "1x2x3"]).shapes == [(1, 2, 3)]
    assert bench.parse_args(["--mlp", "16X32x64"]).mlp == (16, 32, 64)
    assert "activation 'tanh' is not one of none, relu, gelu, gelu_tanh, silu, all" in usage_error(
        capsys, ["--activations", "gelu,tanh"])
    assert "section 'both' is not one of fused, mlp, gated, bias, loss, all" in usage_error(capsys, ["--section", "both"])
    assert bench.parse_args(["--after-op"]).after_op == 32.0 and bench.parse_args(["--after-op", "8"]).after_op == 8.0
    assert bench.parse_args(["--gated", "16x28x32"]).gated == [(16, 28, 32)]
    assert "invalid choice: 'relu'" in usage_error(capsys, ["--gated-activation", "relu"])  # not a gated MLP's
    assert "'8x8' is not TOKENSxDxHIDDEN" in usage_error(capsys, ["--mlp", "8x8"])
    assert "is not MxNxK" in usage_error(capsys, ["--shapes", "0x1x1"])
    assert "invalid choice: 'elu'" in usage_error(capsys, ["--mlp-activation", "elu"])


def fused(m, n, k, unfused, fused_, activation="gelu"):
    def res(t):
        return ({"wrong": True, "rel_err": 0.5} if t == "WRONG" else {"error": "RuntimeError: boom"} if t == "failed"
                else {"us": t, "eager_us": t + 1, "rel_err": 1e-3})
    return bench.finish_fused({"m": m, "n": n, "k": k, "dtype": "bf16", "layout": "nt", "activation": activation,
                               "reps": 2, "impls": {"unfused": res(unfused), "fused": res(fused_)}})


def test_fused_table_and_geomean():
    rows = [fused(1024, 1024, 1024, 12.0, 10.0), fused(2048, 1024, 1024, 30.0, 20.0, "relu"),
            fused(4096, 1024, 1024, 50.0, "WRONG"), fused(64, 64, 64, 5.0, "failed")]
    assert rows[0]["ratio"] == pytest.approx(1.2) and rows[2]["ratio"] is None
    assert rows[0]["impls"]["fused"]["tflops"] == pytest.approx(2 * 1024**3 / 10e-6 / 1e12)
    text = bench.format_fused(rows)
    assert "| 1024x1024x1024 | gelu | 12.0 | 10.0 | 179.0 | 214.7 | 1.20 |" in text
    assert "| 4096x1024x1024 | gelu | 50.0 | WRONG (rel err 5.0e-01) | 171.8 | WRONG (rel err 5.0e-01) | - |" in text
    assert "| 64x64x64 | gelu | 5.0 | failed | 0.1 | failed | - |" in text
    # sqrt(1.2 * 1.5) = 1.342
    assert "geomean unfused/fused: 1.342 over 2 shapes (2 left out: WRONG or failed); target >= 1.1" in text
    assert bench.format_fused([]) == ""


def test_mlp_table_and_exit_status():
    row = {"tokens": 8, "d": 16, "hidden": 32, "dtype": "bf16", "activation": "gelu", "ratio": 1.25,
           "impls": {"torch.nn.Linear": {"ms": 2.5, "tflops": 100.0, "rel_err": 4e-3},
                     "cute_gemm.nn.Linear": {"ms": 2.0, "tflops": 125.0, "rel_err": 3e-3}}}
    text = bench.format_mlp(row)
    assert "Linear(16, 32) + gelu, Linear(32, 16), 8 tokens, bf16" in text
    assert "| cute_gemm.nn.Linear | 2.00 | 125.0 | 3.0e-03 |" in text and "torch/cute time: 1.250" in text
    assert not bench.any_bad({"fused": [fused(8, 8, 8, 2.0, 1.0)], "mlp": row, "gated": [], "bias": []})
    assert bench.any_bad({"fused": [fused(8, 8, 8, 2.0, "WRONG")], "mlp": None, "gated": [], "bias": []})


def gated(m, n, k, torch_us, gated_us, after=None):
    def res(t, a):
        return ({"wrong": True, "rel_err": 0.5} if t == "WRONG" else {"error": "RuntimeError: boom"} if t == "failed"
                else {"us": t, "eager_us": t + 1, "rel_err": 1e-3, **({"after_op_us": a} if a else {})})
    a_t, a_g = after or (None, None)
    return bench.finish_gated({"m": m, "n": n, "k": k, "dtype": "bf16", "activation": "silu", "reps": 2,
                               "impls": {"torch": res(torch_us, a_t), "gated_mm": res(gated_us, a_g)}})


def test_gated_table():
    rows = [gated(1, 14336, 4096, 88.0, 80.0, after=(100.0, 94.0)), gated(16, 14336, 4096, 90.0, "WRONG")]
    assert rows[0]["ratio"] == pytest.approx(1.1) and rows[0]["ratio_after_op"] == pytest.approx(100 / 94)
    # the two weights, 2 x 14336 x 4096 bf16 values, in 80 us
    assert rows[0]["impls"]["gated_mm"]["weights_gbps"] == pytest.approx(2 * 14336 * 4096 * 2 / 80e-6 / 1e9)
    assert rows[1]["ratio"] is None and rows[1]["ratio_after_op"] is None
    text = bench.format_gated(rows)
    assert "vs silu(x @ w_gate.t()) * (x @ w_up.t()), bf16" in text
    assert "| 1x14336x4096 | 88.0 | 80.0 | 2.9 | 2936 | 1.10 | 100.0 | 94.0 | 1.06 |" in text
    assert "| 16x14336x4096 | 90.0 | WRONG (rel err 5.0e-01) |" in text
    assert "geomean torch/gated_mm: 1.100 over 1 shape" in text
    assert "after an op" not in bench.format_gated([gated(1, 64, 64, 2.0, 1.0)])
    assert bench.format_gated([]) == ""
    assert bench.any_bad({"fused": [], "mlp": None, "gated": rows, "bias": []})
    assert not bench.any_bad({"fused": [], "mlp": None, "gated": rows[:1], "bias": []})


def test_gated_variants(capsys):
    """--variants: gated_mm pinned by bench_mm.py's variant names, each in a table of its own beside the
    rule, as torch's time over the variant's."""
    assert bench.parse_args([]).variants == ["auto"]
    assert bench.parse_args(["--variants", "auto,sm90:0,sk"]).variants == ["auto", "sm90:0", "sk"]
    assert bench.parse_args(["--variants", "sm90:2/3,splits:2,nopdl+l2first"]).variants == ["sm90:2/3", "splits:2",
                                                                                             "nopdl+l2first"]
    # Variants that gated_mm would not run as named: a row without a gated kernel, the sm80 family,
    # the autotune cache, the swapped or narrow paths.
    for v in ("sm90:7", "sm80", "tuned", "swap64", "narrow90"):
        assert f"variant '{v}' is not one gated_mm runs" in usage_error(capsys, ["--variants", f"auto,{v}"])
    # The rows named here are the header's.
    header = (Path(__file__).resolve().parent.parent / "csrc" / "sm90" / "configs.h").read_text()
    rows = re.search(r"kGatedConfigs\[\] = \{([\d, ]*)\};", header).group(1)
    assert bench.GATED_ROWS == tuple(r.strip() for r in rows.split(","))
    row = gated(2048, 14336, 4096, 800.0, 700.0, after=(810.0, 720.0))
    row["impls"]["gated_mm[sm90:0]"] = {"us": 640.0, "after_op_us": 900.0}
    row["impls"]["gated_mm[sk]"] = {"wrong": True, "rel_err": 0.5}
    row = bench.finish_gated(row)
    assert row["ratio"] == pytest.approx(800 / 700)  # the rule's
    assert row["impls"]["gated_mm[sm90:0]"]["x_torch"] == pytest.approx(1.25)
    text = bench.format_gated([row])
    assert "| 2048x14336x4096 | sm90:0 | 640.0 | 1.25 | 900.0 | 0.90 |" in text
    assert "| 2048x14336x4096 | sk | WRONG (rel err 5.0e-01) | - |" in text
    assert "variant" not in bench.format_gated([gated(1, 64, 64, 2.0, 1.0)])
    # A variant's after-op times show where the rule's own failed.
    failed = gated(16, 64, 64, 2.0, "failed", after=(3.0, None))
    failed["impls"]["gated_mm[sk]"] = {"us": 1.0, "after_op_us": 1.5}
    assert "| 16x64x64 | sk | 1.0 | 2.00 | 1.5 | 2.00 |" in bench.format_gated([bench.finish_gated(failed)])


def bias(times, after=None):
    def res(t, a):
        return ({"wrong": True, "rel_err": 0.5, "what": "sums"} if t == "WRONG" else {"error": "RuntimeError: boom"}
                if t == "failed" else {"us": t, "eager_us": t + 1, "rel_err": 1e-3, **({"after_op_us": a} if a else {})})
    after = after or [None] * len(times)
    return bench.over_torch({"out": 4096, "in": 1024, "tokens": 8192, "dtype": "bf16", "reps": 2,
                              "impls": {c: res(t, a) for c, t, a in zip(bench.BIAS_COLUMNS, times, after)}},
                             "mm_row_sums")


def test_bias_table():
    """The bias section: torch's weight and bias gradients, mm_row_sums by its rule and with torch's
    sums, and the GEMM alone, in that order; torch's time over mm_row_sums's as the ratio."""
    assert bench.parse_args(["--section", "bias", "--bias", "8x4x16"]).bias == [(8, 4, 16)]
    row = bias([130.0, 100.0, 134.0, 98.0], after=[140.0, 112.0, 150.0, 105.0])
    assert row["ratio"] == pytest.approx(1.3) and row["ratio_after_op"] == pytest.approx(1.25)
    assert row["impls"]["cute_gemm.mm"]["x_torch"] == pytest.approx(130 / 98)
    text = bench.format_bias([row])
    assert "| OUT x IN x TOKENS | torch | mm_row_sums | mm_row_sums[torch sums] | cute_gemm.mm | torch/mm_row_sums |" in text
    assert "| 4096x1024x8192 | 130.0 | 100.0 | 134.0 | 98.0 | 1.30 | 140.0 | 112.0 | 150.0 | 105.0 | 1.25 |" in text
    assert "geomean torch/mm_row_sums: 1.300 over 1 shape" in text
    wrong = bias([130.0, "WRONG", 134.0, 98.0])
    assert wrong["ratio"] is None and "after an op" not in bench.format_bias([wrong])
    assert "| 4096x1024x8192 | 130.0 | WRONG (rel err 5.0e-01) | 134.0 | 98.0 | - |" in bench.format_bias([wrong])
    assert bench.format_bias([]) == ""
    assert bench.any_bad({"fused": [], "mlp": None, "gated": [], "bias": [wrong]})
    assert not bench.any_bad({"fused": [], "mlp": None, "gated": [], "bias": [row]})


def test_loss_table():
    """The loss section: torch's head + loss against linear_cross_entropy, forward and backward, with
    each one's peak memory; torch's time over ours as the ratio; a wrong result is never timed."""
    assert bench.parse_args(["--section", "loss", "--loss", "16x8x100"]).loss == [(16, 8, 100)]
    row = {"tokens": 8192, "d": 1024, "vocab": 50304, "dtype": "bf16", "ratio": 6.2 / 1.55,
           "impls": {"torch": {"ms": 6.2, "rel_err": 1e-3, "peak_gib": 5.5},
                     "linear_cross_entropy": {"ms": 1.55, "rel_err": 1e-3, "peak_gib": 1.6}}}
    text = bench.format_loss([row])
    assert "| TOKENS x D x VOCAB | torch ms | linear_cross_entropy ms | torch / ours | torch GiB | ours GiB |" in text
    assert "| 8192x1024x50304 | 6.200 | 1.550 | 4.00 | 5.50 | 1.60 |" in text
    wrong = dict(row, ratio=None, impls={"torch": row["impls"]["torch"],
                                         "linear_cross_entropy": {"wrong": True, "rel_err": 0.5}})
    assert "| 8192x1024x50304 | 6.200 | WRONG (rel err 5.0e-01) | - |" in bench.format_loss([wrong])
    assert bench.format_loss([]) == ""
    assert bench.any_bad({"fused": [], "mlp": None, "gated": [], "bias": [], "loss": [wrong]})
    assert not bench.any_bad({"fused": [], "mlp": None, "gated": [], "bias": [], "loss": [row]})


def test_without_a_gpu_it_says_so_in_one_sentence():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    run = subprocess.run([sys.executable, "-P", str(BENCH)], env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 2
    assert run.stderr.strip() == "bench_ops: no CUDA GPU is visible, so there is nothing to benchmark."
    assert "Traceback" not in run.stderr + run.stdout


def test_record_keeps_the_others_when_one_fails():
    row = {"impls": {}}
    bench.record(row, {"torch": {"us": 1.0}, "gated_mm": RuntimeError("boom\nsecond line")}, baseline="torch")
    assert row["impls"] == {"torch": {"us": 1.0}, "gated_mm": {"error": "RuntimeError: boom"}}
    with pytest.raises(RuntimeError, match="boom"):  # without the baseline there is nothing to compare against
        bench.record({"impls": {}}, {"torch": RuntimeError("boom"), "gated_mm": {"us": 1.0}}, baseline="torch")
