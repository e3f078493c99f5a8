"""The CUDA kernels a call launches (torch.profiler), and the kind of each sm90 GEMM kernel among
them: shared by test_mm.py and test_ops.py."""

import re

import torch

# gemm_kernel<Traits, kOffload, kLean, kSums>: the kind by its three flags ("offload": the
# activation warps').
KINDS = {"false, false, false": "general", "true, false, false": "offload", "false, true, false": "lean",
         "false, true, true": "row sums"}
_FLAGS = re.compile(r"gemm_kernel<.*, ((?:true|false), (?:true|false), (?:true|false))>\(")


def kernel_names(fn) -> list[str]:
    """The CUDA kernels fn() launched."""
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    return [e.name for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def sm90_kind(name: str) -> str | None:
    """The kind of the sm90 GEMM kernel named name, or None for any other kernel."""
    m = _FLAGS.search(name)
    return KINDS[m.group(1)] if m else None


def sm90_kernel_kinds(fn) -> set[str]:
    """The kinds of sm90 GEMM kernel fn() launched."""
    return {kind for kind in map(sm90_kind, kernel_names(fn)) if kind}
