"""The GEMMs of the models benchmark's training step, call by call, on a GPU machine after a build:

    python3 -P scripts/step_gemms.py                  # bf16 parameters
    python3 -P scripts/step_gemms.py --amp            # float32 parameters, bf16 autocast
    python3 -P scripts/step_gemms.py --decode 1       # the decode step at M = 1 instead
    python3 -P scripts/step_gemms.py --variants sm90:0,sm90:2   # also cute_gemm's calls alone on other rows

--decode M: the models benchmark's Llama-3-8B decode step (8 layers, 1024 cached tokens) at M
tokens, eager (the benchmark replays it in a CUDA graph; a kernel's duration is the same), torch's
layers against cute_gemm.optimize's (gated_mm included). Its "alone" times replay a call on the
same weights, which then stay in the L2 where they fit: in the step each layer's weights come from
HBM, so read the in-step column there.

The GPT-style step of bench/bench_models.py runs once with torch.nn.Linear and once with
cute_gemm.nn.Linear. Every GEMM call (aten mm / addmm / bmm, cute_gemm's ops) is labelled through a
dispatch mode with its shape (M x N x K) and layout (n: row-major, t: column-major, A then B) and
timed inside the step with torch.profiler (the kernels it launched, summed; CUTE_GEMM_PDL=0 unless
--pdl, so that no two kernels overlap), and alone: its first call replayed on the same tensors in a
CUDA graph. Prints per shape and layout: the calls per step, each impl's GPU time in the step and
alone, the ratios and the kernels each call launched; then the kernels whose counts per step differ.
--variants (bench/bench_mm.py's names: sm90:N, sm90:N/S, splits:S, sk, ...): each cute_gemm call
also replayed alone under those knobs, on the step's own tensors (the benchmark's operands are
random). Measurement only.
"""

import argparse
import collections
import copy
import importlib.util
import math
import os
import re
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

ROOT = Path(__file__).resolve().parent.parent
LABEL = "gemm "


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


BENCH_MM = load("bench_mm", ROOT / "bench" / "bench_mm.py")


def layout(t):
    """'n' where the operand is row-major (its last dimension contiguous), else 't'."""
    return "n" if t.stride(-1) == 1 else "t"


def describe(func, args):
    """'MxNxK ab' (and the op) for a GEMM op, None for anything else."""
    name = str(func)
    weights = 1  # B's column blocks: gated_mm's x, w_gate, w_up compute the gate's and the up's columns
    if name.startswith(("aten.mm", "cute_gemm.mm")):  # cute_gemm.mm_row_sums too: the weight's and bias's gradients
        a, b = args[0], args[1]
    elif name.startswith(("aten.addmm", "cute_gemm.addmm")):
        a, b = args[1], args[2]
    elif name.startswith(("aten.bmm", "cute_gemm.bmm")):
        a, b = args[0], args[1]
    elif name.startswith("cute_gemm.gated_mm"):
        a, b, weights = args[0], args[1].t(), 2
    else:
        return None
    m, k, n = a.size(-2), a.size(-1), weights * b.size(-1)
    batch = f"{a.size(0)}x" if a.dim() == 3 else ""
    op = name.split(".")[1]
    return f"{batch}{m}x{n}x{k} {layout(a)}{layout(b)} {op}"


class Label(TorchDispatchMode):
    """Wraps every GEMM op in a record_function named after its shape and layout, and keeps the
    first call of each (op, arguments) for alone_us."""

    def __init__(self):
        super().__init__()
        self.calls = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        desc = describe(func, args)
        if desc is None:
            return func(*args, **(kwargs or {}))
        self.calls.setdefault(desc, (func, args, kwargs or {}))
        with torch.profiler.record_function(LABEL + desc):
            return func(*args, **(kwargs or {}))


ALONE_SECONDS = 0.05  # timing budget of each call alone (--seconds)


def alone_us(call, reps: int = 10, seconds: float = ALONE_SECONDS) -> float:
    """GPU time of one such call on the step's own tensors, alone: `reps` calls in a CUDA graph,
    median over replays (bench_mm's timing; the operands stay in the L2 where they fit, as they may
    in the step)."""
    func, args, kwargs = call
    with torch.no_grad():
        return BENCH_MM.graph_time_us(torch, lambda _a, _b: func(*args, **kwargs), [(None, None)] * reps, seconds)


def short(name: str) -> str:
    """A kernel's name, cut to what tells kernels apart (cute_gemm's: the traits' arguments and the
    kernel's kind: general, offload (the activation warps'), lean, lean row sums)."""
    traits = re.search(r"KernelTraits<([^>]*)>, (true|false), (true|false), (true|false)>", name)
    if traits:
        flags = zip((" offload", " lean", " row sums"), traits.group(2, 3, 4))
        kind = "".join(word for word, on in flags if on == "true")
        return "cute " + re.sub(r"\(cute_gemm::DType\)", "", traits.group(1)).replace(" ", "") + kind
    return name[:60]


