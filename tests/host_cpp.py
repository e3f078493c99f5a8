"""Host-compiled checks of csrc/ headers (the tile order, the stream-K walk, the chooser): build a
C++ file with the machine's host compiler and run it, for CPU tests that need no GPU or extension."""

import shutil
import subprocess
from pathlib import Path

import pytest

CSRC = Path(__file__).resolve().parent.parent / "csrc"

needs_cxx = pytest.mark.skipif(shutil.which("c++") is None, reason="needs a host C++ compiler to build the header check")


def build(src: Path, *sources: Path, out: Path | None = None) -> Path:
    """Compile a C++ file (and further sources) against csrc/ with the host compiler; the program."""
    exe = out or src.with_suffix("")
    subprocess.run(["c++", "-std=c++17", "-I", str(CSRC), str(src), *map(str, sources), "-o", str(exe)], check=True)
    return exe


def build_and_run(src: Path, stdin: str | None = None) -> str:
    """Compile a C++ file against csrc/ with the host compiler, run it, return its stdout."""
    return subprocess.run([str(build(src))], input=stdin, check=True, capture_output=True, text=True).stdout
