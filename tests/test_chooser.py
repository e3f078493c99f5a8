"""The sm90 chooser (csrc/sm90/configs.h) on a 132-SM H100, and with fast_hbm on an H200: the row and
K slices it picks for every problem of the benchmark's suites, as measured in docs/tuning.md. A rule
change that moves one of these picks must change this table too, with the measurement behind it. Host compiler only."""

import pytest

from host_cpp import build_and_run, needs_cxx

# (M, N, K): (config row, K slices). Rows: 0 128x256, 1 128x128, 2 128x256 in 2x1 clusters,
# 3 128x64, 4 64x128 one consumer, 5 64x64 one consumer, 7 128x192, 8 192x192 three consumers,
# 9 128x128 in 2x1 clusters, 12 192x128 three consumers.
PICKS = {
    (1024, 1024, 1024): (4, 1),     # short K, 128x128 tiles fill at most half the SMs (2026-11-23)
    (2048, 2048, 2048): (0, 1),     # about one wave of 128x256 tiles
    (4096, 4096, 4096): (2, 1),     # more than one wave: the cluster tile
    (8192, 8192, 8192): (2, 1),
    (4096, 14336, 4096): (2, 1),
    (4096, 4096, 14336): (2, 1),
    (8192, 8192, 1024): (2, 1),
    (16384, 16384, 8192): (2, 1),
    (16384, 4096, 4096): (2, 1),
    (1, 28672, 8192): (4, 1),       # decode: a wave or more of 64x128 tiles (2026-11-25)
    (16, 4096, 4096): (4, 1),       # M <= 16 with K < 8192 (2026-11-25)
    (16, 14336, 4096): (4, 1),
    (64, 8192, 8192): (5, 1),       # 64x64 tiles fill the SMs better (2026-11-25)
    (64, 4096, 14336): (5, 2),      # half the SMs' tiles, 224 K tiles: two slices (2026-12-05)
    (64, 4096, 4096): (5, 1),       # 64 K tiles: 32 a slice lost after another kernel (2026-12-05)
    (128, 8192, 8192): (3, 1),      # one row of tiles (2026-11-22)
    (128, 4096, 14336): (3, 2),
    (512, 1024, 8192): (9, 4),      # few tiles, long K: split-K (2026-11-22), in clusters (2026-11-27)
    (256, 7168, 2048): (9, 1),      # 112 tiles: the cluster tile (2026-11-27); 192-row tiles would pad M by half
    # Under three quarters of a wave of 128x256 tiles, one full wave of tiles of 3/4 their work
    # (sm90::one_wave_config):
    (3072, 1024, 8192): (12, 1),    # 128 tiles of 192x128 (a QKV projection's weight gradient)
    (1024, 3072, 8192): (7, 1),     # 128 of 128x192
    (3072, 1024, 1024): (12, 1),
    # 2026-11-27 (H100, bf16, us, row 1 / row 9): the cluster tile where its blocks busy two
    # thirds of the SMs (sm90::cluster128_pays) ...
    (1024, 1024, 8192): (9, 2),     # 36.5 / 34.7
    (512, 2048, 4096): (9, 2),      # 22.3 / 21.2
    (768, 1024, 8192): (9, 2),      # 34.3 / 33.0
    # ... and not on 64 blocks.
    (256, 1024, 8192): (1, 4),      # 19.9 / 21.2
    (512, 512, 8192): (1, 4),       # 19.3 / 20.8
    (384, 1024, 8192): (1, 4),      # three tile rows: a pair would compute an empty tile
    (1024, 2048, 1024): (1, 1),     # short K: 9.7 / 10.6
    (2048, 1024, 2048): (1, 1),     # 15.9 / 16.9
    (256, 4096, 4096): (9, 2),      # 26.3 / 24.8
    (574, 574, 574): (4, 1),
    (2050, 2050, 2050): (8, 1),     # past one wave of 128x256 tiles, one of 192x192 (2026-11-26)
    (2056, 2056, 2056): (8, 1),
    (2304, 2048, 2048): (8, 1),     # 12 x 11 = 132 tiles of 192x192
    (4097, 4095, 4103): (2, 1),
    (8192, 8192, 8191): (2, 1),
    (256, 256, 256): (5, 1),        # at most four 128x128 tiles, K too short to split (2026-11-25)
    (81920, 256, 256): (1, 1),      # K <= 256 with two waves or more (2026-11-23)
    (256, 256, 8192): (3, 4),       # four 128x128 tiles, K long enough to split: not row 5
    (100, 200, 300): (5, 1),
    # 2026-11-26 (bf16, us: chosen row against the other of rows 2 and 7): the
    # 128x192 tile where the cluster row's last wave is short and its own waves are full
    # (sm90::tile192_pays) ...
    (3072, 3072, 3072): (7, 1),     # 92.2 against 112.1 (0.97x torch.mm against 0.80x)
    (3072, 3072, 4096): (7, 1),     # 117.6 against 136.8
    (1536, 6144, 4096): (7, 1),     # 121.3 against 142.1
    (2304, 2304, 2304): (7, 1),     # 41.7 against 53.5
    (2048, 2560, 2048): (7, 1),     # 40.4 against 47.5
    (3072, 2048, 2048): (7, 1),     # 42.3 against 51.4
    (2048, 3072, 4096): (7, 1),     # 79.8 against 99.7
    # ... and the cluster row where both fill their waves.
    (2816, 2816, 2816): (2, 1),     # 70.4 against 80.6
    (3328, 3328, 3328): (2, 1),     # 121.1 against 131.2
    (4608, 4608, 4608): (2, 1),     # 294.9 against 322.3
    (2560, 4096, 4096): (2, 1),     # 149.9 against 162.5
    (2560, 2560, 2560): (2, 1),     # 59.6 against 67.9
    (5120, 5120, 5120): (2, 1),     # 416.0 against 464.6
    (6144, 6144, 6144): (2, 1),     # 703.2 against 750.9
    (3584, 3584, 3584): (2, 1),     # 136.6 against 174.9
    (3072, 8192, 3072): (2, 1),     # 238.2 against 251.2
    (4096, 3072, 4096): (2, 1),     # 157.8 against 160.4
    (2048, 8192, 2048): (2, 1),     # 108.5 against 124.6
    (2048, 6144, 2048): (2, 1),     # 82.5 against 84.8
}


