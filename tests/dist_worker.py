"""One rank of tests/test_distributed.py's distributed runs, started by torchrun:

    torchrun --standalone --nproc-per-node N tests/dist_worker.py --mode fsdp|tp [--steps 20] [--device cpu]

Builds a small decoder-like model (embedding, residual blocks of RMSNorm + a gelu MLP, a head,
cross-entropy; AdamW) twice from the same initial weights, once with torch.nn.Linear and once after
cute_gemm.optimize (cute_gemm.nn.Linear, fc1 with its gelu in the epilogue), under FSDP2
(fully_shard per block and at the root) or tensor parallelism (fc1 ColwiseParallel, fc2
RowwiseParallel, the head ColwiseParallel gathered), and compares: the logits of one batch
(inference: the fused activation), then training on the same batches, the two models stepping in
turn (clocks and warm-up fall on both alike): the loss curves, the first step's gradients, AdamW's
exp_avg after the last step. Rank 0 prints one JSON line with them, the median step times, and how
many of cute_gemm's kernels (GPU) or ops (CPU) each model's first step ran. The exit code is 1
where a gap passes its bound or the counts are wrong (none for cute_gemm's model, any for torch's).

--device cuda (default): NCCL, bf16 Parameters, bounds of bf16 rounding. Small GEMMs whose K the
kernels of both libraries sum in the same order give the same bits, so the gaps may be 0.
--device cpu: gloo, float32 Parameters, and cute_gemm's ops computed in float64 by torch in place of
the CUDA kernels (cpu_kernels): the sharding rules checked with real numbers across processes,
without a GPU; tight bounds.
"""

import argparse
import contextlib
import copy
import json
import os

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.profiler import ProfilerActivity, profile

import cute_gemm

D, FF, LAYERS, VOCAB, BATCH, SEQ = 256, 1024, 2, 512, 4, 128
# Largest relative gaps to torch.nn.Linear's model: logits, loss, first-step gradients, exp_avg.
BOUNDS = {"cuda": {"logits": 1e-2, "loss": 1e-2, "grad": 3e-2, "exp_avg": 5e-2},
          "cpu": {"logits": 1e-5, "loss": 1e-5, "grad": 1e-4, "exp_avg": 1e-3}}
ACTIVATIONS = {None: lambda z: z, "relu": F.relu, "gelu": F.gelu, "silu": F.silu,
               "gelu_tanh": lambda z: F.gelu(z, approximate="tanh")}


def cpu_kernels():
    """Registers float64 torch implementations of cute_gemm's ops for CPU tensors (whose own CPU
    kernels only check and refuse); returns the Library (it must stay alive) and a call counter."""
    lib, calls = torch.library.Library("cute_gemm", "IMPL"), [0]

    def product(a, b, out_dtype):
        calls[0] += 1
        return (a.double() @ b.double()).to(out_dtype or a.dtype)

    def addmm(input, a, b, *, beta=1, alpha=1, activation=None, out_dtype=None):
        calls[0] += 1
        z = alpha * (a.double() @ b.double()) + (beta * input.double() if beta != 0 else 0)
        return ACTIVATIONS[activation](z).to(out_dtype or a.dtype)

    def gated_mm(x, w_gate, w_up, *, activation="silu"):
        calls[0] += 1
        x = x.double()
        return (ACTIVATIONS[activation](x @ w_gate.double().t()) * (x @ w_up.double().t())).to(x.dtype)

    lib.impl("mm", lambda a, b, *, out_dtype=None: product(a, b, out_dtype), "CPU")
    lib.impl("bmm", lambda a, b, *, out_dtype=None: product(a, b, out_dtype), "CPU")
    lib.impl("addmm", addmm, "CPU")
    lib.impl("gated_mm", gated_mm, "CPU")
    return lib, calls


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.RMSNorm(D)
        self.fc1 = torch.nn.Linear(D, FF)
        self.fc2 = torch.nn.Linear(FF, D)

    def forward(self, x):
        h = self.fc1(self.norm(x))
        if getattr(self.fc1, "activation", None) is None:  # torch's Linear; cute_gemm's runs it itself
            h = F.gelu(h, approximate="tanh")
        return x + self.fc2(h)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = torch.nn.Embedding(VOCAB, D)
        self.blocks = torch.nn.ModuleList(Block() for _ in range(LAYERS))
        self.norm = torch.nn.RMSNorm(D)
        self.head = torch.nn.Linear(D, VOCAB, bias=False)

    def forward(self, idx):
        x = self.tok(idx)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def parallelize(model, mode, mesh):
    if mode == "fsdp":
        from torch.distributed.fsdp import fully_shard

        for block in model.blocks:
            fully_shard(block, mesh=mesh)
        fully_shard(model, mesh=mesh)
        return model
    from torch.distributed.tensor import Replicate
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    plan = {"head": ColwiseParallel(output_layouts=Replicate())}
    for i in range(LAYERS):
        plan[f"blocks.{i}.fc1"] = ColwiseParallel()
        plan[f"blocks.{i}.fc2"] = RowwiseParallel()
    return parallelize_module(model, mesh, plan)


