"""Soak run: many random cute_gemm calls (ops, shapes, layouts, dtypes, views, kernel families,
split-K, the forced stream-K tail, the narrow kernels) each checked against a float64 reference and against torch's own error; every tenth call
repeated for bitwise equality; device memory compared before and after. Run on a GPU machine:

    python3 -P scripts/soak.py --calls 10000            # one thread
    python3 -P scripts/soak.py --calls 4000 --threads 4 # each thread on its own stream

Prints the figures and exits 1 if any call failed. In threaded mode the kernel-family, split,
stream-K and narrow knobs (environment variables, process-wide) stay at their defaults and TF32 stays allowed.
"""

import argparse
import collections
import json
import math
import os
import random
import sys
import threading
import time

import torch
import torch.nn.functional as F

import cute_gemm

# ||got - ref|| / ||ref|| bounds against float64: the output's rounding (fp32 accumulation).
BOUND = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-4, "tf32": 1e-2}
ACTS = {None: lambda z: z, "relu": F.relu, "gelu": F.gelu, "gelu_tanh": lambda z: F.gelu(z, approximate="tanh"),
        "silu": F.silu}
SPECIAL = [1, 2, 7, 8, 15, 16, 63, 64, 127, 128, 129, 255, 256, 511, 520, 574, 1000, 1023, 1024, 2048, 2050, 4097]
MAX_WORK = 2**32  # M * N * K * batch of one call


def draw_dim(rng: random.Random) -> int:
    r = rng.random()
    if r < 0.5:
        return int(math.exp(rng.uniform(0, math.log(4096))))
    if r < 0.75:
        return rng.choice(SPECIAL)
    return 64 * rng.randint(1, 64)


def operand(rng, gen, rows, cols, dtype, batch=None):
    """A (rows, cols) operand (or (batch, rows, cols)) of a random kind of view; returns (tensor, kind)."""
    lead = () if batch is None else (batch,)
    kind = rng.choices(["row", "col", "offset", "strided", "expanded"], [45, 35, 10, 5, 5])[0]
    if kind == "expanded" and batch is None and rows > 1:
        x = torch.randn(*lead, 1, cols, device="cuda", generator=gen).to(dtype)
        return x.expand(*lead, rows, cols), kind
    if kind == "expanded" and batch is not None:
        x = torch.randn(rows, cols, device="cuda", generator=gen).to(dtype)
        return x.expand(batch, rows, cols), kind
    if kind == "col":
        x = torch.randn(*lead, cols, rows, device="cuda", generator=gen).to(dtype)
        return x.transpose(-1, -2), kind
    if kind == "offset":
        x = torch.randn(*lead, rows, cols + 1, device="cuda", generator=gen).to(dtype)
        return x[..., 1:], kind
    if kind == "strided":
        x = torch.randn(*lead, rows, 2 * cols, device="cuda", generator=gen).to(dtype)
        return x[..., ::2], kind
    return torch.randn(*lead, rows, cols, device="cuda", generator=gen).to(dtype), "row"


def rel_err(x, ref, scale=None) -> float:
    scale = ref.norm() if scale is None else scale
    return ((x.double() - ref).norm() / scale.clamp_min(1e-30)).item()


