"""Models with torch.nn.Linear against the same models after cute_gemm.optimize (cute_gemm.nn.Linear,
cute_gemm.nn.GatedMLP for the Llama MLP, cute_gemm.nn.RMSNorm), same run, same weights.

    python -P bench/bench_models.py                          # every workload, eager and torch.compile
    python -P bench/bench_models.py --workloads decode --decode-tokens 1,16
    python -P bench/bench_models.py --peers eager --steps 20

Workloads (random weights, no downloads; shapes of the model families named in the table):
  train       a GPT-style decoder (GPT-2-medium width: d 1024, 16 heads, ff 4096; 4 blocks, vocab
              50304, 8 x 1024 tokens): forward, cross-entropy, backward, fused AdamW, bf16 parameters
  train_amp   the same with float32 parameters and the forward under torch.autocast(bfloat16)
  prefill     two Llama-3-8B layers (d 4096, 32 heads, 8 KV heads, ff 14336, RMSNorm, RoPE, gated
              SiLU MLP; Mistral-7B has the same layer) over 2048 and 8192 tokens, inference
  decode      eight such layers (weights stream from HBM, as in a real model's step) at M tokens
              (M sequences with 1024 cached tokens each, in a static KV cache that the step writes
              its token into, as serving engines keep one), one step captured in a CUDA graph

Peers: torch eager (the baseline of every ratio), and with --peers compile the torch model under
torch.compile (what a user would try instead) and cute_gemm's model under torch.compile; with
--peers linears (prefill, decode) cute_gemm's model with its nn.Linear layers swapped only, which
shows what nn.GatedMLP adds; with --peers fused_loss (train, train_amp) cute_gemm's model whose
step computes the head and its loss with cute_gemm.linear_cross_entropy instead of
F.cross_entropy(logits.float()).
Per impl: step time (median over interleaved rounds, CUDA events), the ratio torch eager / impl,
and from torch.profiler the time per step in GEMM kernels and the number of kernels per step.
Checks: each training impl's loss curve against torch eager's (largest relative gap); prefill and
decode outputs against a float32 copy of the model (relative Frobenius error within twice torch's).
"""

from __future__ import annotations

import argparse
import copy
import importlib.util
import json
import math
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

WORKLOADS = ("train", "train_amp", "prefill", "decode")
PEERS = ("eager", "compile", "linears", "fused_loss")
GPT2_MEDIUM = {"d": 1024, "heads": 16, "ff": 4096, "layers": 4, "vocab": 50304, "batch": 8, "seq": 1024}
LLAMA3_8B = {"d": 4096, "heads": 32, "kv_heads": 8, "ff": 14336}
PREFILL_TOKENS = (2048, 8192)
DECODE_TOKENS = (1, 4, 16, 64)
DECODE_CONTEXT = 1024
DECODE_LAYERS = 8
PREFILL_LAYERS = 2
LOSS_GAP = 0.01  # the loss curves must agree within 1 %
BASELINE = "torch eager"
FUSED_LOSS = "cute_gemm fused loss"
GEMM_WORDS = ("gemm", "nvjet", "xmma", "cutlass", "cublas")  # kernel names of cuBLAS and cute_gemm
NOT_GEMM_WORDS = ("elementwise", "softmax_xent")  # torch's, and cute_gemm's loss kernel (its namespace says gemm)


# ---------------------------------------------------------------------------------- arguments

def parse_counts(text: str) -> list[int]:
    parts = [s.strip() for s in text.split(",") if s.strip()]
    if not parts or not all(p.isdigit() and int(p) > 0 for p in parts):
        raise argparse.ArgumentTypeError(f"'{text}' is not a comma list of positive integers")
    return list(dict.fromkeys(int(p) for p in parts))


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--workloads", type=lambda t: bench_mm.parse_choices(t, WORKLOADS, "workload"), default=list(WORKLOADS),
                    help=f"comma list of {', '.join(WORKLOADS)}, all (default: all)")
    ap.add_argument("--peers", type=lambda t: bench_mm.parse_choices(t, PEERS, "peer"), default=list(PEERS),
                    help="eager, compile, linears, fused_loss, all (default: all); eager always runs: it is the "
                         "baseline; linears: cute_gemm's model with its nn.Linear layers swapped only (prefill and "
                         "decode: what nn.GatedMLP adds); fused_loss: cute_gemm's model trained with "
                         "cute_gemm.linear_cross_entropy as its head and loss (train, train_amp)")
    ap.add_argument("--prefill-tokens", type=parse_counts, default=list(PREFILL_TOKENS))
    ap.add_argument("--decode-tokens", type=parse_counts, default=list(DECODE_TOKENS))
    ap.add_argument("--steps", type=int, default=30, help="training steps per impl (the loss curve; default 30)")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved timing rounds (default 5)")
    ap.add_argument("--json", type=Path, default=Path("bench/out/models.json"))
    ap.add_argument("--plot", type=Path, help="where to write the PNG (default: the JSON's path with .png)")
    args = ap.parse_args(argv)
    if "eager" not in args.peers:
        args.peers.insert(0, "eager")
    if args.steps < 2 or args.rounds < 1:
        ap.error("--steps must be at least 2 and --rounds at least 1")
    return args