def local(t):
    return t.full_tensor() if hasattr(t, "full_tensor") else t


def rel_gap(x, ref):
    x, ref = local(x).double(), local(ref).double()
    return ((x - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def timer(device):
    """start() and stop() -> ms: CUDA events on the GPU, the wall clock on the CPU."""
    if device == "cuda":
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        return start.record, lambda: (end.record(), end.synchronize(), start.elapsed_time(end))[-1]
    import time
    t0 = []
    return lambda: t0.append(time.perf_counter()), lambda: (time.perf_counter() - t0[0]) * 1e3


def train(models, batches, steps, device, cpu_calls):
    """Both models step by step in turn: per model the loss curve, the first step's gradients,
    AdamW's exp_avg at the end, the median step time, and the count of cute_gemm's kernels (GPU:
    torch.profiler's CUDA events) or ops (CPU: cpu_kernels' counter) in its first step."""
    # foreach=False: under tensor parallelism the Parameters are DTensors and plain tensors (the
    # embedding, the norms), which one foreach call cannot mix.
    opts = {name: torch.optim.AdamW(m.parameters(), lr=1e-3, foreach=False) for name, m in models.items()}
    losses, grads, times = ({name: [] for name in models} for _ in range(3))
    counts = {}
    for step in range(steps):
        idx, target = batches[step]
        for name, model in models.items():
            start, stop = timer(device)
            calls_before = cpu_calls[0]
            profiled = step == 0 and device == "cuda"
            start()
            with profile(activities=[ProfilerActivity.CUDA]) if profiled else contextlib.nullcontext() as prof:
                loss = F.cross_entropy(model(idx).float().flatten(0, 1), target.flatten())
                loss.backward()
                if profiled:
                    torch.cuda.synchronize()
            if step == 0:
                grads[name] = {n: local(p.grad).clone() for n, p in model.named_parameters()}
                counts[name] = (sum(e.device_type == torch.autograd.DeviceType.CUDA and "cute_gemm" in e.name
                                    for e in prof.events()) if profiled else cpu_calls[0] - calls_before)
            opts[name].step()
            opts[name].zero_grad(set_to_none=True)
            times[name].append(stop())
            losses[name].append(loss.item())
    return {name: (losses[name], grads[name],
                   {n: local(opts[name].state[p]["exp_avg"]) for n, p in model.named_parameters()},
                   sorted(times[name])[len(times[name]) // 2], counts[name])
            for name, model in models.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["fsdp", "tp"], required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda")
    args = ap.parse_args()
    rank, world, device = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), args.device
    cpu_calls = [0]
    if device == "cuda":
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    else:
        _lib, cpu_calls = cpu_kernels()
    dist.init_process_group("nccl" if device == "cuda" else "gloo")
    mesh = init_device_mesh(device, (world,))
    torch.manual_seed(0)
    base = Model().to(device, torch.bfloat16 if device == "cuda" else torch.float32)
    batches = [(torch.randint(0, VOCAB, (BATCH, SEQ), device=device),
                torch.randint(0, VOCAB, (BATCH, SEQ), device=device)) for _ in range(args.steps)]
    models = {}
    for impl in ("torch", "cute_gemm"):
        model = copy.deepcopy(base)
        if impl == "cute_gemm":
            cute_gemm.optimize(model)
            assert all(type(m) is not torch.nn.Linear for m in model.modules())
            for block in model.blocks:
                block.fc1.activation = "gelu_tanh"  # in the epilogue where no gradient is needed
        models[impl] = parallelize(model, args.mode, mesh)
    with torch.no_grad():
        logits = {name: local(model(batches[0][0])) for name, model in models.items()}
    for model in models.values():
        if hasattr(model, "reshard"):  # FSDP2 leaves the root's Parameters gathered after a forward
            model.reshard()
    runs = train(models, batches, args.steps, device, cpu_calls)
    (l0, g0, s0, t0, k0), (l1, g1, s1, t1, k1) = runs["torch"], runs["cute_gemm"]
    result = {
        "mode": args.mode, "device": device, "world_size": world, "steps": args.steps,
        "loss_torch": l0, "loss_cute_gemm": l1,
        "logits_gap": rel_gap(logits["cute_gemm"], logits["torch"]),
        "loss_gap": max(abs(a - b) / abs(a) for a, b in zip(l0, l1)),
        "grad_gap": max(rel_gap(g1[n], g0[n]) for n in g0),
        "exp_avg_gap": max(rel_gap(s1[n], s0[n]) for n in s0),
        "step_ms_torch": t0, "step_ms_cute_gemm": t1,
        "cute_gemm_calls_first_step": {"torch": k0, "cute_gemm": k1},
    }
    bounds = BOUNDS[device]
    ok = all(result[f"{what}_gap"] <= bound for what, bound in bounds.items()) and k0 == 0 and k1 > 0
    if rank == 0:
        print(json.dumps({**result, "bounds": bounds, "ok": ok}), flush=True)
    dist.destroy_process_group()
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
