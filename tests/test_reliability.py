"""Reliability guarantees (GPU): a bad argument is a clear error that leaves out= untouched and the
CUDA context usable; prime, huge (over 2^31 elements) and degenerate inputs give torch's answer;
results are the same bits across calls, streams and processes; threads on their own streams get
right results; repeated calls do not grow device memory; tensors on a second GPU run there.

The 10,000-call random soak is a script, not a test: scripts/soak.py.
"""

import hashlib
import os
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

import cute_gemm
from cute_gemm._build_paths import config_names
from test_mm import family, rel_err, use_family  # noqa: F401 (family: the sm80/sm90 fixture)

pytestmark = pytest.mark.gpu
REL_BOUND = {torch.float16: 2e-3, torch.bfloat16: 1e-2, torch.float32: 1e-4}
SENTINEL = 7.0  # what out= holds before a refused call, and must hold after it


@pytest.fixture(autouse=True)
def _seed(request):
    torch.manual_seed(zlib.crc32(request.node.nodeid.encode()))


def randn(*shape, dtype=torch.bfloat16, device="cuda"):
    return torch.randn(shape, device=device).to(dtype)


def operand(rows, cols, major, dtype, device="cuda"):
    """(rows, cols): row-major ("n") or the transposed view of a (cols, rows) tensor ("t")."""
    if major == "n":
        return randn(rows, cols, dtype=dtype, device=device)
    return randn(cols, rows, dtype=dtype, device=device).t()


def check(out, ref, dtype):
    assert out.shape == ref.shape and out.dtype == dtype, (out.shape, ref.shape, out.dtype)
    assert not out.isnan().any(), "unwritten (NaN-poisoned) or NaN output elements"
    assert rel_err(out, ref) <= REL_BOUND[dtype], rel_err(out, ref)


# ============================================================================== bad inputs
# Each case: (op, a function of the good arguments returning the bad call's arguments, the
# exception, the message). The good call is mm (64x32 @ 32x48), addmm (bias 48) or bmm (batch 2);
# out= is a tensor of the right shape holding SENTINEL, which must survive the refused call.

def _good(op, dtype=torch.bfloat16):
    a, b = randn(64, 32, dtype=dtype), randn(32, 48, dtype=dtype)
    if op == "bmm":
        return {"a": randn(2, 64, 32, dtype=dtype), "b": randn(2, 32, 48, dtype=dtype)}
    if op == "addmm":
        return {"input": randn(48, dtype=dtype), "a": a, "b": b}
    return {"a": a, "b": b}


def _with(**changes):
    return lambda args: {**args, **{k: (v(args) if callable(v) else v) for k, v in changes.items()}}


