"""cute_gemm.mm against torch.mm (cuBLAS) and a Triton matmul, same inputs, same run.

    python bench/bench_mm.py                                  # every suite, fp16 and bf16, layouts nn, nt, tn
    python bench/bench_mm.py --suite llm,decode --dtype bf16 --family sm80
    python bench/bench_mm.py --shapes 4096x4096x4096,574x574x574 --variants auto,sm80,sm90:1
    python bench/bench_mm.py --suite decode --variants tuned        # also the autotune cache's picks
    python bench/bench_mm.py --compare old.json               # a run, then its change against old.json
    python bench/bench_mm.py --compare old.json new.json      # two earlier runs (no GPU needed)
    python bench/bench_mm.py --plot-only results.json --plot out.png

Timing: R copies of the operands (together more than 4x the L2) are called in turn inside one
CUDA graph and the replay time is divided by R, so operands come from HBM, launch gaps vanish
and no dirty L2 lines from a cache flush land in the timed kernels. Median over many replays.
The eager column is a plain Python loop of calls on one operand set (CUDA events), so the cost
of launching and dispatching shows. Every result is checked against torch.mm before it is timed;
a wrong one is reported as WRONG, never timed. docs/benchmark.md explains the columns.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.metadata
import importlib.util
import json
import math
import os
import platform
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent

SUITES = {
    "square": [(1024, 1024, 1024), (2048, 2048, 2048), (4096, 4096, 4096), (8192, 8192, 8192)],
    "llm": [(4096, 14336, 4096), (4096, 4096, 14336), (8192, 8192, 1024), (16384, 16384, 8192),
            (16384, 4096, 4096)],
    "decode": [(1, 28672, 8192), (16, 4096, 4096), (16, 14336, 4096), (64, 8192, 8192)],
    "few-tiles": [(128, 8192, 8192), (128, 4096, 14336), (512, 1024, 8192), (256, 7168, 2048)],
    "unaligned": [(574, 574, 574), (2050, 2050, 2050), (4097, 4095, 4103), (8192, 8192, 8191)],
    "small": [(256, 256, 256), (1024, 1024, 1024), (81920, 256, 256)],
    # The GEMMs of bench/bench_models.py's layers: a GPT-2-medium width training step (8 x 1024
    # tokens: QKV, attention out, MLP in, MLP out, the vocabulary head) as its forward runs them (M
    # tokens, N outputs, K inputs; x @ w.t() is the nt layout), then the backward's sizes that the
    # forward's lack: the weights' gradients (M outputs, N inputs, K tokens; dy.t() @ x is tn) and
    # the inputs' (M tokens, N inputs, K outputs; dy @ w is nn); a Llama-3-8B layer over 2048 tokens
    # of prefill (QKV with 8 KV heads, O, gate or up, down) and at 16 tokens of decode.
    "models": [(8192, 3072, 1024), (8192, 1024, 1024), (8192, 4096, 1024), (8192, 1024, 4096), (8192, 50304, 1024),
               (3072, 1024, 8192), (1024, 1024, 8192), (4096, 1024, 8192), (1024, 4096, 8192), (50304, 1024, 8192),
               (8192, 1024, 3072), (8192, 1024, 50304),
               (2048, 6144, 4096), (2048, 4096, 4096), (2048, 14336, 4096), (2048, 4096, 14336),
               (16, 6144, 4096), (16, 4096, 4096), (16, 14336, 4096), (16, 4096, 14336)],
}
DTYPES = {"f16": "float16", "bf16": "bfloat16"}
ELEMENT_BYTES = {"f16": 2, "bf16": 2}
REL_BOUND = {"f16": 2e-3, "bf16": 1e-2}
LAYOUTS = ("nn", "nt", "tn", "tt")
# A model's GEMMs: x @ w.t() forward ("nt"), dy @ w for the input's gradient ("nn"), dy.t() @ x for
# the weight's ("tn").
DEFAULT_LAYOUTS = ["nn", "nt", "tn"]
FAMILIES = ("auto", "sm80", "sm90")
KNOBS = ("CUTE_GEMM_FAMILY", "CUTE_GEMM_SM80_CONFIG", "CUTE_GEMM_SM90_CONFIG", "CUTE_GEMM_AUTOTUNE",
         "CUTE_GEMM_STREAM_K", "CUTE_GEMM_SPLITS", "CUTE_GEMM_PDL", "CUTE_GEMM_NARROW", "CUTE_GEMM_SWAP_CONFIG",
         "CUTE_GEMM_FAST_HBM", "CUTE_GEMM_SM90_NARROW", "CUTE_GEMM_L2_HINT", "CUTE_GEMM_ROW_SUMS", "CUTE_GEMM_GEMV")
# Variants named by a word rather than a family: the knobs each sets.
NAMED_VARIANTS = {
    "tuned": {"CUTE_GEMM_AUTOTUNE": "1"},  # the autotune cache's pick
    "sk": {"CUTE_GEMM_STREAM_K": "1"},      # the chooser's tile with the stream-K tail wherever it can run
    "nosk": {"CUTE_GEMM_STREAM_K": "0"},    # ... and never (auto: where its rule expects a gain)
    "nopdl": {"CUTE_GEMM_PDL": "0"},        # the chooser's pick launched without programmatic dependent launch
    "narrow": {"CUTE_GEMM_NARROW": "1"},    # unaligned operands read in place by the SM80 4-byte kernels wherever they can
    "nonarrow": {"CUTE_GEMM_NARROW": "0"},  # ... and never: the padded copies (auto: where the rule expects a gain)
    "narrow90": {"CUTE_GEMM_SM90_NARROW": "1"},  # such operands read in place by the sm90 rows' cp.async-producer kernels wherever they can (auto: where the narrow rule takes narrow kernels)
    "swap128": {"CUTE_GEMM_SWAP_CONFIG": "6"},  # the swapped path on row 6, 128x16 tiles (auto: its rule's row)
    "swap64": {"CUTE_GEMM_SWAP_CONFIG": "10"},  # ... on row 10, 64x16 tiles
    "swap32": {"CUTE_GEMM_SWAP_CONFIG": "11"},  # ... on row 11, 64x32 tiles (M <= 32)
    "l2normal": {"CUTE_GEMM_L2_HINT": "0"},  # the sm90 TMA loads without L2 eviction hints
    "l2first": {"CUTE_GEMM_L2_HINT": "1"},   # ... an operand read once evict-first
    "l2last": {"CUTE_GEMM_L2_HINT": "2"},    # ... and the other evict-last
    "fasthbm": {"CUTE_GEMM_FAST_HBM": "1"},  # the sm90 chooser's rules for fast HBM (the H200's; auto: by the GPU's bandwidth)
    "slowhbm": {"CUTE_GEMM_FAST_HBM": "0"},  # ... and its rules for the H100's
    "gemv": {"CUTE_GEMM_GEMV": "1"},    # the decode GEMV wherever it can run (auto: where its rule takes it)
    "nogemv": {"CUTE_GEMM_GEMV": "0"},  # ... and never: the tile kernels
}
TORCH = "torch.mm"
TRITON = "triton"
# Below this many FLOP per byte of A + B + C a shape cannot be compute-bound on a Hopper or Ampere
# GPU (the ridge point of the H100 SXM is 989 TFLOP/s / 3.35 TB/s = 295, of the A100 156), so
# its GB/s says more than its TFLOP/s and the tables show it.
MEMORY_BOUND_INTENSITY = 300
# Dense fp16/bf16 tensor-core peak with fp32 accumulation, TFLOP/s, by a substring of the device
# name; the first match wins. NVL boards run other clocks and have no row: pass --peak-tflops.
PEAK_TFLOPS = (
    ("H100 NVL", None),
    ("H100 PCIe", 756.0),
    ("H100 SXM", 989.4),
    ("H100 80GB HBM3", 989.4),
    ("H200 NVL", None),
    ("H200", 989.4),
    ("A100", 312.0),
    ("L40S", 362.1),
    ("RTX 4090", 165.2),
)


# ---------------------------------------------------------------------------------- arguments

def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    shapes = []
    for item in text.split(","):
        parts = item.lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise argparse.ArgumentTypeError(f"shape '{item}' is not MxNxK with positive integers")
        shapes.append(tuple(int(p) for p in parts))
    return shapes


def parse_choices(text: str, choices: tuple[str, ...], what: str) -> list[str]:
    """A comma list of names among choices ("all": every one), in order, without repeats; shared
    by the benchmarks' list arguments."""
    names = [s.strip() for s in text.split(",") if s.strip()]
    for s in names:
        if s != "all" and s not in choices:
            raise argparse.ArgumentTypeError(f"{what} '{s}' is not one of {', '.join(choices)}, all")
    return list(choices) if "all" in names else list(dict.fromkeys(names))


