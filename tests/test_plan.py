"""The one decision site (csrc/plan.cpp, plan_for) on a grid of problems: its row and K slices
agree with the rules' own tables (tests/test_chooser.py), and its route, copies, C target, fold,
stream-K tail and errors with the rules gemm.cpp documents. What cute_gemm.explain() prints is
describe() of this plan. Host compiler only."""

import subprocess

import pytest

from host_cpp import CSRC, build, needs_cxx
from test_chooser import PICKS_FAST_HBM, SWAP_PICKS_FAST_HBM

# One problem per input line; prints describe()'s lines joined by '|', then the error, if any.
DRIVER = r"""
#include <cstdio>
#include <iostream>
#include <string>
#include "plan.h"
using namespace cute_gemm;

// (L, R, C) view: row-major (C contiguous) or column-major (R contiguous).
MatrixView view(long long l, long long r, long long c, bool row_major, int elem, bool broadcast) {
  MatrixView v;
  v.size[0] = l; v.size[1] = r; v.size[2] = c;
  v.stride[0] = broadcast ? 0 : r * c;
  v.stride[1] = row_major ? c : 1;
  v.stride[2] = row_major ? 1 : r;
  v.element_size = elem;
  return v;
}

int main() {
  long long m, n, k, l;
  int ak, bn, elem, c_f32, allow_tf32, major, sms, peak, a_mis, b_bcast, x_kind, act;
  int family, sm90_config, sm80_config, splits, narrow, sm90_narrow, stream_k, act_offload, gated, l2_hint, row_sums;
  int autotune, row_sums_knob, gemv;
  while (std::cin >> m >> n >> k >> l >> ak >> bn >> elem >> c_f32 >> allow_tf32 >> major >> sms >> peak >> a_mis >>
         b_bcast >> x_kind >> act >> family >> sm90_config >> sm80_config >> splits >> narrow >> sm90_narrow >> stream_k >>
         act_offload >> gated >> l2_hint >> row_sums >> autotune >> row_sums_knob >> gemv) {
    Problem p;
    p.a = view(l, m, k, ak, elem, false);  // ak: A K-major (a row-major (M, K))
    p.a.addr = a_mis ? 2 : 0;
    p.b = view(l, k, n, bn, elem, b_bcast);  // bn: B N-major (b row-major (K, N))
    p.c = view(l, m, n, true, c_f32 ? 4 : elem, false);
    p.fp32 = elem == 4;
    p.c_f32 = c_f32;
    p.act = Activation(act);
    if (x_kind > 0) {  // 1 bias, 2 strided bias, 3 misaligned bias, 4 (M, N) rows, 5 (M, 1) column
      p.has_x = true;
      p.x = view(1, m, n, true, elem, false);
      if (x_kind <= 3) p.x.stride[1] = 0;
      if (x_kind == 2) p.x.stride[2] = 2;
      if (x_kind == 3) p.x.addr = 2;
      if (x_kind == 5) { p.x.stride[1] = 1; p.x.stride[2] = 0; }
    }
    if (gated) {  // gated_mm: B2 beside B, of B's layout (1: in a buffer of its own, 2: misaligned)
      p.gated = true;
      p.b2 = p.b;
      p.b2.addr = gated == 2 ? 4098 : 4096;
    }
    p.row_sums = row_sums;
    p.device.major = major;
    p.device.num_sms = sms;
    p.device.peak_hbm_gbs = peak;
    p.device.allow_tf32 = allow_tf32;
    Overrides o;
    o.family = Overrides::Family(family);
    o.sm90_config = sm90_config;
    o.sm80_config = sm80_config;
    o.splits = splits;
    o.narrow = narrow;
    o.sm90_narrow = sm90_narrow;
    o.stream_k = stream_k;
    o.act_offload = act_offload;
    o.l2_hint = l2_hint;
    o.autotune = autotune;
    o.row_sums = row_sums_knob;
    o.gemv = gemv;
    const Plan plan = plan_for(p, o);
    std::string s = describe(plan, p);
    for (char& ch : s) if (ch == '\n') ch = '|';
    std::printf("%serror=%s\n", s.c_str(), plan.error.c_str());
  }
}
"""