# ---------------------------------------------------------------------------------- the models

def build_modules(torch):
    nn, F = torch.nn, torch.nn.functional

    class GPTBlock(nn.Module):
        def __init__(self, d, heads, ff):
            super().__init__()
            self.heads = heads
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc, self.out = nn.Linear(d, ff), nn.Linear(ff, d)

        def forward(self, x):
            b, t, d = x.shape
            q, k, v = (z.view(b, t, self.heads, -1).transpose(1, 2) for z in self.qkv(self.ln1(x)).split(d, -1))
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(b, t, d)
            x = x + self.proj(y)
            return x + self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))

    class GPT(nn.Module):
        def __init__(self, d, heads, ff, layers, vocab, seq, **_):
            super().__init__()
            self.tok, self.pos = nn.Embedding(vocab, d), nn.Embedding(seq, d)
            self.blocks = nn.ModuleList(GPTBlock(d, heads, ff) for _ in range(layers))
            self.ln = nn.LayerNorm(d)
            self.head = nn.Linear(d, vocab, bias=False)

        def features(self, idx):
            """The last layer norm's output: what the head turns into logits."""
            x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
            for block in self.blocks:
                x = block(x)
            return self.ln(x)

        def forward(self, idx):
            return self.head(self.features(idx))

    class LlamaMLP(nn.Module):
        """The gated SiLU MLP, with the names and forward of transformers' LlamaMLP."""

        def __init__(self, d, ff):
            super().__init__()
            self.gate_proj, self.up_proj = nn.Linear(d, ff, bias=False), nn.Linear(d, ff, bias=False)
            self.down_proj = nn.Linear(ff, d, bias=False)
            self.act_fn = nn.SiLU()

        def forward(self, x):
            return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))

    class LlamaLayer(nn.Module):
        """Pre-norm attention (GQA, RoPE) and gated SiLU MLP; bias-free projections as in Llama."""

        def __init__(self, d, heads, kv_heads, ff):
            super().__init__()
            self.heads, self.kv_heads, self.hd = heads, kv_heads, d // heads
            self.norm1, self.norm2 = nn.RMSNorm(d), nn.RMSNorm(d)
            self.qkv = nn.Linear(d, (heads + 2 * kv_heads) * self.hd, bias=False)
            self.o = nn.Linear(d, d, bias=False)
            self.mlp = LlamaMLP(d, ff)

        def forward(self, x, cos, sin, cache=None):
            b, t, d = x.shape
            q, k, v = self.qkv(self.norm1(x)).split(
                [self.heads * self.hd, self.kv_heads * self.hd, self.kv_heads * self.hd], -1)
            q = rope(q.view(b, t, self.heads, self.hd).transpose(1, 2), cos, sin)
            k = rope(k.view(b, t, self.kv_heads, self.hd).transpose(1, 2), cos, sin)
            v = v.view(b, t, self.kv_heads, self.hd).transpose(1, 2)
            if cache is not None:  # decode: the new tokens into the static cache's last slots, then attend to all
                cache[0][:, :, -t:] = k
                cache[1][:, :, -t:] = v
                k, v = cache
            y = F.scaled_dot_product_attention(q, k, v, is_causal=cache is None, enable_gqa=True)
            x = x + self.o(y.transpose(1, 2).reshape(b, t, d))
            h = self.norm2(x)
            return x + self.mlp(h)

    def rope(x, cos, sin):
        x1, x2 = x.chunk(2, -1)
        return x * cos + torch.cat([-x2, x1], -1) * sin

    return GPT, LlamaLayer


