"""cute_gemm: GEMM kernels for PyTorch written with CuTe/CUTLASS.

    import torch, cute_gemm
    c = cute_gemm.mm(a, b)                                  # a (M, K), b (K, N): CUDA, float16/bfloat16
    y = cute_gemm.addmm(bias, x, w.t(), activation="gelu")  # gelu(x @ w^T + bias), one kernel
    z = cute_gemm.bmm(a3, b3)                               # (B, M, K) @ (B, K, N), one launch
    v = cute_gemm.matmul(x3, w.t())                         # torch.matmul's rules on mm/bmm
    layer = cute_gemm.nn.Linear(4096, 1024, activation="relu")  # a drop-in torch.nn.Linear
    model = cute_gemm.optimize(model)                       # its Linears, gated MLPs, RMSNorms swapped in place
    loss = cute_gemm.linear_cross_entropy(h, head.weight, labels)  # LM head + cross-entropy, one op
    print(cute_gemm.explain(a, b))                          # the kernel and tile a call would run

All of them are torch ops (torch.ops.cute_gemm.*) with fake implementations and autograd
formulas, so they work under torch.compile and in backward; see cute_gemm/ops.py.
"""

import torch

try:
    from . import _C  # noqa: F401  (registers torch.ops.cute_gemm.*)
except ImportError as e:  # pragma: no cover - depends on how the package was installed
    from pathlib import Path

    raise ImportError(
        f"cute_gemm's compiled extension could not be loaded ({e}). Build it with "
        "`pip install --no-build-isolation .` from the repository root; if you did, you are "
        f"probably importing the source tree at {Path(__file__).parent} instead of the installed "
        "package: run from another directory (or use `pip install --no-build-isolation -e .`)."
    ) from e

from . import _sharding, nn  # noqa: F401  (_sharding: DTensor rules, see there)
from .loss import linear_cross_entropy
from .nn import optimize
from .ops import addmm, bmm, explain, matmul, mm

__version__ = "0.1.0"
__all__ = ["mm", "addmm", "bmm", "matmul", "explain", "nn", "optimize", "linear_cross_entropy"]
