"""cute_gemm under torch.distributed: DTensor sharding rules for its ops (tensor parallelism) and
its modules under FSDP2 (fully_shard) and ColwiseParallel / RowwiseParallel.

CPU: a two-rank fake process group ("fake" backend: no communication) over meta tensors, where
DTensor decides placements and shapes without computing: every op's output placements and shapes
against torch's own op on the same DTensors, and a Linear pair under parallelize_module against
torch.nn.Linear's, forward and backward; cute_gemm's import leaves torch.distributed.tensor alone
and the rules still come when it is imported later; and tests/dist_worker.py on two CPU processes
(gloo, float64 stand-ins for the kernels): the numbers. GPU: the same worker under torchrun, one
rank on one GPU and two on two: training under FSDP2 and under tensor parallelism against
torch.nn.Linear's.
"""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import cute_gemm  # noqa: F401  (registers torch.ops.cute_gemm.*)

HERE = Path(__file__).resolve().parent
dist = pytest.importorskip("torch.distributed")
if not dist.is_available():
    pytest.skip("this torch has no torch.distributed", allow_module_level=True)

from torch.distributed.tensor import Partial, Replicate, Shard, distribute_tensor  # noqa: E402

R = Replicate()
ops = torch.ops.cute_gemm


@pytest.fixture
def mesh():
    """A two-rank mesh of a fake process group (this process is rank 0)."""
    from torch.distributed.device_mesh import init_device_mesh
    from torch.testing._internal.distributed.fake_pg import FakeStore

    dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
    try:
        yield init_device_mesh("cpu", (2,))
    finally:
        dist.destroy_process_group()


def meta(mesh, shape, placement, requires_grad=False):
    t = distribute_tensor(torch.empty(shape, device="meta"), mesh, [placement])
    return t.requires_grad_(requires_grad)


def same_layout(ours, theirs):
    assert (tuple(ours.shape), ours.placements) == (tuple(theirs.shape), theirs.placements)


# ======================================================================================= CPU

def test_import_leaves_dtensor_alone_and_registers_when_it_comes():
    """`import cute_gemm` does not import torch.distributed.tensor (a second of import time); the
    rules are registered when it is imported afterwards (a lookup of the module first, which loads
    nothing, does not use that up), so a DTensor call then runs."""
    code = """
import importlib.util, sys, torch, cute_gemm
assert "torch.distributed.tensor" not in sys.modules, "cute_gemm imported torch.distributed.tensor"
assert importlib.util.find_spec("torch.distributed.tensor") is not None
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, Shard, distribute_tensor
from torch.testing._internal.distributed.fake_pg import FakeStore
dist.init_process_group("fake", store=FakeStore(), rank=0, world_size=2)
mesh = init_device_mesh("cpu", (2,))
a = distribute_tensor(torch.empty(8, 16, device="meta"), mesh, [Shard(0)])
b = distribute_tensor(torch.empty(16, 4, device="meta"), mesh, [Replicate()])
print(torch.ops.cute_gemm.mm(a, b).placements)
dist.destroy_process_group()
"""
    out = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert out.stdout.strip() == "(Shard(dim=0),)", out.stdout


@pytest.mark.parametrize("pa, pb", [(R, R), (Shard(0), R), (R, Shard(1)), (Shard(1), Shard(0)), (Shard(0), Shard(1))])
def test_mm_and_bmm_place_as_torch(mesh, pa, pb):
    a, b = meta(mesh, (8, 16), pa), meta(mesh, (16, 12), pb)
    same_layout(ops.mm(a, b), torch.mm(a, b))
    same_layout(ops.mm(a, b, out_dtype=torch.float32), torch.mm(a, b))
    a3, b3 = meta(mesh, (4, 8, 16), pa if pa == R else Shard(pa.dim + 1)), meta(mesh, (4, 16, 12), R)
    same_layout(ops.bmm(a3, b3), torch.bmm(a3, b3))
    a3, b3 = meta(mesh, (4, 8, 16), Shard(0)), meta(mesh, (4, 16, 12), Shard(0))
    same_layout(ops.bmm(a3, b3), torch.bmm(a3, b3))


@pytest.mark.parametrize("pa, pb", [(R, R), (Shard(0), R), (R, Shard(1)), (Shard(1), Shard(0))])
def test_mm_row_sums_places_as_its_torch_form(mesh, pa, pb):
    a, b = meta(mesh, (8, 16), pa), meta(mesh, (16, 12), pb)
    c, sums = ops.mm_row_sums(a, b)
    same_layout(c, torch.mm(a, b))
    same_layout(sums, a.sum(1))


@pytest.mark.parametrize("input_shape", [(12,), (1, 12), (8, 12), (8, 1)])
@pytest.mark.parametrize("pa, pb", [(R, R), (Shard(0), R), (R, Shard(1)), (Shard(1), Shard(0))])
def test_addmm_places_as_torch(mesh, input_shape, pa, pb):
    """addmm with each form of input (a bias, a (1, N) row, a full C, an (M, 1) column), the
    input replicated or sharded along the output's rows or columns where it has them; with an
    activation, never a partial sum (act(x) of partial sums is not a partial sum of anything)."""
    a, b = meta(mesh, (8, 16), pa), meta(mesh, (16, 12), pb)
    for pi in (R, Shard(0), Shard(len(input_shape) - 1)):
        if input_shape[pi.dim if pi != R else 0] == 1 and pi != R:
            continue
        x = meta(mesh, input_shape, pi)
        same_layout(ops.addmm(x, a, b), torch.addmm(x, a, b))
        out = ops.addmm(x, a, b, activation="gelu")
        assert tuple(out.shape) == (8, 12) and not any(isinstance(p, Partial) for p in out.placements), out.placements
    # The same arguments without an activation (a K-sharded decision, cached) and then with one.
    if pa == Shard(1):
        x = meta(mesh, input_shape, R)
        assert ops.addmm(x, a, b).placements == (Partial(),)
        assert ops.addmm(x, a, b, activation="relu").placements != (Partial(),)


