"""Where a block of the SM90 kernel spends its time: a phase trace (csrc/sm90/trace.h).

Needs a trace build (measurement only; its kernels carry the recording code):
    CUTE_GEMM_TRACE=1 BUILD_ONLY=1 bash scripts/gpu_check.sh
    python3 -P scripts/trace_phases.py 8192x8192x1024 8192x8192x1024:0 256x256x256 --out $OUT
A shape is MxNxK (bf16, both operands row-major) with an optional :row forcing the sm90 config and
an optional +bias (cute_gemm.addmm with a bias row of N elements, nn.Linear's forward epilogue).
For each, a few untraced calls, then one traced call; it prints the per-block phases (medians over
blocks, in SM cycles and microseconds) and saves the events (.npz) for `--load`, which re-reads saved
traces without a GPU.

Per recorder (producer thread; first thread of each consumer warpgroup), events of
(clock64, globaltimer ns, tag << 32 | arg), tags as in trace.h. Recording costs the recording
thread about 100-300 cycles per event (2026-11-25, mostly the %globaltimer read): read phases
against each other, not as the untraced kernel's absolute times.
"""

import argparse
import os
import sys
import warnings
from pathlib import Path

import numpy as np

CAP = 4096  # kTraceCap
START, EMPTY_WAIT, ISSUED, FULL_WAIT, FULL, RETIRED, MAIN_DONE, EPI_DONE, STORE_BEGIN, STORE_END, END = range(11)


def capture(spec):
    import torch

    import cute_gemm

    spec, _, extra = spec.partition("+")
    if extra not in ("", "bias"):
        raise SystemExit(f"'+{extra}': the only suffix is +bias")
    shape, _, row = spec.partition(":")
    m, n, k = map(int, shape.split("x"))
    if row:
        os.environ["CUTE_GEMM_SM90_CONFIG"] = row
    torch.manual_seed(0)
    a = torch.randn(m, k, device="cuda").bfloat16()
    b = torch.randn(k, n, device="cuda").bfloat16()
    bias = torch.randn(n, device="cuda").bfloat16() if extra else None
    call = (lambda: cute_gemm.addmm(bias, a, b)) if extra else (lambda: cute_gemm.mm(a, b))
    ref = a.double() @ b.double() + (bias.double() if extra else 0)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    buf = torch.zeros(sms * 3 * CAP * 3, dtype=torch.int64, device="cuda")
    for _ in range(5):
        call()
    torch.cuda.synchronize()
    os.environ["CUTE_GEMM_TRACE_BUF"] = str(buf.data_ptr())
    out = call()
    torch.cuda.synchronize()
    del os.environ["CUTE_GEMM_TRACE_BUF"]
    os.environ.pop("CUTE_GEMM_SM90_CONFIG", None)
    err = ((out.double() - ref).norm() / ref.norm()).item()
    assert err < 1e-2, err
    ev = buf.view(sms, 3, CAP, 3).cpu().numpy().view(np.uint64)
    used = int((ev[:, :, :, 0] != 0).any(axis=(0, 1)).nonzero()[0].max() + 1)
    # A block that got no work (grid below the SM count) recorded nothing.
    blocks = int((ev[:, :, 0, 0] != 0).any(axis=1).sum())
    return ev[:blocks, :, :used]


def events(ev, blk, role):
    e = ev[blk, role]
    e = e[e[:, 0] != 0]
    return e[:, 0].astype(np.int64), e[:, 1].astype(np.int64), (e[:, 2] >> 32).astype(np.int64), (e[:, 2] & 0xFFFFFFFF).astype(np.int64)


def med(x):
    return float(np.median(x)) if len(x) else float("nan")