BAD = {
    # operands
    "a_cpu": ("mm", _with(a=lambda g: g["a"].cpu()), ValueError, r"^mm: a must be a CUDA tensor, got device cpu"),
    "b_meta": ("mm", _with(b=lambda g: g["b"].to("meta")), ValueError,
               r"^mm: a and b must be on the same device, got a on cuda:\d and b on meta"),
    "a_sparse": ("mm", _with(a=lambda g: g["a"].to_sparse()), ValueError, r"^mm: a must be a dense \(strided\)"),
    "a_int8": ("mm", _with(a=lambda g: g["a"].to(torch.int8)), TypeError,
               r"^mm: a must be float16, bfloat16 or float32, got Char"),
    "b_fp64": ("mm", _with(b=lambda g: g["b"].double()), TypeError,
               r"^mm: b must be float16, bfloat16 or float32, got Double"),
    "a_fp8": ("mm", _with(a=lambda g: g["a"].to(torch.float8_e4m3fn)), TypeError,
              r"^mm: a must be float16, bfloat16 or float32, got Float8_e4m3fn"),
    "mixed_dtypes": ("mm", _with(b=lambda g: g["b"].half()), TypeError,
                     r"^mm: a and b must have the same dtype, got a BFloat16 and b Half"),
    "a_0d": ("mm", _with(a=lambda g: g["a"][0, 0]), ValueError, r"^mm: a must be 2-D \(M, K\), got shape \[\]"),
    "b_1d": ("mm", _with(b=lambda g: g["b"][:, 0]), ValueError, r"^mm: b must be 2-D \(K, N\), got shape \[32\]"),
    "a_3d": ("mm", _with(a=lambda g: g["a"][None]), ValueError,
             r"^mm: a must be 2-D \(M, K\), got shape \[1, 64, 32\]"),
    "inner_mismatch": ("mm", _with(b=lambda g: g["b"][:31]), ValueError,
                       r"^mm: a's columns \(K\) must equal b's rows, got a \[64, 32\] and b \[31, 48\]"),
    "out_dtype_fp64": ("mm", _with(out_dtype=torch.float64), TypeError, r"^mm: out_dtype must be None, BFloat16"),
    # out=
    "out_shape": ("mm", _with(out=lambda g: torch.full((48, 64), SENTINEL, device="cuda", dtype=torch.bfloat16)),
                  ValueError, r"^mm: out must have shape \[64, 48\], got \[48, 64\]"),
    "out_dtype": ("mm", _with(out=lambda g: torch.full((64, 48), SENTINEL, device="cuda")), TypeError,
                  r"^mm: out must have the result dtype BFloat16, got Float"),
    "out_cpu": ("mm", _with(out=lambda g: torch.full((64, 48), SENTINEL, dtype=torch.bfloat16)), ValueError,
                r"^mm: out must be on the inputs' device cuda:\d, got cpu"),
    "out_expanded": ("mm", _with(out=lambda g: torch.full((1, 48), SENTINEL, device="cuda",
                                                          dtype=torch.bfloat16).expand(64, 48)),
                     ValueError, r"^mm: out must not have overlapping elements"),
    "out_is_a": ("mm", lambda g: {"a": g["a"][:, :32], "b": randn(32, 32), "out": g["a"][:, :32]}, ValueError,
                 r"^mm: out must not overlap a"),
    "out_overlaps_b": ("mm", lambda g: {"a": randn(32, 32), "b": g["b"][:, :32], "out": g["b"][:, 8:40]}, ValueError,
                       r"^mm: out must not overlap b"),
    "out_requires_grad": ("mm", _with(a=lambda g: g["a"].requires_grad_()), RuntimeError,
                          r"^mm\(\): functions with out=\.\.\. arguments don't support automatic differentiation"),
    # addmm
    "bias_length": ("addmm", _with(input=lambda g: g["input"][:47]), ValueError,
                    r"^addmm: input must broadcast to the result's shape \(M, N\) = \[64, 48\]"),
    "bias_dtype": ("addmm", _with(input=lambda g: g["input"].half()), TypeError,
                   r"^addmm: input must have a's dtype BFloat16, got Half"),
    "bias_cpu": ("addmm", _with(input=lambda g: g["input"].cpu()), ValueError,
                 r"^addmm: input must be on a's device cuda:\d, got cpu"),
    "activation": ("addmm", _with(activation="tanh"), ValueError,
                   r"^addmm: activation must be one of None, 'relu', 'gelu', 'gelu_tanh', 'silu', got 'tanh'"),
    "beta_complex": ("addmm", _with(beta=1j), ValueError,
                     r"^addmm: beta must be a real number, got the complex number 0.0 \+ 1.0j"),
    "out_overlaps_input": ("addmm", lambda g: {**g, "input": torch.zeros(64, 48, device="cuda",
                                                                         dtype=torch.bfloat16),
                                               "out": None}, ValueError, r"^addmm: out must not overlap input"),
    # bmm
    "batch_mismatch": ("bmm", _with(b=lambda g: g["b"][:1]), ValueError,
                       r"^bmm: a and b must have the same batch size, got a \[2, 64, 32\] and b \[1, 32, 48\]"),
    "bmm_2d": ("bmm", _with(a=lambda g: g["a"][0]), ValueError,
               r"^bmm: a must be 3-D \(B, M, K\), got shape \[64, 32\]"),
}