H200 = dict(major=9, sms=132, peak=4915)
DEFAULTS = dict(l=1, ak=1, bn=1, elem=2, c_f32=0, allow_tf32=0, **H200, a_mis=0, b_bcast=0, x_kind=0, act=0,
                family=0, sm90_config=-1, sm80_config=-1, splits=-1, narrow=-1, sm90_narrow=-1, stream_k=-1,
                act_offload=-1, gated=0, l2_hint=-1, row_sums=0, autotune=0, row_sums_knob=-1, gemv=-1)
FIELDS = ["m", "n", "k", *DEFAULTS]


@pytest.fixture(scope="module")
def plan_of(tmp_path_factory):
    """plan_of(m, n, k, **fields) -> the plan's fields as a dict; plans([...]) for many at once."""
    src = tmp_path_factory.mktemp("plan") / "plan_driver.cpp"
    src.write_text(DRIVER)
    exe = build(src, CSRC / "plan.cpp", CSRC / "gated_plan.cpp", CSRC / "gemv_plan.cpp", CSRC / "in_place.cpp", CSRC / "describe.cpp")

    def plans(cases):
        lines = []
        for m, n, k, fields in cases:
            row = {**DEFAULTS, **fields, "m": m, "n": n, "k": k}
            lines.append(" ".join(str(int(row[f])) for f in FIELDS))
        out = subprocess.run([str(exe)], input="\n".join(lines) + "\n", capture_output=True, text=True, check=True)
        return [dict(kv.split("=", 1) for kv in line.split("|")) for line in out.stdout.splitlines()]

    def one(m, n, k, **fields):
        return plans([(m, n, k, fields)])[0]

    one.many = plans
    return one


@needs_cxx
def test_rows_follow_the_rules_tables(plan_of):
    # Row-major a and b ("nn", as torch's a @ b), aligned, beside a bias so that M <= 32 is not swapped.
    shapes = [s for s in PICKS_FAST_HBM if s[0] > 32]
    got = plan_of.many([(m, n, k, {"x_kind": 4, "narrow": 0}) for m, n, k in shapes])
    assert len(shapes) > 30
    assert {s: (int(p["row"]), int(p["splits"])) for s, p in zip(shapes, got)} == {s: PICKS_FAST_HBM[s] for s in shapes}
    assert all(p["family"] == "sm90" and p["swapped"] == "false" and p["rule"] for p in got)


@needs_cxx
def test_b_rows_off_the_lines(plan_of):
    # Row 4's problems whose B rows (their pitch or base) are off the L2's 128-byte lines run row 9
    # (sm90::choose_config, b_lined); A's or C's pitch alone does not count.
    def row(m, n, k, **f):
        return plan_of(m, n, k, **f)["row"]

    assert row(1024, 1024, 1024) == "4"
    assert row(1000, 1000, 1000) == "9" and row(1000, 1000, 1000, bn=0) == "9" and row(1000, 1000, 1000, ak=0) == "9"
    assert row(1024, 1024, 1000) == "4" and row(1024, 1024, 1000, bn=0) == "9"  # nn: A off; nt: B off (pitch K)
    assert row(1024, 1000, 1024) == "9" and row(1024, 1000, 1024, bn=0) == "4"  # nn: B off; nt: C off only
    assert row(1100, 896, 1000, bn=0) == "1" and row(1100, 896, 1024, bn=0) == "4"  # nine tile rows: no pairs
    # One row of B has no pitch to straddle the lines (N = 1, K-major; K = 1, N-major).
    assert row(1000, 1, 1000, bn=0) == "4" and row(1000, 1000, 1) == "4"
    # B padded by a copy (rows of an odd count of elements, which TMA cannot read in place) keeps
    # row 4, whatever its padded pitch: the rule was measured on operands read in place.
    copied = plan_of(1000, 1000, 1001, bn=0, narrow=0)
    assert (copied["row"], copied["b"]) == ("4", "K-major, copied"), copied