def analyze(name, ev):
    nblk = ev.shape[0]
    starts = np.array([events(ev, b, 0)[1][0] for b in range(nblk)])
    ends = np.array([events(ev, b, r)[1][-1] for b in range(nblk) for r in range(3) if (ev[b, r, :, 0] != 0).any()])
    t0 = starts.min()
    span_ns = ends.max() - t0
    # Clock rate from the first and last events of block 0's first consumer.
    c, g, _, _ = events(ev, 0, 1)
    mhz = (c[-1] - c[0]) / max(1, g[-1] - g[0]) * 1e3
    gdiff = np.diff(g)
    res = gdiff[gdiff > 0].min() if (gdiff > 0).any() else 0
    print(f"\n== {name}: {nblk} blocks, span {span_ns / 1e3:.2f} us (first start to last end), "
          f"block starts spread {(starts.max() - t0) / 1e3:.2f} us, SM clock {mhz:.0f} MHz, globaltimer step >= {res} ns")
    rows = []
    for b in range(nblk):
        pc, _, ptag, _ = events(ev, b, 0)
        issued = pc[ptag == ISSUED]
        ew = pc[ptag == EMPTY_WAIT]
        empty_wait = (issued - ew[: len(issued)]).sum()  # (includes the issue itself: ~tens of cycles)
        for role in (1, 2):
            if not (ev[b, role, :, 0] != 0).any():
                continue
            c, _, tag, _ = events(ev, b, role)
            start = c[tag == START][0]
            fw, fu = c[tag == FULL_WAIT], c[tag == FULL]
            n = min(len(fw), len(fu), len(issued))
            waits = fu[:n] - fw[:n]
            lead = fw[:n] - issued[:n]  # how long before the consumer wanted it the load was issued
            lat = fu[:n] - issued[:n]   # issue to consumer passing the barrier
            md, ed = c[tag == MAIN_DONE], c[tag == EPI_DONE]
            # The first load of each unit: the one after the previous unit's main loop.
            unit_first = np.searchsorted(fw[:n], np.concatenate([[start], md[:-1]]))
            sb, se = c[tag == STORE_BEGIN], c[tag == STORE_END]
            # Wait by the load's position in its unit (0: the unit's first k-tile).
            pos = np.arange(n) - unit_first[np.searchsorted(unit_first, np.arange(n), side="right") - 1]
            # Turnaround: a unit's last WGMMA done to the next unit's first slot full.
            nxt = unit_first[1:]
            turn = fu[nxt[nxt < n]] - md[: len(nxt[nxt < n])] if len(md) > 1 else np.array([])
            rows.append(dict(
                block=b, role=role, units=len(md), loads=len(fw),
                total=c[-1] - start,
                first_data=fu[0] - start if len(fu) else 0,
                wait_sum=waits.sum(), wait_first=waits[pos == 0].sum(), wait_n=(waits > 300).sum(),
                wait_lat=med(lat[waits > 300]), lead_med=med(lead), lat_med=med(lat),
                epi=med(ed - md[: len(ed)]) if len(ed) else 0,
                epi_sum=(ed - md[: len(ed)]).sum() if len(ed) else 0,
                store=med(se - sb[: len(se)]) if len(se) else 0,
                store_sum=(se - sb[: len(se)]).sum() if len(se) else 0,
                tail=c[-1] - (ed[-1] if len(ed) else start),
                empty_wait=empty_wait,
                kt_cycles=med(np.diff(c[tag == RETIRED])) if (tag == RETIRED).sum() > 1 else 0,
                turn=med(turn),
                pos_wait=[waits[pos == q].mean() if (pos == q).any() else np.nan for q in range(8)]
                + [waits[pos >= 8].mean() if (pos >= 8).any() else np.nan],
            ))
    keys = ["units", "loads", "total", "first_data", "wait_sum", "wait_first", "wait_n", "wait_lat", "lead_med",
            "lat_med", "epi", "epi_sum", "store", "store_sum", "tail", "empty_wait", "kt_cycles", "turn"]
    print("median over consumer recorders (cycles):")
    for key in keys:
        vals = np.array([r[key] for r in rows], dtype=float)
        print(f"  {key:11s} median {np.nanmedian(vals):10.0f}  min {np.nanmin(vals):10.0f}  max {np.nanmax(vals):10.0f}")
    pw = np.nanmedian(np.array([r["pos_wait"] for r in rows], float), axis=0)
    print("  mean wait by k-tile of the unit 0..7, 8+: " + " ".join(f"{v:.0f}" for v in pw))
    tot = np.array([r["total"] for r in rows], float)
    for key in ("wait_sum", "wait_first", "epi_sum", "store_sum", "first_data", "tail"):
        frac = np.array([r[key] for r in rows], float) / tot
        print(f"  share of a consumer's time: {key:10s} {100 * np.median(frac):5.1f} %")
    return rows


