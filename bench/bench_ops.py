"""The fused epilogue, the gated kernel, the bias gradient's row sums and cute_gemm.nn.Linear
against torch's unfused path, same inputs, same run.

    python -P bench/bench_ops.py                                  # every section, bf16, gelu
    python -P bench/bench_ops.py --activations all                # none (the bias alone), relu, gelu, gelu_tanh, silu
    python -P bench/bench_ops.py --section fused --shapes 4096x14336x4096 --layout nn
    python -P bench/bench_ops.py --section mlp --mlp 8192x4096x14336 --mlp-activation silu
    python -P bench/bench_ops.py --section gated --gated 1x14336x4096 --after-op
    python -P bench/bench_ops.py --section gated --gated 2048x14336x4096 --variants auto,sm90:0,sk
    python -P bench/bench_ops.py --section bias --bias 4096x1024x8192 --after-op
    python -P bench/bench_ops.py --section loss --loss 8192x4096x128256

fused: cute_gemm.addmm(bias, a, b, activation=act), one kernel, against
act(torch.addmm(bias, a, b)), cuBLAS then an elementwise kernel that reads and writes C again.
Timed as bench/bench_mm.py times (its functions are reused): R copies of the operands called in
turn inside one CUDA graph, median over replays, plus a plain eager loop.

mlp: one training step, forward + backward, of a two-layer MLP block
(Linear(d, hidden) + act, Linear(hidden, d); loss = out.float().square().mean(); gradients of the
input and of every parameter) built from cute_gemm.nn.Linear against the same block of
torch.nn.Linear with the same weights. Eager, CUDA events, median of loops.

gated: torch.ops.cute_gemm.gated_mm(x, w_gate, w_up), one kernel computing act(x w_gate^T) *
(x w_up^T) (nn.GatedMLP's gate and up projections), against torch's two GEMMs, the activation and
the product; M tokens, FF the intermediate size, D the hidden size; weights of N(0, 0.02). Timed as
fused, with --after-op also each call right after another kernel, as a model makes it; with
--variants also gated_mm pinned to other rows, K slices or the stream-K tail (bench_mm.py's names).

bias: nn.Linear's weight and bias gradients from one call, torch.ops.cute_gemm.mm_row_sums(dY^T, x)
(the product and the sums over K of dY^T's rows), against torch's dY^T @ x and dY.sum(0); also
mm_row_sums with CUTE_GEMM_ROW_SUMS=0 (its GEMM, then torch's sum) and cute_gemm.mm(dY^T, x) alone
(the GEMM without the sums). OUT x IN x TOKENS: the weight's shape and the tokens. Timed as gated.

loss: cute_gemm.linear_cross_entropy(x, w, target), a language model's head and its loss with
backward (the gradients of x and w), against F.cross_entropy(F.linear(x, w).float(), target) and
its backward; TOKENS x D x VOCAB. Eager, CUDA events, median of loops, and the peak of memory
allocated beyond the inputs.

Every result is checked against a float32 reference before it is timed (relative Frobenius
error); a wrong one is reported as WRONG and never timed. docs/benchmark.md describes the output.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import math
import os
import platform
import shlex
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _load_bench_mm():
    # By path: `python -P` keeps this folder off sys.path.
    spec = importlib.util.spec_from_file_location("bench_mm", HERE / "bench_mm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


bench_mm = _load_bench_mm()

DEFAULT_SHAPES = [(4096, 14336, 4096), (16384, 4096, 4096)]
DEFAULT_MLP = (8192, 4096, 14336)  # tokens, d, hidden
# gated: Llama-3-8B's MLP (intermediate 14336, hidden 4096) at decode (1, 16, 64 tokens) and prefill.
DEFAULT_GATED = [(1, 14336, 4096), (16, 14336, 4096), (64, 14336, 4096), (2048, 14336, 4096)]
# bias: a GPT-2-medium block's weights (QKV, attention output, MLP up and down) at 8192 tokens.
DEFAULT_BIAS = [(3072, 1024, 8192), (1024, 1024, 8192), (4096, 1024, 8192), (1024, 4096, 8192)]
# loss: the heads of GPT-2-medium (vocabulary 50304) and Llama-3-8B (128256) over 8192 tokens.
DEFAULT_LOSS = [(8192, 1024, 50304), (8192, 4096, 128256)]
GATED_ACTIVATIONS = ("silu", "gelu", "gelu_tanh")
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")
# fused: "none" is the bias alone, torch.addmm (cuBLAS's own bias epilogue) against cute_gemm.addmm.
FUSED_ACTIVATIONS = ("none",) + ACTIVATIONS
SECTIONS = ("fused", "mlp", "gated", "bias", "loss")
# gated: the rows with a gated kernel (csrc/sm90/configs.h, kGatedConfigs) and the knobs that gated_mm
# reads (csrc/gated_plan.cpp): a variant setting any other would time the rule under another name.
GATED_ROWS = ("0", "1", "2", "4")
GATED_KNOBS = ("CUTE_GEMM_FAMILY", "CUTE_GEMM_SM90_CONFIG", "CUTE_GEMM_SPLITS", "CUTE_GEMM_STREAM_K", "CUTE_GEMM_PDL",
               "CUTE_GEMM_FAST_HBM", "CUTE_GEMM_L2_HINT", "CUTE_GEMM_GEMV")
DTYPES = {"f16": "float16", "bf16": "bfloat16"}
TARGET = 1.1  # the fused epilogue should save at least this much over the unfused pair


# ---------------------------------------------------------------------------------- arguments

def parse_mlp(text: str) -> tuple[int, int, int]:
    parts = text.lower().split("x")
    if len(parts) != 3 or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"'{text}' is not TOKENSxDxHIDDEN with positive integers")
    return tuple(int(p) for p in parts)


def parse_gated_variants(text: str) -> list[str]:
    """bench_mm.py's variants, limited to those gated_mm honours: the sm90 family, its gated rows, K
    slices, the stream-K tail, PDL, the HBM rules, the L2 hints and the decode GEMV."""
    variants = bench_mm.parse_variants(text)
    for v in variants:
        env = bench_mm.variant_env(v)
        if (set(env) - set(GATED_KNOBS) or env.get("CUTE_GEMM_FAMILY", "auto") not in ("auto", "sm90")
                or env.get("CUTE_GEMM_SM90_CONFIG", "0") not in GATED_ROWS):
            raise argparse.ArgumentTypeError(
                f"variant '{v}' is not one gated_mm runs: auto, sk, nosk, nopdl, l2normal, l2first, l2last, fasthbm, "
                f"slowhbm, gemv, nogemv, splits:S, sm90:N or sm90:N/S with N a gated row ({', '.join(GATED_ROWS)}), or such joined by '+'")
    return variants


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--section", type=lambda t: bench_mm.parse_choices(t, SECTIONS, "section"), default=list(SECTIONS),
                    help="comma list of fused, mlp, gated, bias, loss, all (default: all)")
    ap.add_argument("--shapes", type=bench_mm.parse_shapes, default=DEFAULT_SHAPES,
                    help="fused: MxNxK,... (default: 4096x14336x4096,16384x4096x4096)")
    ap.add_argument("--activations", type=lambda t: bench_mm.parse_choices(t, FUSED_ACTIVATIONS, "activation"),
                    default=["gelu"], help=f"fused: comma list of {', '.join(FUSED_ACTIVATIONS)}, all (default: gelu)")
    ap.add_argument("--layout", choices=bench_mm.LAYOUTS, default="nt",
                    help="fused: a then b, n = row-major, t = transposed view (default nt: b is an nn.Linear "
                         "weight's .t())")
    ap.add_argument("--mlp", type=parse_mlp, default=DEFAULT_MLP, metavar="TOKENSxDxHIDDEN",
                    help="mlp: tokens, model width, hidden width (default: 8192x4096x14336)")
    ap.add_argument("--mlp-activation", choices=ACTIVATIONS, default="gelu", help="mlp: activation (default gelu)")
    ap.add_argument("--gated", type=bench_mm.parse_shapes, default=DEFAULT_GATED, metavar="MxFFxD,...",
                    help="gated: tokens x intermediate size x hidden size (default: Llama-3-8B's MLP at 1, 16, "
                         "64 and 2048 tokens)")
    ap.add_argument("--gated-activation", choices=GATED_ACTIVATIONS, default="silu",
                    help="gated: activation (default silu)")
    ap.add_argument("--bias", type=bench_mm.parse_shapes, default=DEFAULT_BIAS, metavar="OUTxINxTOKENS,...",
                    help="bias: a weight's rows and columns and the tokens (default: a GPT-2-medium block's "
                         "four weights at 8192 tokens)")
    ap.add_argument("--loss", type=bench_mm.parse_shapes, default=DEFAULT_LOSS, metavar="TOKENSxDxVOCAB,...",
                    help="loss: tokens, model width, vocabulary (default: GPT-2-medium's and Llama-3-8B's heads at "
                         "8192 tokens)")
    ap.add_argument("--after-op", nargs="?", type=bench_mm.positive_float, const=32.0, default=None, metavar="MIB",
                    help="gated, bias: also time each call right after an in-place scale of a MIB MiB buffer (32 "
                         "unless given), less that kernel's own time")
    ap.add_argument("--variants", type=parse_gated_variants, default=["auto"],
                    help="gated: gated_mm's plans to time beside its rule (auto), by bench_mm.py's names: "
                         f"sm90:N or sm90:N/S (N a gated row: {', '.join(GATED_ROWS)}), splits:S, sk, nosk, nopdl, "
                         "l2normal, l2first, l2last, fasthbm, slowhbm (default: auto)")
    ap.add_argument("--dtype", choices=list(DTYPES), default="bf16")
    ap.add_argument("--seconds", type=bench_mm.positive_float, default=0.3, help="timed time per measurement")
    ap.add_argument("--json", type=Path, default=Path("bench/out/ops.json"), help="where to write results")
    return ap.parse_args(argv)


# ------------------------------------------------------------------------------- measurement

def torch_activation(torch, name: str):
    F = torch.nn.functional
    return {"none": lambda y: y, "relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda y: F.gelu(y, approximate="tanh"),
            "silu": F.silu}[name]


def fused_row(torch, cute_gemm, shape, activation, dname, layout, l2, seconds) -> dict:
    """Check and time act(torch.addmm(...)) and cute_gemm.addmm(..., activation=act) on one shape."""
    m, n, k = shape
    dtype = getattr(torch, DTYPES[dname])
    per_set = (m * k + k * n + m * n) * 2
    reps = max(2, min(64, math.ceil(4 * l2 / per_set)))
    torch.manual_seed(0)
    sets = [(bench_mm.make_operand(torch, m, k, layout[0], dtype), bench_mm.make_operand(torch, k, n, layout[1], dtype))
            for _ in range(reps)]
    bias = torch.randn(n, device="cuda", dtype=dtype)
    act = torch_activation(torch, activation)
    a0, b0 = sets[0]
    ref = act(torch.addmm(bias.float(), a0.float(), b0.float()))
    cute_act = None if activation == "none" else activation
    fused = lambda a, b: cute_gemm.addmm(bias, a, b, activation=cute_act)
    # "consumers": the sm90 kernel with bias and activation in its consumer warpgroups, not handed to
    # the activation warps (CUTE_GEMM_ACT_OFFLOAD=0); the same kernel as "fused" elsewhere, and
    # left out without an activation, where it is "fused".
    impls = [("unfused", lambda a, b: act(torch.addmm(bias, a, b)), {}), ("fused", fused, {})]
    if cute_act is not None:
        impls.append(("consumers", fused, {"CUTE_GEMM_ACT_OFFLOAD": "0"}))
    row = {"m": m, "n": n, "k": k, "dtype": dname, "layout": layout, "activation": activation, "reps": reps,
           "impls": {}}
    # Checked, then timed interleaved in one run (bench_mm.measure_row); one failing must not cost
    # the others' numbers.
    results = bench_mm.measure_row(torch, impls, sets, ref, bench_mm.REL_BOUND[dname], seconds)
    record(row, results, baseline="unfused")
    del sets, ref
    torch.cuda.empty_cache()
    return finish_fused(row)


def record(row: dict, results: dict, baseline: str) -> None:
    """measure_row's results into row["impls"]: an implementation that raised is "failed", but the
    baseline's exception ends the run (nothing is left to compare against)."""
    for name, res in results.items():
        if isinstance(res, Exception):
            if name == baseline:
                raise res
            res = {"error": bench_mm.first_line(res)}
        row["impls"][name] = res