@needs_cxx
def test_decode_rows_are_swapped(plan_of):
    # SWAP_PICKS_FAST_HBM is keyed by the kernel's view (N, M, K).
    cases = [(m, n, k, {}) for n, m, k in SWAP_PICKS_FAST_HBM]
    got = plan_of.many(cases)
    assert [p["swapped"] for p in got] == ["true"] * len(cases)
    assert {(n, m, k): (int(p["row"]), int(p["splits"])) for (m, n, k, _), p in zip(cases, got)} == SWAP_PICKS_FAST_HBM
    # A bias, or a batch of problems, keeps the unswapped path.
    assert plan_of(16, 4096, 4096, x_kind=1)["swapped"] == "false"
    assert plan_of(16, 4096, 4096, l=2)["swapped"] == "false"
    # An M-major A (x.t() @ w, the tn layout) is swapped too, read in place (the kernel's N-major B).
    tn = plan_of(16, 4096, 14336, ak=0)
    assert (tn["swapped"], tn["a"], tn["row"]) == ("true", "M-major, in place", "10"), tn


@needs_cxx
def test_routes(plan_of):
    assert plan_of(0, 64, 64)["route"] == "nothing"
    assert plan_of(64, 64, 0)["route"] == "torch"
    assert plan_of(256, 256, 256, elem=4)["route"] == "torch"  # float32 without TF32
    tf32 = plan_of(256, 256, 256, elem=4, allow_tf32=1)
    assert (tf32["route"], tf32["tf32"], tf32["row"]) == ("kernel", "true", "1")
    sm80 = plan_of(4096, 4096, 4096, major=8, sms=108, peak=2039)
    assert (sm80["family"], sm80["row"], sm80["fast_hbm"]) == ("sm80", "0", "false")
    assert plan_of(4096, 4096, 4096, sm90_config=3)["rule"].startswith("pinned")


@needs_cxx
def test_copies_and_c_target(plan_of):
    aligned = plan_of(4096, 4096, 4096)
    assert (aligned["a"], aligned["b"], aligned["c"], aligned["pdl"]) == ("K-major, in place", "N-major, in place",
                                                                          "in place", "true")
    mis = plan_of(4096, 4096, 4096, a_mis=1, narrow=0)
    assert mis["a"] == "K-major, copied" and mis["b"] == "N-major, in place"
    odd = plan_of(574, 574, 574, narrow=0)  # rows of 574 elements are not 16-byte vectors
    assert odd["a"].endswith("copied") and odd["b"].endswith("copied") and odd["c"] == "staged rows"
    assert plan_of(574, 574, 574, narrow=1)["family"] == "sm80 narrow"
    # Where the narrow rule takes them: the sm90 rows' narrow kernels on Hopper, the sm80 ones elsewhere.
    assert plan_of(574, 574, 574)["family"] == "sm90 narrow"
    assert plan_of(574, 574, 574, major=8, sms=108, peak=2039)["family"] == "sm80 narrow"
    for keeps_sm80 in (dict(sm90_narrow=0), dict(narrow=1), dict(sm80_config=1)):
        assert plan_of(574, 574, 574, **keeps_sm80)["family"] == "sm80 narrow", keeps_sm80
    assert plan_of(574, 574, 574, family=2)["family"] == "sm90"  # a forced family keeps the copies
    assert plan_of(2050, 2050, 2050, sm90_narrow=1)["family"] == "sm90 narrow"  # wherever they can run
    assert plan_of(1000, 1001, 1024, act=2)["c"] == "scratch, copied out"  # gelu: the activation warps' rows
    assert plan_of(1000, 1001, 1024, c_f32=1)["c"] == "in place"  # fp32 C: stored from registers


@needs_cxx
def test_x_and_fold(plan_of):
    assert plan_of(512, 512, 512, x_kind=1)["x"] == "in place"
    assert plan_of(512, 512, 512, x_kind=2)["x"] == "copied to one row"
    misaligned = plan_of(512, 512, 512, x_kind=3)
    assert misaligned["x"] == "copied to one row" and misaligned["pdl"] == "false"
    assert plan_of(512, 512, 512, x_kind=4)["x"] == "in place"
    assert plan_of(512, 512, 512, x_kind=5)["x"] == "copied to rows"
    folded = plan_of(512, 1024, 1024, l=8, b_bcast=1)
    assert (folded["folded_batches"], folded["batch"], folded["rows"]) == ("true", "1", "4096")
    assert plan_of(512, 1024, 1024, l=8)["folded_batches"] == "false"


