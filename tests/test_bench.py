"""bench/ on CPU: arguments, tables, JSON, --compare, the plot, the Triton kernel (in Triton's
interpreter), a whole run with made-up timings, and the no-GPU message. The timing is not a test."""

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import bench_scripts
import pytest
import torch

BENCH, bench = bench_scripts.load("bench_mm")


def usage_error(capsys, argv) -> str:
    return bench_scripts.usage_error(bench, capsys, argv)


# ---------------------------------------------------------------------------------- arguments

def test_shapes_parse():
    assert bench.parse_shapes("4096x14336x4096,1x2x3") == [(4096, 14336, 4096), (1, 2, 3)]
    for bad in ("4096x4096", "0x1x1", "ax1x1", "1x1x1x1"):
        with pytest.raises(argparse.ArgumentTypeError, match="is not MxNxK"):
            bench.parse_shapes(bad)


def test_suites_parse(capsys):
    assert bench.parse_suites("llm, decode,llm") == ["llm", "decode"]
    assert bench.parse_suites("few-tiles,all") == list(bench.SUITES)
    assert list(bench.SUITES) == ["square", "llm", "decode", "few-tiles", "unaligned", "small", "models"]
    assert "suite 'tiny' is not one of square, llm" in usage_error(capsys, ["--suite", "square,tiny"])


def test_default_is_every_suite_with_each_shape_timed_once():
    args = bench.parse_args([])
    assert args.suite == list(bench.SUITES)
    plan = bench.plan_shapes(args.suite, args.shapes)
    assert [len(bench.SUITES[s]) for s in bench.SUITES] == [4, 5, 4, 4, 4, 3, 20]
    assert len(plan) == 41  # 1024^3 is in square and small, 16x4096x4096 and 16x14336x4096 in decode and models
    assert plan[(1024, 1024, 1024)] == ["square", "small"]
    assert plan[(16, 14336, 4096)] == ["decode", "models"]
    assert plan[(1, 28672, 8192)] == ["decode"]


def test_shapes_alone_are_the_custom_suite_and_add_to_suites():
    args = bench.parse_args(["--shapes", "1x2x3"])
    assert args.suite is None
    assert bench.plan_shapes(args.suite, args.shapes) == {(1, 2, 3): ["custom"]}
    args = bench.parse_args(["--suite", "small", "--shapes", "256x256x256,5x5x5"])
    assert bench.plan_shapes(args.suite, args.shapes) == {
        (256, 256, 256): ["small", "custom"], (1024, 1024, 1024): ["small"], (81920, 256, 256): ["small"],
        (5, 5, 5): ["custom"]}