def finish_fused(row: dict) -> dict:
    flops = 2.0 * row["m"] * row["n"] * row["k"]
    for res in row["impls"].values():
        if "us" in res:
            res["tflops"] = flops / res["us"] / 1e6
    unfused, fused = row["impls"].get("unfused", {}), row["impls"].get("fused", {})
    row["ratio"] = unfused["us"] / fused["us"] if "us" in unfused and "us" in fused else None
    return row


def within_bound(row: dict, runs: dict, refs: list, dname: str) -> dict:
    """{name: largest relative error} of each run's outputs (runs[name]() returns tensors matching
    refs) for those within twice the first run's (torch's) own error or the dtype's bound; the
    others go into row as WRONG or as their error, untimed. The first must run."""
    errors = {}
    for i, (name, run) in enumerate(runs.items()):
        try:
            got = run()
            errors[name] = max(_rel_err(g, r) for g, r in zip(got, refs))
            del got
        except Exception as e:
            if i == 0:
                raise
            row["impls"][name] = {"error": bench_mm.first_line(e)}
    bound = max(bench_mm.REL_BOUND[dname], 2 * errors[next(iter(runs))])
    passed = {}
    for name, err in errors.items():
        if math.isfinite(err) and err <= bound:
            passed[name] = err
        else:
            row["impls"][name] = {"wrong": True, "rel_err": err if math.isfinite(err) else None}
    return passed


