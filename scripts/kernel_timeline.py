"""Where one call's time goes, kernel by kernel, on a GPU machine after a build:

    python3 -P scripts/kernel_timeline.py 2050x2050x2050 574x574x574 --variants auto,nonarrow

For each shape (bf16, both operands row-major unless --layout) and variant (bench/bench_mm.py's
names), the same CUDA graph the benchmark times (R operand sets, called in turn) is replayed under
torch.profiler; for the middle call of a replay it prints every kernel's name, its duration and the
idle time before it (the gap after the previous kernel ended), and the call's span from the first
kernel's start to the last one's end. torch.mm is listed first, for comparison. Measurement only.
"""

import argparse
import importlib.util
import statistics
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent


def load_bench():
    spec = importlib.util.spec_from_file_location("bench_mm", ROOT / "bench" / "bench_mm.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def kernels_of_replay(graph, replays: int):
    """Kernel activities (name, start us, end us) of `replays` graph replays, in start order."""
    from torch.profiler import ProfilerActivity, profile

    graph.replay()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
    out = []
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CUDA and not e.name.startswith(("Memcpy", "Memset")):
            out.append((e.name, e.time_range.start, e.time_range.end))
    return sorted(out, key=lambda x: x[1])


class EagerCalls:
    """A stand-in for a graph: replay() calls fn on every operand set in turn."""

    def __init__(self, fn, sets):
        self.fn, self.sets = fn, sets

    def replay(self):
        for a, b in self.sets:
            self.fn(a, b)


def same_kernels_per_call(ks, per_call: int) -> bool:
    """Whether the kernels (name, start, end) split into whole calls of per_call kernels, each
    call the same names in the same order."""
    names = [k[0] for k in ks]
    if per_call <= 0 or len(names) % per_call:
        return False
    first = names[:per_call]
    return all(names[i:i + per_call] == first for i in range(0, len(names), per_call))


def short(name: str) -> str:
    name = name.split("(")[0]
    return name if len(name) <= 90 else name[:87] + "..."


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shapes", nargs="+")
    ap.add_argument("--variants", default="auto")
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    ap.add_argument("--layout", default="nn")
    ap.add_argument("--sets", type=int, default=0, help="operand sets per graph (default: > 200 MB in all)")
    args = ap.parse_args()
    bench = load_bench()
    import cute_gemm

    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    for shape in args.shapes:
        m, n, k = map(int, shape.split("x"))
        per_set = 2 * (m * k + k * n + m * n)
        sets_n = args.sets or max(4, min(64, int(2e8 // per_set) + 1))
        sets = [(bench.make_operand(torch, m, k, args.layout[0], dtype),
                 bench.make_operand(torch, k, n, args.layout[1], dtype)) for _ in range(sets_n)]
        impls = [("torch.mm", torch.mm, {})] + [
            (f"cute[{v}]", cute_gemm.mm, bench.variant_env(v)) for v in args.variants.split(",")]
        for label, fn, env in impls:
            with bench.knobs(env):
                graph = bench.capture(torch, fn, sets)
                ks = kernels_of_replay(graph, 3)
                if not ks:  # a profiler that does not see into graphs: eager calls (launch gaps in them)
                    print(f"{shape} {label}: no kernels seen in graph replays; eager calls instead")
                    ks = kernels_of_replay(EagerCalls(fn, sets), 3)
            # Calls split where the kernel sequence repeats: every call launches the same kernels.
            per_call = len(ks) // (3 * sets_n) if ks else 0
            if per_call == 0:
                print(f"{shape} {label}: no kernels seen ({len(ks)})")
                continue
            if not same_kernels_per_call(ks, per_call):
                print(f"{shape} {label}: {len(ks)} kernels for {3 * sets_n} calls do not repeat in groups of "
                      f"{per_call} (an event the profiler dropped, or calls that launch different kernels): "
                      "the split below may be wrong")
            spans = [ks[i + per_call - 1][2] - ks[i][1] for i in range(0, len(ks) - per_call + 1, per_call)]
            mid = (len(ks) // per_call // 2) * per_call
            call = ks[mid:mid + per_call]
            prev_end = ks[mid - 1][2] if mid > 0 else call[0][1]
            print(f"{shape} {label}: {per_call} kernels a call, span median {statistics.median(spans):.1f} us "
                  f"(from kernel start to end; replay's calls back to back)")
            for name, s, e in call:
                print(f"    gap {s - prev_end:6.1f}  dur {e - s:7.1f}  {short(name)}")
                prev_end = e
            del graph
        del sets
        torch.cuda.empty_cache()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
