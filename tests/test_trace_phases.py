"""scripts/trace_phases.py's analysis (no GPU): a synthetic trace whose phases are known."""

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
import trace_phases as T  # noqa: E402


def synthetic(blocks=3, units=3, k_tiles=16, latency=800, k_cycles=1000):
    """Producer issues a load every 900 cycles; consumers wait for data `latency` cycles after the
    issue, retire each k-tile k_cycles after its data, and spend 400 cycles per epilogue."""
    ev = np.zeros((blocks, 3, T.CAP, 3), np.uint64)

    def put(b, r, rows):
        for i, (c, tag, arg) in enumerate(rows):
            ev[b, r, i] = (c, 1000 + c // 2, (tag << 32) | arg)

    for b in range(blocks):
        prod, t, loads, ct = [(10, T.START, 0)], 20, 0, 100
        cons = {1: [(12, T.START, 0)], 2: [(12, T.START, 0)]}
        for u in range(units):
            for _ in range(k_tiles):
                prod += [(t, T.EMPTY_WAIT, loads), (t + 30, T.ISSUED, loads)]
                full = max(ct, t + 30 + latency)
                for r in (1, 2):
                    cons[r] += [(ct, T.FULL_WAIT, loads), (full, T.FULL, loads), (full + k_cycles, T.RETIRED, 0)]
                ct, t, loads = full + k_cycles, t + 900, loads + 1
            for r in (1, 2):
                cons[r] += [(ct + 100, T.MAIN_DONE, u), (ct + 150, T.STORE_BEGIN, 0), (ct + 300, T.STORE_END, 0),
                            (ct + 500, T.EPI_DONE, u)]
            ct += 600
        prod.append((t, T.END, loads))
        put(b, 0, prod)
        for r in (1, 2):
            cons[r].append((ct + 50, T.END, loads))
            put(b, r, cons[r])
    return ev


def test_phases_of_a_synthetic_trace(capsys):
    rows = T.analyze("synthetic", synthetic())
    assert len(rows) == 6  # 3 blocks x 2 consumer recorders
    r = rows[0]
    assert (r["units"], r["loads"]) == (3, 48)
    assert r["epi"] == 400 and r["epi_sum"] == 1200 and r["store"] == 150
    assert r["kt_cycles"] == 1000
    # Only the very first load finds the consumer waiting (it arrives 830 cycles after the issue at
    # 20, the consumer asked at 100); later loads were issued long before they were wanted.
    assert r["wait_n"] == 1 and r["wait_sum"] == 20 + 30 + 800 - 100
    assert r["first_data"] == 20 + 30 + 800 - 12
    assert "synthetic: 3 blocks" in capsys.readouterr().out


def test_saved_traces_load(tmp_path, capsys, monkeypatch):
    np.savez_compressed(tmp_path / "t.npz", ev=synthetic(blocks=1))
    monkeypatch.setattr(sys, "argv", ["trace_phases.py", "--load", str(tmp_path / "t.npz")])
    assert T.main() == 0
    assert "== t: 1 blocks" in capsys.readouterr().out


def test_timeline_of_a_synthetic_trace(capsys):
    # globaltimer = 1000 + cycles / 2 ns. Unit 0's first slot is full at cycle 850 (20 + 30 + 800),
    # each k-tile takes 1000 cycles and MAIN_DONE comes 100 after the last: 16,100 cycles for 16
    # k-tiles, 0.503 us each. The next unit asks for its first slot 600 cycles after the last
    # retire (500 after MAIN_DONE: 0.25 us) and finds it full; the block ends 550 cycles after its
    # last MAIN_DONE (0.275 us).
    t = T.timeline("synthetic", synthetic())
    assert t["units"] == 9  # 3 blocks x 3 units, first consumer only
    assert abs(t["us_per_kt"] - 16100 / 2 / 16 / 1e3) < 1e-9
    assert abs(t["gap"] - 0.25) < 1e-9 and abs(t["last"] - 0.275) < 1e-9
    assert t["first_wait"] == 0
    assert "16 k-tiles:    9 units" in capsys.readouterr().out