def rope_tables(torch, positions, head_dim, dtype):
    inv = 1.0 / (500000.0 ** (torch.arange(0, head_dim, 2, device=positions.device) / head_dim))
    angles = torch.outer(positions.float(), inv)
    angles = torch.cat([angles, angles], -1)
    return angles.cos().to(dtype), angles.sin().to(dtype)


def swap_linears(torch, cute_gemm, model):
    """model as a user gets it from cute_gemm.optimize: every torch.nn.Linear a cute_gemm.nn.Linear,
    every LlamaMLP a cute_gemm.nn.GatedMLP and every torch.nn.RMSNorm a cute_gemm.nn.RMSNorm, on the
    same Parameters."""
    return cute_gemm.optimize(model)


def linears_only(torch, cute_gemm, model):
    """model with every torch.nn.Linear a cute_gemm.nn.Linear on the same Parameters, and nothing else."""
    for name, child in model.named_children():
        if type(child) is torch.nn.Linear:
            setattr(model, name, cute_gemm.nn.Linear.from_torch(child))
        else:
            linears_only(torch, cute_gemm, child)
    return model


def impls_of(torch, cute_gemm, model, peers, gated=False):
    """(name, module) per impl, each with its own copy of the same weights. gated: the model has
    gated MLPs (with the linears peer, also the impl that swaps its Linear layers only)."""
    out = [(BASELINE, model), ("cute_gemm eager", swap_linears(torch, cute_gemm, copy.deepcopy(model)))]
    if gated and "linears" in peers:
        out.append(("cute_gemm linears", linears_only(torch, cute_gemm, copy.deepcopy(model))))
    if "compile" in peers:
        out.insert(1, ("torch compile", torch.compile(copy.deepcopy(model))))
        out.append(("cute_gemm compile", torch.compile(swap_linears(torch, cute_gemm, copy.deepcopy(model)))))
    return out


# ------------------------------------------------------------------------------- measurement