@needs_cxx
@pytest.mark.parametrize("fast_hbm", [False, True])
def test_chooser_picks_the_measured_rows(tmp_path, fast_hbm):
    picks, flag = (PICKS_FAST_HBM, ", true") if fast_hbm else (PICKS, "")
    check_picks(tmp_path, picks, f"cute_gemm::sm90::choose_config(a0, a1, a2, 1, 132{flag})", flag)


# Where row 4 would run but B's rows, read in place, straddle the L2's 128-byte lines (a pitch of
# 1000 or 2000 bytes): the 128x128 tile in 2x1 clusters, or plain 128x128 where the tile rows do not
# pair (2026-12-06, H100, bf16, us: row 4 / row 9 / torch.mm, in the layouts where B's rows are off
# the lines; plan.cpp tells which). (M, N, K) -> (row, K slices), on both HBM rules.
PICKS_B_OFF_LINES = {
    (1000, 1000, 1000): (9, 1),     # nn 11.4 / 9.1 / 8.8, nt 11.2 / 9.4 / 8.9, tn 11.3 / 9.6 / 8.8
    (1024, 1000, 1024): (9, 1),     # nn 9.9 / 8.9 / 8.2, tn 9.8 / 8.8 / 8.2
    (1000, 1000, 1024): (9, 1),     # nn 9.9 / 8.9 / 8.3, tn 11.4 / 9.6 / 8.7
    (1024, 1024, 1000): (9, 1),     # nt 11.1 / 8.8 / 8.5
    (1100, 896, 1000): (1, 1),      # nine tile rows do not pair: row 1 (10.1 against row 4's 11.4 on 1000^3)
    (2000, 2000, 1000): (0, 1),     # about one wave of 128x256 tiles: not row 4's rule
    (512, 1024, 8192): (9, 4),      # K splits: not row 4's rule
}


@needs_cxx
@pytest.mark.parametrize("fast_hbm", [False, True])
def test_b_rows_off_the_lines(tmp_path, fast_hbm):
    flag = ", true" if fast_hbm else ", false"
    check_picks(tmp_path, PICKS_B_OFF_LINES, f"cute_gemm::sm90::choose_config(a0, a1, a2, 1, 132{flag}, false)", flag)