def test_variants_parse_and_select_knobs():
    assert bench.parse_variants("auto, sm80,sm90:0") == ["auto", "sm80", "sm90:0"]
    assert bench.variant_env("sm90:0") == {"CUTE_GEMM_FAMILY": "sm90", "CUTE_GEMM_SM90_CONFIG": "0"}
    assert bench.variant_env("auto") == {"CUTE_GEMM_FAMILY": "auto"}
    assert bench.parse_variants("tuned") == ["tuned"]
    assert bench.variant_env("tuned") == {"CUTE_GEMM_AUTOTUNE": "1"}
    assert bench.variant_env("nosk") == {"CUTE_GEMM_STREAM_K": "0"}
    assert bench.parse_variants("sk,nosk") == ["sk", "nosk"] and bench.variant_env("sk") == {"CUTE_GEMM_STREAM_K": "1"}
    assert bench.parse_variants("sm90:2/4,nopdl,sm90:0/64") == ["sm90:2/4", "nopdl", "sm90:0/64"]
    assert bench.variant_env("sm90:2/4") == {"CUTE_GEMM_FAMILY": "sm90", "CUTE_GEMM_SM90_CONFIG": "2",
                                            "CUTE_GEMM_SPLITS": "4"}
    assert bench.variant_env("nopdl") == {"CUTE_GEMM_PDL": "0"}
    assert bench.parse_variants("narrow,narrow:2") == ["narrow", "narrow:2"]
    assert bench.variant_env("narrow") == {"CUTE_GEMM_NARROW": "1"}
    assert bench.variant_env("narrow:2") == {"CUTE_GEMM_NARROW": "1", "CUTE_GEMM_SM80_CONFIG": "2"}
    assert bench.variant_env("nonarrow") == {"CUTE_GEMM_NARROW": "0"}
    assert bench.variant_env("narrow90+sm90:1") == {"CUTE_GEMM_SM90_NARROW": "1", "CUTE_GEMM_FAMILY": "sm90",
                                                    "CUTE_GEMM_SM90_CONFIG": "1"}
    assert bench.parse_variants("auto,fasthbm,slowhbm+nopdl") == ["auto", "fasthbm", "slowhbm+nopdl"]
    assert bench.variant_env("swap64") == {"CUTE_GEMM_SWAP_CONFIG": "10"}
    assert bench.variant_env("swap32") == {"CUTE_GEMM_SWAP_CONFIG": "11"}
    assert bench.parse_variants("swap32+splits:2,splits:64") == ["swap32+splits:2", "splits:64"]
    assert bench.variant_env("swap32+splits:2") == {"CUTE_GEMM_SWAP_CONFIG": "11", "CUTE_GEMM_SPLITS": "2"}
    assert bench.variant_env("fasthbm+swap64") == {"CUTE_GEMM_FAST_HBM": "1", "CUTE_GEMM_SWAP_CONFIG": "10"}
    assert bench.variant_env("slowhbm") == {"CUTE_GEMM_FAST_HBM": "0"}
    assert bench.variant_env("swap128+nopdl") == {"CUTE_GEMM_SWAP_CONFIG": "6", "CUTE_GEMM_PDL": "0"}
    assert bench.parse_variants("sm80+nonarrow,sm80+narrow:2") == ["sm80+nonarrow", "sm80+narrow:2"]
    assert bench.variant_env("sm80+nonarrow") == {"CUTE_GEMM_FAMILY": "sm80", "CUTE_GEMM_NARROW": "0"}
    assert bench.variant_env("sm80+narrow:2") == {"CUTE_GEMM_FAMILY": "sm80", "CUTE_GEMM_NARROW": "1",
                                                  "CUTE_GEMM_SM80_CONFIG": "2"}
    for bad in ("sm70", "auto:1", "sm80:x", "tuned:1", "sm80:1/2", "sm90:1/0", "sm90:1/x", "sm90/2",
                "sm90:/4", "sm90:2/", "sm90:2/65", "sm90:1/\u00b2", "sm90:\u00b2", "narrow:", "narrow:x",
                "narrow:1/2", "narrow:\u00b2", "nopdl:1", "sm80+", "+narrow", "sm80+sm70", "splits:", "splits:0",
                "splits:65", "splits:2/2", "splits:x", "splits:\u00b2"):
        with pytest.raises(argparse.ArgumentTypeError, match="is not auto, tuned, sk, nosk, nopdl, narrow, nonarrow, narrow90, swap128"):
            bench.parse_variants(bad)
    for clash in ("narrow+nonarrow", "sm80+sm90", "sm80:1+narrow:2", "sm90:2/2+splits:4", "swap32+swap64"):
        with pytest.raises(argparse.ArgumentTypeError, match="sets a knob twice"):
            bench.parse_variants(clash)