# Cases about out= itself, which only the out= overload can get wrong.
OUT_ONLY = {"out_shape", "out_dtype", "out_cpu", "out_expanded", "out_is_a", "out_overlaps_b", "out_requires_grad",
            "out_overlaps_input"}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_a_clear_error_and_writes_nothing(case):
    op, make, exc, pattern = BAD[case]
    args = make(_good(op))
    out = args.pop("out", None)
    if case == "out_overlaps_input":
        out = args["input"]
    if out is None:
        out = torch.full((2, 64, 48) if op == "bmm" else (64, 48), SENTINEL, device="cuda", dtype=torch.bfloat16)
    before = out.detach().clone()
    positional = [args.pop(k) for k in ("input", "a", "b") if k in args]
    fn = getattr(cute_gemm, op)
    variants = [{**args, "out": out}] + ([] if case in OUT_ONLY else [args])
    for kwargs in variants:  # the out= overload, then the functional one
        with pytest.raises(exc, match=pattern):
            fn(*positional, **kwargs)
        torch.cuda.synchronize()
        assert torch.equal(out, before), "a refused call wrote to out"
    # The context is still usable, and a good call gives the right answer.
    good = _good(op)
    ref = good["a"].double() @ good["b"].double()
    if op == "addmm":
        ref = ref + good["input"].double()
    check(fn(*good.values()), ref, torch.bfloat16)


def test_raw_op_with_a_complex_scalar_raises():
    """torch.ops.cute_gemm.addmm with a complex alpha or beta is refused by the schema (float
    alpha/beta), naming the argument. Run in a child process: while the schema said Scalar, this
    call crashed the process under torch 2.11 (2026-11-23)."""
    code = ("import torch, cute_gemm\n"
            "a = torch.randn(64, 32, device='cuda').bfloat16(); b = torch.randn(32, 48, device='cuda').bfloat16()\n"
            "x = torch.randn(48, device='cuda').bfloat16(); o = torch.empty(64, 48, device='cuda').bfloat16()\n"
            "for name, call in (('beta', lambda: torch.ops.cute_gemm.addmm.default(x, a, b, beta=2j)),\n"
            "                   ('alpha', lambda: torch.ops.cute_gemm.addmm.out(x, a, b, alpha=1j, out=o))):\n"
            "    try:\n"
            "        call()\n"
            "        print(name, 'accepted')\n"
            "    except (RuntimeError, TypeError, ValueError) as e:\n"
            "        print(name, type(e).__name__, name in str(e) and 'float' in str(e))\n")
    run = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    lines = run.stdout.splitlines()
    assert len(lines) == 2 and all(line.endswith("True") for line in lines), lines


# ====================================================================== odd but valid inputs

PRIMES = [(521, 4099, 263), (4099, 521, 4099), (1, 4099, 521), (521, 1, 4099), (263, 263, 1)]  # (M, N, K)


@pytest.mark.parametrize("layout", ["nn", "nt", "tn", "tt"])
def test_prime_sizes(layout, family):
    """Every dimension a prime (rows not 16-byte aligned: the padded-copy path for the operands,
    C's rows written from the shared-memory staging in the sm90 family, or with an activation
    computed into a padded scratch buffer and copied out), mm and the fused addmm."""
    for (m, n, k), dtype in zip(PRIMES, [torch.float16, torch.bfloat16] * 3):
        a, b = operand(m, k, layout[0], dtype), operand(k, n, layout[1], dtype)
        ref = a.double() @ b.double()
        check(cute_gemm.mm(a, b), ref, dtype)
        bias = randn(n, dtype=dtype)
        check(cute_gemm.addmm(bias, a, b, activation="gelu"), F.gelu(ref + bias.double()), dtype)


# ========================================================================== large indices
# Operands and results of more than 2^31 elements: every offset past 2^31 must be 64-bit. The
# reference is torch.mm in float32 on row blocks (a float64 copy would not fit in memory).

BIG = 65544  # 65544 x 32768 = 2^31 + 2^18 elements
BIG_CASES = {  # name: (M, N, K)
    "a": (BIG, 64, 32768),
    "b": (64, BIG, 32768),
    "c": (BIG, 32768, 16),
}


