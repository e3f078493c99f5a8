"""scripts/kernel_timeline.py's split of profiled kernels into calls (no GPU)."""

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
pytest.importorskip("torch")
import kernel_timeline as K  # noqa: E402


def kernels(names):
    return [(n, float(i), float(i) + 0.5) for i, n in enumerate(names)]


def test_calls_that_repeat_split():
    assert K.same_kernels_per_call(kernels(["copy", "gemm"] * 6), 2)
    assert K.same_kernels_per_call(kernels(["gemm"] * 5), 1)


def test_a_dropped_or_different_kernel_is_reported():
    names = ["copy", "gemm"] * 6
    assert not K.same_kernels_per_call(kernels(names[:-1]), 2)  # one event missing
    assert not K.same_kernels_per_call(kernels(["copy", "gemm", "gemm", "gemm"]), 2)
    assert not K.same_kernels_per_call(kernels(names), 0)