def mlp_row(torch, cute_gemm, mlp, activation, dname, seconds) -> dict:
    """Check and time one forward+backward step of the MLP block, torch.nn.Linear vs cute_gemm.nn.Linear."""
    tokens, d, hidden = mlp
    dtype = getattr(torch, DTYPES[dname])
    torch.manual_seed(0)
    theirs = torch.nn.Sequential(torch.nn.Linear(d, hidden), activation_module(torch, activation),
                                 torch.nn.Linear(hidden, d)).to("cuda", dtype)
    ours = torch.nn.Sequential(cute_gemm.nn.Linear.from_torch(theirs[0], activation=activation),
                               cute_gemm.nn.Linear.from_torch(theirs[2]))  # the same Parameters
    x = torch.randn(tokens, d, device="cuda", dtype=dtype, requires_grad=True)

    def step(model, x):
        loss = model(x).float().square().mean()
        return torch.autograd.grad(loss, [x, *model.parameters()])

    def outputs(model, x):
        with torch.no_grad():
            y = model(x)
        return [y, *step(model, x)]

    # Reference: the same block and input in float32 (TF32 off), then the relative error of every
    # output and gradient; ours must be within twice torch's own error (or the dtype's bound).
    reference = torch.nn.Sequential(torch.nn.Linear(d, hidden), activation_module(torch, activation),
                                    torch.nn.Linear(hidden, d)).to("cuda")
    reference.load_state_dict(theirs.state_dict())
    refs = outputs(reference, x.detach().float().requires_grad_())
    del reference
    row = {"tokens": tokens, "d": d, "hidden": hidden, "dtype": dname, "activation": activation,
           "flops": 3 * 2.0 * 2 * tokens * d * hidden, "impls": {}}  # forward 2 GEMMs, backward 4
    models = {"torch.nn.Linear": theirs, "cute_gemm.nn.Linear": ours}
    passed = within_bound(row, {name: lambda m=m: outputs(m, x) for name, m in models.items()}, refs, dname)
    del refs
    for name, err in passed.items():
        model = models[name]
        us = bench_mm.eager_time_us(torch, lambda x, _: step(model, x), x, None, max(seconds, 1.0))
        row["impls"][name] = {"ms": us / 1e3, "tflops": row["flops"] / us / 1e6, "rel_err": err}
    torch.cuda.empty_cache()
    t, c = row["impls"].get("torch.nn.Linear", {}), row["impls"].get("cute_gemm.nn.Linear", {})
    row["ratio"] = t["ms"] / c["ms"] if "ms" in t and "ms" in c else None
    return row