class Call:
    """One random call: run() gives cute_gemm's result, reference() float64, theirs() torch's."""

    def __init__(self, rng: random.Random, gen: torch.Generator, knobs: bool):
        r = rng.random()
        self.dtype = torch.float16 if r < 0.4 else torch.bfloat16 if r < 0.8 else torch.float32
        # allow_tf32 is process-wide: threads leave it on (main sets it), one thread draws it.
        self.tf32 = self.dtype == torch.float32 and (not knobs or rng.random() < 0.5)
        self.op = rng.choices(["mm", "mm_out", "mm_f32", "addmm", "bmm", "matmul"], [35, 10, 10, 30, 10, 5])[0]
        if self.dtype == torch.float32 and self.op == "mm_f32":
            self.op = "mm"
        self.env = {}
        if knobs:
            family = rng.choices(["auto", "sm80", "sm90"], [60, 20, 20])[0]
            if family == "sm90" and torch.cuda.get_device_capability() != (9, 0):
                family = "auto"  # the sm90 family exists on sm_90 only
            if family != "auto":
                self.env["CUTE_GEMM_FAMILY"] = family
            if family != "sm80" and rng.random() < 0.15:
                self.env["CUTE_GEMM_SPLITS"] = str(rng.randint(2, 8))
            elif family != "sm80" and rng.random() < 0.15:
                self.env["CUTE_GEMM_STREAM_K"] = "1"  # the stream-K tail wherever it can run
            if family != "sm90" and rng.random() < 0.25:
                self.env["CUTE_GEMM_NARROW"] = "1"  # the 4-byte sm80 kernels where an operand needs them
        m, n, k = draw_dim(rng), draw_dim(rng), draw_dim(rng)
        if rng.random() < 0.03:
            m, n, k = [rng.choice([0, 1, m]) for _ in range(3)]
        self.batch = rng.randint(1, 4) if self.op == "bmm" else None
        while m * n * max(k, 1) * (self.batch or 1) > MAX_WORK:
            k = max(1, k // 2) if k > 64 else k
            m = max(1, m // 2) if m * n * max(k, 1) * (self.batch or 1) > MAX_WORK else m
        self.shape = (m, n, k)
        self.a, self.a_kind = operand(rng, gen, m, k, self.dtype, self.batch)
        self.b, self.b_kind = operand(rng, gen, k, n, self.dtype, self.batch)
        self.out_dtype = torch.float32 if self.op == "mm_f32" else self.dtype
        if self.op == "addmm":
            self.act = rng.choice(list(ACTS))
            self.beta, self.alpha = rng.choice([1, 1, 0.5, 0]), rng.choice([1, 1, -2.0, 0.25])
            in_shape = rng.choice([(n,), (1, n), (m, 1), (m, n), ()])
            self.input = torch.randn(in_shape, device="cuda", generator=gen).to(self.dtype)
            if self.dtype != torch.float32 and rng.random() < 0.2:
                self.out_dtype = torch.float32
                self.input = self.input.float() if rng.random() < 0.5 else self.input

    def describe(self) -> str:
        m, n, k = self.shape
        extra = f" act={self.act} beta={self.beta} alpha={self.alpha} input={tuple(self.input.shape)}" \
            if self.op == "addmm" else ""
        return (f"{self.op} {m}x{n}x{k} batch={self.batch} {str(self.dtype)[6:]} out={str(self.out_dtype)[6:]} "
                f"tf32={self.tf32} a={self.a_kind} b={self.b_kind} env={self.env}{extra}")

    def run(self):
        a, b = self.a, self.b
        if self.op == "mm":
            return cute_gemm.mm(a, b)
        if self.op == "mm_f32":
            return cute_gemm.mm(a, b, out_dtype=torch.float32)
        if self.op == "mm_out":
            out = torch.full((a.shape[0], b.shape[1]), float("nan"), device="cuda", dtype=self.dtype)
            assert cute_gemm.mm(a, b, out=out) is out
            return out
        if self.op == "addmm":
            return cute_gemm.addmm(self.input, a, b, beta=self.beta, alpha=self.alpha, activation=self.act,
                                   out_dtype=self.out_dtype)
        if self.op == "bmm":
            return cute_gemm.bmm(a, b)
        return cute_gemm.matmul(a, b)

    def reference(self):
        """(float64 result, the norm that errors are measured against). For addmm that norm is
        the pre-activation's: where every z is far below 0, gelu's tiny outputs underflow in
        fp32, and measured against their own norm any rounding would look like 100 %. TF32
        rounds the inputs to 10-bit mantissas, an error of the size of the products, not of their
        sum: a few outputs whose sums cancel (1x1x512: 1.1 % in the 2026-11-26 soak) are measured
        against the products' typical sum, ||(|a| @ |b|)|| / sqrt(K), where that is larger."""
        z = self.a.double() @ self.b.double()
        typical = 0.0
        if self.tf32:
            k = max(self.a.shape[-1], 1)
            typical = (self.a.double().abs() @ self.b.double().abs()).norm().item() / math.sqrt(k)
        if self.op != "addmm":
            return z, z.norm().clamp_min(typical)
        typical *= abs(self.alpha)
        z = self.alpha * z
        if self.beta != 0:
            z = z + self.beta * self.input.double()
        return ACTS[self.act](z), z.norm().clamp_min(typical)

    def theirs(self):
        """torch's result in the same precision, or None where torch has no same-precision twin
        (TF32 is allowed, not forced: cuBLAS computes some fp32 shapes, K = 1 say, in full fp32)."""
        if self.tf32:
            return None
        if self.op in ("mm", "mm_out", "matmul"):
            return torch.mm(self.a, self.b)
        if self.op == "bmm":
            return torch.bmm(self.a, self.b)
        return None

    def bound(self):
        if self.tf32:
            return BOUND["tf32"]
        return BOUND[self.out_dtype]


def soak(calls: int, seed: int, knobs: bool, stats: collections.Counter, failures: list, lock: threading.Lock,
         deadline: float = math.inf):
    rng = random.Random(seed)
    gen = torch.Generator(device="cuda").manual_seed(seed)
    for i in range(calls):
        if time.perf_counter() > deadline:
            with lock:
                stats["stopped early (--max-seconds)"] = 1
            return
        call = Call(rng, gen, knobs)
        saved = {k: os.environ.get(k) for k in call.env}
        os.environ.update(call.env)
        if knobs:
            torch.backends.cuda.matmul.allow_tf32 = call.tf32
        try:
            got = call.run()
            again = call.run() if i % 10 == 0 else None
            ref, scale = call.reference()
            theirs = call.theirs()
            problems = []
            want_shape = ref.shape
            if got.shape != want_shape or got.dtype != call.out_dtype:
                problems.append(f"shape/dtype {tuple(got.shape)} {got.dtype}")
            elif ref.numel() > 0:
                if got.isnan().any() and not ref.isnan().any():
                    problems.append("NaN in output (unwritten element?)")
                err = rel_err(got, ref, scale)
                if err > call.bound():
                    problems.append(f"error {err:.3g} > {call.bound():.3g}")
                if theirs is not None and ref.numel() >= 32:
                    err_t = rel_err(theirs, ref)
                    if err > 2 * err_t + 1e-5:
                        problems.append(f"error {err:.3g} > 2 x torch's {err_t:.3g}")
            if again is not None and not torch.equal(again, got):
                problems.append("second call gave other bits")
        except Exception as e:  # noqa: BLE001 - every failure is reported
            problems = [f"{type(e).__name__}: {e}"]
        finally:
            for k, v in saved.items():
                os.environ.pop(k, None)
                if v is not None:
                    os.environ[k] = v
        with lock:
            stats["calls"] += 1
            stats[f"op {call.op}"] += 1
            stats[f"dtype {str(call.dtype)[6:]}{' tf32' if call.tf32 else ''}"] += 1
            if call.env:
                stats["knobs set (family, splits, stream-K, narrow)"] += 1
            if problems:
                stats["failed"] += 1
                failures.append(f"{call.describe()}: {'; '.join(problems)}")


def clear_cublas_workspaces():
    """torch.mm (the reference) keeps a cuBLAS workspace per (handle, stream) in the caching
    allocator: 32 MiB for each new thread's stream. Dropped before each reading, so the memory
    figures count cute_gemm's allocations alone."""
    if hasattr(torch._C, "_cuda_clearCublasWorkspaces"):
        torch._C._cuda_clearCublasWorkspaces()


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=10000, help="calls in all (split over the threads)")
    parser.add_argument("--threads", type=int, default=1, help="threads, each on its own CUDA stream")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", help="write the figures here")
    parser.add_argument("--max-seconds", type=float, default=math.inf,
                        help="stop drawing new calls after this long (the figures say so)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("soak: needs a CUDA GPU", file=sys.stderr)
        return 2

    stats, failures, lock = collections.Counter(), [], threading.Lock()
    torch.backends.cuda.matmul.allow_tf32 = True
    # Warm-up (kernel loads, cuBLAS handles, allocator pools), then the baseline.
    soak(50, args.seed + 10_000, args.threads == 1, collections.Counter(), [], lock)
    torch.cuda.synchronize()
    clear_cublas_workspaces()
    allocated0, reserved0 = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    start = time.perf_counter()
    deadline = start + args.max_seconds
    if args.threads == 1:
        soak(args.calls, args.seed, True, stats, failures, lock, deadline)
    else:
        def body(t):
            stream = torch.cuda.Stream()
            with torch.cuda.stream(stream):
                soak(args.calls // args.threads, args.seed + t, False, stats, failures, lock, deadline)
            stream.synchronize()

        pool = [threading.Thread(target=body, args=(t,)) for t in range(args.threads)]
        for p in pool:
            p.start()
        for p in pool:
            p.join()
    torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    clear_cublas_workspaces()
    allocated1, reserved1 = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    figures = {
        "device": torch.cuda.get_device_name(), "calls": stats["calls"], "failed": stats["failed"],
        "threads": args.threads, "seconds": round(seconds, 1),
        "allocated_before": allocated0, "allocated_after": allocated1,
        "reserved_before": reserved0, "reserved_after": reserved1,
        "peak_allocated": torch.cuda.max_memory_allocated(),
        "counts": {k: v for k, v in sorted(stats.items()) if k not in ("calls", "failed")},
        "failures": failures[:50],
    }
    print(f"soak: {figures['calls']} calls, {figures['failed']} failed, {args.threads} thread(s), {seconds:.1f} s "
          f"on {figures['device']}")
    print(f"soak: memory allocated {allocated0} -> {allocated1} bytes, reserved {reserved0 >> 20} -> "
          f"{reserved1 >> 20} MiB, peak allocated {figures['peak_allocated'] >> 20} MiB")
    for k, v in figures["counts"].items():
        print(f"  {k}: {v}")
    for f in failures[:50]:
        print("FAIL", f)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(figures, fh, indent=1)
    grew = allocated1 != allocated0
    if grew:
        print("soak: allocated device memory grew")
    return 1 if failures or grew else 0


if __name__ == "__main__":
    sys.exit(main())