@needs_cxx
def test_stream_k_tail_and_knob_errors(plan_of):
    # 4096x14336x4096 on the cluster row: 13.6 waves of cluster tiles, a tail where forced.
    assert int(plan_of(4096, 14336, 4096, stream_k=1)["stream_k_tiles"]) > 0
    assert plan_of(4096, 14336, 4096, stream_k=0)["stream_k_tiles"] == "0"
    assert plan_of(4096, 14336, 4096, splits=2)["stream_k_tiles"] == "0"  # split K has no tail
    # CUTE_GEMM_FAMILY=sm90 on an sm_80 GPU.
    assert plan_of(256, 256, 256, major=8, sms=108, family=2)["error"].startswith("CUTE_GEMM_FAMILY=sm90 needs")


@needs_cxx
def test_l2_hint(plan_of):
    """The TMA loads' L2 policy mode (CUTE_GEMM_L2_HINT): mode 1 by default on the sm90 family,
    gated_mm's kernel included, the knob's mode where it is set; the sm80 family has no TMA loads."""
    assert plan_of(1, 4096, 4096)["l2_hint"] == "1"
    assert plan_of(1, 4096, 4096, l2_hint=0)["l2_hint"] == "0"
    assert plan_of(1, 4096, 4096, l2_hint=2)["l2_hint"] == "2"
    assert plan_of(1, 14336, 4096, bn=0, gated=1, gemv=0)["l2_hint"] == "1"
    assert plan_of(1, 14336, 4096, bn=0, gated=1, gemv=0, l2_hint=2)["l2_hint"] == "2"
    assert plan_of(256, 256, 256, major=8, sms=108)["l2_hint"] == "0"
    assert plan_of(256, 256, 256, major=8, sms=108, l2_hint=1)["l2_hint"] == "0"


@needs_cxx
def test_epilogue_kernel(plan_of):
    """The sm90 kernel instantiation (sm90::choose_epilogue_kernel, which sm90/run.h launches by)."""
    assert plan_of(4096, 4096, 4096)["epilogue"] == "lean"  # a plain product
    assert plan_of(8192, 4096, 1024, x_kind=1)["epilogue"] == "lean"  # nn.Linear's bias
    assert plan_of(8192, 4096, 1024, x_kind=2)["epilogue"] == "lean"  # a strided bias, copied to one row
    assert plan_of(8192, 4096, 1024, x_kind=4)["epilogue"] == "general"  # an (M, N) input
    assert plan_of(8192, 4096, 1024, x_kind=5)["epilogue"] == "general"  # a column, copied to rows
    assert plan_of(8192, 4096, 1024, c_f32=1)["epilogue"] == "general"
    assert plan_of(574, 574, 576, narrow=0)["epilogue"] == "general"  # rows TMA cannot store (staged)
    assert plan_of(16, 4096, 4096)["epilogue"] == "general"  # the swapped rows: element stores of C^T
    assert plan_of(256, 256, 256, elem=4, allow_tf32=1)["epilogue"] == "general"
    # An activation: the activation warps on 128x256 tiles with two tiles or more per block.
    many = plan_of(8192, 8192, 1024, x_kind=1, act=2)
    assert int(many["row"]) in (0, 2) and many["epilogue"] == "activation warps", many
    assert plan_of(8192, 8192, 1024, x_kind=1, act=2, act_offload=0)["epilogue"] == "general"
    assert plan_of(8192, 8192, 1024, act=2, splits=2)["epilogue"] == "general"  # K slices: whole tiles only
    few = plan_of(1024, 1024, 1024, act=2)  # fewer tiles than two per block (or another row)
    assert few["epilogue"] == "general", few
    assert plan_of(1024, 1024, 1024)["epilogue"] == "lean"
    # The SM80 family has one kernel per row.
    assert plan_of(4096, 4096, 4096, major=8, sms=108, peak=2039)["epilogue"] == "general"


