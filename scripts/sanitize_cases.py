"""A small run of every kernel path for compute-sanitizer (scripts/sanitize.sh): both families,
every sm90 tile config, the four layouts, the fused epilogue (bias, full C, activation), fp32
output, unaligned C rows (written from the shared-memory staging, odd row strides included; through
the scratch buffer), split-K, TF32, bmm, the gated kernel and the narrow (4-byte cp.async)
kernels of both families; each result is checked against torch in float64.
Shapes are small: under the sanitizer every launch is slow."""

import itertools
import os
import sys
from pathlib import Path

import torch

import cute_gemm
from cute_gemm._build_paths import config_names

SM90_CONFIGS = len(config_names(Path(__file__).resolve().parent.parent / "csrc" / "sm90" / "configs.h"))


def check(got, a, b, ref=None):
    ref = a.double() @ b.double() if ref is None else ref
    err = ((got.double() - ref).norm() / ref.norm()).item()
    assert err < 2e-2, err


def operand(rows, cols, major, dtype):
    x = torch.randn(rows, cols, device="cuda") if major == "n" else torch.randn(cols, rows, device="cuda").t()
    return x.to(dtype)


def run_case(m, n, k, layout, dtype):
    a, b = operand(m, k, layout[0], dtype), operand(k, n, layout[1], dtype)
    check(cute_gemm.mm(a, b), a, b)
    bias = torch.randn(n, device="cuda").to(dtype)
    ref = torch.nn.functional.gelu(a.double() @ b.double() + bias.double())
    check(cute_gemm.addmm(bias, a, b, activation="gelu"), a, b, ref)
    c = torch.randn(m, n, device="cuda").to(dtype)
    check(cute_gemm.addmm(c, a, b, beta=0.5), a, b, a.double() @ b.double() + 0.5 * c.double())
    check(cute_gemm.mm(a, b, out_dtype=torch.float32), a, b)
    buf = torch.full((m, n + 1), float("nan"), device="cuda", dtype=dtype)
    check(cute_gemm.mm(a, b, out=buf[:, :n]), a, b)
    assert buf[:, n].isnan().all(), "a store past N"  # inside the allocation: memcheck cannot see it


