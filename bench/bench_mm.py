"""cute_gemm.mm against torch.mm (cuBLAS), same inputs, same run.

    python bench/bench_mm.py                       # default suite, fp16 and bf16
    python bench/bench_mm.py --shapes 4096x4096x4096,574x574x574 --dtype bf16 --variants auto,sm80,sm90:1

Timing: R copies of the operands (together more than 4x the L2) are called in turn inside one
CUDA graph and the replay time is divided by R, so operands come from HBM, launch gaps vanish
and no dirty L2 lines from a cache flush land in the timed kernels. Median over many replays.
Every result is checked against torch.mm before it is timed; a wrong one is reported, not timed.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_SHAPES = [
    (1024, 1024, 1024),
    (2048, 2048, 2048),
    (4096, 4096, 4096),
    (8192, 8192, 8192),
    (4096, 14336, 4096),
    (4096, 4096, 14336),
    (128, 8192, 8192),
    (16, 4096, 4096),
    (574, 574, 574),
    (3000, 5000, 1000),
    (81920, 256, 256),
]
DTYPES = {"f16": "float16", "bf16": "bfloat16"}
REL_BOUND = {"f16": 2e-3, "bf16": 1e-2}


def parse_shapes(text: str) -> list[tuple[int, int, int]]:
    shapes = []
    for item in text.split(","):
        parts = item.lower().split("x")
        if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise argparse.ArgumentTypeError(f"shape '{item}' is not MxNxK with positive integers")
        shapes.append(tuple(int(p) for p in parts))
    return shapes


def parse_variants(text: str) -> list[str]:
    variants = [v.strip() for v in text.split(",") if v.strip()]
    for v in variants:
        family, _, row = v.partition(":")
        if family not in ("auto", "sm80", "sm90") or (row and (family == "auto" or not row.isdigit())):
            raise argparse.ArgumentTypeError(f"variant '{v}' is not auto, sm80, sm90 or sm80:N / sm90:N")
    return variants


def variant_env(variant: str) -> dict[str, str]:
    """The CUTE_GEMM_* settings that select one variant (read by the op at call time)."""
    family, _, row = variant.partition(":")
    env = {"CUTE_GEMM_FAMILY": family}
    if row:
        env[f"CUTE_GEMM_{family.upper()}_CONFIG"] = row
    return env


KNOBS = ("CUTE_GEMM_FAMILY", "CUTE_GEMM_SM80_CONFIG", "CUTE_GEMM_SM90_CONFIG")


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shapes", type=parse_shapes, default=DEFAULT_SHAPES, help="MxNxK,MxNxK,...")
    ap.add_argument("--dtype", choices=["f16", "bf16", "both"], default="both")
    ap.add_argument("--layout", default="nn", help="a then b: n = row-major, t = transposed view (nn, nt, tn, tt)")
    ap.add_argument("--variants", type=parse_variants, default=["auto"],
                    help="cute_gemm variants to time: auto, a family (sm80, sm90), or family:row of its configs.h")
    ap.add_argument("--json", type=Path, default=Path("bench/out/results.json"), help="where to write results")
    ap.add_argument("--seconds", type=float, default=0.3, help="timed replay time per measurement")
    args = ap.parse_args(argv)
    if args.layout not in ("nn", "nt", "tn", "tt"):
        ap.error(f"--layout must be one of nn, nt, tn, tt, got {args.layout}")
    return args


def make_operand(torch, rows, cols, major, dtype):
    if major == "n":
        return torch.randn(rows, cols, device="cuda", dtype=dtype)
    return torch.randn(cols, rows, device="cuda", dtype=dtype).t()


def graph_time_us(torch, fn, sets, seconds):
    """Median time of one call, from replays of a graph that calls fn on every operand set."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for a, b in sets:  # warm-up outside the graph: module load, smem opt-in
            fn(a, b)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for a, b in sets:
            fn(a, b)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    graph.replay()
    start.record()
    graph.replay()
    end.record()
    end.synchronize()
    once_ms = start.elapsed_time(end)
    n = max(10, min(500, int(seconds * 1e3 / max(once_ms, 1e-3))))
    times = []
    for _ in range(n):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    del graph
    return statistics.median(times) * 1e3 / len(sets)


def environment(torch):
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=Path(__file__).parent).stdout.strip()
    except OSError:
        commit = ""
    prop = torch.cuda.get_device_properties(0)
    import cute_gemm

    return {
        "gpu": prop.name,
        "sms": prop.multi_processor_count,
        "l2_bytes": prop.L2_cache_size,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cute_gemm": cute_gemm.__version__,
        "git_commit": commit,
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S"),
    }


