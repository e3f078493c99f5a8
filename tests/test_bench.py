"""bench/bench_mm.py on CPU: argument parsing and the no-GPU message (the timing is not a test)."""

import argparse
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parent.parent / "bench" / "bench_mm.py"
_spec = importlib.util.spec_from_file_location("bench_mm", BENCH)
bench = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(bench)


def test_shapes_parse():
    assert bench.parse_shapes("4096x14336x4096,1x2x3") == [(4096, 14336, 4096), (1, 2, 3)]
    for bad in ("4096x4096", "0x1x1", "ax1x1", "1x1x1x1"):
        with pytest.raises(argparse.ArgumentTypeError, match="is not MxNxK"):
            bench.parse_shapes(bad)


def test_variants_parse_and_select_knobs():
    assert bench.parse_variants("auto, sm80,sm90:0") == ["auto", "sm80", "sm90:0"]
    assert bench.variant_env("sm90:0") == {"CUTE_GEMM_FAMILY": "sm90", "CUTE_GEMM_SM90_CONFIG": "0"}
    assert bench.variant_env("auto") == {"CUTE_GEMM_FAMILY": "auto"}
    for bad in ("sm70", "auto:1", "sm80:x"):
        with pytest.raises(argparse.ArgumentTypeError, match="is not auto, sm80, sm90"):
            bench.parse_variants(bad)


def test_bad_layout_is_a_usage_error():
    with pytest.raises(SystemExit):
        bench.parse_args(["--layout", "xy"])


def test_without_a_gpu_it_says_so_in_one_sentence():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    run = subprocess.run([sys.executable, "-P", str(BENCH), "--shapes", "64x64x64"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 2
    assert run.stderr.strip() == "bench_mm: no CUDA GPU is visible, so there is nothing to benchmark."
    assert "Traceback" not in run.stderr + run.stdout
