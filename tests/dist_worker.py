"""One rank of tests/test_distributed.py's GPU tests, started by torchrun:

    torchrun --standalone --nproc-per-node N tests/dist_worker.py --mode fsdp|tp [--steps 20]

Trains a small decoder-like model (embedding, residual blocks of RMSNorm + a gelu MLP, a head,
cross-entropy; bf16 Parameters, AdamW) twice from the same initial weights and batches, with
torch.nn.Linear and after cute_gemm.optimize (cute_gemm.nn.Linear), under FSDP2 (fully_shard per
block and at the root) or tensor parallelism (fc1 ColwiseParallel, fc2 RowwiseParallel, the head
ColwiseParallel gathered). Rank 0 prints one JSON line: both loss curves, the largest relative gap
between them, the first step's largest relative gradient gap, the largest relative gap of AdamW's
exp_avg after the last step, and the median step time of each (the two models step in turn). The
exit code is 1 where a gap passes its bound, or where the cute_gemm model's first step ran no
kernel of cute_gemm (or torch's one did). Small GEMMs whose K the kernels of both libraries sum in
the same order give the same bits: the gaps may be 0.
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
LOSS_GAP, GRAD_GAP = 0.01, 0.05  # the loss curves within 1 %; bf16 gradients within 5 %


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = torch.nn.RMSNorm(D)
        self.fc1 = torch.nn.Linear(D, FF)
        self.fc2 = torch.nn.Linear(FF, D)

    def forward(self, x):
        return x + self.fc2(F.gelu(self.fc1(self.norm(x)), approximate="tanh"))


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


def train(models, batches, steps):
    """Both models step by step in turn (the GPU's clocks and caches fall on both alike): per model
    the loss curve, the first step's gradients, AdamW's exp_avg at the end, the median step time,
    and the number of cute_gemm kernels in its first step (torch.profiler)."""
    # foreach=False: under tensor parallelism the Parameters are DTensors and plain tensors (the
    # embedding, the norms), which one foreach call cannot mix.
    opts = {name: torch.optim.AdamW(m.parameters(), lr=1e-3, foreach=False) for name, m in models.items()}
    losses, grads, times = ({name: [] for name in models} for _ in range(3))
    kernels = {}
    for step in range(steps):
        idx, target = batches[step]
        for name, model in models.items():
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            with profile(activities=[ProfilerActivity.CUDA]) if step == 0 else contextlib.nullcontext() as prof:
                loss = F.cross_entropy(model(idx).float().flatten(0, 1), target.flatten())
                loss.backward()
                torch.cuda.synchronize()
            if step == 0:
                grads[name] = {n: local(p.grad).clone() for n, p in model.named_parameters()}
                kernels[name] = sum("cute_gemm" in e.name for e in prof.events())
            opts[name].step()
            opts[name].zero_grad(set_to_none=True)
            end.record()
            end.synchronize()
            times[name].append(start.elapsed_time(end))
            losses[name].append(loss.item())
    return {name: (losses[name], grads[name],
                   {n: local(opts[name].state[p]["exp_avg"]) for n, p in model.named_parameters()},
                   sorted(times[name])[len(times[name]) // 2], kernels[name])
            for name, model in models.items()}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", choices=["fsdp", "tp"], required=True)
    ap.add_argument("--steps", type=int, default=20)
    args = ap.parse_args()
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
    dist.init_process_group("nccl")
    mesh = init_device_mesh("cuda", (world,))
    torch.manual_seed(0)
    base = Model().to("cuda", torch.bfloat16)
    batches = [(torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda"),
                torch.randint(0, VOCAB, (BATCH, SEQ), device="cuda")) for _ in range(args.steps)]
    models = {}
    for impl in ("torch", "cute_gemm"):
        model = copy.deepcopy(base)
        if impl == "cute_gemm":
            cute_gemm.optimize(model)
            assert all(type(m) is not torch.nn.Linear for m in model.modules())
        models[impl] = parallelize(model, args.mode, mesh)
    runs = train(models, batches, args.steps)
    (l0, g0, s0, t0, k0), (l1, g1, s1, t1, k1) = runs["torch"], runs["cute_gemm"]
    result = {
        "mode": args.mode, "world_size": world, "steps": args.steps,
        "loss_torch": l0, "loss_cute_gemm": l1,
        "loss_gap": max(abs(a - b) / abs(a) for a, b in zip(l0, l1)),
        "grad_gap": max(rel_gap(g1[n], g0[n]) for n in g0),
        "exp_avg_gap": max(rel_gap(s1[n], s0[n]) for n in s0),
        "step_ms_torch": t0, "step_ms_cute_gemm": t1,
        "cute_gemm_kernels_first_step": {"torch": k0, "cute_gemm": k1},
    }
    ok = result["loss_gap"] <= LOSS_GAP and result["grad_gap"] <= GRAD_GAP and k0 == 0 and k1 > 0
    if rank == 0:
        print(json.dumps(result), flush=True)
    dist.destroy_process_group()
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