def gated_row(torch, shape, activation, dname, l2, seconds, after_op=None, variants=("auto",)) -> dict:
    """Check and time act(x @ w_gate.t()) * (x @ w_up.t()) in torch and gated_mm on one shape: its rule
    ("gated_mm") and each other variant ("gated_mm[sm90:0]": bench_mm.variant_env's knobs)."""
    m, n, k = shape
    dtype = getattr(torch, DTYPES[dname])
    per_set = (m * k + 2 * n * k + m * n) * 2
    reps = max(2, min(64, math.ceil(4 * l2 / per_set)))
    torch.manual_seed(0)
    # A model's weights (N(0, 0.02)): with N(0, 1) the product of two K-long sums would dwarf bf16's range.
    sets = [(torch.randn(m, k, device="cuda", dtype=dtype),
             tuple(torch.randn(n, k, device="cuda", dtype=dtype) * 0.02 for _ in range(2))) for _ in range(reps)]
    act = torch_activation(torch, activation)
    x0, (g0, u0) = sets[0]
    ref = act(x0.float() @ g0.float().t()) * (x0.float() @ u0.float().t())
    def gated(x, w):
        return torch.ops.cute_gemm.gated_mm(x, w[0], w[1], activation=activation)

    impls = [("torch", lambda x, w: act(x @ w[0].t()) * (x @ w[1].t()), {}), ("gated_mm", gated, {})]
    impls += [(f"gated_mm[{v}]", gated, bench_mm.variant_env(v)) for v in variants if v != "auto"]
    row = {"m": m, "n": n, "k": k, "dtype": dname, "activation": activation, "reps": reps, "impls": {}}
    results = bench_mm.measure_row(torch, impls, sets, ref, bench_mm.REL_BOUND[dname], seconds, after_op)
    record(row, results, baseline="torch")
    del sets, ref
    torch.cuda.empty_cache()
    return finish_gated(row)


def finish_gated(row: dict) -> dict:
    """TFLOP/s, the weights' GB/s and torch's time over each gated_mm variant's (x_torch, also after
    an op where timed); the rule's as the row's ratio."""
    flops, weight_bytes = 2.0 * row["m"] * 2 * row["n"] * row["k"], 2 * row["n"] * row["k"] * 2
    for res in row["impls"].values():
        if "us" in res:
            res["tflops"], res["weights_gbps"] = flops / res["us"] / 1e6, weight_bytes / res["us"] / 1e3
    return over_torch(row, "gated_mm")