def parse_layouts(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    for name in names:
        if name not in LAYOUTS:
            raise argparse.ArgumentTypeError(f"layout '{name}' is not one of {', '.join(LAYOUTS)}")
    if not names:
        raise argparse.ArgumentTypeError("no layout given")
    return list(dict.fromkeys(names))


def parse_suites(text: str) -> list[str]:
    names = [s.strip() for s in text.split(",") if s.strip()]
    for s in names:
        if s != "all" and s not in SUITES:
            raise argparse.ArgumentTypeError(f"suite '{s}' is not one of {', '.join(SUITES)}, all")
    return list(SUITES) if "all" in names else list(dict.fromkeys(names))


def parse_families(text: str) -> list[str]:
    names = [f.strip() for f in text.split(",") if f.strip()]
    for f in names:
        if f not in FAMILIES:
            raise argparse.ArgumentTypeError(f"family '{f}' is not one of {', '.join(FAMILIES)}")
    return names


MAX_SPLITS = 64  # CUTE_GEMM_SPLITS's range is [1, 64]


def parse_variants(text: str) -> list[str]:
    """Comma-separated variants; a variant is one setting or several joined by "+" (sm80+nonarrow),
    whose knobs must not clash."""
    variants = [v.strip() for v in text.split(",") if v.strip()]
    for v in variants:
        parts = v.split("+")
        for part in parts:
            family, _, row = part.partition(":")
            row, slash, splits = row.partition("/")
            bad_row = row and (family == "auto" or not (row.isascii() and row.isdecimal()))
            bad_splits = slash and (family != "sm90" or not row or not (splits.isascii() and splits.isdecimal())
                                    or not 1 <= int(splits) <= MAX_SPLITS)
            narrow_row = family == "narrow" and row and not bad_row and not slash
            split_count = (family == "splits" and not slash and row.isascii() and row.isdecimal()
                           and 1 <= int(row) <= MAX_SPLITS)
            if (part not in NAMED_VARIANTS and not narrow_row and not split_count
                    and (family not in FAMILIES or bad_row or bad_splits)):
                raise argparse.ArgumentTypeError(
                    f"variant '{v}' is not auto, tuned, sk, nosk, nopdl, narrow, nonarrow, narrow90, swap128, swap64, swap32, "
                    "l2normal, l2first, l2last, fasthbm, slowhbm, "
                    "narrow:N, splits:S, sm80, sm90, "
                    "sm80:N / sm90:N or sm90:N/S, nor such settings joined by '+'")
        envs = [variant_env(part) for part in parts]
        keys = [k for env in envs for k in env]
        if len(keys) != len(set(keys)):
            raise argparse.ArgumentTypeError(f"variant '{v}' sets a knob twice")
    return variants


def positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not value > 0 or math.isinf(value):
        raise argparse.ArgumentTypeError(f"'{text}' is not a positive number")
    return value


def variant_env(variant: str) -> dict[str, str]:
    """The CUTE_GEMM_* settings that select one variant (read by the op at call time). "tuned": the
    autotune cache's pick (CUTE_GEMM_AUTOTUNE=1; the check before timing tunes a new shape); "sk" / "nosk":
    the chooser's pick with the stream-K tail forced on / off (CUTE_GEMM_STREAM_K=1 / 0; auto leaves
    it to the rule); "nopdl": the chooser's pick launched without PDL (CUTE_GEMM_PDL=0); "narrow" /
    "narrow:N": operands that the default family would copy into padded buffers read in place by the
    SM80 4-byte cp.async kernels wherever they can (CUTE_GEMM_NARROW=1; auto takes them where
    sm80::narrow_pays expects a gain, "nonarrow" never), on their rule's row or row N of sm80/configs.h
    (1 or 2; another row fails on the shapes that take them); the default kernels where no operand
    needs them (on an sm80-default GPU, "narrow:N" pins those to row N as well); "sm90:N/S": row N
    with S K slices (CUTE_GEMM_SPLITS=S); "splits:S": the chooser's row with S K slices (with
    "swap32" and the like: the swapped path's row); "a+b": the settings of a and of b together."""
    if "+" in variant:
        return {k: v for part in variant.split("+") for k, v in variant_env(part).items()}
    if variant in NAMED_VARIANTS:
        return dict(NAMED_VARIANTS[variant])
    family, _, row = variant.partition(":")
    if family == "narrow":
        return {**NAMED_VARIANTS["narrow"], "CUTE_GEMM_SM80_CONFIG": row}
    if family == "splits":
        return {"CUTE_GEMM_SPLITS": row}
    row, _, splits = row.partition("/")
    env = {"CUTE_GEMM_FAMILY": family}
    if row:
        env[f"CUTE_GEMM_{family.upper()}_CONFIG"] = row
    if splits:
        env["CUTE_GEMM_SPLITS"] = splits
    return env


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--suite", type=parse_suites,
                    help=f"comma list of {', '.join(SUITES)}, all (default: all, unless --shapes is given)")
    ap.add_argument("--shapes", type=parse_shapes, help="MxNxK,MxNxK,... (timed as the suite 'custom')")
    ap.add_argument("--dtype", choices=["f16", "bf16", "both"], default="both")
    ap.add_argument("--layout", type=parse_layouts, default=DEFAULT_LAYOUTS,
                    help="comma list of nn, nt, tn, tt (default: nn,nt,tn, a model's three): a then b, n = "
                         "row-major, t = the transposed view of a row-major tensor (nt: x @ w.t())")
    pick = ap.add_mutually_exclusive_group()
    pick.add_argument("--family", type=parse_families,
                      help="also time cute_gemm forced to these kernel families (comma list of auto, sm80, sm90)")
    pick.add_argument("--variants", type=parse_variants,
                      help="also time these cute_gemm variants: auto, tuned (the autotune cache), sk / nosk "
                           "(stream-K tail forced on / off), nopdl (no programmatic dependent launch), narrow / "
                           "narrow:row / nonarrow (unaligned operands read in place by the SM80 4-byte kernels "
                           "wherever they can / never; auto: where the rule expects a gain), "
                           "swap128 / swap64 / swap32 (the swapped decode "
                           "path on its 128x16, 64x16 or 64x32 row), splits:S (S K slices on the chooser's row), "
                           "l2normal / l2first / l2last (the sm90 TMA loads' L2 hints: none, an operand read once "
                           "evict-first, and the other evict-last), "
                           "fasthbm / slowhbm (the sm90 chooser's rules for the H200's HBM or the H100's), "
                           "gemv / nogemv (the decode GEMV wherever it can run / never), "
                           "a family, "
                           "family:row of its configs.h, or sm90:row/splits (1 to 64 K slices); settings joined "
                           "by + combine (sm80+nonarrow)")
    ap.add_argument("--after-op", nargs="?", type=positive_float, const=32.0, default=None, metavar="MIB",
                    help="also time each call right after a non-GEMM kernel (an in-place scale of a MIB MiB "
                         "buffer, 32 unless given, as a model runs a norm or an activation between its GEMMs), "
                         "less that kernel's own time: the 'after an op' columns")
    ap.add_argument("--warm", action="store_true",
                    help="every call reads the same operand set, which stays in the L2 where it fits (as a "
                         "model's GEMM reads activations a kernel just wrote), instead of R sets from HBM")
    ap.add_argument("--no-triton", action="store_true", help="leave out the Triton matmul (bench/triton_mm.py)")
    ap.add_argument("--seconds", type=positive_float, default=0.3, help="timed replay time per measurement")
    ap.add_argument("--peak-tflops", type=positive_float,
                    help="the GPU's dense fp16/bf16 peak for the %%-of-peak column (default: from its name)")
    ap.add_argument("--json", type=Path, default=Path("bench/out/results.json"), help="where to write results")
    ap.add_argument("--plot", type=Path, help="where to write the PNG (default: the JSON's path with .png)")
    ap.add_argument("--compare", nargs="+", type=Path, metavar=("OLD.json", "NEW.json"),
                    help="OLD: after the run, print its change against OLD; OLD NEW: compare two results files")
    ap.add_argument("--plot-only", type=Path, metavar="RESULTS.json", help="only plot these results (no GPU)")
    args = ap.parse_args(argv)
    if args.compare and len(args.compare) > 2:
        ap.error("--compare takes OLD.json or OLD.json NEW.json")
    if args.plot_only and args.compare:
        ap.error("--plot-only and --compare are separate jobs: give one of them")
    if args.suite is None and args.shapes is None:
        args.suite = list(SUITES)
    args.variants = list(dict.fromkeys(["auto"] + (args.family or args.variants or [])))
    if args.plot is None:
        args.plot = (args.plot_only or args.json).with_suffix(".png")
    return args


