"""The opt-in autotune cache (CUTE_GEMM_AUTOTUNE=1, csrc/autotune.h): tuned calls are right, the
choices land in one file per GPU, later processes read it instead of timing again, several
processes may write it at once, and a corrupt or stale file is ignored."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import cute_gemm
from cute_gemm._build_paths import config_names
from test_mm import DTYPES, check, family, make_operand  # noqa: F401 (family: the sm80/sm90 fixture)

pytestmark = pytest.mark.gpu

HERE = Path(__file__).resolve().parent
# (33 rows: M <= 32 takes the swapped decode rows on the sm90 family, which are not tuned.)
SHAPES = [(300, 520, 2056), (33, 4096, 1024), (129, 127, 131), (1024, 768, 512)]
HEADER = "cute_gemm-autotune 1 "


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    for knob in ("CUTE_GEMM_SM90_CONFIG", "CUTE_GEMM_SM80_CONFIG", "CUTE_GEMM_SPLITS"):
        monkeypatch.delenv(knob, raising=False)
    monkeypatch.setenv("CUTE_GEMM_AUTOTUNE", "1")
    monkeypatch.setenv("CUTE_GEMM_CACHE_DIR", str(tmp_path))
    return tmp_path


def cache_file(directory: Path) -> Path:
    files = sorted(directory.glob("autotune-*.txt"))
    assert len(files) == 1, files
    return files[0]


def entries(path: Path) -> dict[str, str]:
    lines = path.read_text().splitlines()
    assert lines[0] == HEADER + path.name
    return dict(line.split("\t") for line in lines[1:])


def run_child(code: str, cache: Path, family_name: str) -> subprocess.Popen:
    env = {**os.environ, "CUTE_GEMM_AUTOTUNE": "1", "CUTE_GEMM_CACHE_DIR": str(cache),
           "CUTE_GEMM_FAMILY": family_name}
    prelude = f"import sys; sys.path.insert(0, {str(HERE)!r}); import torch, cute_gemm, test_mm\n"
    return subprocess.Popen([sys.executable, "-P", "-c", prelude + code], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def finish(child: subprocess.Popen) -> None:
    out, _ = child.communicate(timeout=300)
    assert child.returncode == 0, out


def test_tuned_calls_are_right_and_cached(cache_dir, family):
    for (m, n, k), dtype in zip(SHAPES, DTYPES * 2):
        a, b = make_operand(m, k, "n", dtype), make_operand(k, n, "t", dtype)
        out = check(a, b)                              # the first call times the candidates
        assert torch.equal(out, cute_gemm.mm(a, b))    # the second runs the cached choice
    path = cache_file(cache_dir)
    assert torch.cuda.get_device_name().replace(" ", "_") in path.name and cute_gemm.__version__ in path.name
    found = entries(path)
    assert len(found) == len(SHAPES) and all(f"{m}x{n}x{k}" in " ".join(found) for m, n, k in SHAPES)
    for value in found.values():
        cfg, splits, us = value.split(" ")
        assert int(cfg) >= 0 and int(splits) in (1, 2, 4) and float(us) > 0
    # A new process finds every shape in the file: no timing, no write.
    before = (path.read_bytes(), path.stat().st_mtime_ns)
    code = "".join(f"a = test_mm.make_operand({m}, {k}, 'n', torch.{dt}); b = test_mm.make_operand({k}, {n}, 't', "
                   f"torch.{dt}); test_mm.check(a, b)\n"
                   for (m, n, k), dt in zip(SHAPES, ["float16", "bfloat16"] * 2))
    finish(run_child(code, cache_dir, family))
    assert (path.read_bytes(), path.stat().st_mtime_ns) == before


def test_processes_tuning_at_once_keep_every_entry(cache_dir, family):
    shapes = [(64 + 8 * i, 1000 + 24 * i, 512) for i in range(4)]
    children = [run_child(f"test_mm.check(test_mm.make_operand({m}, {k}, 'n', torch.bfloat16), "
                          f"test_mm.make_operand({k}, {n}, 'n', torch.bfloat16))\n", cache_dir, family)
                for m, n, k in shapes]
    for child in children:
        finish(child)
    found = " ".join(entries(cache_file(cache_dir)))
    assert all(f"{m}x{n}x{k}" in found for m, n, k in shapes), found
    assert not list(cache_dir.glob("*.tmp.*"))


@pytest.mark.parametrize("damage", ["garbage", "stale-header", "torn-rows", "unknown-config", "splits-past-k",
                                    "untuned-splits", "unbuilt-kernel"])
def test_corrupt_or_stale_cache_is_ignored(damage, cache_dir, family):
    if damage == "unbuilt-kernel" and family == "sm90":
        pytest.skip("every sm90 row is built in every layout")
    m, n, k = 200, 264, 1000
    a, b = make_operand(m, k, "n", torch.bfloat16), make_operand(k, n, "n", torch.bfloat16)
    check(a, b)
    path = cache_file(cache_dir)
    (key, _), = entries(path).items()
    if damage == "garbage":
        path.write_bytes(b"\x00\xff not a cache \n\t\t\n")
    elif damage == "stale-header":
        path.write_text(f"cute_gemm-autotune 0 {path.name}\n{key}\t0 1 1.0\n")
    elif damage == "torn-rows":  # lines that do not parse: no tab, a field missing, out of range
        path.write_text(f"{HEADER}{path.name}\n{key} 0 1 1.0\n{key}\t0 1\n{key}\t99 1 1.0\n")
    elif damage == "unknown-config":  # parses, but this build has no row 60: gemm.cpp's autotune refuses it
        path.write_text(f"{HEADER}{path.name}\n{key}\t60 1 1.0\n")
    elif damage == "unbuilt-kernel":  # a row without a plain kernel: sm80 row 2 is built narrow only
        path.write_text(f"{HEADER}{path.name}\n{key}\t2 1 1.0\n")
    elif damage == "splits-past-k":  # parses, but 64 slices of K = 1000 (16 K tiles) cannot run
        path.write_text(f"{HEADER}{path.name}\n{key}\t0 64 1.0\n")
    else:  # could run, but the timing never picks 16 slices: a foreign or hand-edited entry
        path.write_text(f"{HEADER}{path.name}\n{key}\t1 16 1.0\n")
    # A new process: the damaged file gives no choice, so it tunes, answers right and rewrites it.
    finish(run_child(f"test_mm.check(test_mm.make_operand({m}, {k}, 'n', torch.bfloat16), "
                     f"test_mm.make_operand({k}, {n}, 'n', torch.bfloat16))\n", cache_dir, family))
    found = entries(path)
    cfg, splits, _ = found[key].split(" ")
    rows = len(config_names(HERE.parent / "csrc" / family / "configs.h"))  # not the damaged 60 or 99
    assert 0 <= int(cfg) < rows and int(splits) in (1, 2, 4)
    if damage == "unbuilt-kernel":  # tuned again, among the rows with a kernel
        assert int(cfg) != 2, found[key]


def test_unwritable_cache_dir_only_warns(tmp_path, monkeypatch, family):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder would be")
    monkeypatch.setenv("CUTE_GEMM_AUTOTUNE", "1")
    monkeypatch.setenv("CUTE_GEMM_CACHE_DIR", str(blocker / "sub"))
    check(make_operand(96, 136, "t", torch.float16), make_operand(136, 200, "n", torch.float16))


def test_graph_capture_does_not_tune(cache_dir, family):
    """While a stream captures a CUDA graph nothing is timed (the chooser's pick is captured), and
    the replay is right."""
    a, b = make_operand(256, 512, "n", torch.bfloat16), make_operand(512, 384, "n", torch.bfloat16)
    with pytest.MonkeyPatch.context() as mp:  # warm up (module load, smem opt-in) untuned
        mp.setenv("CUTE_GEMM_AUTOTUNE", "0")
        cute_gemm.mm(a, b)
    graph = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, stream=side):
            out = cute_gemm.mm(a, b)
    graph.replay()
    torch.cuda.synchronize()
    ref = a.double() @ b.double()
    assert ((out.double() - ref).norm() / ref.norm()).item() <= 1e-2
    assert not list(cache_dir.glob("autotune-*.txt"))