@pytest.mark.parametrize("px, pw", [(R, R), (Shard(0), R), (R, Shard(0))])
def test_gated_mm_places_as_its_torch_form(mesh, px, pw):
    x, wg, wu = meta(mesh, (8, 16), px), meta(mesh, (12, 16), pw), meta(mesh, (12, 16), pw)
    same_layout(ops.gated_mm(x, wg, wu), F.silu(x @ wg.t()) * (x @ wu.t()))


def test_errors_name_the_op(mesh):
    """Where DTensor cannot run a call it says which op: an out= form (no rules), a plain tensor
    beside a DTensor."""
    a, b = meta(mesh, (8, 16), Shard(0)), meta(mesh, (16, 4), R)
    with pytest.raises(NotImplementedError, match=r"cute_gemm\.mm\.out"):
        cute_gemm.mm(a, b, out=meta(mesh, (8, 4), Shard(0)))
    with pytest.raises(RuntimeError, match=r"cute_gemm\.mm\.default:? got mixed torch\.Tensor and DTensor"):
        ops.mm(torch.empty(8, 16, device="meta"), b)


def two_linears(linear_cls, dtype=None):
    torch.manual_seed(0)
    return torch.nn.Sequential(linear_cls(16, 32, device="meta", dtype=dtype), torch.nn.GELU(),
                               linear_cls(32, 16, device="meta", dtype=dtype))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["f32", "bf16"])
@pytest.mark.parametrize("batched", [False, True])
def test_linear_under_tensor_parallelism_as_torch(mesh, batched, dtype):
    """ColwiseParallel then RowwiseParallel (the Megatron MLP) on cute_gemm.nn.Linear and on
    torch.nn.Linear: outputs and every gradient (input, weights, biases) of the same shapes and
    placements (in bf16 the weight and bias gradients come from one mm_row_sums call)."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    plan = {"0": ColwiseParallel(), "2": RowwiseParallel()}
    grads = {}
    for name, cls in (("torch", torch.nn.Linear), ("cute_gemm", cute_gemm.nn.Linear)):
        model = parallelize_module(two_linears(cls, dtype), mesh, plan)
        x = torch.empty((3, 4, 16) if batched else (4, 16), device="meta", dtype=dtype, requires_grad=True)
        y = model(x)
        y.sum().backward()
        grads[name] = (y, x.grad, *(p.grad for p in model.parameters()))
    for ours, theirs in zip(grads["cute_gemm"], grads["torch"]):
        assert type(ours) is type(theirs) and tuple(ours.shape) == tuple(theirs.shape)
        if hasattr(theirs, "placements"):
            assert ours.placements == theirs.placements


def test_gated_mlp_under_tensor_parallelism(mesh):
    """gate_proj and up_proj ColwiseParallel, down_proj RowwiseParallel, in inference: the
    projections run as modules (their hooks make the DTensors; the one-kernel gated_mm would skip
    them), and the output is a plain tensor of x's shape, as torch's Llama-style MLP gives."""
    from torch.distributed.tensor.parallel import ColwiseParallel, RowwiseParallel, parallelize_module

    plan = {"gate_proj": ColwiseParallel(), "up_proj": ColwiseParallel(), "down_proj": RowwiseParallel()}
    mlp = parallelize_module(cute_gemm.nn.GatedMLP(16, 48, device="meta"), mesh, plan)
    with torch.no_grad():
        y = mlp(torch.empty(5, 16, device="meta"))
    assert type(y) is torch.Tensor and tuple(y.shape) == (5, 16)


def run_worker(mode, ranks, device="cuda"):
    cmd = [sys.executable, "-P", "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={ranks}",
           str(HERE / "dist_worker.py"), "--mode", mode, "--device", device]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
    assert lines, (out.stdout[-3000:], out.stderr[-3000:])
    result = json.loads(lines[-1])
    assert out.returncode == 0 and result["ok"], result
    calls = result["cute_gemm_calls_first_step"]
    assert calls["cute_gemm"] > 0 and calls["torch"] == 0, result
    return result


@pytest.mark.parametrize("mode", ["fsdp", "tp"])
def test_training_on_two_cpu_ranks(mode):
    """Two processes over gloo, cute_gemm's ops computed in float64 by torch in place of the CUDA
    kernels (dist_worker.py, --device cpu): with real shards and real numbers, the logits (the
    fused activation too), 20 steps' losses, the first gradients and AdamW's state of the model
    with cute_gemm.nn.Linear match torch.nn.Linear's within float32 rounding. (A partial-sum rule
    that adds the bias on both ranks puts the logits 2e-2 apart.)"""
    run_worker(mode, 2, "cpu")


# ======================================================================================= GPU

@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["fsdp", "tp"])
def test_training_on_one_rank(mode):
    """One rank on one GPU (NCCL, bf16): the logits, 20 steps' losses (within 1 %), the first
    gradients and AdamW's state against torch.nn.Linear's model in the same run, cute_gemm's
    kernels running in its model's step and not in torch's."""
    run_worker(mode, 1)


@pytest.mark.gpu
@pytest.mark.parametrize("mode", ["fsdp", "tp"])
def test_training_on_two_ranks(mode):
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs two GPUs, {torch.cuda.device_count()} visible")
    run_worker(mode, 2)