def shape_layout(desc: str) -> str:
    """'MxNxK ab' of a label: the same GEMM whichever op ran it."""
    return " ".join(desc.split(" ")[:2])


def variant_times(calls: dict, torch_calls: dict, variants: list[str], seconds: float = ALONE_SECONDS) -> dict:
    """Per label: {"torch": us, "auto": us, variant: us, ...}, all timed alone one after another (the
    GPU's clock drifts between the profile and these): torch's call of the same shape and layout,
    cute_gemm's as the rule runs it, then under each of bench_mm's variants (its knobs set while the
    call is captured; the knobs this script set itself, CUTE_GEMM_PDL, kept unless a variant sets them)."""
    kept = {k: os.environ[k] for k in BENCH_MM.KNOBS if k in os.environ}
    by_shape = {shape_layout(d): c for d, c in torch_calls.items()}
    out = {}
    for desc, call in calls.items():
        torch_call = by_shape.get(shape_layout(desc))
        out[desc] = {"torch": alone_us(torch_call, seconds=seconds) if torch_call else 0.0,
                     "auto": alone_us(call, seconds=seconds)}
        for v in variants:
            try:
                with BENCH_MM.knobs({**kept, **BENCH_MM.variant_env(v)}):
                    out[desc][v] = alone_us(call, seconds=seconds)
            except (RuntimeError, ValueError):  # a row that cannot run this call: no time, the others go on
                out[desc][v] = math.nan
    return out


def profile_step(step, steps: int, seconds: float = ALONE_SECONDS):
    """Per label: (calls, GPU us, kernel names, us alone) per step; kernel name -> launches per step;
    and the label's first call (for variant_times)."""
    from torch.profiler import ProfilerActivity, profile

    step()
    torch.cuda.synchronize()
    label = Label()
    with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
        with label:
            for _ in range(steps):
                step()
        torch.cuda.synchronize()
    per_label = collections.defaultdict(lambda: [0, 0.0, collections.Counter()])
    for e in prof.events():
        if e.device_type == torch.autograd.DeviceType.CPU and e.name.startswith(LABEL):
            entry = per_label[e.name[len(LABEL):]]
            entry[0] += 1
            entry[1] += e.device_time_total

            def kernels(ev):
                for k in ev.kernels:
                    yield k.name
                for c in ev.cpu_children:
                    yield from kernels(c)

            entry[2].update(kernels(e))
    counts = collections.Counter(e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA)
    alone = {d: alone_us(call, seconds=seconds) for d, call in label.calls.items()}
    return ({d: (n / steps, us / steps, ks, alone[d]) for d, (n, us, ks) in per_label.items()},
            {name: c / steps for name, c in counts.items()}, label.calls)


def ratio(torch_us: float, cute_us: float) -> str:
    """torch's time over cute_gemm's; '-' where one side made no such call (gated_mm's shape)."""
    return f"{torch_us / cute_us:.2f}" if torch_us > 0 and cute_us > 0 else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--amp", action="store_true", help="float32 parameters under bf16 autocast")
    ap.add_argument("--pdl", action="store_true", help="leave CUTE_GEMM_PDL as it is (overlapping kernels)")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--decode", type=int, metavar="M", help="the decode step at M tokens instead of training")
    ap.add_argument("--variants", type=BENCH_MM.parse_variants, default=[],
                    help="bench_mm's variants (sm90:N, sm90:N/S, splits:S, sk, ...): cute_gemm's calls also "
                         "timed alone under each")
    ap.add_argument("--seconds", type=float, default=ALONE_SECONDS,
                    help=f"timing budget of each call alone (default {ALONE_SECONDS})")
    args = ap.parse_args()
    if not args.pdl:
        os.environ["CUTE_GEMM_PDL"] = "0"
    bm = load("bench_models", ROOT / "bench" / "bench_models.py")
    import cute_gemm

    steps = decode_steps(bm, cute_gemm, args.decode) if args.decode else train_steps(bm, cute_gemm, args.amp)
    report(steps, args.steps, args.variants, args.seconds)
    return 0


def decode_steps(bm, cute_gemm, tokens: int) -> dict:
    """torch's and cute_gemm's decode step of bench_models' Llama layers at `tokens` tokens."""
    cfg, dtype = bm.LLAMA3_8B, torch.bfloat16
    layers = bm.llama_layers(torch, bm.DECODE_LAYERS, dtype)
    x = torch.randn(tokens, 1, cfg["d"], device="cuda", dtype=dtype)
    cos, sin = bm.rope_tables(torch, torch.arange(bm.DECODE_CONTEXT, bm.DECODE_CONTEXT + 1, device="cuda"),
                              cfg["d"] // cfg["heads"], dtype)
    caches = bm.decode_caches(torch, tokens, bm.DECODE_LAYERS, dtype)
    steps = {}
    for name, mods in (("torch", layers), ("cute_gemm", bm.swap_linears(torch, cute_gemm, copy.deepcopy(layers)))):
        def step(mods=mods):
            with torch.no_grad():
                h = x
                for layer, cache in zip(mods, caches):
                    h = layer(h, cos, sin, cache)

        steps[name] = step
    return steps


def train_steps(bm, cute_gemm, amp: bool) -> dict:
    """torch's and cute_gemm's training step of bench_models' GPT-style model."""
    GPT, _ = bm.build_modules(torch)
    cfg = bm.GPT2_MEDIUM
    torch.manual_seed(0)
    model = GPT(**cfg).to("cuda", torch.float32 if amp else torch.bfloat16)
    idx = torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"] + 1), device="cuda")
    steps = {}
    for name, m in (("torch", model), ("cute_gemm", bm.swap_linears(torch, cute_gemm, copy.deepcopy(model)))):
        opt = torch.optim.AdamW(m.parameters(), lr=3e-4, fused=True)

        def step(m=m, opt=opt):
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                logits = m(idx[:, :-1])
            torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), idx[:, 1:].flatten()).backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        steps[name] = step
    return steps