def plan_shapes(suites: list[str] | None, shapes: list | None) -> dict[tuple[int, int, int], list[str]]:
    """Each (M, N, K) to time, once, with the suites it belongs to (1024^3 is in two)."""
    plan: dict[tuple[int, int, int], list[str]] = {}
    for name in suites or []:
        for shape in SUITES[name]:
            plan.setdefault(shape, []).append(name)
    for shape in shapes or []:
        if "custom" not in plan.setdefault(shape, []):
            plan[shape].append("custom")
    return plan


def gpu_peak_tflops(name: str) -> float | None:
    for key, peak in PEAK_TFLOPS:
        if key in name:
            return peak
    return None


# ------------------------------------------------------------------------------- measurement

def make_operand(torch, rows, cols, major, dtype):
    if major == "n":
        return torch.randn(rows, cols, device="cuda", dtype=dtype)
    return torch.randn(cols, rows, device="cuda", dtype=dtype).t()


def capture(torch, fn, sets, before=None):
    """A CUDA graph that calls fn on every operand set in turn (after one warm-up pass outside it:
    module load, shared-memory opt-in, an autotune cache's timing); before(), if given, runs
    before each call."""
    def calls():
        for a, b in sets:
            if before is not None:
                before()
            fn(a, b)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        calls()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        calls()
    return graph