def timeline(name, ev, show=4):
    """Per block, each unit's span on the first consumer (globaltimer, us from the kernel's first
    start): the wait for its first slot, its main loop (k-tiles), and the gap after it (epilogue,
    or a split / stream-K piece's partial). Then, over blocks: main-loop time per k-tile, the gaps,
    and when the blocks end."""
    nblk = ev.shape[0]
    t0 = min(events(ev, b, 0)[1][0] for b in range(nblk))
    per_kt, gaps, ends, first_waits = [], [], [], []
    for b in range(nblk):
        if not (ev[b, 1, :, 0] != 0).any():
            continue
        _, g, tag, _ = events(ev, b, 1)
        g = (g - t0) / 1e3
        md = np.nonzero(tag == MAIN_DONE)[0]
        start = np.nonzero(tag == START)[0][0]
        bounds = np.concatenate([[start], md])
        units = []
        for i in range(len(md)):
            seg = slice(bounds[i] + 1, md[i])
            t_seg = tag[seg]
            fulls = np.nonzero(t_seg == FULL)[0]
            waits = np.nonzero(t_seg == FULL_WAIT)[0]
            if not len(fulls):
                continue
            first_full = g[seg][fulls[0]]
            kts = len(fulls)
            units.append((g[bounds[i]], g[seg][waits[0]] if len(waits) else first_full, first_full, g[md[i]], kts))
        end = g[-1]
        ends.append(end)
        for i, (prev_end, fw, ff, done, kts) in enumerate(units):
            per_kt.append(((done - ff) / max(kts, 1), kts))
            first_waits.append(ff - fw)
            nxt = units[i + 1][1] if i + 1 < len(units) else end  # next unit's first slot wait starts
            gaps.append((nxt - done, kts, i == len(units) - 1))
        if b < show:
            print(f"  block {b}: " + "; ".join(f"[{ff:.1f}..{done:.1f}] {kts}kt" for (_, _, ff, done, kts) in units)
                  + f"; end {end:.1f}")
    pk = np.array(per_kt)
    gp = np.array(gaps)
    print(f"== {name} timeline: {nblk} blocks; us per k-tile by unit length:")
    for kts in sorted(set(pk[:, 1].astype(int))):
        sel = pk[:, 1] == kts
        print(f"    {kts:4d} k-tiles: {sel.sum():4d} units, median {np.median(pk[sel, 0]):.3f} us/k-tile")
    inner = gp[gp[:, 2] == 0]
    last = gp[gp[:, 2] == 1]
    if len(inner):
        print(f"  gap after a unit (epilogue or partial, to the next unit's first wait): median {np.median(inner[:, 0]):.2f} us, "
              f"max {inner[:, 0].max():.2f}")
    print(f"  after the last unit to the block's end: median {np.median(last[:, 0]):.2f} us, max {last[:, 0].max():.2f}")
    print(f"  first-slot wait per unit: median {np.median(first_waits):.2f} us, max {np.max(first_waits):.2f}")
    e = np.sort(np.array(ends))
    print("  block ends (us): min {:.1f} p10 {:.1f} median {:.1f} p90 {:.1f} max {:.1f}".format(
        e[0], e[len(e) // 10], e[len(e) // 2], e[9 * len(e) // 10], e[-1]))
    return dict(units=len(pk), us_per_kt=float(np.median(pk[:, 0])),
                gap=float(np.median(inner[:, 0])) if len(inner) else float("nan"),
                last=float(np.median(last[:, 0])), first_wait=float(np.median(first_waits)), end=float(e[-1]))


def main():
    warnings.filterwarnings("ignore", message="All-NaN slice")  # a column no recorder had (one unit per block)
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("shapes", nargs="*")
    ap.add_argument("--out", default=None, help="folder for the .npz traces")
    ap.add_argument("--load", nargs="*", default=[], help="analyze saved .npz traces instead")
    ap.add_argument("--timeline", action="store_true", help="also each block's units in time (stream-K, split-K)")
    ap.add_argument("--env", action="append", default=[], metavar="NAME=VALUE",
                    help="set an environment knob for the calls (e.g. CUTE_GEMM_STREAM_K=1)")
    args = ap.parse_args()
    for kv in args.env:
        key, _, value = kv.partition("=")
        os.environ[key] = value
    for path in args.load:
        analyze(Path(path).stem, np.load(path)["ev"])
        if args.timeline:
            timeline(Path(path).stem, np.load(path)["ev"])
    for spec in args.shapes:
        ev = capture(spec)
        if args.out:
            Path(args.out).mkdir(parents=True, exist_ok=True)
            np.savez_compressed(Path(args.out) / f"trace_{spec.replace(':', '_row').replace('+', '_')}.npz", ev=ev)
        analyze(spec, ev)
        if args.timeline:
            timeline(spec, ev)
    return 0


if __name__ == "__main__":
    sys.exit(main())