def _blocked_check(out, a, b, dtype, x=None):
    """out (M, N) against float32 torch.mm of a @ b (+ x) over blocks of rows."""
    step = 4096
    for r in range(0, a.shape[0], step):
        ref = a[r:r + step].float() @ b.float()
        if x is not None:
            ref += x[r:r + step].float()
        got = out[r:r + step]
        assert not got.isnan().any(), f"NaN in rows {r}.."
        err = ((got.float() - ref).norm() / ref.norm()).item()
        assert err <= REL_BOUND[dtype], (r, err)


@pytest.mark.parametrize("case", list(BIG_CASES))
@pytest.mark.parametrize("major", ["n", "t"])
def test_over_2_31_elements(case, major, family):
    if torch.cuda.get_device_properties(0).total_memory < 40 * 2**30:
        pytest.skip("needs a GPU with 40 GiB of memory")
    dtype = torch.float16
    m, n, k = BIG_CASES[case]
    a, b = operand(m, k, major, dtype), operand(k, n, major, dtype)
    out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
    x = None
    if case == "c":  # the fused epilogue reads a full C of more than 2^31 elements too
        x = randn(m, n, dtype=dtype)
        cute_gemm.addmm(x, a, b, out=out)
    else:
        cute_gemm.mm(a, b, out=out)
    _blocked_check(out, a, b, dtype, x)
    del a, b, out, x
    torch.cuda.empty_cache()


SM90_ROWS = len(config_names(Path(__file__).resolve().parents[1] / "csrc" / "sm90" / "configs.h"))


@pytest.mark.parametrize("row", list(range(SM90_ROWS)) + ["sm80"])
def test_addmm_input_rows_far_apart(row, monkeypatch):
    """addmm's input (M, N) with a row stride of millions of elements (a column block of a very
    wide buffer): the epilogue's offsets into it pass 2^31 elements within a tile of 192 or 256
    rows unless they are 64-bit or the host first copies such an input to rows. Strides on both
    sides of the copy's threshold (2^23) and one that crashed a 192-row tile (12e6), on every sm90
    row and the sm80 family."""
    if torch.cuda.get_device_properties(0).total_memory < 40 * 2**30:
        pytest.skip("needs a GPU with 40 GiB of memory")
    if row == "sm80":
        use_family(monkeypatch, "sm80")
    else:
        use_family(monkeypatch, "sm90")
        monkeypatch.setenv("CUTE_GEMM_SM90_CONFIG", str(row))
    dtype = torch.bfloat16
    m, n, k = 520, 264, 64  # two tile rows of every tile height, edge tiles in M and N
    strides = [2**23 - 8, 2**23 + 8, 12_000_000]
    buf = torch.empty((m - 1) * max(strides) + n, device="cuda", dtype=dtype)
    a, b = randn(m, k, dtype=dtype), randn(k, n, dtype=dtype)
    for stride in strides:
        x = buf.as_strided((m, n), (stride, 1))
        x.copy_(randn(m, n, dtype=dtype))
        ref = F.relu(a.double() @ b.double() + 0.5 * x.double())
        c = cute_gemm.addmm(x, a, b, beta=0.5, activation="relu")
        torch.cuda.synchronize()
        assert not c.isnan().any()
        assert rel_err(c, ref) <= REL_BOUND[dtype], stride
    del buf
    torch.cuda.empty_cache()


def test_bmm_batch_offsets_over_2_31(family):
    """Batch strides whose multiples pass 2^31 elements."""
    if torch.cuda.get_device_properties(0).total_memory < 40 * 2**30:
        pytest.skip("needs a GPU with 40 GiB of memory")
    dtype = torch.bfloat16
    a = randn(3, 16384, 65544, dtype=dtype)  # 3.2e9 elements
    b = randn(3, 65544, 24, dtype=dtype)
    out = cute_gemm.bmm(a, b)
    for i in range(3):
        _blocked_check(out[i], a[i], b[i], dtype)
    del a, b, out
    torch.cuda.empty_cache()