def replay_ms(torch, graph, start, end) -> float:
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    return start.elapsed_time(end)


def interleaved_us(torch, graphs, calls, seconds):
    """Median time of one call for each graph (each makes `calls` calls): the graphs are replayed
    one after another, round after round, with the order rotating each round, so that the GPU's
    clock and power drift over the measurement reach every implementation alike (timed one
    after the other, the first measured ran on a cooler, faster-clocked GPU: the same kernel
    measured twice in one run differed by up to 5 %). About `seconds` of replays per graph."""
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for g in graphs:
        g.replay()
    once_ms = statistics.mean(replay_ms(torch, g, start, end) for g in graphs)
    n = max(10, min(500, int(seconds * 1e3 / max(once_ms, 1e-3))))
    times = [[] for _ in graphs]
    for r in range(n):
        for i in [(r + j) % len(graphs) for j in range(len(graphs))]:
            times[i].append(replay_ms(torch, graphs[i], start, end))
    return [statistics.median(t) * 1e3 / calls for t in times]


def graph_time_us(torch, fn, sets, seconds):
    """Median time of one call, from replays of a graph that calls fn on every operand set."""
    graph = capture(torch, fn, sets)
    (us,) = interleaved_us(torch, [graph], len(sets), seconds)
    del graph
    return us


def eager_time_us(torch, fn, a, b, seconds, trials=5):
    """Median time per call of a plain loop of calls on one operand set: the GPU waits whenever the
    host cannot launch as fast as the kernels run, so launch and dispatch costs are in it."""
    fn(a, b)
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    fn(a, b)
    end.record()
    end.synchronize()
    calls = max(1, min(200, int(seconds * 1e3 / trials / max(start.elapsed_time(end), 1e-3))))
    times = []
    for _ in range(trials):
        start.record()
        for _ in range(calls):
            fn(a, b)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / calls)
    return statistics.median(times) * 1e3


def check(torch, fn, sets, ref, bound) -> dict:
    """fn's relative error against the reference on the first operand set; "wrong" past bound."""
    out = fn(*sets[0]).float()
    err = ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()
    if not math.isfinite(err) or err > bound:
        return {"wrong": True, "rel_err": err if math.isfinite(err) else None}  # JSON has no NaN
    return {"rel_err": err}


def measure(torch, fn, sets, ref, bound, seconds):
    """Check fn against the reference on the first operand set, then time it both ways."""
    res = check(torch, fn, sets, ref, bound)
    if "wrong" in res:
        return res
    return {"us": graph_time_us(torch, fn, sets, seconds),
            "eager_us": eager_time_us(torch, fn, *sets[0], seconds / 3), **res}