@needs_cxx
def test_gated_plan(plan_of):
    """gated_mm: the sm90 gated kernels on 128x256 tiles (128 columns of C each) in 2x1 clusters past
    one wave of them where the tile rows pair up, alone otherwise where they fill the GPU, else
    128x128 (K slices by the row's rule);
    M <= 64 on 64x128 tiles, whole; torch's path wherever the fused kernel cannot read or write in
    place."""
    # x (M, K) @ w.t(): B K-major (bn=0), as nn.GatedMLP's weights. 65 x 14336: 112 tiles of 128x256
    # on 132 SMs; 129 x 14336: 224 in two tile rows, a pair; 100 x 28672 and 300 x 14336: past one
    # wave, but one or three tile rows, which pairs would pad with tiles past M.
    for m, n, k, row, splits in [(4096, 14336, 4096, 2, 1), (2048, 14336, 4096, 2, 1), (129, 14336, 4096, 2, 1),
                                 (100, 28672, 4096, 0, 1), (300, 14336, 4096, 0, 1),
                                 (65, 14336, 4096, 0, 1), (256, 1024, 4096, 1, 4),
                                 (1, 14336, 4096, 4, 1), (64, 14336, 4096, 4, 1), (1, 28672, 8192, 4, 1),
                                 (16, 1024, 4096, 4, 1), (1, 8, 64, 4, 1)]:
        p = plan_of(m, n, k, bn=0, gated=1, gemv=0)  # (the decode GEMV takes M <= 4 by default)
        assert (p["route"], p["family"], p["row"], p["splits"], p["stream_k_tiles"], p["a"], p["b"]) == (
            "kernel", "sm90", str(row), str(splits), "0", "K-major, in place", "K-major, in place"), (m, n, k, p)
        assert p["rule"].startswith("gated")
    pinned = plan_of(1, 14336, 4096, bn=0, gated=1, sm90_config=1, splits=2)
    assert (pinned["row"], pinned["splits"], pinned["rule"]) == ("1", "2", "gated: pinned (CUTE_GEMM_SM90_CONFIG)")
    # A stream-K tail only where the knob forces it: 1 x 14336 on row 4 is 224 tiles of 64x128.
    assert plan_of(1, 14336, 4096, bn=0, gated=1, gemv=0)["stream_k_tiles"] == "0"
    assert int(plan_of(1, 14336, 4096, bn=0, gated=1, gemv=0, stream_k=1)["stream_k_tiles"]) > 0
    for fields, why in [(dict(bn=1), "operands"), (dict(a_mis=1), "operands"), (dict(gated=2), "operands"),
                        (dict(elem=4, allow_tf32=1), "float32"), (dict(major=8), "sm90 family")]:
        p = plan_of(256, 1024, 512, **{"bn": 0, "gated": 1, **fields})
        assert p["route"] == "torch" and p["rule"].startswith("gated: ") and why in p["rule"], (fields, p)
    assert plan_of(256, 1028, 512, bn=0, gated=1)["rule"].startswith("gated: C rows")
    assert plan_of(256, 1024, 0, bn=0, gated=1)["route"] == "torch"


