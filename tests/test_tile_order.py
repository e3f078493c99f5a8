"""The grouped tile order: Python mirror checked against the rules and against the C++ header."""

import shutil
import subprocess
from pathlib import Path

import pytest

from cute_gemm.tile_order import grouped_tile

REPO = Path(__file__).resolve().parent.parent


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


@pytest.mark.skipif(shutil.which("c++") is None, reason="needs a host C++ compiler to build the header check")
def test_cpp_header_matches_python(tmp_path):
    src = tmp_path / "dump.cpp"
    src.write_text(
        '#include <cstdio>\n#include "tile_scheduler.h"\n'
        "int main() { for (int m = 1; m <= 12; ++m) for (int n = 1; n <= 12; ++n) for (int g = 1; g <= 9; ++g)\n"
        "  for (int p = 0; p < m * n; ++p) { auto t = cute_gemm::grouped_tile(p, m, n, g);\n"
        '    std::printf("%d %d %d %d %d %d\\n", m, n, g, p, t.m, t.n); } }\n'
    )
    exe = tmp_path / "dump"
    subprocess.run(["c++", "-std=c++17", "-I", str(REPO / "csrc"), str(src), "-o", str(exe)], check=True)
    out = subprocess.run([str(exe)], check=True, capture_output=True, text=True).stdout.split("\n")
    rows = [tuple(map(int, line.split())) for line in out if line]
    assert len(rows) == sum(m * n for m in range(1, 13) for n in range(1, 13)) * 9
    for m, n, g, p, tm, tn in rows:
        assert (tm, tn) == grouped_tile(p, m, n, g), (m, n, g, p)