# =========================================================================== determinism

def digests(keep: list | None = None) -> dict:
    """SHA-256 of the outputs of every kernel path, for inputs drawn from a fixed seed: the same in
    every process on the same GPU model. Sets the CUTE_GEMM_* knobs itself (clearing any others),
    and restores them. keep: a list to hold the outputs, so that a second call cannot get the
    first one's blocks back from the allocator (with their bits)."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("CUTE_GEMM_")}
    tf32 = torch.backends.cuda.matmul.allow_tf32
    result = {}
    try:
        cases = {
            "sm90": ({"CUTE_GEMM_FAMILY": "sm90"}, lambda a, b, bias: cute_gemm.mm(a, b)),
            "sm80": ({"CUTE_GEMM_FAMILY": "sm80"}, lambda a, b, bias: cute_gemm.mm(a, b)),
            "split_k": ({"CUTE_GEMM_FAMILY": "sm90", "CUTE_GEMM_SPLITS": "5"}, lambda a, b, bias: cute_gemm.mm(a, b)),
            "split_k_gelu": ({"CUTE_GEMM_FAMILY": "sm90", "CUTE_GEMM_SPLITS": "3"},
                             lambda a, b, bias: cute_gemm.addmm(bias, a, b, activation="gelu")),
            "addmm_silu_fp32": ({}, lambda a, b, bias: cute_gemm.addmm(bias.float(), a, b, activation="silu",
                                                                        out_dtype=torch.float32)),
            "tf32": ({}, lambda a, b, bias: cute_gemm.mm(a.float(), b.float())),
            "bmm": ({}, lambda a, b, bias: cute_gemm.bmm(a.view(3, -1, a.shape[1]), b.expand(3, -1, -1))),
            # N % 8 != 0: staged rows (N even; N odd, half the rows 2-byte aligned), and with an
            # activation the scratch buffer copied out.
            "staged": ({"CUTE_GEMM_FAMILY": "sm90"}, lambda a, b, bias: cute_gemm.mm(a, b[:, :518])),
            "staged_odd": ({"CUTE_GEMM_FAMILY": "sm90"}, lambda a, b, bias: cute_gemm.mm(a, b[:, :517])),
            "scratch": ({"CUTE_GEMM_FAMILY": "sm90"},
                        lambda a, b, bias: cute_gemm.addmm(bias[:517], a, b[:, :517], activation="relu")),
        }
        torch.backends.cuda.matmul.allow_tf32 = True
        for name, (env, fn) in cases.items():
            if "sm90" in env.values() and torch.cuda.get_device_capability() != (9, 0):
                continue
            for k in [k for k in os.environ if k.startswith("CUTE_GEMM_")]:
                del os.environ[k]
            os.environ.update(env)
            gen = torch.Generator(device="cuda").manual_seed(zlib.crc32(name.encode()))
            a = torch.randn(387, 2056, device="cuda", generator=gen).to(torch.bfloat16)
            b = torch.randn(520, 2056, device="cuda", generator=gen).to(torch.bfloat16).t()
            bias = torch.randn(520, device="cuda", generator=gen).to(torch.bfloat16)
            out = fn(a, b, bias)
            if keep is not None:
                keep.append(out)
            result[name] = hashlib.sha256(out.contiguous().view(torch.uint8).cpu().numpy().tobytes()).hexdigest()
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
        for k in [k for k in os.environ if k.startswith("CUTE_GEMM_")]:
            del os.environ[k]
        os.environ.update(saved)
    return result


def test_same_bits_across_calls_streams_and_processes():
    keep = []  # every output stays alive: each call writes fresh blocks
    first = digests(keep)
    assert first and digests(keep) == first
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        on_side = digests(keep)
    side.synchronize()
    assert on_side == first
    code = (f"import sys; sys.path.insert(0, {str(Path(__file__).parent)!r}); import test_reliability as t; "
            "print(repr(t.digests()))")
    env = {k: v for k, v in os.environ.items() if not k.startswith("CUTE_GEMM_")}
    for _ in range(2):
        run = subprocess.run([sys.executable, "-P", "-c", code], capture_output=True, text=True, env=env, timeout=300)
        assert run.returncode == 0, run.stderr[-2000:]
        assert eval(run.stdout.strip().splitlines()[-1]) == first


# =========================================================================== concurrency

# One row of 128x64 tiles with a long K: the chooser splits it (sm90 row 3, 4 slices of 32 k-tiles).
# (64x512x8192, used before, is a decode row: not split since 2026-11-23.)
SPLIT_SHAPE = (128, 1024, 8192)


def _workload(seed: int):
    """A thread's calls: (function, its float64 reference), on shapes and dtypes of its own."""
    gen = torch.Generator(device="cuda").manual_seed(seed)
    calls = []
    for i in range(12):
        dtype = (torch.float16, torch.bfloat16)[(seed + i) % 2]
        m, n, k = [int(v) for v in torch.randint(1, 700, (3,), generator=gen, device="cuda")]
        if i % 4 == 3:
            m, n, k = SPLIT_SHAPE  # split-K by the chooser (test_threads_each_on_its_own_stream checks)
        a = torch.randn(m, k, device="cuda", generator=gen).to(dtype)
        b = torch.randn(n, k, device="cuda", generator=gen).to(dtype).t()
        bias = torch.randn(n, device="cuda", generator=gen).to(dtype)
        ref = a.double() @ b.double()
        kind = i % 3
        if kind == 0:
            calls.append((lambda a=a, b=b: cute_gemm.mm(a, b), ref, dtype))
        elif kind == 1:
            calls.append((lambda a=a, b=b, bias=bias: cute_gemm.addmm(bias, a, b, activation="relu"),
                          F.relu(ref + bias.double()), dtype))
        else:
            calls.append((lambda a=a, b=b: cute_gemm.bmm(a[None].expand(2, -1, -1), b[None].expand(2, -1, -1)),
                          ref[None].expand(2, -1, -1), dtype))
    return calls