def step_times_ms(torch, steps: dict, rounds: int, per_round: int) -> dict:
    """Median ms per call of each step function, rounds interleaved so clocks and heat fall on all."""
    times = {name: [] for name in steps}
    for _ in range(rounds):
        for name, fn in steps.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            for _ in range(per_round):
                fn()
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end) / per_round)
    return {name: sorted(t)[len(t) // 2] for name, t in times.items()}


def is_gemm_kernel(name: str) -> bool:
    low = name.lower()
    return any(w in low for w in GEMM_WORDS) and not any(w in low for w in NOT_GEMM_WORDS)


def busy_us(intervals: list[tuple[float, float]]) -> float:
    """The time covered by the union of (start, end) intervals. Kernels overlap (programmatic
    dependent launch starts a GEMM under its predecessor's tail), so summing durations would count
    the overlap twice."""
    total, reach = 0.0, -math.inf
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def kernel_profile(torch, fn, calls: int = 3) -> dict:
    """Per call of fn: GPU kernels launched, the GPU's busy time, the busy time in GEMM kernels;
    the kernels that took the most time."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    events = [e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
              and "memcpy" not in e.name.lower() and "memset" not in e.name.lower()]
    gemm = [e for e in events if is_gemm_kernel(e.name)]
    per_name = {}
    for e in events:
        k = per_name.setdefault(e.name, [0, 0.0])
        k[0] += 1
        k[1] += e.time_range.elapsed_us()
    top = sorted(per_name.items(), key=lambda kv: -kv[1][1])[:8]
    def busy_ms(es):
        return busy_us([(e.time_range.start, e.time_range.end) for e in es]) / calls / 1e3
    return {"kernels": len(events) / calls, "gemm_kernels": len(gemm) / calls,
            "kernel_ms": busy_ms(events), "gemm_ms": busy_ms(gemm),
            "top": [{"name": name[:120], "calls": n / calls, "ms": us / calls / 1e3} for name, (n, us) in top]}


def rel_err(x, ref) -> float:
    return ((x.float() - ref.float()).norm() / ref.float().norm().clamp_min(1e-30)).item()


def train_rows(torch, cute_gemm, amp: bool, args) -> list[dict]:
    """One row: the training step of every impl from the same initial weights on the same batches."""
    GPT, _ = build_modules(torch)
    cfg = GPT2_MEDIUM
    dtype = torch.float32 if amp else torch.bfloat16
    torch.manual_seed(0)
    model = GPT(**cfg).to("cuda", dtype)
    # Four fixed batches in turn: the model memorizes them, so the loss curve moves.
    batches = [torch.randint(0, cfg["vocab"], (cfg["batch"], cfg["seq"] + 1), device="cuda") for _ in range(4)]
    impls = impls_of(torch, cute_gemm, model, args.peers)
    if "fused_loss" in args.peers:
        impls.append((FUSED_LOSS, swap_linears(torch, cute_gemm, copy.deepcopy(model))))
    states = {}
    for name, m in impls:
        opt = torch.optim.AdamW(m.parameters(), lr=3e-4, fused=True)
        states[name] = {"model": m, "opt": opt, "losses": [], "i": 0, "fused_loss": name == FUSED_LOSS}

    def make_step(st):
        def step(record=False):
            idx = batches[st["i"] % len(batches)]
            st["i"] += 1
            model = st["model"]
            with torch.autocast("cuda", dtype=torch.bfloat16, enabled=amp):
                if st["fused_loss"]:
                    loss = cute_gemm.linear_cross_entropy(model.features(idx[:, :-1]), model.head.weight, idx[:, 1:])
                else:
                    logits = model(idx[:, :-1])
            if not st["fused_loss"]:
                loss = torch.nn.functional.cross_entropy(logits.float().flatten(0, 1), idx[:, 1:].flatten())
            loss.backward()
            st["opt"].step()
            st["opt"].zero_grad(set_to_none=True)
            if record:
                st["losses"].append(loss.detach())
        return step

    steps = {name: make_step(st) for name, st in states.items()}
    for name, step in steps.items():  # the loss curve (and torch.compile's compile) first
        for _ in range(args.steps):
            step(record=True)
    torch.cuda.synchronize()
    ms = step_times_ms(torch, steps, args.rounds, 4)
    base = torch.stack(states[BASELINE]["losses"]).float()
    row = {"workload": "train_amp" if amp else "train", "model": "GPT-2-medium width",
           "shape": f"{cfg['layers']} blocks, d {cfg['d']}, {cfg['batch']}x{cfg['seq']} tokens",
           "dtype": "fp32 params + bf16 autocast" if amp else "bf16", "impls": {}}
    for name, st in states.items():
        losses = torch.stack(st["losses"]).float()
        gap = ((losses - base).abs() / base.abs()).max().item()
        row["impls"][name] = {"ms": ms[name], "loss_gap": gap, "first_loss": losses[0].item(),
                              "last_loss": losses[-1].item(), "ok": math.isfinite(gap) and gap <= LOSS_GAP,
                              **kernel_profile(torch, steps[name])}
    return [finish(row)]


def llama_layers(torch, n_layers: int, dtype):
    """n_layers Llama-3-8B layers on the GPU in eval mode, seeded, their weights at Llama-like scale."""
    _, LlamaLayer = build_modules(torch)
    torch.manual_seed(0)
    layers = torch.nn.ModuleList(LlamaLayer(**LLAMA3_8B) for _ in range(n_layers)).to("cuda", dtype).eval()
    with torch.no_grad():
        for p in layers.parameters():  # Llama-like scale: activations stay O(1) through the layers
            if p.dim() == 2:
                p.normal_(0, 0.02)
    return layers


def decode_caches(torch, batch: int, n_layers: int, dtype) -> list:
    """Each layer's (k, v): DECODE_CONTEXT cached tokens and one slot for the step's token (written
    in place each step: a static cache; concatenating the whole cache every step would cost more
    than the step's GEMMs at M = 64)."""
    cfg = LLAMA3_8B
    shape = (batch, cfg["kv_heads"], DECODE_CONTEXT + 1, cfg["d"] // cfg["heads"])
    return [(torch.randn(shape, device="cuda", dtype=dtype), torch.randn(shape, device="cuda", dtype=dtype))
            for _ in range(n_layers)]


def inference_rows(torch, cute_gemm, decode: bool, args) -> list[dict]:
    """Prefill over each token count, or a decode step at each M: every impl against a float32 copy."""
    cfg = LLAMA3_8B
    dtype = torch.bfloat16
    hd = cfg["d"] // cfg["heads"]
    n_layers = DECODE_LAYERS if decode else PREFILL_LAYERS
    layers = llama_layers(torch, n_layers, dtype)

    def run(mods, x, cos, sin, caches):
        for i, layer in enumerate(mods):
            x = layer(x, cos, sin, caches[i] if caches else None)
        return x

    class Stack(torch.nn.Module):
        def __init__(self, mods):
            super().__init__()
            self.mods = mods

        def forward(self, x, cos, sin, caches):
            return run(self.mods, x, cos, sin, caches)

    reference = Stack(copy.deepcopy(layers).float())
    impls = impls_of(torch, cute_gemm, Stack(layers), args.peers, gated=True)
    rows = []
    for tokens in (args.decode_tokens if decode else args.prefill_tokens):
        batch, t = (tokens, 1) if decode else (1, tokens)
        x = torch.randn(batch, t, cfg["d"], device="cuda", dtype=dtype)
        positions = torch.arange(DECODE_CONTEXT, DECODE_CONTEXT + 1) if decode else torch.arange(t)
        cos, sin = rope_tables(torch, positions.cuda(), hd, dtype)
        caches = decode_caches(torch, batch, n_layers, dtype) if decode else None
        with torch.no_grad():
            ref = reference(x.float(), cos.float(), sin.float(),
                            [(k.float(), v.float()) for k, v in caches] if caches else None)
        row = {"workload": "decode" if decode else "prefill", "model": "Llama-3-8B / Mistral-7B layer",
               "shape": (f"M {tokens}, {n_layers} layers, {DECODE_CONTEXT} cached" if decode
                         else f"{tokens} tokens, {n_layers} layers"), "dtype": "bf16", "impls": {}}
        steps, errors = {}, {}
        for name, model in impls:
            with torch.no_grad():
                call = (lambda m=model, args=(x, cos, sin, caches): m(*args))
                try:
                    out = call()
                    errors[name] = rel_err(out, ref)
                    steps[name] = graphed(torch, call) if decode else call
                except Exception as e:  # one impl failing must not cost the others' numbers
                    if name == BASELINE:
                        raise
                    row["impls"][name] = {"error": bench_mm.first_line(e)}
        bound = max(bench_mm.REL_BOUND["bf16"], 2 * errors[BASELINE])
        with torch.no_grad():
            ms = step_times_ms(torch, steps, args.rounds, 20 if decode else 3)
            for name in steps:
                row["impls"][name] = {"ms": ms[name], "rel_err": errors[name], "ok": errors[name] <= bound,
                                      **kernel_profile(torch, steps[name])}
        rows.append(finish(row))
        steps = caches = None  # the graphs and caches of this size go before the next
        torch.cuda.empty_cache()
    return rows


def graphed(torch, call):
    """call captured in a CUDA graph (a decode step as serving engines run it); returns replay."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            call()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        call()
    return graph.replay


def finish(row: dict) -> dict:
    """Adds each impl's ratio to torch eager (time of torch eager / time of the impl)."""
    base = row["impls"].get(BASELINE, {}).get("ms")
    for res in row["impls"].values():
        res["ratio"] = base / res["ms"] if base and res.get("ms") and res.get("ok", True) else None
    return row


# ----------------------------------------------------------------------------------- reports

def impl_names(rows: list[dict]) -> list[str]:
    return list(dict.fromkeys(name for r in rows for name in r["impls"]))


def cell(res: dict | None) -> str:
    if res is None:
        return "-"
    if "error" in res:
        return "failed"
    text = f"{res['ms']:.3f} ({bench_mm.fmt(res['ratio'], '.2f')}x)" if res.get("ok", True) else "WRONG"
    return text


def check_text(res: dict) -> str:
    if "loss_gap" in res:
        return f"loss gap {res['loss_gap']:.1e}"
    return f"rel err {res['rel_err']:.1e}" if "rel_err" in res else "-"


def format_table(rows: list[dict]) -> str:
    names = impl_names(rows)
    out = ["| workload | model | shape | " + " | ".join(f"{n} ms (ratio)" for n in names)
           + " | GEMM ms/step torch / cute_gemm eager | kernels/step torch / cute_gemm eager | check (cute_gemm eager) |",
           "|---|---|---|" + "---|" * len(names) + "---|---|---|"]
    for r in rows:
        t, c = r["impls"].get(BASELINE, {}), r["impls"].get("cute_gemm eager", {})
        out.append(f"| {r['workload']} ({r['dtype']}) | {r['model']} | {r['shape']} | "
                   + " | ".join(cell(r["impls"].get(n)) for n in names)
                   + f" | {bench_mm.fmt(t.get('gemm_ms'), '.3f')} / {bench_mm.fmt(c.get('gemm_ms'), '.3f')}"
                   + f" | {bench_mm.fmt(t.get('kernels'), '.0f')} / {bench_mm.fmt(c.get('kernels'), '.0f')}"
                   + f" | {check_text(c) if c else '-'} |")
    lines = []
    for name in names:
        ratios = [r["impls"][name]["ratio"] for r in rows if r["impls"].get(name, {}).get("ratio")]
        if name != BASELINE and ratios:
            lines.append(f"{name}: geomean {bench_mm.geomean(ratios):.3f}x torch eager, lowest {min(ratios):.3f}x "
                         f"over {len(ratios)} workloads")
    return "\n".join(out + [""] + lines)


def any_bad(rows: list[dict]) -> bool:
    return any("error" in res or not res.get("ok", True) for r in rows for res in r["impls"].values())


def write_plot(rows: list[dict], path: Path, title: str) -> None:
    from matplotlib.figure import Figure

    names = [n for n in impl_names(rows) if n != BASELINE]
    fig = Figure(figsize=(max(6.0, 0.9 * len(rows) + 2), 3.6), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / max(1, len(names))
    for s, name in enumerate(names):
        xs = [x + (s - (len(names) - 1) / 2) * width for x in range(len(rows))]
        ax.bar(xs, [r["impls"].get(name, {}).get("ratio") or 0 for r in rows], width, label=name, color=f"C{s}")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xticks(range(len(rows)), [f"{r['workload']}\n{r['shape']}" for r in rows], rotation=20, ha="right",
                  fontsize=7)
    ax.set_ylabel("speed vs torch eager (x)")
    ax.legend(fontsize=8)
    ax.set_title(title, fontsize=9)
    fig.savefig(path, dpi=110)


# -------------------------------------------------------------------------------------- main

def main(argv=None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    loaded = bench_mm.load_torch_and_cute_gemm("bench_models")
    if isinstance(loaded, int):
        return loaded
    torch, cute_gemm = loaded
    torch.backends.cuda.matmul.allow_tf32 = False  # the float32 references are float32
    prop = torch.cuda.get_device_properties(0)
    env = {"gpu": prop.name, "sms": prop.multi_processor_count, "torch": torch.__version__,
           "cute_gemm": bench_mm.package_version(cute_gemm, "cute_gemm"), "git_commit": bench_mm.git_commit(),
           "date": time.strftime("%Y-%m-%d %H:%M:%S %z"),
           "command": " ".join(["python", "-P", "bench/bench_models.py", *argv])}
    print(f"# {env['gpu']}, torch {env['torch']}, cute_gemm {env['cute_gemm']} @ {env['git_commit'] or '?'}",
          flush=True)
    started = time.monotonic()
    rows = []
    for workload in args.workloads:
        if workload.startswith("train"):
            new = train_rows(torch, cute_gemm, workload == "train_amp", args)
        else:
            new = inference_rows(torch, cute_gemm, workload == "decode", args)
        for r in new:
            print(f"[{time.monotonic() - started:5.0f} s] {r['workload']} {r['shape']}: "
                  + ", ".join(f"{n} {cell(res)}" for n, res in r["impls"].items()), flush=True)
        rows += new
        torch.cuda.empty_cache()
    print()
    print(format_table(rows))
    env["elapsed_s"] = round(time.monotonic() - started, 1)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"format": 1, "environment": env, "rows": rows}, indent=1))
    try:
        plot = args.plot or args.json.with_suffix(".png")
        plot.parent.mkdir(parents=True, exist_ok=True)
        write_plot(rows, plot, f"{env['gpu']}, {env['date'][:10]}, cute_gemm @ {env['git_commit'] or '?'}")
    except ImportError:
        print("# no matplotlib: plot skipped")
    print(f"# wrote {args.json} ({env['elapsed_s']:.0f} s)")
    return 1 if any_bad(rows) else 0


if __name__ == "__main__":
    sys.exit(main())