def measure_row(torch, impls, sets, ref, bound, seconds, after_op=None) -> dict:
    """Every implementation (name, fn, knob settings) on one problem: name -> its result, or the
    exception it raised. Each is checked first (a wrong one is never timed); the graphs of those
    that pass are timed together (interleaved_us), then each one's eager loop. With after_op (a
    non-GEMM kernel, as a model runs between its GEMMs): also each call right after after_op(),
    less the time of the after_op() calls alone ("after_op_us")."""
    results, timed = {}, []
    for name, fn, settings in impls:
        try:
            with knobs(settings):  # the knobs pick the kernel when the graph is captured
                results[name] = check(torch, fn, sets, ref, bound)
                if "wrong" not in results[name]:
                    timed.append((name, capture(torch, fn, sets)))
        except Exception as e:  # one implementation failing must not cost the others' numbers
            results[name] = e
    if timed:
        for (name, _), us in zip(timed, interleaved_us(torch, [g for _, g in timed], len(sets), seconds)):
            results[name]["us"] = us
    if timed and after_op is not None:
        graphs = [capture(torch, lambda a, b: None, sets, before=after_op)]
        for name, fn, settings in impls:
            if name in dict(timed):
                with knobs(settings):
                    graphs.append(capture(torch, fn, sets, before=after_op))
        alone, *with_op = interleaved_us(torch, graphs, len(sets), seconds)
        for (name, _), us in zip(timed, with_op):
            results[name]["after_op_us"] = us - alone
        del graphs
    del timed
    for name, fn, settings in impls:
        res = results[name]
        if isinstance(res, dict) and "us" in res:
            try:
                with knobs(settings):
                    res["eager_us"] = eager_time_us(torch, fn, *sets[0], seconds / 3)
            except Exception as e:
                results[name] = e
    return {name: results[name] for name, _, _ in impls}


def other_kernel(torch, mib: float | None):
    """--after-op's kernel: an in-place scale of a MIB MiB buffer, as a model runs a norm or an
    activation between its GEMMs; None without the option."""
    if not mib:
        return None
    scratch = torch.ones(max(1, int(mib * 2**19)), device="cuda", dtype=torch.bfloat16)
    return lambda: scratch.mul_(1.0)


@contextlib.contextmanager
def knobs(settings: dict[str, str]):
    """Clear the CUTE_GEMM_* variant knobs and set `settings` for the duration, then restore what
    was there: every knob and every key of `settings` (a setting that outlived its row would pick
    the kernel of every later row, as CUTE_GEMM_ACT_OFFLOAD=0 did before 2026-11-25)."""
    keys = dict.fromkeys([*KNOBS, *settings])
    saved = {k: os.environ.pop(k, None) for k in keys}
    try:
        os.environ.update(settings)
        yield
    finally:
        for k in keys:
            os.environ.pop(k, None)
        os.environ.update({k: v for k, v in saved.items() if v is not None})


def ignored_knobs_note(environ) -> str | None:
    """The knobs of KNOBS set in `environ`: knobs() clears them for every implementation, so that
    each variant is what its name says; a run under such a knob would otherwise look like it took
    effect. None where none is set."""
    unused = [f"{k}={environ[k]}" for k in KNOBS if k in environ]
    if not unused:
        return None
    return (f"# note: not used from the environment: {', '.join(unused)}; each column sets its own knobs "
            "(name a variant instead, e.g. --variants auto,l2first)")


def finish_row(row: dict, peak: float | None) -> dict:
    """Add the derived columns (FLOP, bytes, TFLOP/s, % of peak, GB/s, x torch.mm) to a row whose
    implementations carry measured times."""
    m, n, k = row["m"], row["n"], row["k"]
    flops = 2.0 * m * n * k
    nbytes = (m * k + k * n + m * n) * ELEMENT_BYTES[row["dtype"]]
    row.update(flops=flops, bytes=nbytes, intensity=flops / nbytes,
               memory_bound=flops / nbytes < MEMORY_BOUND_INTENSITY)
    t_torch = row["impls"].get(TORCH, {}).get("us")
    for res in row["impls"].values():
        if "us" in res:
            res["tflops"] = flops / res["us"] / 1e6
            res["pct_peak"] = 100 * res["tflops"] / peak if peak else None
            res["gbps"] = nbytes / res["us"] / 1e3
            res["x_torch"] = t_torch / res["us"] if t_torch else None
        if "after_op_us" in res:
            t_after = row["impls"].get(TORCH, {}).get("after_op_us")
            res["x_torch_after_op"] = t_after / res["after_op_us"] if t_after and res["after_op_us"] > 0 else None
    return row


def first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{type(exc).__name__}: {lines[0][:200] if lines else ''}"


def load_sibling(name: str):
    """Import bench/<name>.py by path: `python -P` keeps this folder off sys.path."""
    spec = importlib.util.spec_from_file_location(f"bench_{name}", HERE / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # triton.jit reads the kernel's source through its module
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------------------- environment

def git_commit() -> str | None:
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=HERE, timeout=10)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, cwd=HERE, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    if sha.returncode != 0:
        return None
    return sha.stdout.strip() + ("+dirty" if dirty.stdout.strip() else "")


def driver_version() -> str | None:
    try:
        smi = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = smi.stdout.split()
    return lines[0] if smi.returncode == 0 and lines else None


