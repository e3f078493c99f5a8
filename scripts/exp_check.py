"""TEMPORARY (measurement): every CUTE_GEMM_EXP form against the plain kernel, bit for bit."""
import itertools
import os
import sys

import torch

import cute_gemm

SHAPES = [(4096, 4096, 1024), (300, 520, 4096), (129, 4097, 8192), (16, 4096, 4096), (1, 1000, 4096),
          (512, 1024, 8192), (2050, 2048, 2048), (7, 129, 574)]
KNOBS = [{}, {"CUTE_GEMM_STREAM_K": "1"}, {"CUTE_GEMM_SPLITS": "3"}, {"CUTE_GEMM_SM90_CONFIG": "1", "CUTE_GEMM_SPLITS": "4"}]
bad = total = 0
torch.manual_seed(0)
for (m, n, k), dt, lay, knobs in itertools.product(SHAPES, [torch.bfloat16, torch.float16], ["nn", "tn"], KNOBS):
    a = torch.randn(m, k, device="cuda", dtype=dt)
    b = torch.randn(k, n, device="cuda", dtype=dt)
    if lay == "tn":
        a = a.t().contiguous().t()
    outs = []
    for e in ["0", "1", "2", "3"]:
        os.environ.update(knobs)
        os.environ["CUTE_GEMM_EXP"] = e
        out = torch.full((m, n), float("nan"), device="cuda", dtype=dt)
        cute_gemm.mm(a, b, out=out)
        for key in knobs:
            del os.environ[key]
        outs.append(out)
    del os.environ["CUTE_GEMM_EXP"]
    ref = (a.double() @ b.double())
    err = ((outs[0].double() - ref).norm() / ref.norm()).item()
    for e, o in zip(["1", "2", "3"], outs[1:]):
        total += 1
        if not torch.equal(o, outs[0]) or not err < 1e-2:
            bad += 1
            print("DIFFERENT", (m, n, k), dt, lay, knobs, "exp", e, err)
print(f"exp_check: {bad} different of {total}")
sys.exit(1 if bad else 0)