def test_knobs_restore_everything_they_set(monkeypatch):
    # bench_ops' "consumers" column sets CUTE_GEMM_ACT_OFFLOAD=0 (not one of KNOBS): it must not
    # outlive that column (it did, and every later row's "fused" ran without the activation warps).
    for name in (*bench.KNOBS, "CUTE_GEMM_ACT_OFFLOAD", "CUTE_GEMM_GROUP_M"):
        monkeypatch.delenv(name, raising=False)
    assert "CUTE_GEMM_ACT_OFFLOAD" not in bench.KNOBS and "CUTE_GEMM_GROUP_M" not in bench.KNOBS
    monkeypatch.setenv("CUTE_GEMM_FAMILY", "sm80")
    monkeypatch.setenv("CUTE_GEMM_STREAM_K", "1")
    with bench.knobs({"CUTE_GEMM_ACT_OFFLOAD": "0", "CUTE_GEMM_SM90_CONFIG": "2"}):
        assert os.environ["CUTE_GEMM_ACT_OFFLOAD"] == "0" and os.environ["CUTE_GEMM_SM90_CONFIG"] == "2"
        assert "CUTE_GEMM_FAMILY" not in os.environ and "CUTE_GEMM_STREAM_K" not in os.environ
    assert "CUTE_GEMM_ACT_OFFLOAD" not in os.environ and "CUTE_GEMM_SM90_CONFIG" not in os.environ
    assert os.environ["CUTE_GEMM_FAMILY"] == "sm80" and os.environ["CUTE_GEMM_STREAM_K"] == "1"
    monkeypatch.setenv("CUTE_GEMM_GROUP_M", "3")  # a setting outside KNOBS is restored, not cleared
    with bench.knobs({"CUTE_GEMM_GROUP_M": "2"}):
        assert os.environ["CUTE_GEMM_GROUP_M"] == "2"
    assert os.environ["CUTE_GEMM_GROUP_M"] == "3"
    with pytest.raises(TypeError):  # a bad setting restores what was cleared
        with bench.knobs({"CUTE_GEMM_SM80_CONFIG": 1}):
            pass
    assert os.environ["CUTE_GEMM_FAMILY"] == "sm80" and "CUTE_GEMM_SM80_CONFIG" not in os.environ


def test_knobs_in_the_environment_are_named_as_unused():
    assert bench.ignored_knobs_note({"CUTE_GEMM_GROUP_M": "2", "HOME": "/root"}) is None
    note = bench.ignored_knobs_note({"CUTE_GEMM_L2_HINT": "1", "CUTE_GEMM_SPLITS": "2"})
    assert note.startswith("# note: ") and "CUTE_GEMM_SPLITS=2" in note and "CUTE_GEMM_L2_HINT=1" in note
    assert "--variants" in note


def test_family_is_a_shorthand_and_auto_is_always_timed(capsys):
    assert bench.parse_args([]).variants == ["auto"]
    assert bench.parse_args(["--family", "sm80"]).variants == ["auto", "sm80"]
    assert bench.parse_args(["--family", "sm80,sm90"]).variants == ["auto", "sm80", "sm90"]
    assert bench.parse_args(["--variants", "sm90:1,auto"]).variants == ["auto", "sm90:1"]
    assert "family 'sm70' is not one of auto, sm80, sm90" in usage_error(capsys, ["--family", "sm70"])
    assert "not allowed with argument --family" in usage_error(capsys, ["--family", "sm80", "--variants", "sm90"])


def test_layouts(capsys):
    assert bench.parse_args([]).layout == ["nn", "nt", "tn"]  # a model's three
    for layout in ("nn", "nt", "tn", "tt"):
        assert bench.parse_args(["--layout", layout]).layout == [layout]
    assert bench.parse_args(["--layout", "tn,nt,tn"]).layout == ["tn", "nt"]
    assert "layout 'xy' is not one of nn, nt, tn, tt" in usage_error(capsys, ["--layout", "nt,xy"])
    assert "no layout given" in usage_error(capsys, ["--layout", ","])


def test_tables_per_layout():
    """Rows of two layouts: a table per suite, dtype and layout (the heading names it), a geometric
    mean per layout, the plot's panels titled with the layout."""
    rows = [row(4096, 4096, 4096, {"torch.mm": 10.0, "cute[auto]": us}, layout=layout)
            for layout, us in (("nn", 10.0), ("nt", 20.0))]
    text = bench.format_tables(rows)
    assert "## square, bf16, layout nn" in text and "## square, bf16, layout nt" in text
    assert "geomean x torch.mm (every shape, bf16, nn): cute[auto] 1.000" in text
    assert "geomean x torch.mm (every shape, bf16, nt): cute[auto] 0.500" in text
    assert [title for title, _, _ in bench.panels(rows)] == ["square nn", "square nt"]
    assert [title for title, _, _ in bench.panels(rows[:1])] == ["square"]