def main():
    torch.manual_seed(0)
    shapes = [(300, 520, 200), (129, 1031, 64)]
    cases = 0
    families = ["sm90", "sm80"] if torch.cuda.get_device_capability() == (9, 0) else ["sm80"]
    for family in families:
        os.environ["CUTE_GEMM_FAMILY"] = family
        configs = range(SM90_CONFIGS) if family == "sm90" else [None]
        quick = os.environ.get("SANITIZE_QUICK") == "1"  # one layout and dtype (racecheck is slow)
        layouts = ["nt"] if quick else ["nn", "nt", "tn", "tt"]
        dtypes = [torch.bfloat16] if quick else [torch.bfloat16, torch.float16]
        for config, layout, dtype in itertools.product(configs, layouts, dtypes):
            if config is not None:
                os.environ["CUTE_GEMM_SM90_CONFIG"] = str(config)
            for m, n, k in shapes:
                run_case(m, n, k, layout, dtype)
                cases += 1
            # Progress (racecheck takes minutes and prints its summary only at the end: a log cut
            # by a time limit then still says how far it got).
            print(f"sanitize_cases: {family} row {config} {layout} {dtype} done, {cases} cases", flush=True)
        os.environ.pop("CUTE_GEMM_SM90_CONFIG", None)
        # Split-K (sm90), unaligned C rows, TF32,
        # bmm with a shared weight.
        if family == "sm90":
            # Several tiles per block on the 128x256 rows (the late C pair: two chunks written in
            # one unit's epilogue, fenced and stored under the next unit's main loop) and on row 7
            # (six chunks, all stored under the next main loop); and on row 9 (128x128 tiles in 2x1
            # clusters), then split into 3 K slices there.
            for config in ("0", "2", "7", "9"):
                os.environ["CUTE_GEMM_SM90_CONFIG"] = config
                run_case(2100, 2400, 320, "nt", torch.bfloat16)
            os.environ["CUTE_GEMM_SPLITS"] = "3"
            run_case(300, 520, 2056, "nn", torch.bfloat16)
            os.environ.pop("CUTE_GEMM_SPLITS")
            os.environ.pop("CUTE_GEMM_SM90_CONFIG")
            cases += 5
            for swap_row in ("6", "10", "11"):  # the swapped decode path's rows (128x16, 64x16, 64x32 tiles)
                os.environ["CUTE_GEMM_SWAP_CONFIG"] = swap_row
                os.environ["CUTE_GEMM_SPLITS"] = "3"
                run_case(16, 1024, 2048, "nt", torch.bfloat16)  # M <= 16: the swapped decode path, split
                run_case(16, 1024, 2048, "tn", torch.bfloat16)  # ... an M-major A: the kernel's N-major B
                os.environ.pop("CUTE_GEMM_SPLITS")
                run_case(5, 1031, 200, "nn", torch.bfloat16)  # swapped, one slice, B copied (N odd)
                run_case(16, 2048, 4096, "nt", torch.float16)  # swapped, the rule's slices (row 6: 4, rows 10, 11: 2)
                run_case(27, 1031, 200, "nn", torch.bfloat16)  # 17 <= M <= 32 (two column tiles on rows 6, 10)
                cases += 5
            os.environ.pop("CUTE_GEMM_SWAP_CONFIG")
            # Broadcast batches (batch stride 0) read in place through TMA's batch 0, A and B, on a
            # 128x256 row and a cluster row; an addmm input of rows 2^23 + 8 elements apart (copied
            # to rows first) and an activation with a cancelling bias through the activation warps.
            for config in ("0", "9"):
                os.environ["CUTE_GEMM_SM90_CONFIG"] = config
                x, w3 = torch.randn(130, 264, device="cuda").bfloat16(), torch.randn(4, 264, 136, device="cuda").bfloat16()
                check(cute_gemm.bmm(x.expand(4, 130, 264), w3), x.expand(4, 130, 264), w3)
                a3 = torch.randn(4, 264, 130, device="cuda").bfloat16().mT
                w = torch.randn(264, 136, device="cuda").bfloat16()
                check(cute_gemm.bmm(a3, w.expand(4, 264, 136)), a3, w)
                cases += 2
            os.environ["CUTE_GEMM_SM90_CONFIG"] = "0"
            a, b = operand(300, 64, "n", torch.bfloat16), operand(64, 264, "n", torch.bfloat16)
            stride = 2**23 + 8
            buf = torch.randn(299 * stride + 264, device="cuda").bfloat16()
            x = buf.as_strided((300, 264), (stride, 1))
            check(cute_gemm.addmm(x, a, b), a, b, a.double() @ b.double() + x.double())
            del buf, x
            os.environ.pop("CUTE_GEMM_SM90_CONFIG")
            cases += 1
            # The stream-K tail (128x64 tiles: more than one wave, pieces of up to three blocks).
            os.environ["CUTE_GEMM_STREAM_K"] = "1"
            os.environ["CUTE_GEMM_SM90_CONFIG"] = "3"
            run_case(1100, 2560, 1500, "nt", torch.bfloat16)
            os.environ.pop("CUTE_GEMM_SM90_CONFIG")
            # gated_mm (act(x w_gate^T) * (x w_up^T) in one kernel), whole tiles and with the
            # stream-K tail (1 x 9000: 141 tiles of 64x128 on row 4).
            x = torch.randn(1, 2048, device="cuda").bfloat16()
            wg, wu = (torch.randn(9000, 2048, device="cuda").bfloat16() for _ in range(2))
            ref = torch.nn.functional.silu(x.double() @ wg.double().t()) * (x.double() @ wu.double().t())
            check(torch.ops.cute_gemm.gated_mm(x, wg, wu), x, wg, ref)
            os.environ.pop("CUTE_GEMM_STREAM_K")
            check(torch.ops.cute_gemm.gated_mm(x, wg, wu), x, wg, ref)
            cases += 2
            # gated_mm in 2x1 clusters (row 2: each block multicasts its share of both weights'
            # boxes to the pair) on 300 rows: the second block of the last pair computes a tile past M.
            os.environ["CUTE_GEMM_SM90_CONFIG"] = "2"
            x = torch.randn(300, 1024, device="cuda").bfloat16()
            wg, wu = (torch.randn(1000, 1024, device="cuda").bfloat16() for _ in range(2))
            ref = torch.nn.functional.silu(x.double() @ wg.double().t()) * (x.double() @ wu.double().t())
            check(torch.ops.cute_gemm.gated_mm(x, wg, wu), x, wg, ref)
            os.environ.pop("CUTE_GEMM_SM90_CONFIG")
            cases += 1
            # Operands TMA reads in place although their extent is not whole 16-byte vectors (the
            # last row ends where the allocation does), and K % 8 != 0 rows copied into a buffer
            # whose padding is never zeroed (TMA stops at K).
            # Elements between the rows are NaN, and so is the memory the padded copies will get
            # (freed NaN blocks of their size): a read past the extent or K makes the result NaN.
            flat_a = torch.randn(299 * 128 + 123, device="cuda").bfloat16()
            flat_b = torch.randn(122 * 80 + 77, device="cuda").bfloat16()
            flat_a[:299 * 128].view(299, 128)[:, 123:] = float("nan")
            flat_b[:122 * 80].view(122, 80)[:, 77:] = float("nan")
            a, b = flat_a.as_strided((300, 123), (128, 1)), flat_b.as_strided((123, 77), (80, 1))
            check(cute_gemm.mm(a, b), a, b)
            poison = [torch.full((574, 576), float("nan"), device="cuda", dtype=torch.bfloat16) for _ in range(6)]
            del poison
            run_case(574, 574, 574, "nn", torch.bfloat16)
            cases += 6
        torch.backends.cuda.matmul.allow_tf32 = True
        a, b = torch.randn(129, 200, device="cuda"), torch.randn(200, 257, device="cuda")
        check(cute_gemm.mm(a, b), a, b)
        torch.backends.cuda.matmul.allow_tf32 = False
        a3, w = torch.randn(3, 65, 96, device="cuda").bfloat16(), torch.randn(96, 130, device="cuda").bfloat16()
        check(cute_gemm.bmm(a3, w.expand(3, 96, 130)), a3, w)
        cases += 3
    # The narrow kernels (CUTE_GEMM_NARROW=1: 4-byte cp.async, sm80 rows 1 and 2; on Hopper also
    # CUTE_GEMM_SM90_NARROW=1, the sm90 rows' narrow kernels on their rule's row). The caching
    # allocator's blocks are larger than these operands, so memcheck would not see a read a few
    # bytes past one: each operand's rows are padded with two NaN elements (row length + 2, not a
    # multiple of 8: the narrow path is taken) and followed by NaN, so that a vector read past K,
    # M or N makes the result NaN and the check fails.
    def guarded(rows, cols, major, dtype):
        outer, inner = (rows, cols) if major == "n" else (cols, rows)
        flat = torch.full(((outer + 1) * (inner + 2),), float("nan"), device="cuda", dtype=dtype)
        x = flat[:outer * (inner + 2)].view(outer, inner + 2)[:, :inner]
        x.copy_(torch.randn(outer, inner, device="cuda"))
        return x if major == "n" else x.t()

    os.environ["CUTE_GEMM_FAMILY"] = "auto"
    kinds = [("sm80", "1"), ("sm80", "2")] + ([("sm90", None)] if "sm90" in families else [])
    for (kind, config), layout in itertools.product(kinds, ["nt"] if quick else ["nn", "nt", "tn", "tt"]):
        for key in ("CUTE_GEMM_NARROW", "CUTE_GEMM_SM80_CONFIG", "CUTE_GEMM_SM90_NARROW"):
            os.environ.pop(key, None)
        if kind == "sm80":
            os.environ["CUTE_GEMM_NARROW"] = "1"
            os.environ["CUTE_GEMM_SM80_CONFIG"] = config
        else:
            os.environ["CUTE_GEMM_SM90_NARROW"] = "1"
        for (m, n, k), dtype in [((130, 66, 2050), torch.bfloat16), ((258, 10, 130), torch.float16)]:
            a, b = guarded(m, k, layout[0], dtype), guarded(k, n, layout[1], dtype)
            before = torch.cuda.memory_stats()["allocation.all.allocated"]
            got = cute_gemm.mm(a, b)
            if kind == "sm80":
                assert torch.cuda.memory_stats()["allocation.all.allocated"] - before == 1, "not the narrow path"
            else:
                assert cute_gemm.explain(a, b)["family"] == "sm90 narrow", "not the sm90 narrow path"
            assert not got.isnan().any(), "a read past the operand"
            check(got, a, b)
            bias = torch.randn(n, device="cuda").to(dtype)
            check(cute_gemm.addmm(bias, a, b), a, b, a.double() @ b.double() + bias.double())
            cases += 1
    for key in ("CUTE_GEMM_NARROW", "CUTE_GEMM_SM80_CONFIG", "CUTE_GEMM_SM90_NARROW"):
        os.environ.pop(key, None)
    torch.cuda.synchronize()
    print(f"sanitize_cases: {cases} cases passed ({', '.join(families)})")


if __name__ == "__main__":
    sys.exit(main())