def check_picks(tmp_path, picks, row, flag):
    """picks: (a0, a1, a2) -> (config row, K slices); row: the C++ expression of the chosen row on
    a0..a2 (M, N, K; N, M, K for the swapped path); flag: ", true" for the fast-HBM rules."""
    expr = f"{row} * 100 + cute_gemm::sm90::choose_splits(a0, a1, a2, 1, {row}, 132{flag})"
    out = rule_values(tmp_path, "sm90/configs.h", expr, list(picks))
    assert {shape: (v // 100, v % 100) for shape, v in zip(picks, out)} == picks


def rule_values(tmp_path, header, expr, rows):
    """Build a program that reads len(row) integers per line (named a0, a1, ...) and prints
    int(expr) for each, run it on `rows`, return the printed values."""
    n = len(rows[0])
    names = ", ".join(f"a{i}" for i in range(n))
    src = tmp_path / "rule.cpp"
    src.write_text(
        "#include <cstdio>\n"
        f'#include "{header}"\n'
        "int main() {\n"
        f"  int {names};\n"
        f'  while (std::scanf("{" ".join(["%d"] * n)}", {", ".join(f"&a{i}" for i in range(n))}) == {n})\n'
        f'    std::printf("%d\\n", int({expr}));\n'
        "}\n"
    )
    return [int(v) for v in build_and_run(src, stdin="".join(" ".join(map(str, r)) + "\n" for r in rows)).split()]

# The narrow kernels against the copy path (csrc/sm80/configs.h, narrow_pays), on the shapes timed
# on 2026-11-26 (H200, bf16, "nn": A is M x K, B is K x N; a row of an odd multiple of 2 elements
# needs the copy): (M, N, K, behind the SM90 family): (copied operands, narrow us, copy path us).
# The rule must pick the faster one, except where noted (a close call it misses).
NARROW = {
    (574, 574, 574, True): ("ab", 8.7, 15.2),
    (1030, 1030, 1030, True): ("ab", 26.4, 22.9),
    (1282, 1282, 1282, True): ("ab", 32.9, 32.8),
    (1538, 1538, 1538, True): ("ab", 58.9, 51.0),
    (2050, 2050, 2050, True): ("ab", 124.2, 82.0),
    (4096, 4096, 574, True): ("a", 79.9, 44.3),
    (4096, 574, 4096, True): ("b", 122.8, 68.4),
    (16, 4100, 4096, True): ("b", 29.1, 61.0),      # B is 34 MB
    (16, 4096, 4100, True): ("a", 29.1, 21.9),      # A is 131 KB
    (128, 4100, 4096, True): ("b", 32.9, 60.7),
    (1000, 1000, 4098, True): ("a", 55.4, 40.4),
    (770, 770, 770, True): ("ab", 16.6, 18.8),
    (900, 900, 900, True): ("ab", 18.4, 20.5),
    (258, 4102, 4096, True): ("b", 72.8, 83.9),     # missed: estimates 90 against 75
    (32, 11010, 4096, True): ("b", 67.6, 140.1),
    (64, 4096, 11010, True): ("a", 76.0, 45.0),
    (2000, 2000, 514, True): ("a", 21.6, 16.6),
    (200, 200, 8194, True): ("a", 57.6, 23.7),     # long K on 16 blocks: split-K wins
    (574, 4096, 1002, True): ("a", 33.2, 22.5),
    (100, 100, 100, True): ("ab", 4.3, 9.5),
    # CUTE_GEMM_FAMILY=sm80 on the same GPU: the copy path runs the 16-byte SM80 kernels.
    (770, 770, 770, False): ("ab", 16.6, 28.2),
    (900, 900, 900, False): ("ab", 18.3, 29.8),
    (258, 4102, 4096, False): ("b", 73.0, 96.2),
    (32, 11010, 4096, False): ("b", 67.0, 156.7),
    (64, 4096, 11010, False): ("a", 76.1, 126.5),
    (2000, 2000, 514, False): ("a", 21.6, 22.2),   # missed: estimates 44 against 27
    (200, 200, 8194, False): ("a", 57.6, 112.5),
    (574, 4096, 1002, False): ("a", 33.2, 28.2),
    (100, 100, 100, False): ("ab", 4.3, 12.1),
}
NARROW_MISSED = {(258, 4102, 4096, True), (2000, 2000, 514, False)}


@needs_cxx
def test_narrow_rule_agrees_with_the_measurements(tmp_path):
    rows = [(m, n, k, int("a" in c), int("b" in c), int(sm90)) for (m, n, k, sm90), (c, _, _) in NARROW.items()]
    out = rule_values(tmp_path, "sm80/configs.h", "cute_gemm::sm80::narrow_pays(a0, a1, a2, 1, a3, a4, a5)", rows)
    got = {key: bool(v) for key, v in zip(NARROW, out)}
    faster = {key: (narrow < copy) != (key in NARROW_MISSED) for key, (_, narrow, copy) in NARROW.items()}
    assert got == faster


# The narrow kernels' row (sm80::choose_narrow_config, 132 SMs), as measured on 2026-11-26 (H200).
NARROW_ROWS = {
    (574, 574, 574): 2,       # 8.8 us, row 1 17.9
    (16, 4100, 4096): 2,      # 28.8, row 1 63.9
    (32, 11010, 4096): 2,     # M <= 64: 53, row 1 68
    (258, 4102, 4096): 1,     # 73, row 2 80
    (1030, 1030, 1030): 1,    # 81 tiles: row 1 27.2, row 2 25.7 (a miss; the rule takes the copies, 24)
}


@needs_cxx
def test_narrow_rows(tmp_path):
    out = rule_values(tmp_path, "sm80/configs.h", "cute_gemm::sm80::choose_narrow_config(a0, a1, 1, 132)",
                      list(NARROW_ROWS))
    assert dict(zip(NARROW_ROWS, map(int, out))) == NARROW_ROWS


# The sm90 narrow kernels' row (sm90::choose_narrow_config, 132 SMs, the H200's fast-HBM rules), as
# measured on 2026-11-29 (H200, bf16 nn, us: the narrow kernels on the row picked / the best other).
SM90_NARROW_ROWS = {
    (574, 574, 574): 5,       # 7.6 / row 1 14.3
    (256, 574, 514): 5,       # 7.5 / 14.7
    (130, 66, 2050): 5,       # 17.4 / 26.6
    (16, 4100, 4096): 1,      # 23.5 (4 K slices) / 27.9
    (66, 4098, 4098): 1,      # 28.6 / 30.5
    (1030, 1030, 1030): 1,    # 21.2 / 25.3 (past a wave of 64x64 tiles: the aligned rule's row)
    (258, 4102, 4096): 1,     # 66.2 / row 5 75.6
    (2050, 2050, 2050): 0,    # 106 / row 1 101 (a miss by 5 %)
    (4098, 4098, 4098): 0,    # 431 / row 1 574
}


@needs_cxx
def test_sm90_narrow_rows(tmp_path):
    out = rule_values(tmp_path, "sm90/configs.h", "cute_gemm::sm90::choose_narrow_config(a0, a1, a2, 1, 132, true)",
                      list(SM90_NARROW_ROWS))
    assert dict(zip(SM90_NARROW_ROWS, map(int, out))) == SM90_NARROW_ROWS


# The swapped decode row (sm90::kSwap128x16, M <= 16 run as C^T = B^T A^T): its K slices on 132
# SMs, the problem as the kernel sees it (N rows of 128, M columns): all or nothing (configs.h has
# the measurements, 2026-11-27, H100, forced slices).
SWAP_SPLITS = {
    (4096, 16, 4096): 1,     # 32 tiles: 4 slices would keep 16 k-tiles, under 64
    (4096, 16, 8192): 1,     # 32 tiles: 4 slices of 32 k-tiles; 2 slices lost to both 1 and 4
    (4096, 16, 16384): 4,    # 32 tiles: 4 slices of 64 k-tiles
    (8192, 16, 4096): 1,     # 64 tiles: 2 slices of 32
    (8192, 16, 8192): 2,     # 64 tiles: 2 slices of 64 fill 128 SMs
    (6144, 16, 8192): 1,     # 48 tiles: 2 slices would busy 96 SMs (40.1 against 44.3 us)
    (2048, 16, 4096): 4,     # 16 tiles: slices of 16 k-tiles suffice (test_mm's swapped split-K case)
    (2048, 16, 2048): 4,     # 16 tiles: slices of 8 (8.3 against 9.1 us unsplit)
    (2048, 16, 16384): 4,
    (14336, 16, 4096): 1,    # 112 tiles
    (16384, 16, 8192): 1,    # 128 tiles
    (28672, 1, 8192): 1,     # 224 tiles
    (1024, 16, 1024): 1,     # 8 tiles, but 16 k-tiles: 4 slices of 4
    (1024, 16, 4096): 4,     # 8 tiles: 8.6 against 15.4 us unsplit
}


@needs_cxx
def test_swap_row_splits(tmp_path):
    out = rule_values(tmp_path, "sm90/configs.h",
                      "cute_gemm::sm90::choose_splits(a0, a1, a2, 1, cute_gemm::sm90::kSwap128x16, 132)",
                      list(SWAP_SPLITS))
    assert dict(zip(SWAP_SPLITS, map(int, out))) == SWAP_SPLITS


# The swapped path's row (sm90::choose_swap_config, 2026-11-28) and row 10's K slices on 132 SMs,
# the problem as the kernel sees it (N rows, M columns): (N, M, K) -> (row, slices). configs.h has
# the measurements (H100, forced rows and slices).
SWAP_PICKS = {
    (1024, 16, 4096): (10, 4),   # 16 tiles of 64 rows: 7.8 us against 8.5 (row 6, 4 slices)
    (2048, 16, 2048): (10, 2),   # 32 tiles: 7.3 against 8.2 (unsplit 7.2)
    (2048, 16, 4096): (10, 2),   # 10.3 against 11.4
    (2048, 16, 8192): (10, 2),   # 16.4 against 18.2
    (3072, 16, 4096): (10, 1),   # 48 tiles: 12.6 against 15.1
    (4096, 16, 4096): (10, 1),   # 64 tiles: 14.3 against 16.4
    (4096, 1, 4096): (10, 1),    # 14.2 against 15.8
    (4096, 16, 8192): (10, 1),   # 27.4 against 29.2
    (5120, 16, 8192): (6, 1),    # 80 tiles busy 61 % of the SMs: row 6 32.1 against 34.4
    (6144, 16, 8192): (6, 1),    # 96 tiles: 39.5 against 39.9
    (8192, 16, 4096): (10, 1),   # 128 tiles busy 7/8 of the SMs: 26.9 against 28.8
    (8192, 16, 8192): (10, 1),   # 50.0 against 52.3 (row 6, 2 slices)
    (14336, 16, 4096): (6, 1),   # 224 tiles, more than a wave: row 6 44.6 against 45.9
    (28672, 1, 8192): (6, 1),    # 164.2 against 172.5
    (512, 16, 1024): (10, 1),    # 8 tiles, 16 K tiles: slices would keep 4
    (1024, 16, 2048): (10, 2),   # 16 tiles, 32 K tiles: 2 slices of 16 (4 would keep 8; unmeasured)
    (1024, 16, 1024): (10, 1),   # 16 K tiles: no slice keeps 16 (row 6 would not split either)
    (512, 16, 8192): (10, 4),    # 8 tiles: 4 slices at most
    # Two slices where they fit in one wave and keep 96 K tiles each (2026-12-06, H100, the decode
    # step's down projection, 8 calls: 357.8 us against 373.5 unsplit at M = 1, 351.3 / 374.5 at 16).
    (4096, 1, 14336): (10, 2),
    (4096, 16, 14336): (10, 2),
    (4096, 16, 12288): (10, 2),  # 96 K tiles a slice
    (4096, 16, 12224): (10, 1),  # 95
    (4096, 32, 14336): (11, 2),  # after another kernel 52.1 us against 57.8 unsplit (torch.mm 55.0)
    (4096, 32, 12224): (11, 1),  # 95
    # 17 <= M <= 32: row 11 (64x32 tiles of C^T) with row 10's slices (2026-11-29, H200; configs.h).
    (8192, 32, 8192): (11, 1),   # 128 tiles: 36.9 us against 43.5 in 2 slices
    (4096, 32, 4096): (11, 1),   # 64 tiles
    (2048, 24, 4096): (11, 2),   # 32 tiles
    (1024, 17, 4096): (11, 4),   # 16 tiles
    (14336, 32, 4096): (11, 1),  # 224 tiles: 33.3 against 44.8 in 2 slices
}


@needs_cxx
@pytest.mark.parametrize("fast_hbm", [False, True])
def test_swap_rows(tmp_path, fast_hbm):
    picks, flag = (SWAP_PICKS_FAST_HBM, ", true") if fast_hbm else (SWAP_PICKS, "")
    check_picks(tmp_path, picks, f"cute_gemm::sm90::choose_swap_config(a0, 132, {str(fast_hbm).lower()}, a1)", flag)


# The same on a GPU whose HBM is fast (fast_hbm: peak bandwidth per SM kFastHbmMBsPerSm or more, the
# H200; 2026-11-28, H200, bf16, forced rows and slices, us, configs.h): row 10 wherever its tiles
# fit in one wave, and two slices where the rule above leaves it unsplit and they fit in one wave.
# (N, M, K) -> (row, slices).
SWAP_PICKS_FAST_HBM = {
    **SWAP_PICKS,
    (3072, 16, 4096): (10, 2),   # 48 tiles: 11.7 against 13.1 unsplit (row 6, 2 slices: 12.4)
    (4096, 16, 4096): (10, 2),   # 64 tiles: 13.0 against 13.4
    (4096, 1, 8192): (10, 2),    # 22.2 against 24.0
    (4096, 16, 8192): (10, 2),
    (4096, 1, 4096): (10, 2),
    (5120, 16, 8192): (10, 1),   # 80 tiles: 26.0 against row 6's 30.9
    (6144, 16, 8192): (10, 1),   # 96 tiles: 31.5 against 31.2 (a tie)
    (2560, 16, 4096): (10, 2),   # 40 tiles: unmeasured (3 slices would fit a wave: not taken)
    (4224, 16, 4096): (10, 2),   # 66 tiles: two slices fill the 132 SMs
    (4288, 16, 4096): (10, 1),   # 67 tiles: two slices would not fit
    (4096, 32, 4096): (11, 2),   # row 11 takes row 10's slices: 13.6 against 13.9 unsplit
    (4096, 16, 12224): (10, 2),
    (4096, 32, 12224): (11, 2),
}


# Unswapped rows on such a GPU: PICKS, but the short-K rule takes the 128x256 tile (81920x256x256
# 31.2 us against row 1's 33.7, torch.mm 29.5; 2026-11-28, H200, bf16).
PICKS_FAST_HBM = {**PICKS, (81920, 256, 256): (0, 1)}


# sm90::l2_policies: (m, n, batch, batch_a, batch_b, row, mode) as the kernel sees the problem ->
# A's and B's policy, 0 evict-normal, 1 evict-first, 2 evict-last (digits: 10 * A + B).
L2_POLICIES = {
    (4096, 4, 1, 0, 0, 10, 1): 10,       # the swapped decode path: A (the weight) read once
    (4096, 4, 1, 0, 0, 10, 2): 12,       # ... and B (the tokens) kept
    (4096, 4, 1, 0, 0, 10, 0): 0,        # mode 0: no hint
    (48, 4096, 1, 0, 0, 5, 1): 1,        # a decode row: B (the weight) read once
    (128, 8192, 1, 0, 0, 3, 2): 21,      # one row of 128x64 tiles
    (256, 7168, 1, 0, 0, 9, 1): 1,       # two tile rows in one 2x1 cluster: B multicast, read once
    (384, 7168, 1, 0, 0, 9, 1): 0,       # two clusters of tile rows: B read twice
    (40, 512, 3, 40960, 0, 5, 1): 0,     # B broadcast over three batches: read three times
    (40, 512, 3, 40960, 1024, 5, 1): 1,  # a B per batch
    (64, 64, 1, 0, 0, 5, 1): 0,          # one tile: both read once, no preference
    (1024, 1024, 1, 0, 0, 1, 2): 0,      # many tiles each way
}


@needs_cxx
def test_l2_policies(tmp_path):
    expr = ("[&] { cute_gemm::GemmParams p; p.m = a0; p.n = a1; p.batch = a2; p.batch_a = a3; p.batch_b = a4;"
            " const auto q = cute_gemm::sm90::l2_policies(p, cute_gemm::sm90::kConfigs[a5], a6);"
            " auto code = [](unsigned long long v) { return v == cute_gemm::kL2EvictFirst ? 1"
            " : v == cute_gemm::kL2EvictLast ? 2 : 0; };"
            " return 10 * code(q.a) + code(q.b); }()")
    out = rule_values(tmp_path, "sm90/configs.h", expr, list(L2_POLICIES))
    assert dict(zip(L2_POLICIES, out)) == L2_POLICIES