def test_bad_numbers_and_file_options_are_usage_errors(capsys):
    for bad in ("0", "-1", "x", "inf"):
        assert f"'{bad}' is not a positive number" in usage_error(capsys, ["--seconds", bad])
    assert bench.parse_args(["--peak-tflops", "500"]).peak_tflops == 500
    assert "--compare takes OLD.json or OLD.json NEW.json" in usage_error(capsys, ["--compare", "a", "b", "c"])
    assert "separate jobs" in usage_error(capsys, ["--plot-only", "a.json", "--compare", "b.json"])


def test_plot_path_defaults_next_to_the_json():
    assert bench.parse_args([]).plot == Path("bench/out/results.png")
    assert bench.parse_args(["--json", "/tmp/x/run.json"]).plot == Path("/tmp/x/run.png")
    assert bench.parse_args(["--plot-only", "r.json"]).plot == Path("r.png")


def test_peak_by_gpu_name():
    assert bench.gpu_peak_tflops("NVIDIA H100 80GB HBM3") == 989.4
    assert bench.gpu_peak_tflops("NVIDIA H100 PCIe") == 756.0
    assert bench.gpu_peak_tflops("NVIDIA H200") == 989.4
    assert bench.gpu_peak_tflops("NVIDIA A100-SXM4-80GB") == 312.0
    assert bench.gpu_peak_tflops("NVIDIA GeForce RTX 4090") == 165.2
    assert bench.gpu_peak_tflops("NVIDIA H200 NVL") is None
    assert bench.gpu_peak_tflops("Tesla T4") is None


# ------------------------------------------------------------------------------ tables, JSON

def row(m, n, k, times, dtype="bf16", suites=("square",), peak=1000.0, layout="nn"):
    """A finished row; times maps an implementation to its µs, "WRONG", "NaN" (wrong, not finite) or "failed"."""
    impls = {}
    for name, t in times.items():
        impls[name] = ({"wrong": True, "rel_err": 0.3} if t == "WRONG" else {"wrong": True, "rel_err": None}
                       if t == "NaN" else {"error": "RuntimeError: boom"} if t == "failed"
                       else {"us": t, "eager_us": t + 5, "rel_err": 1e-3})
    return bench.finish_row({"suites": list(suites), "m": m, "n": n, "k": k, "dtype": dtype, "layout": layout,
                             "reps": 2, "impls": impls}, peak)


def test_derived_columns():
    r = row(1024, 1024, 1024, {"torch.mm": 10.0, "cute[auto]": 20.0})
    cute = r["impls"]["cute[auto]"]
    assert cute["tflops"] == pytest.approx(2 * 1024**3 / 20e-6 / 1e12)
    assert cute["pct_peak"] == pytest.approx(cute["tflops"] / 10)
    assert cute["gbps"] == pytest.approx(3 * 1024 * 1024 * 2 / 20e-6 / 1e9)
    assert cute["x_torch"] == 0.5
    assert not r["memory_bound"]  # 2 * 1024^3 / (3 * 1024^2 * 2 bytes) = 341 FLOP/byte
    assert row(16, 4096, 4096, {"torch.mm": 10.0})["memory_bound"]