def report(steps: dict, n_steps: int, variants: list[str] = (), seconds: float = ALONE_SECONDS) -> None:
    """Profiles both steps and prints the per-GEMM table, the variants' table (if any) and the
    kernels whose counts differ."""
    # Profiled in turn, twice each, the second round kept: clocks and heat reach both alike.
    results = {}
    for _ in range(2):
        for name, step in steps.items():
            results[name] = profile_step(step, n_steps, seconds)

    (tl, tk, torch_calls), (cl, ck, cute_calls) = results["torch"], results["cute_gemm"]

    merged = collections.defaultdict(lambda: {"torch": [0, 0.0, 0.0], "cute_gemm": [0, 0.0, 0.0], "torch_k": "",
                                              "cute_k": ""})
    for impl, labels in (("torch", tl), ("cute_gemm", cl)):
        for desc, (n, us, ks, alone) in labels.items():
            row = merged[shape_layout(desc)]
            row[impl][0] += n
            row[impl][1] += us
            row[impl][2] += n * alone
            # The kernels the calls launched, most frequent first (the GEMM's own, then copies,
            # counters, memsets), with their launches per call.
            row["torch_k" if impl == "torch" else "cute_k"] = ", ".join(
                f"{short(name)} x{c / (n * n_steps):.2g}" for name, c in ks.most_common(3))
    print("us per step; in the step (the profile) and alone (alone_us, times the calls per step)")
    print(f"{'shape layout':24} {'calls':>5} {'torch':>8} {'alone':>8} {'cute':>8} {'alone':>8} {'x torch':>7} "
          f"{'alone':>6}  kernels: torch | cute_gemm")
    totals = [0.0] * 4
    for k, row in sorted(merged.items(), key=lambda kv: -(kv[1]["cute_gemm"][1] - kv[1]["torch"][1])):
        cells = [row["torch"][1], row["torch"][2], row["cute_gemm"][1], row["cute_gemm"][2]]
        totals = [a + b for a, b in zip(totals, cells)]
        calls = f"{row['torch'][0]:.0f}" if row["torch"][0] else f"{row['cute_gemm'][0]:.0f}c"
        print(f"{k:24} {calls:>5} " + " ".join(f"{x:8.1f}" for x in cells)
              + f" {ratio(cells[0], cells[2]):>7} {ratio(cells[1], cells[3]):>6}  {row['torch_k']} | {row['cute_k']}")
    print(f"{'all GEMMs':24} {'':5} " + " ".join(f"{x:8.1f}" for x in totals)
          + f" {ratio(totals[0], totals[2]):>7} {ratio(totals[1], totals[3]):>6}")
    if any(d.endswith(" gated_mm") for d in cl):
        print("(Nc: cute_gemm's calls where torch made none: gated_mm's M x 2N x K stands for torch's gate and "
              "up GEMMs, two calls of M x N x K, and its silu and product kernels, which are not in these rows)")
    if variants:
        print_variants(variant_times(cute_calls, torch_calls, variants, seconds), variants)
    print("\nkernels whose launches per step differ (torch, cute_gemm):")
    for name in sorted(set(tk) | set(ck)):
        if abs(tk.get(name, 0) - ck.get(name, 0)) > 1e-9:
            print(f"  {tk.get(name, 0):5.1f} {ck.get(name, 0):5.1f}  {name[:110]}")


def print_variants(times: dict, variants: list[str]) -> None:
    """us per call alone (variant_times), with x torch."""
    print("\nus per call alone on the step's tensors, timed one after another (x torch)")
    print(f"{'shape layout':24} {'torch':>8} {'auto':>14} " + " ".join(f"{v:>14}" for v in variants))
    for desc, row in sorted(times.items()):
        t = row["torch"]

        def cell(us):
            return f"{us:.1f} ({ratio(t, us)})"

        print(f"{shape_layout(desc):24} {t:8.1f} {cell(row['auto']):>14} "
              + " ".join(f"{cell(row[v]):>14}" for v in variants))


if __name__ == "__main__":
    raise SystemExit(main())
