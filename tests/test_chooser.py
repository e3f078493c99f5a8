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