def test_after_op_columns():
    """--after-op: each call also timed after another kernel; two more columns, and only then."""
    plain = row(1024, 1024, 1024, {"torch.mm": 10.0, "cute[auto]": 20.0})
    assert "after an op" not in bench.format_tables([plain])
    r = row(1024, 1024, 1024, {"torch.mm": 10.0, "cute[auto]": 20.0, "triton": "WRONG"})
    r["impls"]["torch.mm"]["after_op_us"], r["impls"]["cute[auto]"]["after_op_us"] = 12.0, 8.0
    bench.finish_row(r, 1000.0)
    assert r["impls"]["cute[auto]"]["x_torch_after_op"] == 1.5
    text = bench.format_tables([r])
    assert "| x torch.mm | after an op us | x torch.mm after an op |" in text
    assert "| 1024x1024x1024 | cute[auto] | 20.0 | 25.0 | 107.4 | 10.7 | - | 0.50 | 8.0 | 1.50 |" in text
    assert "| 1024x1024x1024 | triton | WRONG (rel err 3.0e-01) | - | - | - | - | - | - | - |" in text
    assert bench.parse_args(["--after-op"]).after_op == 32 and not bench.parse_args([]).after_op
    assert bench.parse_args(["--after-op", "0.25"]).after_op == 0.25


def test_tables_geomean_wrong_and_memory_bound():
    rows = [row(1024, 1024, 1024, {"torch.mm": 10.0, "cute[auto]": 20.0, "triton": 10.0}),
            row(2048, 2048, 2048, {"torch.mm": 40.0, "cute[auto]": 20.0, "triton": "failed"}),
            row(4096, 4096, 4096, {"torch.mm": 80.0, "cute[auto]": "WRONG", "triton": 80.0}),
            row(16, 4096, 4096, {"torch.mm": 20.0, "cute[auto]": 40.0}, suites=("decode",), peak=None),
            row(1, 4096, 4096, {"torch.mm": 20.0, "cute[auto]": "NaN"}, suites=("decode",))]
    text = bench.format_tables(rows)
    assert "## square, bf16, layout nn" in text and "## decode, bf16, layout nn" in text
    # 0.5x and 2x: geomean 1; the WRONG shape and the failed one are left out and counted
    assert ("geomean x torch.mm (square, bf16, nn): cute[auto] 1.000 over 2 shapes (1 WRONG); "
            "triton 1.000 over 2 shapes (1 failed)") in text
    assert "| 4096x4096x4096 | cute[auto] | WRONG (rel err 3.0e-01) | - | - | - | - | - |" in text
    assert "| 2048x2048x2048 | triton | failed | - | - | - | - | - |" in text
    assert "| 1x4096x4096 | cute[auto] | WRONG (rel err not finite) | - | - | - | - | - |" in text
    # compute-bound: no GB/s; memory-bound: GB/s = (16*4096 + 4096*4096 + 16*4096) * 2 B / 40 µs
    assert "| 1024x1024x1024 | cute[auto] | 20.0 | 25.0 | 107.4 | 10.7 | - | 0.50 |" in text
    assert "| 16x4096x4096 | cute[auto] | 40.0 | 45.0 | 13.4 | - | 845 | 0.50 |" in text
    assert "geomean x torch.mm (every shape, bf16): cute[auto] 0.794 over 3 shapes (2 WRONG)" in text


def test_tables_split_by_dtype_and_sum_up_over_both():
    rows = [row(1024, 1024, 1024, {"torch.mm": 10.0, "cute[auto]": 20.0}, dtype="f16"),
            row(1024, 1024, 1024, {"torch.mm": 10.0, "cute[auto]": 5.0}, dtype="bf16")]
    text = bench.format_tables(rows)
    assert "## square, f16, layout nn" in text and "## square, bf16, layout nn" in text
    assert "geomean x torch.mm (every shape, f16): cute[auto] 0.500 over 1 shape" in text
    assert "geomean x torch.mm (every shape, every dtype): cute[auto] 1.000 over 2 shapes" in text


def write_doc(path, rows, **env):
    path.write_text(json.dumps(bench.results_doc({"date": "2026-01-01", "gpu": "H100", **env}, rows)))
    return path