def over_torch(row: dict, ours: str) -> dict:
    """torch's time over each timed call's (x_torch, also after an op where both were timed); the
    call `ours`'s as the row's ratio."""
    t = row["impls"].get("torch", {})
    for res in row["impls"].values():
        if "us" in res:
            res["x_torch"] = t["us"] / res["us"] if "us" in t else None
            if t.get("after_op_us") and res.get("after_op_us"):
                res["x_torch_after_op"] = t["after_op_us"] / res["after_op_us"]
    r = row["impls"].get(ours, {})
    row["ratio"], row["ratio_after_op"] = r.get("x_torch"), r.get("x_torch_after_op")
    return row


def bias_row(torch, cute_gemm, shape, dname, l2, seconds, after_op=None) -> dict:
    """Check and time nn.Linear's weight and bias gradients on one shape (OUT x IN x TOKENS): torch's
    two ops against mm_row_sums(dY^T, x) and its GEMM alone. Each call's product is checked by
    bench_mm.measure_row, its sums here first (a call with wrong sums is never timed)."""
    out, inp, tokens = shape
    dtype = getattr(torch, DTYPES[dname])
    per_set = (out * tokens + tokens * inp + out * inp) * 2
    reps = max(2, min(64, math.ceil(4 * l2 / per_set)))
    torch.manual_seed(0)
    sets = [(torch.randn(tokens, out, device="cuda", dtype=dtype).t(), torch.randn(tokens, inp, device="cuda", dtype=dtype))
            for _ in range(reps)]  # (dY^T, x): dY^T an M-major view, as nn.Linear's backward passes it
    a0, b0 = sets[0]
    ref, ref_sums = a0.float() @ b0.float(), a0.float().sum(1)
    row_sums = torch.ops.cute_gemm.mm_row_sums
    both = {"torch": lambda a, b: (torch.mm(a, b), a.sum(1)), "mm_row_sums": row_sums,
            "mm_row_sums[torch sums]": row_sums}
    settings = {"mm_row_sums[torch sums]": {"CUTE_GEMM_ROW_SUMS": "0"}}
    row = {"out": out, "in": inp, "tokens": tokens, "dtype": dname, "reps": reps, "impls": {}}
    impls = []
    for name, fn in both.items():
        with bench_mm.knobs(settings.get(name, {})):
            err = _rel_err(fn(a0, b0)[1], ref_sums)
        if not math.isfinite(err) or err > bench_mm.REL_BOUND[dname]:
            row["impls"][name] = {"wrong": True, "rel_err": err if math.isfinite(err) else None, "what": "sums"}
        else:
            impls.append((name, lambda a, b, fn=fn: fn(a, b)[0], settings.get(name, {})))
    if "torch" in row["impls"]:
        raise RuntimeError(f"torch's own row sums are off by {row['impls']['torch']['rel_err']}")
    impls.append(("cute_gemm.mm", cute_gemm.mm, {}))
    results = bench_mm.measure_row(torch, impls, sets, ref, bench_mm.REL_BOUND[dname], seconds, after_op)
    record(row, results, baseline="torch")
    del sets, ref, ref_sums
    torch.cuda.empty_cache()
    return over_torch(row, "mm_row_sums")


def loss_row(torch, cute_gemm, shape, dname, seconds) -> dict:
    """Check and time the head + cross-entropy with backward: torch's way against linear_cross_entropy.
    Each must be within twice torch's error (or the dtype's bound) of a float32 reference in the
    loss and both gradients before it is timed."""
    tokens, d, vocab = shape
    dtype = getattr(torch, DTYPES[dname])
    F = torch.nn.functional
    torch.manual_seed(0)
    x = torch.randn(tokens, d, device="cuda").to(dtype).requires_grad_()
    w = (torch.randn(vocab, d, device="cuda") / d ** 0.5).to(dtype).requires_grad_()
    target = torch.randint(0, vocab, (tokens,), device="cuda")
    impls = {"torch": lambda x, w: F.cross_entropy(F.linear(x, w).float(), target),
             "linear_cross_entropy": lambda x, w: cute_gemm.linear_cross_entropy(x, w, target)}

    def step(fn, x, w):
        loss = fn(x, w)
        return [loss.detach(), *torch.autograd.grad(loss, [x, w])]

    x32, w32 = x.detach().float().requires_grad_(), w.detach().float().requires_grad_()
    refs = step(lambda x, w: F.cross_entropy(F.linear(x, w), target), x32, w32)
    del x32, w32
    row = {"tokens": tokens, "d": d, "vocab": vocab, "dtype": dname, "impls": {}}
    passed = within_bound(row, {name: lambda fn=fn: step(fn, x, w) for name, fn in impls.items()}, refs, dname)
    del refs
    for name, err in passed.items():
        fn = impls[name]
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step(fn, x, w)
        peak = torch.cuda.max_memory_allocated() - base
        us = bench_mm.eager_time_us(torch, lambda a, b, fn=fn: step(fn, a, b), x, w, max(seconds, 1.0))
        row["impls"][name] = {"ms": us / 1e3, "rel_err": err, "peak_gib": peak / 2**30}
    torch.cuda.empty_cache()
    t, c = row["impls"].get("torch", {}), row["impls"].get("linear_cross_entropy", {})
    row["ratio"] = t["ms"] / c["ms"] if "ms" in t and "ms" in c else None
    return row


