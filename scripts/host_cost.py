"""Host cost per call (issue 5: at most 5 us above torch.mm's at 256^3): a Python loop of calls on
one operand set, timed on the CPU clock; the GPU runs these small kernels faster than the host
issues them, so the loop measures wrapper + dispatch + launch. Interleaved rounds, median.

    python3 -P scripts/host_cost.py [--shape 256x256x256] [--calls 2000] [--rounds 15]
"""

import argparse
import statistics
import time

import torch

import cute_gemm


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shape", default="256x256x256")
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--dtype", default="bf16", choices=["bf16", "f16"])
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("host_cost.py needs a CUDA GPU")
    m, n, k = (int(x) for x in args.shape.split("x"))
    dtype = torch.bfloat16 if args.dtype == "bf16" else torch.float16
    a = torch.randn(m, k, device="cuda").to(dtype)
    b = torch.randn(k, n, device="cuda").to(dtype)
    bias = torch.randn(n, device="cuda").to(dtype)
    calls = {
        "torch.mm": lambda: torch.mm(a, b),
        "cute_gemm.mm": lambda: cute_gemm.mm(a, b),
        "torch.ops.cute_gemm.mm": lambda: torch.ops.cute_gemm.mm.default(a, b),
        "torch.addmm": lambda: torch.addmm(bias, a, b),
        "cute_gemm.addmm": lambda: cute_gemm.addmm(bias, a, b),
    }
    times = {name: [] for name in calls}
    for fn in calls.values():  # warm-up: first-call work (kernel attributes, caches)
        for _ in range(50):
            fn()
    torch.cuda.synchronize()
    for _ in range(args.rounds):
        for name, fn in calls.items():
            t = time.perf_counter()
            for _ in range(args.calls):
                fn()
            times[name].append((time.perf_counter() - t) / args.calls * 1e6)
            torch.cuda.synchronize()
    print(f"# host cost per call, {args.shape} {args.dtype}, {torch.cuda.get_device_name()}, median of "
          f"{args.rounds} rounds of {args.calls} calls, us")
    base = statistics.median(times["torch.mm"])
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:26s} {med:7.2f} us  ({med - base:+.2f} vs torch.mm)")


if __name__ == "__main__":
    main()