def test_compare_two_results_files(tmp_path, capsys):
    old = write_doc(tmp_path / "old.json", [
        row(1024, 1024, 1024, {"torch.mm": 10.0, "cute[auto]": 20.0}),
        row(2048, 2048, 2048, {"torch.mm": 40.0, "cute[auto]": 50.0}),
        row(574, 574, 574, {"torch.mm": 5.0})], git_commit="aaaa")
    new = write_doc(tmp_path / "new.json", [
        row(1024, 1024, 1024, {"torch.mm": 10.0, "cute[auto]": 16.0, "triton": 12.0}),
        row(2048, 2048, 2048, {"torch.mm": 40.0, "cute[auto]": "WRONG"})], git_commit="bbbb")
    assert bench.main(["--compare", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "## change: old = 2026-01-01, H100, commit aaaa; new = 2026-01-01, H100, commit bbbb" in out
    assert "| 1024x1024x1024 | bf16 | nn | cute[auto] | 20.0 | 16.0 | 0.800 | 107.4 -> 134.2 |" in out
    assert "| 2048x2048x2048 | bf16 | nn | cute[auto] | 50.0 | WRONG | - | - |" in out
    assert "geomean new/old time, cute[auto]: 0.800 over 1 shape" in out
    assert "geomean new/old time, torch.mm: 1.000 over 2 shapes" in out
    assert "triton" not in out and "574x574x574" not in out  # only what both runs timed
    assert "cute[auto], nn" not in out  # one layout: no geomean per layout


def test_compare_per_layout(tmp_path, capsys):
    """Two layouts of one shape: a row each, told apart by the layout column, a geomean per layout."""
    old = write_doc(tmp_path / "old.json", [row(1024, 1024, 1024, {"torch.mm": 10.0, "cute[auto]": 20.0}, layout=x)
                                            for x in ("nn", "nt")])
    new = write_doc(tmp_path / "new.json", [row(1024, 1024, 1024, {"torch.mm": 10.0, "cute[auto]": us}, layout=x)
                                            for x, us in (("nn", 10.0), ("nt", 40.0))])
    assert bench.main(["--compare", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "| 1024x1024x1024 | bf16 | nn | cute[auto] | 20.0 | 10.0 | 0.500 |" in out
    assert "| 1024x1024x1024 | bf16 | nt | cute[auto] | 20.0 | 40.0 | 2.000 |" in out
    assert "geomean new/old time, cute[auto]: 1.000 over 2 shapes" in out
    assert "geomean new/old time, cute[auto], nn: 0.500 over 1 shape" in out
    assert "geomean new/old time, cute[auto], nt: 2.000 over 1 shape" in out


def test_compare_reads_a_first_version_file(tmp_path, capsys):
    old = tmp_path / "v1.json"
    old.write_text(json.dumps({"environment": {"gpu": "H100"}, "results": [
        {"m": 1024, "n": 1024, "k": 1024, "dtype": "bf16", "layout": "nn", "reps": 64, "torch_us": 10.0,
         "torch_tflops": 214.7, "cute": {"auto": {"us": 20.0, "tflops": 107.4, "x_torch": 0.5, "rel_err": 1e-3},
                                         "sm80": {"wrong": True, "rel_err": 0.5}}}]}))
    new = write_doc(tmp_path / "new.json", [row(1024, 1024, 1024, {"torch.mm": 10.0, "cute[auto]": 10.0,
                                                                  "cute[sm80]": 30.0})])
    assert bench.main(["--compare", str(old), str(new)]) == 0
    out = capsys.readouterr().out
    assert "| 1024x1024x1024 | bf16 | nn | cute[auto] | 20.0 | 10.0 | 0.500 | 107.4 -> 214.7 |" in out
    assert "| 1024x1024x1024 | bf16 | nn | cute[sm80] | WRONG | 30.0 | - | - |" in out


def test_an_unreadable_results_file_is_one_clear_error(tmp_path, capsys):
    bad = tmp_path / "bad.json"
    bad.write_text('{"rows": []}')
    assert bench.main(["--compare", str(bad), str(bad)]) == 1
    assert capsys.readouterr().err.strip() == (
        f"bench_mm: cannot read a results file: {bad} is not a bench_mm results file (no 'results' list)")
    assert bench.main(["--plot-only", str(tmp_path / "missing.json")]) == 1
    assert "No such file or directory" in capsys.readouterr().err


def test_plot_only_writes_a_png(tmp_path):
    pytest.importorskip("matplotlib", reason="scripts/setup_env.sh installs it; the GPU machine may lack it")
    rows = [row(1024, 1024, 1024, {"torch.mm": 10.0, "cute[auto]": 20.0, "triton": "failed"}),
            row(16, 4096, 4096, {"torch.mm": 20.0, "cute[auto]": "WRONG"}, suites=("decode",)),
            row(16, 4096, 4096, {"torch.mm": 20.0, "cute[auto]": 30.0}, dtype="f16", suites=("decode",))]
    results = write_doc(tmp_path / "r.json", rows)
    assert bench.main(["--plot-only", str(results), "--plot", str(tmp_path / "p.png")]) == 0
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


# -------------------------------------------------------------------------------------- runs

@pytest.mark.parametrize("triton_fails_on", [64, 16])
def test_a_run_with_made_up_timings(tmp_path, monkeypatch, capsys, triton_fails_on):
    """main() end to end with measure_row() replaced: progress, tables, JSON, --compare, plot, a WRONG
    variant, and Triton failing on the first shape (column dropped) or a later one (cell failed)."""
    cute = types.ModuleType("cute_gemm")
    cute.mm = lambda a, b: torch.mm(a, b)
    cute.__version__ = "9.9"
    monkeypatch.setitem(sys.modules, "cute_gemm", cute)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "empty_cache", lambda: None)
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda i: types.SimpleNamespace(
        name="NVIDIA H100 80GB HBM3", multi_processor_count=132, L2_cache_size=50 * 2**20))
    monkeypatch.setattr(bench, "make_operand", lambda torch, rows, cols, major, dtype: torch.randn(rows, cols))

    def fake_measure(torch, fn, sets, ref, bound, seconds):
        a, b = sets[0]
        if fn is torch.mm:
            return {"us": 10.0, "eager_us": 15.0, "rel_err": 0.0}
        if fn is cute.mm:
            if os.environ["CUTE_GEMM_FAMILY"] == "sm80":
                return {"wrong": True, "rel_err": 0.25}
            return {"us": 20.0, "eager_us": 30.0, "rel_err": 1e-3}
        if a.shape[0] == triton_fails_on:
            raise RuntimeError("PassManager::run failed\nmore detail")
        return {"us": 12.5, "eager_us": 14.0, "rel_err": 1e-3}

    def fake_row(torch, impls, sets, ref, bound, seconds, after_op=None):
        out = {}
        for name, fn, settings in impls:
            try:
                with bench.knobs(settings):
                    out[name] = fake_measure(torch, fn, sets, ref, bound, seconds)
            except Exception as e:
                out[name] = e
        return out

    monkeypatch.setattr(bench, "measure_row", fake_row)
    old = write_doc(tmp_path / "old.json", [row(64, 64, 64, {"torch.mm": 10.0, "cute[auto]": 40.0}, suites=("custom",))])
    results = tmp_path / "out" / "r.json"
    rc = bench.main(["--shapes", "64x64x64,16x4096x64", "--dtype", "bf16", "--layout", "nn", "--family", "sm80",
                     "--json", str(results), "--compare", str(old)])
    out = capsys.readouterr().out
    assert rc == 1  # a WRONG result fails the run
    assert "# NVIDIA H100 80GB HBM3 (132 SMs, dense peak 989.4 TFLOP/s)" in out
    # the seconds column is wall time (importing Triton on a slow CI machine takes more than one)
    assert re.search(r"^\[  1/2 +\d+ s\] bf16 nn     64x    64x    64  torch\.mm 10\.0 us 0\.1 TFLOP/s \| "
                     r"cute\[auto\] 20\.0 us 0\.0 TFLOP/s 0\.50x \| ", out, re.M), out
    doc = json.loads(results.read_text())
    assert doc["environment"]["cute_gemm"] == "9.9" and doc["environment"]["suites"] == ["custom"]
    assert [r["impls"]["cute[sm80]"] for r in doc["results"]] == [{"wrong": True, "rel_err": 0.25}] * 2
    if triton_fails_on == 64:
        assert "# note: no Triton column: its first kernel failed (RuntimeError: PassManager::run failed)" in out
        assert all("triton" not in r["impls"] for r in doc["results"])
    else:
        assert "# note: triton failed on bf16 16x4096x64: RuntimeError: PassManager::run failed" in out
        assert [r["impls"]["triton"].get("x_torch") for r in doc["results"]] == [0.8, None]
    assert "| 64x64x64 | cute[sm80] | WRONG (rel err 2.5e-01) |" in out
    assert "| 64x64x64 | bf16 | nn | cute[auto] | 40.0 | 20.0 | 0.500 |" in out
    if importlib.util.find_spec("matplotlib"):
        assert results.with_suffix(".png").is_file()
    else:
        assert "# note: no plot: matplotlib is not importable" in out


def test_without_a_gpu_it_says_so_in_one_sentence():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    run = subprocess.run([sys.executable, "-P", str(BENCH), "--suite", "all"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2
    assert run.stderr.strip() == "bench_mm: no CUDA GPU is visible, so there is nothing to benchmark."
    assert "Traceback" not in run.stderr + run.stdout


# ----------------------------------------------------------------------------- Triton kernel

TRITON_CHECK = """
import sys, torch, triton
sys.path.insert(0, sys.argv[1])
import triton_mm
small = triton.Config({"BLOCK_M": 16, "BLOCK_N": 16, "BLOCK_K": 16, "GROUP_M": 2}, num_warps=1, num_stages=1)
torch.manual_seed(0)
def operand(rows, cols, major):
    return torch.randn(rows, cols, dtype=torch.float16) if major == "n" else torch.randn(cols, rows, dtype=torch.float16).t()
cases = [(m, n, k, lay) for m, n, k in [(33, 47, 29), (1, 20, 5), (16, 16, 16)] for lay in ("nn", "nt", "tn", "tt")]
cases.append((33, 47, 29, "expanded"))
for m, n, k, lay in cases:
    if lay == "expanded":  # stride-0 rows
        a, b = torch.randn(1, k, dtype=torch.float16).expand(m, k), operand(k, n, "n")
    else:
        a, b = operand(m, k, lay[0]), operand(k, n, lay[1])
    c = triton_mm.mm(a, b, small)
    ref = a.float() @ b.float()
    err = ((c.float() - ref).norm() / ref.norm()).item()
    assert c.shape == (m, n) and c.is_contiguous() and c.dtype == torch.float16, (m, n, k, lay)
    assert err < 2e-3, (m, n, k, lay, err)
print("ok", len(cases))
"""


def test_triton_kernel_in_the_interpreter():
    """Masks, the grouped order's partial group, every layout and stride 0, on CPU (fp16: the
    interpreter's bf16 dot is wrong, a limit of the interpreter, not of the kernel)."""
    triton = pytest.importorskip("triton")
    if tuple(int(x) for x in triton.__version__.split(".")[:2]) < (3, 8):
        pytest.skip(f"triton {triton.__version__}'s interpreter cannot run the kernel's K loop (3.8 can); "
                    "on a GPU the benchmark checks the kernel against torch.mm before timing it")
    run = subprocess.run([sys.executable, "-c", TRITON_CHECK, str(BENCH.parent)], capture_output=True, text=True,
                         env=dict(os.environ, TRITON_INTERPRET="1"), timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "ok 13"


def test_plan_text_names_what_ran():
    plan = {"route": "kernel", "family": "sm90", "row": 2, "splits": 1, "stream_k_tiles": 0, "swapped": False}
    assert bench.plan_text(plan) == "sm90 row 2"
    assert bench.plan_text({**plan, "row": 10, "splits": 2, "swapped": True}) == "sm90 row 10/2 swapped"
    assert bench.plan_text({**plan, "stream_k_tiles": 66}) == "sm90 row 2 sk"
    assert bench.plan_text({"route": "torch"}) == "torch"