def main(argv=None) -> int:
    args = parse_args(argv)
    import torch

    if not torch.cuda.is_available():
        print("bench_mm: no CUDA GPU is visible, so there is nothing to benchmark.", file=sys.stderr)
        return 2
    import cute_gemm

    env = environment(torch)
    l2 = env["l2_bytes"] or 50 * 2**20
    dtypes = ["f16", "bf16"] if args.dtype == "both" else [args.dtype]
    variants = args.variants
    print(f"# {env['gpu']} ({env['sms']} SMs), torch {env['torch']}, CUDA {env['cuda']}, "
          f"cute_gemm {env['cute_gemm']} @ {env['git_commit'] or '?'}; layout {args.layout}")

    rows = []
    for dname in dtypes:
        dtype = getattr(torch, DTYPES[dname])
        for m, n, k in args.shapes:
            elt = torch.finfo(dtype).bits // 8
            per_set = (m * k + k * n + m * n) * elt
            reps = max(2, min(64, math.ceil(4 * l2 / per_set)))
            torch.manual_seed(0)
            sets = [(make_operand(torch, m, k, args.layout[0], dtype), make_operand(torch, k, n, args.layout[1], dtype))
                    for _ in range(reps)]
            flops = 2.0 * m * n * k
            ref = torch.mm(*sets[0]).float()
            t_torch = graph_time_us(torch, torch.mm, sets, args.seconds)
            row = {"m": m, "n": n, "k": k, "dtype": dname, "layout": args.layout, "reps": reps,
                   "torch_us": t_torch, "torch_tflops": flops / t_torch / 1e6, "cute": {}}
            for cfg in variants:
                for knob in KNOBS:
                    os.environ.pop(knob, None)
                os.environ.update(variant_env(cfg))
                out = cute_gemm.mm(*sets[0]).float()
                err = ((out - ref).norm() / ref.norm().clamp_min(1e-30)).item()
                if not math.isfinite(err) or err > REL_BOUND[dname]:
                    row["cute"][cfg] = {"wrong": True, "rel_err": err}
                    continue
                t = graph_time_us(torch, cute_gemm.mm, sets, args.seconds)
                row["cute"][cfg] = {"us": t, "tflops": flops / t / 1e6, "x_torch": t_torch / t, "rel_err": err}
            for knob in KNOBS:
                os.environ.pop(knob, None)
            rows.append(row)
            cells = "  ".join(
                f"{c}: WRONG (rel err {r['rel_err']:.2e})" if r.get("wrong")
                else f"{c}: {r['us']:9.1f} us {r['tflops']:6.1f} TFLOP/s {r['x_torch']:5.2f}x"
                for c, r in row["cute"].items())
            print(f"{dname:4} {m:>6}x{n:>6}x{k:>6}  torch: {t_torch:9.1f} us {row['torch_tflops']:6.1f} TFLOP/s  "
                  f"{cells}", flush=True)
            del sets, ref
            torch.cuda.empty_cache()

    print_table(rows, variants)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"environment": env, "results": rows}, indent=1))
    print(f"# wrote {args.json}")
    return 1 if any(r.get("wrong") for row in rows for r in row["cute"].values()) else 0


def print_table(rows, variants):
    print()
    head = f"| dtype | M x N x K | torch.mm TFLOP/s |" + "".join(f" cute[{c}] TFLOP/s | x torch |" for c in variants)
    print(head)
    print("|" + "---|" * (3 + 2 * len(variants)))
    for r in rows:
        cells = ""
        for c in variants:
            res = r["cute"][c]
            cells += " WRONG | - |" if res.get("wrong") else f" {res['tflops']:.1f} | {res['x_torch']:.2f} |"
        print(f"| {r['dtype']} | {r['m']}x{r['n']}x{r['k']} | {r['torch_tflops']:.1f} |{cells}")
    for c in variants:
        for d in sorted({r["dtype"] for r in rows}):
            ratios = [r["cute"][c]["x_torch"] for r in rows if r["dtype"] == d and not r["cute"][c].get("wrong")]
            if ratios:
                geo = math.exp(sum(map(math.log, ratios)) / len(ratios))
                print(f"geomean x torch.mm, cute[{c}], {d}: {geo:.3f} over {len(ratios)} shapes")


if __name__ == "__main__":
    sys.exit(main())