def package_version(module, dist: str) -> str | None:
    version = getattr(module, "__version__", None)
    if version:
        return version
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def environment(torch, cute_gemm, triton_mm, args, argv) -> dict:
    prop = torch.cuda.get_device_properties(0)
    peak = args.peak_tflops or gpu_peak_tflops(prop.name)
    return {
        "gpu": prop.name,
        "sms": prop.multi_processor_count,
        "l2_bytes": prop.L2_cache_size,
        "peak_tflops": peak,
        "driver": driver_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cute_gemm": package_version(cute_gemm, "cute_gemm"),
        "triton": package_version(sys.modules["triton"], "triton") if triton_mm else None,
        "git_commit": git_commit(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "command": shlex.join(["python", sys.argv[0]] + list(argv)),
        "suites": (args.suite or []) + (["custom"] if args.shapes else []),
        "dtypes": ["f16", "bf16"] if args.dtype == "both" else [args.dtype],
        "layouts": args.layout,
        "seconds": args.seconds,
        "after_op": args.after_op,
        "warm": args.warm,
    }


# ----------------------------------------------------------------------------------- reports

def fmt(value, spec: str) -> str:
    return "-" if value is None else format(value, spec)


def geomean(values: list[float]) -> float:
    return math.exp(sum(map(math.log, values)) / len(values))


def n_shapes(count: int) -> str:
    return f"{count} shape" + ("" if count == 1 else "s")


def panels(rows: list[dict]) -> list[tuple[str, str, list[dict]]]:
    """(title, dtype, its rows) per suite, dtype and layout, in the order of SUITES and of each
    suite's shapes: the tables and the plot's panels. The title: the suite, and the layout where
    the rows have more than one."""
    order = [*SUITES, "custom"]
    suites = sorted({s for r in rows for s in r["suites"]}, key=lambda s: order.index(s) if s in order else len(order))
    layouts = list(dict.fromkeys(r["layout"] for r in rows))
    out = []
    for suite in suites:
        listed = SUITES.get(suite, [])
        for layout in layouts:
            for dtype in dict.fromkeys(r["dtype"] for r in rows):
                sel = [r for r in rows if suite in r["suites"] and r["dtype"] == dtype and r["layout"] == layout]
                sel.sort(key=lambda r: listed.index((r["m"], r["n"], r["k"])) if (r["m"], r["n"], r["k"]) in listed else 0)
                if sel:
                    out.append((f"{suite} {layout}" if len(layouts) > 1 else suite, dtype, sel))
    return out


def impl_names(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(name for r in rows for name in r["impls"]))


def geomean_line(rows: list[dict], label: str) -> str:
    parts = []
    for name in impl_names(rows):
        if name == TORCH:
            continue
        results = [r["impls"][name] for r in rows if name in r["impls"]]
        ratios = [res["x_torch"] for res in results if res.get("x_torch")]
        wrong = sum(1 for res in results if res.get("wrong"))
        failed = sum(1 for res in results if "error" in res)
        text = f"{name} {geomean(ratios):.3f} over {n_shapes(len(ratios))}" if ratios else f"{name} -"
        extra = ", ".join(f"{c} {w}" for c, w in ((wrong, "WRONG"), (failed, "failed")) if c)
        parts.append(text + (f" ({extra})" if extra else ""))
    return f"geomean x torch.mm ({label}): " + ("; ".join(parts) or "nothing to compare")


def wrong_text(res: dict) -> str:
    return "WRONG (rel err " + ("not finite" if res["rel_err"] is None else f"{res['rel_err']:.1e}") + ")"


def result_cells(row: dict, res: dict, after_op: bool = False) -> str:
    extra = " | - | -" if after_op else ""
    if res.get("wrong"):
        return f"{wrong_text(res)} | - | - | - | - | -" + extra
    if "error" in res:
        return "failed | - | - | - | - | -" + extra
    gbps = fmt(res["gbps"], ".0f") if row["memory_bound"] else "-"
    if after_op:
        extra = f" | {fmt(res.get('after_op_us'), '.1f')} | {fmt(res.get('x_torch_after_op'), '.2f')}"
    return (f"{res['us']:.1f} | {fmt(res.get('eager_us'), '.1f')} | {res['tflops']:.1f} | "
            f"{fmt(res.get('pct_peak'), '.1f')} | {gbps} | {fmt(res.get('x_torch'), '.2f')}" + extra)


def format_tables(rows: list[dict]) -> str:
    """One table per (suite, dtype) with its geometric-mean line, then the geomeans over all shapes."""
    out = []
    # Timed after another kernel too (--after-op): two more columns.
    after = any("after_op_us" in res for r in rows for res in r["impls"].values())
    for title, dtype, sel in panels(rows):
        suite, layout = title.split(" ")[0], sel[0]["layout"]
        out += [f"## {suite}, {dtype}, layout {layout}", "",
                "| M x N x K | impl | us/call | eager us | TFLOP/s | % peak | GB/s | x torch.mm |"
                + (" after an op us | x torch.mm after an op |" if after else ""),
                "|---|---|---|---|---|---|---|---|" + ("---|---|" if after else "")]
        for r in sel:
            for name, res in r["impls"].items():
                out.append(f"| {r['m']}x{r['n']}x{r['k']} | {name} | {result_cells(r, res, after)} |")
        out += ["", geomean_line(sel, f"{suite}, {dtype}, {layout}"), ""]
    dtypes = list(dict.fromkeys(r["dtype"] for r in rows))
    layouts = list(dict.fromkeys(r["layout"] for r in rows))
    for dtype in dtypes:
        for layout in layouts if len(layouts) > 1 else []:
            out.append(geomean_line([r for r in rows if r["dtype"] == dtype and r["layout"] == layout],
                                    f"every shape, {dtype}, {layout}"))
        out.append(geomean_line([r for r in rows if r["dtype"] == dtype], f"every shape, {dtype}"))
    if len(dtypes) > 1:
        out.append(geomean_line(rows, "every shape, every dtype"))
    return "\n".join(out)


def plan_text(plan) -> str:
    """cute_gemm.explain()'s plan in a few words: family, tile row, K slices, stream-K, swapped."""
    if plan.get("route") != "kernel":
        return plan.get("route", "?")
    if plan.get("family") == "gemv":  # the decode GEMV: no tile row
        return "gemv"
    extra = (f"/{plan['splits']}" if plan["splits"] > 1 else "") + (" sk" if plan["stream_k_tiles"] else "")
    return f"{plan['family']} row {plan['row']}{extra}{' swapped' if plan['swapped'] else ''}"


def record_plans(cute_gemm, impls, row: dict, operands) -> None:
    """Each cute_gemm variant's plan for this shape (cute_gemm.explain under its knobs), in its
    result: what ran, beside how fast."""
    explain = getattr(cute_gemm, "explain", None)
    for name, _, settings in impls:
        res = row["impls"].get(name)
        if explain is None or not name.startswith("cute[") or not isinstance(res, dict) or "error" in res:
            continue
        with knobs(settings):
            res["plan"] = plan_text(explain(*operands))


def progress_line(row: dict) -> str:
    cells = []
    for name, res in row["impls"].items():
        if res.get("wrong"):
            cells.append(f"{name} {wrong_text(res)}")
        elif "error" in res:
            cells.append(f"{name} failed")
        else:
            ratio = "" if name == TORCH else f" {res['x_torch']:.2f}x"
            plan = f" ({res['plan']})" if "plan" in res else ""
            cells.append(f"{name} {res['us']:.1f} us {res['tflops']:.1f} TFLOP/s{ratio}{plan}")
    return f"{row['dtype']:4} {row['layout']} {row['m']:>6}x{row['n']:>6}x{row['k']:>6}  " + " | ".join(cells)


def results_doc(env: dict, rows: list[dict]) -> dict:
    return {"format": 2, "environment": env, "results": rows}


def load_results(path: Path) -> dict:
    """A results file of this script; files of its first version (torch_us and a 'cute' map per
    row) are turned into the current rows."""
    doc = json.loads(Path(path).read_text())
    if not isinstance(doc, dict) or not isinstance(doc.get("results"), list):
        raise ValueError(f"{path} is not a bench_mm results file (no 'results' list)")
    if doc.get("format") == 2:
        return doc
    rows = []
    try:
        for old in doc["results"]:
            impls = {TORCH: {"us": old["torch_us"]}}
            impls.update({f"cute[{c}]": {k: v for k, v in res.items() if k in ("us", "wrong", "rel_err")}
                          for c, res in old["cute"].items()})
            rows.append(finish_row({"suites": ["custom"], "m": old["m"], "n": old["n"], "k": old["k"],
                                    "dtype": old["dtype"], "layout": old["layout"], "impls": impls}, None))
    except (KeyError, TypeError, AttributeError) as e:
        raise ValueError(f"{path} is neither a current nor a first-version bench_mm results file ({e!r})") from e
    return results_doc(doc.get("environment", {}), rows)


def write_json(path: Path, env: dict, rows: list[dict]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results_doc(env, rows), indent=1))