def activation_module(torch, name: str):
    nn = torch.nn
    return {"relu": nn.ReLU(), "gelu": nn.GELU(), "gelu_tanh": nn.GELU(approximate="tanh"), "silu": nn.SiLU()}[name]


def _rel_err(x, ref) -> float:
    return ((x.float() - ref.float()).norm() / ref.float().norm().clamp_min(1e-30)).item()


# ----------------------------------------------------------------------------------- reports

def cell(res: dict, key: str, spec: str) -> str:
    if res.get("wrong"):
        return bench_mm.wrong_text(res)
    if "error" in res:
        return "failed"
    return bench_mm.fmt(res.get(key), spec)


def format_fused(rows: list[dict]) -> str:
    if not rows:
        return ""
    out = [f"## fused epilogue: cute_gemm.addmm(bias, a, b, activation=act) vs act(torch.addmm(bias, a, b)), "
           f"{rows[0]['dtype']}, layout {rows[0]['layout']}", "",
           "| M x N x K | activation | unfused us | fused us | unfused TFLOP/s | fused TFLOP/s | unfused/fused "
           "| fused, epilogue in the consumers (us) |",
           "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        u, f = r["impls"].get("unfused", {}), r["impls"].get("fused", {})
        c = r["impls"].get("consumers")
        out.append(f"| {r['m']}x{r['n']}x{r['k']} | {r['activation']} | {cell(u, 'us', '.1f')} | "
                   f"{cell(f, 'us', '.1f')} | {cell(u, 'tflops', '.1f')} | {cell(f, 'tflops', '.1f')} | "
                   f"{bench_mm.fmt(r['ratio'], '.2f')} | {cell(c, 'us', '.1f') if c is not None else '-'} |")
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    summary = (f"{bench_mm.geomean(ratios):.3f} over {bench_mm.n_shapes(len(ratios))}" if ratios else "-")
    left_out = len(rows) - len(ratios)
    out += ["", f"geomean unfused/fused: {summary}" + (f" ({left_out} left out: WRONG or failed)" if left_out else "")
            + f"; target >= {TARGET}"]
    return "\n".join(out)


def format_mlp(row: dict | None) -> str:
    if row is None:
        return ""
    t, c = row["impls"].get("torch.nn.Linear", {}), row["impls"].get("cute_gemm.nn.Linear", {})
    return "\n".join([
        f"## MLP step (forward + backward): Linear({row['d']}, {row['hidden']}) + {row['activation']}, "
        f"Linear({row['hidden']}, {row['d']}), {row['tokens']} tokens, {row['dtype']}", "",
        "| impl | ms/step | TFLOP/s | max rel err |", "|---|---|---|---|",
        f"| torch.nn.Linear | {cell(t, 'ms', '.2f')} | {cell(t, 'tflops', '.1f')} | "
        f"{bench_mm.fmt(t.get('rel_err'), '.1e')} |",
        f"| cute_gemm.nn.Linear | {cell(c, 'ms', '.2f')} | {cell(c, 'tflops', '.1f')} | "
        f"{bench_mm.fmt(c.get('rel_err'), '.1e')} |",
        "", f"torch/cute time: {bench_mm.fmt(row['ratio'], '.3f')}"])


def format_gated(rows: list[dict]) -> str:
    if not rows:
        return ""
    after = any("after_op_us" in res for r in rows for res in r["impls"].values())
    out = [f"## gated: torch.ops.cute_gemm.gated_mm(x, w_gate, w_up) vs {rows[0]['activation']}(x @ w_gate.t()) * "
           f"(x @ w_up.t()), {rows[0]['dtype']}", "",
           "| M x FF x D | torch us | gated_mm us | gated_mm TFLOP/s | weights GB/s (gated_mm) | torch/gated_mm |"
           + (" after an op: torch us | gated_mm us | torch/gated_mm |" if after else ""),
           "|---|---|---|---|---|---|" + ("---|---|---|" if after else "")]
    for r in rows:
        t, g = r["impls"].get("torch", {}), r["impls"].get("gated_mm", {})
        line = (f"| {r['m']}x{r['n']}x{r['k']} | {cell(t, 'us', '.1f')} | {cell(g, 'us', '.1f')} | "
                f"{cell(g, 'tflops', '.1f')} | {cell(g, 'weights_gbps', '.0f')} | {bench_mm.fmt(r['ratio'], '.2f')} |")
        if after:
            line += (f" {cell(t, 'after_op_us', '.1f')} | {cell(g, 'after_op_us', '.1f')} | "
                     f"{bench_mm.fmt(r['ratio_after_op'], '.2f')} |")
        out.append(line)
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    out += ["", "geomean torch/gated_mm: " + (f"{bench_mm.geomean(ratios):.3f} over {bench_mm.n_shapes(len(ratios))}"
                                               if ratios else "-")]
    others = [(r, name, res) for r in rows for name, res in r["impls"].items() if name.startswith("gated_mm[")]
    if others:
        out += ["", "| M x FF x D | variant | us | torch/variant |" + (" after an op: us | torch/variant |" if after else ""),
                "|---|---|---|---|" + ("---|---|" if after else "")]
        for r, name, res in others:
            line = (f"| {r['m']}x{r['n']}x{r['k']} | {name[len('gated_mm['):-1]} | {cell(res, 'us', '.1f')} | "
                    f"{bench_mm.fmt(res.get('x_torch'), '.2f')} |")
            if after:
                line += f" {cell(res, 'after_op_us', '.1f')} | {bench_mm.fmt(res.get('x_torch_after_op'), '.2f')} |"
            out.append(line)
    return "\n".join(out)


BIAS_COLUMNS = ("torch", "mm_row_sums", "mm_row_sums[torch sums]", "cute_gemm.mm")


def format_bias(rows: list[dict]) -> str:
    if not rows:
        return ""
    after = any("after_op_us" in res for r in rows for res in r["impls"].values())
    out = [f"## bias: torch.ops.cute_gemm.mm_row_sums(dY^T, x) vs dY^T @ x and dY.sum(0), {rows[0]['dtype']} "
           "(us; mm_row_sums[torch sums]: CUTE_GEMM_ROW_SUMS=0; cute_gemm.mm: the GEMM alone)", "",
           "| OUT x IN x TOKENS | " + " | ".join(BIAS_COLUMNS) + " | torch/mm_row_sums |"
           + (" after an op: " + " | ".join(BIAS_COLUMNS) + " | torch/mm_row_sums |" if after else ""),
           "|---|" + "---|" * (len(BIAS_COLUMNS) + 1) + ("---|" * (len(BIAS_COLUMNS) + 1) if after else "")]
    for r in rows:
        cells = [cell(r["impls"].get(c, {}), "us", ".1f") for c in BIAS_COLUMNS]
        line = f"| {r['out']}x{r['in']}x{r['tokens']} | " + " | ".join(cells) + f" | {bench_mm.fmt(r['ratio'], '.2f')} |"
        if after:
            cells = [cell(r["impls"].get(c, {}), "after_op_us", ".1f") for c in BIAS_COLUMNS]
            line += " " + " | ".join(cells) + f" | {bench_mm.fmt(r['ratio_after_op'], '.2f')} |"
        out.append(line)
    ratios = [r["ratio"] for r in rows if r["ratio"]]
    out += ["", "geomean torch/mm_row_sums: " + (f"{bench_mm.geomean(ratios):.3f} over {bench_mm.n_shapes(len(ratios))}"
                                                  if ratios else "-")]
    return "\n".join(out)


def format_loss(rows: list[dict]) -> str:
    if not rows:
        return ""
    out = [f"## loss: cute_gemm.linear_cross_entropy(x, w, target) vs F.cross_entropy(F.linear(x, w).float(), "
           f"target), forward + backward, {rows[0]['dtype']} (ms; peak GiB allocated beyond the inputs)", "",
           "| TOKENS x D x VOCAB | torch ms | linear_cross_entropy ms | torch / ours | torch GiB | ours GiB |",
           "|---|---|---|---|---|---|"]
    for r in rows:
        t, c = r["impls"].get("torch", {}), r["impls"].get("linear_cross_entropy", {})
        out.append(f"| {r['tokens']}x{r['d']}x{r['vocab']} | {cell(t, 'ms', '.3f')} | {cell(c, 'ms', '.3f')} | "
                   f"{bench_mm.fmt(r['ratio'], '.2f')} | {cell(t, 'peak_gib', '.2f')} | {cell(c, 'peak_gib', '.2f')} |")
    return "\n".join(out)


def any_bad(doc: dict) -> bool:
    rows = doc["fused"] + doc["gated"] + doc["bias"] + doc.get("loss", []) + ([doc["mlp"]] if doc["mlp"] else [])
    return any(res.get("wrong") or "error" in res for r in rows for res in r["impls"].values())


# -------------------------------------------------------------------------------------- main

def environment(torch, cute_gemm, argv) -> dict:
    prop = torch.cuda.get_device_properties(0)
    return {
        "gpu": prop.name,
        "sms": prop.multi_processor_count,
        "l2_bytes": prop.L2_cache_size,
        "driver": bench_mm.driver_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cute_gemm": bench_mm.package_version(cute_gemm, "cute_gemm"),
        "git_commit": bench_mm.git_commit(),
        "python": platform.python_version(),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
        "command": shlex.join(["python", sys.argv[0]] + list(argv)),
    }


def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    loaded = bench_mm.load_torch_and_cute_gemm("bench_ops")
    if isinstance(loaded, int):
        return loaded
    torch, cute_gemm = loaded
    torch.backends.cuda.matmul.allow_tf32 = False  # the float32 references are float32

    env = environment(torch, cute_gemm, argv)
    env.update(sections=args.section, dtype=args.dtype, seconds=args.seconds, after_op=args.after_op,
               variants=args.variants)
    print(f"# {env['gpu']} ({env['sms']} SMs), driver {env['driver'] or '?'}, torch {env['torch']}, "
          f"CUDA {env['cuda']}, cute_gemm {env['cute_gemm']} @ {env['git_commit'] or '?'}", flush=True)
    # The fused, gated and bias sections set the knobs per column; the mlp section runs under the environment's.
    if set(args.section) & {"fused", "gated", "bias"} and (note := bench_mm.ignored_knobs_note(os.environ)):
        print("# note (fused, gated, bias): " + note.removeprefix("# note: "), flush=True)
    started = time.monotonic()
    doc = {"format": 1, "environment": env, "fused": [], "mlp": None, "gated": [], "bias": [], "loss": []}
    l2 = env["l2_bytes"] or 50 * 2**20
    if "fused" in args.section:
        for shape in args.shapes:
            for activation in args.activations:
                row = fused_row(torch, cute_gemm, shape, activation, args.dtype, args.layout, l2, args.seconds)
                doc["fused"].append(row)
                print(f"[{time.monotonic() - started:5.0f} s] fused {args.dtype} {'x'.join(map(str, shape))} "
                      f"{activation}: ratio {bench_mm.fmt(row['ratio'], '.2f')}", flush=True)
    if "mlp" in args.section:
        doc["mlp"] = mlp_row(torch, cute_gemm, args.mlp, args.mlp_activation, args.dtype, args.seconds)
        print(f"[{time.monotonic() - started:5.0f} s] mlp: ratio {bench_mm.fmt(doc['mlp']['ratio'], '.2f')}",
              flush=True)
    if "gated" in args.section:
        after_op = bench_mm.other_kernel(torch, args.after_op)
        for shape in args.gated:
            row = gated_row(torch, shape, args.gated_activation, args.dtype, l2, args.seconds, after_op, args.variants)
            doc["gated"].append(row)
            print(f"[{time.monotonic() - started:5.0f} s] gated {args.dtype} {'x'.join(map(str, shape))} "
                  f"{args.gated_activation}: ratio {bench_mm.fmt(row['ratio'], '.2f')}", flush=True)

    if "bias" in args.section:
        after_op = bench_mm.other_kernel(torch, args.after_op)
        for shape in args.bias:
            row = bias_row(torch, cute_gemm, shape, args.dtype, l2, args.seconds, after_op)
            doc["bias"].append(row)
            print(f"[{time.monotonic() - started:5.0f} s] bias {args.dtype} {'x'.join(map(str, shape))}: "
                  f"ratio {bench_mm.fmt(row['ratio'], '.2f')}", flush=True)

    if "loss" in args.section:
        for shape in args.loss:
            row = loss_row(torch, cute_gemm, shape, args.dtype, args.seconds)
            doc["loss"].append(row)
            print(f"[{time.monotonic() - started:5.0f} s] loss {args.dtype} {'x'.join(map(str, shape))}: "
                  f"ratio {bench_mm.fmt(row['ratio'], '.2f')}", flush=True)

    print()
    print("\n\n".join(t for t in (format_fused(doc["fused"]), format_mlp(doc["mlp"]), format_gated(doc["gated"]),
                                  format_bias(doc["bias"]), format_loss(doc["loss"])) if t))
    env["elapsed_s"] = round(time.monotonic() - started, 1)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(doc, indent=1))
    print(f"# wrote {args.json} ({env['elapsed_s']:.0f} s)")
    return 1 if any_bad(doc) else 0


if __name__ == "__main__":
    sys.exit(main())
