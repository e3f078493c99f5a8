"""cute_gemm: GEMM kernels for PyTorch written with CuTe/CUTLASS.

    import torch, cute_gemm
    c = cute_gemm.mm(a, b)   # a (M, K), b (K, N): CUDA, both float16 or both bfloat16
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

from .ops import mm

__version__ = "0.1.0"
__all__ = ["mm"]