@needs_cxx
def test_decode_gemv(plan_of):
    """The decode GEMV (gemv_plan.cpp, choose_gemv): x @ w.t() with at most 4 rows on sm_90, 16-bit, one
    problem, A's rows and B's columns (the weight's rows) K-contiguous and 16-byte aligned; gated_mm
    alike; CUTE_GEMM_GEMV=1 takes it wherever it can run (up to 8 rows, any GPU), 0 never, and a knob
    that pins a family, row or slice count keeps the tile kernels."""
    def family(m, n, k, **f):
        p = plan_of(m, n, k, **{"bn": 0, **f})
        return p.get("family"), p["rule"]

    for m in (1, 2, 3, 4):
        for n, k in ((4096, 4096), (6144, 4096), (4096, 14336), (7, 1), (1, 4104)):
            fam, rule = family(m, n, k)
            assert fam == "gemv" and "GEMV" in rule, (m, n, k, rule)
    assert family(1, 14336, 4096, gated=1)[0] == "gemv"
    assert family(1, 4096, 4096, x_kind=1)[0] == "gemv"  # a bias (any X: read element by element)
    assert family(1, 4096, 4096, c_f32=1)[0] == "gemv"
    assert family(5, 4096, 4096)[0] == "sm90"  # the rule's rows
    # Any weight: few long rows too (their K shared by several warps).
    assert family(1, 64, 1 << 20)[0] == "gemv" and family(4, 1023, 16392)[0] == "gemv"
    assert family(5, 4096, 4096, gemv=1)[0] == "gemv" and family(8, 4096, 4096, gemv=1)[0] == "gemv"
    assert family(9, 4096, 4096, gemv=1)[0] == "sm90"  # past the kernels' rows
    assert family(1, 4096, 4096, gemv=0)[0] == "sm90"
    assert family(1, 4096, 4096, major=8, sms=108, peak=2039)[0] == "sm80"  # measured on sm_90 only
    assert family(1, 4096, 4096, major=8, sms=108, peak=2039, gemv=1)[0] == "gemv"
    for pin in (dict(family=1), dict(family=2), dict(sm90_config=4), dict(sm80_config=1), dict(splits=2)):
        assert family(1, 4096, 4096, **pin)[0] != "gemv", pin
        assert family(1, 4096, 4096, gemv=1, **pin)[0] == "gemv", pin
    # What it cannot read: B N-major (x @ w), A or B off 16 bytes (an odd K of a contiguous weight),
    # float32, batches, a misaligned up weight.
    assert family(1, 4096, 4096, bn=1)[0] != "gemv"
    assert family(1, 4096, 4095)[0] != "gemv" and family(2, 4096, 4100, a_mis=1)[0] != "gemv"
    assert family(1, 4096, 4096, elem=4, allow_tf32=1)[0] != "gemv"
    assert family(1, 4096, 4096, l=2)[0] != "gemv"
    assert family(1, 14336, 4096, gated=2)[0] != "gemv"
    # M-major A with one row is a K-contiguous row; with two rows it is not.
    assert family(1, 4096, 4096, ak=0)[0] == "gemv" and family(2, 4096, 4096, ak=0)[0] != "gemv"

@needs_cxx
def test_row_sums_in_the_kernel_where_it_can(plan_of):
    # nn.Linear's weight and bias gradients (mm_row_sums): A = dY^T, M-major, read in place; the
    # lean kernel's row-sum form sums whole tiles of any row with a lean kernel, else torch sums
    # after the GEMM.
    def where(m, n, k, **f):
        p = plan_of(m, n, k, ak=0, row_sums=1, **f)
        return p["row_sums"], p["row"], p["splits"], p["stream_k_tiles"]

    assert where(4096, 1024, 8192) == ("kernel", "0", "1", "0")  # the MLP's weight: one wave of 128x256
    assert where(3072, 1024, 8192)[:2] == ("kernel", "12")       # the QKV weight: 192x128, one wave
    assert where(1024, 4096, 8192)[0] == "kernel"
    assert where(1024, 1024, 8192)[:3] == ("torch", "9", "2")    # K slices
    assert where(8192, 8192, 8192)[:2] == ("torch", "2")         # the 2x1 cluster tile, a stream-K tail
    assert where(8192, 8192, 8192, stream_k=0) == ("kernel", "2", "1", "0")  # ... without it
    assert where(4096, 1024, 8192, splits=2)[0] == "torch"       # pinned K slices
    assert where(4096, 1001, 8192)[0] == "torch"                 # C rows of 2002 bytes: the general kernel
    assert where(4096, 1024, 8192, autotune=1)[0] == "kernel"    # no autotune for such a call
    assert plan_of(4096, 1024, 8192, ak=0, row_sums=1, autotune=1)["autotune"] == "false"
    assert plan_of(1024, 1024, 8192, ak=0, row_sums=1, autotune=1)["autotune"] == "true"  # torch sums there
    assert plan_of(4096, 1024, 8192, ak=1, row_sums=1)["row_sums"] == "torch"  # a K-major A: no such kernel
    assert plan_of(4096, 1024, 8192, ak=0, row_sums=1, major=8)["row_sums"] == "torch"  # the sm80 family
    assert plan_of(16, 1024, 8192, ak=0, row_sums=1)["row_sums"] == "torch"  # the swapped decode path
    assert plan_of(64, 64, 0, ak=0, row_sums=1)["row_sums"] == "torch"  # K = 0: torch's route
    assert "row_sums" not in plan_of(4096, 1024, 8192, ak=0)  # only where asked
    assert where(4096, 1024, 8192, row_sums_knob=0)[0] == "torch"  # CUTE_GEMM_ROW_SUMS=0