def test_threads_each_on_its_own_stream(monkeypatch):
    threads, rounds = 6, 5
    if torch.cuda.get_device_capability() == (9, 0):
        # The workload's SPLIT_SHAPE calls run split-K: fp32 sums in another order than unsplit.
        m, n, k = SPLIT_SHAPE
        a, b = randn(m, k), randn(n, k).t()
        chosen = cute_gemm.mm(a, b, out_dtype=torch.float32)
        with monkeypatch.context() as mp:
            mp.setenv("CUTE_GEMM_SPLITS", "1")
            assert not torch.equal(chosen, cute_gemm.mm(a, b, out_dtype=torch.float32)), "SPLIT_SHAPE is not split"
    work = [_workload(1000 + t) for t in range(threads)]
    torch.cuda.synchronize()  # inputs written before any thread's stream reads them
    results = [[] for _ in range(threads)]
    errors = []
    start = threading.Barrier(threads, timeout=120)

    def body(t):
        try:
            stream = torch.cuda.Stream()
            start.wait()
            with torch.cuda.stream(stream):
                for _ in range(rounds):
                    results[t].append([fn() for fn, _, _ in work[t]])
            stream.synchronize()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    pool = [threading.Thread(target=body, args=(t,)) for t in range(threads)]
    for p in pool:
        p.start()
    for p in pool:
        p.join()
    assert not errors, errors
    for t in range(threads):
        assert len(results[t]) == rounds
        for outs in results[t]:
            for out, (_, ref, dtype), first in zip(outs, work[t], results[t][0]):
                check(out, ref, dtype)
                assert torch.equal(out, first)


# ================================================================================= memory