def compare_text(old: dict, new: dict) -> str:
    """Per shape and implementation present in both: the time ratio new/old and TFLOP/s old -> new."""
    def key(r):
        return r["m"], r["n"], r["k"], r["dtype"], r["layout"]

    def label(doc):
        env = doc["environment"]
        return f"{env.get('date', '?')}, {env.get('gpu', '?')}, commit {(env.get('git_commit') or '?')[:12]}"

    old_rows = {key(r): r for r in old["results"]}
    out = [f"## change: old = {label(old)}; new = {label(new)}", "",
           "| M x N x K | dtype | layout | impl | old us | new us | new/old time | TFLOP/s old -> new |",
           "|---|---|---|---|---|---|---|---|"]
    ratios: dict[str, list[float]] = {}  # per implementation
    per_layout: dict[tuple[str, str], list[float]] = {}
    for r in new["results"]:
        o = old_rows.get(key(r))
        if o is None:
            continue
        for name, res in r["impls"].items():
            if name not in o["impls"]:
                continue
            was = o["impls"][name]
            head = f"| {r['m']}x{r['n']}x{r['k']} | {r['dtype']} | {r['layout']} | {name} |"
            if "us" in res and "us" in was:
                ratios.setdefault(name, []).append(res["us"] / was["us"])
                per_layout.setdefault((name, r["layout"]), []).append(res["us"] / was["us"])
                out.append(f"{head} {was['us']:.1f} | {res['us']:.1f} | {res['us'] / was['us']:.3f} | "
                           f"{was['tflops']:.1f} -> {res['tflops']:.1f} |")
            else:
                status = ["WRONG" if x.get("wrong") else "failed" if "error" in x else f"{x['us']:.1f}"
                          for x in (was, res)]
                out.append(f"{head} {status[0]} | {status[1]} | - | - |")
    if not ratios:
        out.append("(no shape and implementation was timed in both)")
    out.append("")
    out += [f"geomean new/old time, {name}: {geomean(v):.3f} over {n_shapes(len(v))}" for name, v in ratios.items()]
    if len({layout for _, layout in per_layout}) > 1:
        out += [f"geomean new/old time, {name}, {layout}: {geomean(v):.3f} over {n_shapes(len(v))}"
                for (name, layout), v in per_layout.items()]
    return "\n".join(out)


def write_plot(rows: list[dict], path: Path, title: str) -> None:
    """Write the PNG; raises ImportError without matplotlib."""
    plot = load_sibling("plot")
    path.parent.mkdir(parents=True, exist_ok=True)
    plot.write_plot(panels(rows), path, title)
    print(f"# wrote {path}")


def plot_title(env: dict) -> str:
    return (f"{env.get('gpu', '?')}, torch {env.get('torch', '?')}, cute_gemm {env.get('cute_gemm', '?')} "
            f"@ {(env.get('git_commit') or '?')[:12]}, {env.get('date', '?')}")


# -------------------------------------------------------------------------------------- main

