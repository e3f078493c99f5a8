"""The sm90 chooser (csrc/sm90/configs.h) on a 132-SM H100: the row and K slices it picks for every
problem of the benchmark's suites, as measured in docs/tuning.md. A rule change that moves one of
these picks must change this table too, with the measurement behind it. Host compiler only."""

from host_cpp import build_and_run, needs_cxx

# (M, N, K): (config row, K slices). Rows: 0 128x256, 1 128x128, 2 128x256 in 2x1 clusters,
# 3 128x64, 4 64x128 one consumer, 5 64x64 one consumer.
PICKS = {
    (1024, 1024, 1024): (4, 1),     # short K, 128x128 tiles fill at most half the SMs (session 6)
    (2048, 2048, 2048): (0, 1),     # about one wave of 128x256 tiles
    (4096, 4096, 4096): (2, 1),     # more than one wave: the cluster tile
    (8192, 8192, 8192): (2, 1),
    (4096, 14336, 4096): (2, 1),
    (4096, 4096, 14336): (2, 1),
    (8192, 8192, 1024): (2, 1),
    (16384, 16384, 8192): (2, 1),
    (16384, 4096, 4096): (2, 1),
    (1, 28672, 8192): (4, 1),       # decode: a wave or more of 64x128 tiles (session 13)
    (16, 4096, 4096): (4, 1),       # M <= 16 with K < 8192 (session 13)
    (16, 14336, 4096): (4, 1),
    (64, 8192, 8192): (5, 1),       # 64x64 tiles fill the SMs better (session 13)
    (128, 8192, 8192): (3, 1),      # one row of tiles (session 4)
    (128, 4096, 14336): (3, 2),
    (512, 1024, 8192): (1, 4),      # few tiles, long K: split-K (session 4)
    (256, 7168, 2048): (1, 1),
    (574, 574, 574): (4, 1),
    (2050, 2050, 2050): (2, 1),     # past one wave of 128x256 tiles (session 7)
    (4097, 4095, 4103): (2, 1),
    (8192, 8192, 8191): (2, 1),
    (256, 256, 256): (5, 1),        # at most four 128x128 tiles, K too short to split (session 17)
    (81920, 256, 256): (1, 1),      # K <= 256 with two waves or more (session 7)
    (256, 256, 8192): (3, 4),       # four 128x128 tiles, K long enough to split: not row 5
    (100, 200, 300): (5, 1),
}


@needs_cxx
def test_chooser_picks_the_measured_rows(tmp_path):
    src = tmp_path / "choose.cpp"
    src.write_text(
        "#include <cstdio>\n"
        '#include "sm90/configs.h"\n'
        "int main() {\n"
        "  int m, n, k;\n"
        '  while (std::scanf("%d %d %d", &m, &n, &k) == 3) {\n'
        "    const int c = cute_gemm::sm90::choose_config(m, n, k, 1, 132);\n"
        '    std::printf("%d %d\\n", c, cute_gemm::sm90::choose_splits(m, n, k, 1, c, 132));\n'
        "  }\n"
        "}\n"
    )
    out = build_and_run(src, stdin="".join(f"{m} {n} {k}\n" for m, n, k in PICKS)).split("\n")
    got = {shape: tuple(map(int, line.split())) for shape, line in zip(PICKS, out)}
    assert got == PICKS


# The narrow kernels against the copy path (csrc/sm80/configs.h, narrow_pays), on the shapes timed
# in session 19 (H200, bf16, "nn": A is M x K, B is K x N, a row of an odd multiple of 2 elements
# needs the copy): (M, N, K): (copied operands, narrow measured faster). The rule must agree with
# every measurement behind the SM90 family.
NARROW = {
    (574, 574, 574): ("ab", True),         # 8.7 us against 15.2
    (1030, 1030, 1030): ("ab", False),     # 26.4 against 22.9
    (1282, 1282, 1282): ("ab", False),     # 32.9 against 32.8 (a tie)
    (1538, 1538, 1538): ("ab", False),     # 58.9 against 51.0
    (2050, 2050, 2050): ("ab", False),     # 124 against 82
    (4096, 4096, 574): ("a", False),       # 80 against 44
    (4096, 574, 4096): ("b", False),       # 123 against 68
    (16, 4100, 4096): ("b", True),         # 29 against 61: B is 34 MB
    (16, 4096, 4100): ("a", False),        # 29 against 22: A is 131 KB
    (128, 4100, 4096): ("b", True),        # 33 against 61
    (1000, 1000, 4098): ("a", False),      # 55 against 40
}


@needs_cxx
def test_narrow_rule_agrees_with_the_measurements(tmp_path):
    src = tmp_path / "narrow.cpp"
    src.write_text(
        "#include <cstdio>\n"
        '#include "sm80/configs.h"\n'
        "int main() {\n"
        "  int m, n, k, ca, cb;\n"
        '  while (std::scanf("%d %d %d %d %d", &m, &n, &k, &ca, &cb) == 5)\n'
        '    std::printf("%d\\n", int(cute_gemm::sm80::narrow_pays(m, n, k, 1, ca, cb, true)));\n'
        "}\n"
    )
    stdin = "".join(f"{m} {n} {k} {int('a' in c)} {int('b' in c)}\n" for (m, n, k), (c, _) in NARROW.items())
    out = build_and_run(src, stdin=stdin).split()
    got = {shape: bool(int(v)) for shape, v in zip(NARROW, out)}
    assert got == {shape: taken for shape, (_, taken) in NARROW.items()}