def test_repeated_calls_do_not_grow_device_memory(monkeypatch):
    """Every output and workspace goes back to torch's caching allocator: after a warm-up round,
    rounds of the same calls leave allocated and reserved memory where they were. Split-K's
    workspace (sm90 family) is one allocation from that allocator (no cudaMalloc of its own)."""
    use_family(monkeypatch, "sm90")
    calls = _workload(7)
    for fn, _, _ in calls:
        fn()
    torch.cuda.synchronize()
    allocated, reserved = torch.cuda.memory_allocated(), torch.cuda.memory_reserved()
    for _ in range(20):
        for fn, _, _ in calls:
            fn()
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == allocated
    assert torch.cuda.memory_reserved() == reserved

    a, b = randn(512, 8192), randn(1024, 8192).t()  # split by the chooser
    counter = "allocation.all.allocated"
    n0 = torch.cuda.memory_stats()[counter]
    cute_gemm.mm(a, b)
    n1 = torch.cuda.memory_stats()[counter]
    with_splits = n1 - n0
    cute_gemm.mm(a[:, :64], b[:64])  # K = 64: one slice, no workspace
    assert with_splits == 2 and torch.cuda.memory_stats()[counter] - n1 == 1, with_splits


# ============================================================================= two GPUs

def _two_gpus():
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs two GPUs, {torch.cuda.device_count()} visible")


@pytest.mark.parametrize("path", ["plain", "split_k", "addmm", "bmm", "sm80"])
def test_tensors_on_the_second_gpu_run_there(path, monkeypatch):
    _two_gpus()
    torch.cuda.set_device(0)
    dev = torch.device("cuda:1")
    if path == "sm80":
        monkeypatch.setenv("CUTE_GEMM_FAMILY", "sm80")
    m, n, k = SPLIT_SHAPE if path == "split_k" else (300, 520, 1000)
    a, b = operand(m, k, "n", torch.bfloat16, dev), operand(k, n, "t", torch.bfloat16, dev)
    bias = randn(n, device=dev)
    ref = a.double() @ b.double()
    if path == "addmm":
        out, ref = cute_gemm.addmm(bias, a, b, activation="gelu"), F.gelu(ref + bias.double())
    elif path == "bmm":
        out, ref = cute_gemm.bmm(a[None].expand(2, -1, -1), b[None].expand(2, -1, -1)), ref.expand(2, -1, -1)
    else:
        out = cute_gemm.mm(a, b)
    assert out.device == dev and torch.cuda.current_device() == 0
    check(out, ref, torch.bfloat16)
    buf = torch.full(tuple(out.shape), float("nan"), device=dev, dtype=torch.bfloat16)
    if path != "bmm" and path != "addmm":
        check(cute_gemm.mm(a, b, out=buf), ref, torch.bfloat16)


def test_operands_on_two_gpus_are_refused():
    _two_gpus()
    a, b = randn(8, 8, device="cuda:0"), randn(8, 8, device="cuda:1")
    with pytest.raises(ValueError, match=r"^mm: a and b must be on the same device, got a on cuda:0 and b on cuda:1"):
        cute_gemm.mm(a, b)
    out = torch.full((8, 8), SENTINEL, device="cuda:1", dtype=torch.bfloat16)
    with pytest.raises(ValueError, match=r"^mm: out must be on the inputs' device cuda:0, got cuda:1"):
        cute_gemm.mm(a, a, out=out)
    assert (out == SENTINEL).all()


def test_two_threads_drive_two_gpus_at_once():
    _two_gpus()
    errors, done = [], []
    start = threading.Barrier(2, timeout=120)

    def body(index):
        try:
            dev = torch.device("cuda", index)
            torch.cuda.set_device(dev)
            gen = torch.Generator(device=dev).manual_seed(index)
            outs = []
            start.wait()
            for i in range(40):
                m, n, k = 129 + 64 * i, 257, 2048 + 8 * i
                a = torch.randn(m, k, device=dev, generator=gen).to(torch.bfloat16)
                b = torch.randn(k, n, device=dev, generator=gen).to(torch.bfloat16)
                outs.append((cute_gemm.mm(a, b), a, b))
            for out, a, b in outs:
                assert out.device == dev
                check(out, a.double() @ b.double(), torch.bfloat16)
            done.append(index)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    pool = [threading.Thread(target=body, args=(i,)) for i in range(2)]
    for p in pool:
        p.start()
    for p in pool:
        p.join()
    assert not errors, errors
    assert sorted(done) == [0, 1]