def load_torch_and_cute_gemm(prog: str):
    """(torch, cute_gemm), or the exit status after saying why not: 2 without a GPU, 1 when
    cute_gemm does not import. Shared by the benchmarks."""
    import torch

    if not torch.cuda.is_available():
        print(f"{prog}: no CUDA GPU is visible, so there is nothing to benchmark.", file=sys.stderr)
        return 2
    try:
        import cute_gemm
    except ImportError as e:
        print(f"{prog}: cannot import cute_gemm: {e}", file=sys.stderr)
        return 1
    return torch, cute_gemm


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    try:
        if args.plot_only:
            doc = load_results(args.plot_only)
            try:
                write_plot(doc["results"], args.plot, plot_title(doc["environment"]))
            except ImportError as e:
                print(f"bench_mm: cannot plot: matplotlib is not importable ({e})", file=sys.stderr)
                return 1
            return 0
        old = load_results(args.compare[0]) if args.compare else None
        if args.compare and len(args.compare) == 2:
            print(compare_text(old, load_results(args.compare[1])))
            return 0
    except (OSError, ValueError) as e:
        print(f"bench_mm: cannot read a results file: {e}", file=sys.stderr)
        return 1

    loaded = load_torch_and_cute_gemm("bench_mm")
    if isinstance(loaded, int):
        return loaded
    torch, cute_gemm = loaded
    triton_mm = None
    if not args.no_triton:
        try:
            triton_mm = load_sibling("triton_mm")
        except Exception as e:  # triton raises more than ImportError when its install is broken
            print(f"# note: no Triton column: bench/triton_mm.py could not be loaded ({first_line(e)})")

    if note := ignored_knobs_note(os.environ):
        print(note)
    env = environment(torch, cute_gemm, triton_mm, args, argv)
    plan = plan_shapes(args.suite, args.shapes)
    l2 = env["l2_bytes"] or 50 * 2**20
    impls = [(TORCH, torch.mm, {})] + [(f"cute[{v}]", cute_gemm.mm, variant_env(v)) for v in args.variants]
    if triton_mm:
        impls.append((TRITON, triton_mm.mm, {}))
    print(f"# {env['gpu']} ({env['sms']} SMs, dense peak {fmt(env['peak_tflops'], '.1f')} TFLOP/s), "
          f"driver {env['driver'] or '?'}, torch {env['torch']}, CUDA {env['cuda']}, triton {env['triton'] or '-'}, "
          f"cute_gemm {env['cute_gemm']} @ {env['git_commit'] or '?'}")
    print(f"# {len(plan)} shapes, dtypes {','.join(env['dtypes'])}, layouts {','.join(args.layout)}, "
          f"operands {'warm (one set, in L2 where it fits)' if args.warm else 'rotated (from HBM)'}, suites "
          f"{','.join(env['suites'])}; {', '.join(name for name, _, _ in impls)}", flush=True)

    after_op = other_kernel(torch, args.after_op)
    started = time.monotonic()
    triton_worked = False
    rows = []
    total = len(plan) * len(env["dtypes"]) * len(args.layout)
    for dname, layout in ((d, lay) for d in env["dtypes"] for lay in args.layout):
        dtype = getattr(torch, DTYPES[dname])
        for (m, n, k), suites in plan.items():
            per_set = (m * k + k * n + m * n) * ELEMENT_BYTES[dname]
            reps = max(2, min(64, math.ceil(4 * l2 / per_set)))
            torch.manual_seed(0)
            sets = [(make_operand(torch, m, k, layout[0], dtype), make_operand(torch, k, n, layout[1], dtype))
                    for _ in range(1 if args.warm else reps)]
            if args.warm:
                sets *= reps
            ref = torch.mm(*sets[0]).float()
            row = {"suites": suites, "m": m, "n": n, "k": k, "dtype": dname, "layout": layout, "reps": reps,
                   "warm": args.warm,
                   "impls": {}}
            for name, res in measure_row(torch, impls, sets, ref, REL_BOUND[dname], args.seconds,
                                         after_op).items():
                if isinstance(res, Exception):
                    if name == TORCH:
                        raise res
                    if name == TRITON and not triton_worked:
                        print(f"# note: no Triton column: its first kernel failed ({first_line(res)})")
                        impls.pop()
                        continue
                    print(f"# note: {name} failed on {dname} {m}x{n}x{k}: {first_line(res)}")
                    res = {"error": first_line(res)}
                row["impls"][name] = res
                triton_worked |= name == TRITON and "error" not in res
            record_plans(cute_gemm, impls, row, sets[0])
            rows.append(finish_row(row, env["peak_tflops"]))
            print(f"[{len(rows):>3}/{total} {time.monotonic() - started:5.0f} s] {progress_line(row)}", flush=True)
            write_json(args.json, env, rows)  # so far: a run cut short keeps what it measured
            del sets, ref
            torch.cuda.empty_cache()

    print()
    print(format_tables(rows))
    env["elapsed_s"] = round(time.monotonic() - started, 1)
    write_json(args.json, env, rows)
    print(f"# {total} measurements in {env['elapsed_s']:.0f} s; wrote {args.json}")
    if old:
        print()
        print(compare_text(old, results_doc(env, rows)))
    try:
        write_plot(rows, args.plot, plot_title(env))
    except ImportError as e:  # the GPU machine may not have matplotlib: the JSON has everything
        print(f"# note: no plot: matplotlib is not importable ({e}); make it elsewhere with "
              f"python bench/bench_mm.py --plot-only {args.json} --plot {args.plot}")
    return 1 if any(res.get("wrong") for row in rows for res in row["impls"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
