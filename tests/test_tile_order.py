"""The grouped tile order: Python mirror checked against the rules and against the C++ header."""

from cute_gemm.tile_order import grouped_tile
from host_cpp import build_and_run, needs_cxx


def _grid_cases():
    cases = [(9, 9, 3)]  # 574 / 64 rounded up, G = 3
    cases += [(m, n, g) for m in range(1, 41) for n in range(1, 41) for g in (1, 2, 3, 5, 8, 16)]
    cases += [(m, n, g) for m in (1, 7, 13, 40) for n in (1, 6, 40) for g in range(1, 17)]
    return cases


def test_bijection_onto_tile_grid():
    for num_m, num_n, g in _grid_cases():
        seen = {grouped_tile(pid, num_m, num_n, g) for pid in range(num_m * num_n)}
        expected = {(m, n) for m in range(num_m) for n in range(num_n)}
        assert seen == expected, (num_m, num_n, g)


def test_group_walks_down_columns():
    for num_m, num_n, g in _grid_cases():
        for pid in range(num_m * num_n):
            m, n = grouped_tile(pid, num_m, num_n, g)
            first_m = (m // g) * g
            gsize = min(num_m - first_m, g)
            # Inside a group, pids run down a column of gsize tiles, then to the next column.
            assert pid == first_m * num_n + n * gsize + (m - first_m), (num_m, num_n, g, pid)


def test_nine_by_nine_group_three_order():
    order = [grouped_tile(pid, 9, 9, 3) for pid in range(9 * 9)]
    assert order[:7] == [(0, 0), (1, 0), (2, 0), (0, 1), (1, 1), (2, 1), (0, 2)]
    assert order[27] == (3, 0)  # second group starts at tile row 3


def test_last_short_group():
    # 10 tile rows with G = 4: the last group has 2 rows and still covers every column.
    order = [grouped_tile(pid, 10, 5, 4) for pid in range(40, 50)]
    assert order == [(8, 0), (9, 0), (8, 1), (9, 1), (8, 2), (9, 2), (8, 3), (9, 3), (8, 4), (9, 4)]


@needs_cxx
def test_cpp_header_matches_python(tmp_path):
    src = tmp_path / "dump.cpp"
    src.write_text(
        '#include <cstdio>\n#include "tile_scheduler.h"\n'
        "int main() { for (int m = 1; m <= 12; ++m) for (int n = 1; n <= 12; ++n) for (int g = 1; g <= 9; ++g)\n"
        "  for (int p = 0; p < m * n; ++p) { auto t = cute_gemm::grouped_tile(p, m, n, g);\n"
        '    std::printf("%d %d %d %d %d %d\\n", m, n, g, p, t.m, t.n); } }\n'
    )
    out = build_and_run(src).split("\n")
    rows = [tuple(map(int, line.split())) for line in out if line]
    assert len(rows) == sum(m * n for m in range(1, 13) for n in range(1, 13)) * 9
    for m, n, g, p, tm, tn in rows:
        assert (tm, tn) == grouped_tile(p, m, n, g), (m, n, g, p)


# (cluster tiles, k-tiles per tile, workers, split-K slices, clusters in the grid, stream-K mode:
# 0 off, 1 forced, 2 the default rule). Grids smaller than the workers: each block then walks
# several virtual workers' segments.
# The default rule's picks for the 128x256 cluster tile's H100 runs (docs/tuning.md, 2026-11-23):
# cluster tiles, k-tiles -> tail tiles (66 workers).
MEASURED_RULE = {(256, 64): 0,      # 4096^3: 7 k-tiles saved, 8 % slower with the tail
                 (256, 224): 0,     # 4096x4096x14336: 27, break-even
                 (896, 64): 0,      # 4096x14336x4096: 27, break-even
                 (1024, 16): 0,     # 8192x8192x1024: 7, 5 % slower
                 (1024, 128): 34,   # 8192^3: 62, 1.6-1.8 % faster
                 (4096, 128): 70}   # 16384^2x8192: 120, 1.3-1.5 % faster
WORK_CASES = (
    [(t, k, w, 1, w, 1) for t in (133, 150, 197, 263, 264, 1792, 4096) for k in (8, 9, 16, 24, 64, 224)
     for w in (66, 132)]
    + [(t, k, w, 1, w, 1) for w in (2, 3, 7) for t in range(w + 1, 4 * w + 2) for k in (8, 11, 31, 40)]
    + [(t, k, w, 1, g, 1) for (t, k, w, g) in [(150, 16, 132, 100), (97, 9, 66, 1), (400, 64, 132, 131)]]
    + [(t, k, w, s, g, 0) for (t, k, w, g) in [(1, 1, 132, 132), (5, 7, 132, 132), (300, 64, 132, 132),
                                               (1000, 16, 66, 66), (17, 33, 7, 3)] for s in (1, 2, 3, 4)
       if s <= k]  # the host never cuts a tile into more slices than k-tiles
    + [(t, k, 66, 1, 66, 2) for (t, k) in MEASURED_RULE]
    + [(t, k, w, 1, w, 2) for t in (150, 197, 263, 1792) for k in (16, 24, 40, 64, 224) for w in (66, 132)]
)


def expected_tail(tiles, kt, workers, mode):
    """choose_stream_k's rule, restated: the tail's cluster tiles (0: none)."""
    rest = tiles % workers
    if mode == 0 or workers < 2 or tiles <= workers or kt < 8 or rest == 0:
        return 0
    tail = rest + (workers if 2 * rest < workers else 0)  # a full wave joins a remainder under half a wave
    if tail * kt > 1 << 30:
        return 0  # 32-bit iteration ids
    saved = -(-tail // workers) * kt - -(-tail * kt // workers)  # k-tiles: whole rounds against segments
    return 0 if mode == 2 and (tail * kt // workers < 16 or saved < 32) else tail


def _walk_units(tmp_path):
    """Every block's units for WORK_CASES, from the C++ headers (WorkCursor, choose_stream_k)."""
    src = tmp_path / "units.cpp"
    src.write_text(
        '#include <cstdio>\n#include "sm90/configs.h"\n'
        "int main() { long long tiles; int kt, workers, splits, grid, on;\n"
        '  while (std::scanf("%lld %d %d %d %d %d", &tiles, &kt, &workers, &splits, &grid, &on) == 6) {\n'
        "    cute_gemm::sm90::StreamK sk = on ? cute_gemm::sm90::choose_stream_k(tiles, kt, workers,\n"
        "                                                    cute_gemm::sm90::kConfigs[2], on == 1)\n"
        "                                     : cute_gemm::sm90::StreamK{};\n"
        '    std::printf("case %d %d\\n", sk.tiles, sk.slots);\n'
        "    for (int b = 0; b < grid; ++b) {\n"
        "      auto c = cute_gemm::WorkCursor::make(int(tiles), kt, splits, sk.tiles, workers, b, grid);\n"
        "      cute_gemm::Unit u;\n"
        "      while (c.next(u)) std::printf(\"%d %d %d %d %d %d %d %d\\n\", b, u.tile, u.kb, u.ke, u.part, u.parts,\n"
        "                                     u.slot_tile, int(c.has_next()));\n"
        '      std::printf("end %d\\n", b); } } }\n'
    )
    out = build_and_run(src, stdin="".join(" ".join(map(str, case)) + "\n" for case in WORK_CASES))
    results = []
    for line in out.splitlines():
        words = line.split()
        if words[0] == "case":
            results.append({"sk_tiles": int(words[1]), "slots": int(words[2]), "blocks": {}})
        elif words[0] == "end":
            results[-1]["blocks"].setdefault(int(words[1]), [])
        else:
            b, *unit = map(int, words)
            results[-1]["blocks"].setdefault(b, []).append(tuple(unit))
    assert len(results) == len(WORK_CASES)
    return results


@needs_cxx
def test_work_units_cover_every_k_tile_once(tmp_path):
    """The blocks' units (data-parallel tiles, split-K slices, stream-K segments) cover every k-tile
    of every tile exactly once; the pieces of a tile agree on their count and number themselves in
    K order; has_next() tells the truth; with as many blocks as workers, the work is balanced."""
    for (tiles, kt, workers, splits, grid, on), res in zip(WORK_CASES, _walk_units(tmp_path)):
        case = (tiles, kt, workers, splits, grid, on)
        sk, slots = res["sk_tiles"], res["slots"]
        assert sk == expected_tail(tiles, kt, workers, on), case
        if on == 2 and workers == 66 and (tiles, kt) in MEASURED_RULE:
            assert sk == MEASURED_RULE[tiles, kt], case
        dp = tiles - sk
        pieces = {}
        for b, units in res["blocks"].items():
            for j, (tile, kb, ke, part, parts, slot_tile, more) in enumerate(units):
                assert 0 <= kb < ke <= kt and 0 <= tile < tiles, (case, b, j)
                assert more == (j + 1 < len(units)), (case, b, j)
                if tile < dp:
                    assert (parts, slot_tile) == (splits, tile), (case, b, j)
                else:
                    assert slot_tile == tile - dp and parts <= slots, (case, b, j)
                pieces.setdefault(tile, []).append((kb, ke, part, parts))
        assert sorted(pieces) == list(range(tiles)), case
        for tile, ps in pieces.items():
            ps.sort()
            assert ps[0][0] == 0 and ps[-1][1] == kt, (case, tile)
            assert all(ps[i][1] == ps[i + 1][0] for i in range(len(ps) - 1)), (case, tile)
            assert [p[2] for p in ps] == list(range(len(ps))) and {p[3] for p in ps} == {len(ps)}, (case, tile)
            if tile >= dp:
                assert len(ps) <= 3 if 2 * (tiles % workers) >= workers else len(ps) <= 2, (case, tile)
        if grid == workers and sk > 0:
            # Block b is worker b: its tail units are its segment's pieces, run last piece first
            # (from k-tile 0), then the first piece (to the last k-tile), then the whole tiles
            # between, so the workers' k-positions stay in two fronts (L2 reuse).
            for b, units in res["blocks"].items():
                seg = [unit for unit in units if unit[0] >= dp]
                if len(seg) > 1:
                    assert seg[0][1] == 0 and seg[1][2] == kt and seg[0][0] == seg[1][0] + len(seg) - 1, (case, b, seg)
                    assert [u[0] for u in seg[2:]] == list(range(seg[1][0] + 1, seg[0][0])), (case, b, seg)
                    assert all((u[1], u[2]) == (0, kt) for u in seg[2:]), (case, b, seg)
            # The point of the tail: every block ends within a k-tile of the others.
            work = [sum(ke - kb for _, kb, ke, *_ in res["blocks"][b]) for b in range(grid)]
            assert max(work) - min(work) <= 1, (case, work)
        if not on:  # the data-parallel order: unit u = b, b + grid, ... is slice u % splits of tile u // splits
            for b, units in res["blocks"].items():
                expect = [(u // splits, u % splits * kt // splits, (u % splits + 1) * kt // splits, u % splits)
                          for u in range(b, tiles * splits, grid)]
                assert [unit[:4] for unit in units] == expect, (case, b)
