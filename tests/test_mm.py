"""GPU correctness of cute_gemm.mm against a float64 reference, over shapes, layouts and dtypes."""

import gc
import itertools
import re
from pathlib import Path

import pytest
import torch

import cute_gemm
from cute_gemm._build_paths import config_names
from kernel_kinds import kernel_names, sm90_kernel_kinds

CSRC = Path(__file__).resolve().parent.parent / "csrc"
FAMILIES = ["sm80", "sm90"]
CONFIGS = [(f, i, name) for f in FAMILIES for i, name in enumerate(config_names(CSRC / f / "configs.h"))]
pytestmark = pytest.mark.gpu

DTYPES = [torch.float16, torch.bfloat16]
# Bound on ||out - ref|| / ||ref||: rounding of the output to the dtype dominates (fp32 accumulate).
REL_BOUND = {torch.float16: 2e-3, torch.bfloat16: 1e-2}
# a: "n" = row-major (M, K), "t" = x.t() of a (K, M) tensor; b: "n" = row-major (K, N), "t" = w.t() of (N, K).
LAYOUTS = ["nn", "nt", "tn", "tt"]
SHAPES = [  # (M, N, K)
    (1, 1, 1),
    (7, 7, 7),
    (1, 4096, 8192),       # one row
    (4097, 1, 129),        # one column
    (127, 129, 127),
    (129, 127, 131),
    (574, 574, 574),
    (1000, 1000, 1000),
    (4097, 520, 33),
    (256, 384, 8192),      # long K
    (8192, 64, 72),        # tall-skinny
    (64, 8192, 56),        # short-wide
    (640, 1280, 1024),     # aligned, several tiles of each config
]


def make_operand(rows, cols, major, dtype):
    """A (rows, cols) operand: row-major ("n") or the transposed view of a (cols, rows) tensor ("t")."""
    if major == "n":
        return torch.randn(rows, cols, device="cuda").to(dtype)
    return torch.randn(cols, rows, device="cuda").to(dtype).t()


def use_family(monkeypatch, family):
    """Force a kernel family for this test (CUTE_GEMM_FAMILY); skip where the GPU lacks it."""
    if family == "sm90" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the sm90 family (TMA + WGMMA) needs an sm_90 GPU")
    monkeypatch.setenv("CUTE_GEMM_FAMILY", family)


def use_sm90_narrow(monkeypatch):
    """The sm90 family with CUTE_GEMM_SM90_NARROW=1: the sm90 rows' narrow kernels wherever they can run."""
    use_family(monkeypatch, "sm90")
    monkeypatch.setenv("CUTE_GEMM_SM90_NARROW", "1")


@pytest.fixture(params=FAMILIES)
def family(request, monkeypatch):
    use_family(monkeypatch, request.param)
    return request.param


def poisoned_mm(a, b):
    """Run mm into memory that was just filled with NaN, so an unwritten element shows up."""
    m, n = a.shape[0], b.shape[1]
    poison = torch.full((m, n), float("nan"), dtype=a.dtype, device=a.device)
    ptr = poison.data_ptr()
    del poison  # the caching allocator hands this block to mm's output
    out = cute_gemm.mm(a, b)
    if m * n > 0:
        assert out.data_ptr() == ptr, "poisoning did not reach the output allocation"
    return out


def rel_err(x, ref):
    return ((x.double() - ref).norm() / ref.norm().clamp_min(1e-30)).item()


def check(a, b):
    out = poisoned_mm(a, b)
    assert out.shape == (a.shape[0], b.shape[1]) and out.dtype == a.dtype and out.is_contiguous()
    ref = a.double() @ b.double()
    assert not out.isnan().any(), "unwritten (NaN-poisoned) or NaN output elements"
    err = rel_err(out, ref)
    err_torch = rel_err(torch.mm(a, b), ref)
    assert err <= REL_BOUND[a.dtype], (err, err_torch)
    # Same rounding budget as cuBLAS: an fp16 accumulator or a dropped k-block would blow this.
    assert err <= 2 * err_torch + 1e-5, (err, err_torch)
    return out


def allocations():
    """Device allocations requested so far (cached ones too): a call's padded copies and scratch
    buffers show as a difference."""
    return torch.cuda.memory_stats()["allocation.all.allocated"]


def check_reproducible(a, b):
    """check(a, b), and the same bits again and on another stream."""
    out = check(a, b)
    assert torch.equal(out, cute_gemm.mm(a, b))
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        again = cute_gemm.mm(a, b)
    side.synchronize()
    assert torch.equal(out, again)
    return out


@pytest.mark.parametrize("dtype", DTYPES, ids=["f16", "bf16"])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: "x".join(map(str, s)))
def test_mm_matches_reference(shape, layout, dtype, family):
    torch.manual_seed(hash((shape, layout, str(dtype))) % 2**31)
    m, n, k = shape
    a = make_operand(m, k, layout[0], dtype)
    b = make_operand(k, n, layout[1], dtype)
    out = check(a, b)
    # Deterministic: the same inputs give the same bits.
    assert torch.equal(out, cute_gemm.mm(a, b))


@pytest.mark.parametrize("family_config", CONFIGS, ids=[f"{f}-{name}" for f, _, name in CONFIGS])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_every_tile_config(family_config, layout, monkeypatch):
    family, index, _ = family_config
    use_family(monkeypatch, family)
    monkeypatch.setenv(f"CUTE_GEMM_{family.upper()}_CONFIG", str(index))
    # 2048x1024: more tiles than SMs for rows 3-6, so blocks store several tiles in turn (the
    # other rows: test_late_c_pair, test_row7_several_tiles).
    for (m, n, k), dtype in itertools.product([(300, 520, 200), (129, 257, 4104), (1024, 768, 512),
                                               (2048, 1024, 256)], DTYPES):
        check(make_operand(m, k, layout[0], dtype), make_operand(k, n, layout[1], dtype))


SPLIT_SHAPES = [(16, 4096, 1024), (300, 520, 2056), (129, 257, 4104)]


@pytest.mark.parametrize("config", [None, 2, 3, 7, 9],
                         ids=["auto-tile", "cluster-tile", "128x64-tile", "128x192-tile", "128x128-cluster-tile"])
@pytest.mark.parametrize("splits", [2, 3, 7])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_split_k(splits, config, layout, monkeypatch):
    """Split-K (sm90, CUTE_GEMM_SPLITS forces the slice count): right, and the same bits on every
    call and on another stream (the partials are summed in a fixed order, never raced)."""
    use_family(monkeypatch, "sm90")
    monkeypatch.setenv("CUTE_GEMM_SPLITS", str(splits))
    if config is not None:
        monkeypatch.setenv("CUTE_GEMM_SM90_CONFIG", str(config))
    for (m, n, k), dtype in itertools.product(SPLIT_SHAPES, DTYPES):
        # Fresh inputs first: with the arrival counters not zeroed, the workspace's stale partials
        # of the previous call would be summed in.
        check(make_operand(m, k, layout[0], dtype), make_operand(k, n, layout[1], dtype))
        check_reproducible(make_operand(m, k, layout[0], dtype), make_operand(k, n, layout[1], dtype))


def test_split_counters_of_streams_and_graphs(monkeypatch):
    """A split call's arrival counters: on the default stream, one buffer that every split launch
    leaves zeroed (launch.cpp, default_stream_counters); in a CUDA graph, the graph's
    (graph_counters); on other streams, the call's own. Split calls of other tile and slice counts
    and a stream-K tail, eagerly on the default stream and on a side stream at once, with a graph of
    the same calls (captured on the side stream) replayed on a third stream beside them: every
    result right and the same bits each round. A counter left nonzero sums its tile too early, or
    never (the NaN-poisoned output then shows it: every C here is written in place, N % 8 == 0)."""
    use_family(monkeypatch, "sm90")
    torch.manual_seed(13)
    dtype = torch.bfloat16
    # (M, N, K, CUTE_GEMM_SPLITS, CUTE_GEMM_STREAM_K)
    calls = [(300, 520, 2056, "3", "0"), (129, 264, 4104, "2", "0"), (16, 4096, 1024, "7", "0"),
             (2176, 2176, 2048, "1", "1"), (300, 520, 2056, "2", "0")]
    operands = [(make_operand(m, k, "n", dtype), make_operand(k, n, "t", dtype)) for m, n, k, _, _ in calls]

    def knobs(splits, stream_k):
        monkeypatch.setenv("CUTE_GEMM_SPLITS", splits)
        monkeypatch.setenv("CUTE_GEMM_STREAM_K", stream_k)

    for (a, b), (_, _, _, splits, stream_k) in zip(operands, calls):
        knobs(splits, stream_k)
        plan = cute_gemm.explain(a, b)
        assert int(plan["splits"]) > 1 or int(plan["stream_k_tiles"]) > 0, plan
        assert plan["c"] == "in place", plan

    def run_all():
        outs = []
        for (a, b), (_, _, _, splits, stream_k) in zip(operands, calls):
            knobs(splits, stream_k)
            out = torch.full((a.shape[0], b.shape[1]), float("nan"), device="cuda", dtype=dtype)
            outs.append(cute_gemm.mm(a, b, out=out))
        return outs

    first = run_all()
    for out, (a, b) in zip(first, operands):
        assert not out.isnan().any() and rel_err(out, a.double() @ b.double()) <= REL_BOUND[dtype]
    side, third = torch.cuda.Stream(), torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up outside the graph
        run_all()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=side):
        graph_outs = run_all()
    torch.cuda.synchronize()
    for _ in range(3):
        third.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(third):
            graph.replay()
        with torch.cuda.stream(side):
            on_side = run_all()
        eager = run_all()
        eager_again = run_all()
        torch.cuda.synchronize()
        for outs in (eager, graph_outs, on_side, eager_again):
            for out, want in zip(outs, first):
                assert torch.equal(out, want)


def test_split_counters_of_graphs_replayed_and_remade(monkeypatch):
    """A split call captured into a CUDA graph counts its tiles' pieces in counters that its graph
    owns (launch.cpp, graph_counters): zero when handed out, left zeroed by every replay, put back
    for later captures when the graph is destroyed; the replay runs no zeroing kernel. Two graphs
    of the same split calls, replayed at once on two streams many times, then destroyed and
    captured again (on the slices the first graphs gave back, where CUDA has run their destructors
    by then): every result the eager call's bits. A counter left nonzero, or shared by the two
    graphs, sums a tile early or never (the output's NaN poison then shows it)."""
    use_family(monkeypatch, "sm90")
    torch.manual_seed(14)
    dtype = torch.bfloat16
    # (M, N, K, CUTE_GEMM_SPLITS, CUTE_GEMM_STREAM_K)
    calls = [(300, 520, 2056, "3", "0"), (16, 4096, 1024, "7", "0"), (2176, 2176, 2048, "1", "1")]
    operands = [(make_operand(m, k, "n", dtype), make_operand(k, n, "t", dtype)) for m, n, k, _, _ in calls]

    def pinned():  # each call's operands, with its slice count and stream-K knob set
        for (a, b), (_, _, _, splits, stream_k) in zip(operands, calls):
            monkeypatch.setenv("CUTE_GEMM_SPLITS", splits)
            monkeypatch.setenv("CUTE_GEMM_STREAM_K", stream_k)
            yield a, b

    def run_all():
        outs = []
        for a, b in pinned():
            out = torch.full((a.shape[0], b.shape[1]), float("nan"), device="cuda", dtype=dtype)
            outs.append(cute_gemm.mm(a, b, out=out))
        return outs

    for a, b in pinned():
        plan = cute_gemm.explain(a, b)
        assert int(plan["splits"]) > 1 or int(plan["stream_k_tiles"]) > 0, plan
    want = run_all()
    for out, (a, b) in zip(want, operands):
        assert not out.isnan().any() and rel_err(out, a.double() @ b.double()) <= REL_BOUND[dtype]
    streams = [torch.cuda.Stream(), torch.cuda.Stream()]
    with torch.cuda.stream(streams[0]):  # eagerly on another stream: counters zeroed per call
        assert sum("zero_counters" in name for name in kernel_names(run_all)) == len(calls)
    for _ in range(3):
        graphs, graph_outs = [], []
        for stream in streams:
            stream.wait_stream(torch.cuda.current_stream())
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, stream=stream):
                graph_outs.append(run_all())
            graphs.append(graph)
        torch.cuda.synchronize()
        replayed = kernel_names(graphs[0].replay)  # the fills and the GEMMs, no zeroing kernel
        assert sum("zero_counters" in name for name in replayed) == 0, replayed
        assert sum("gemm_kernel" in name for name in replayed) == len(calls), replayed
        for _ in range(5):
            for graph, stream in zip(graphs, streams):
                stream.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(stream):
                    graph.replay()
            for stream in streams:
                torch.cuda.current_stream().wait_stream(stream)
            for outs in graph_outs:
                for out, expected in zip(outs, want):
                    assert torch.equal(out, expected)
        del graphs, graph_outs, graph
        gc.collect()
        torch.cuda.synchronize()


@pytest.mark.parametrize("row", [8, 12])
def test_three_consumer_rows_run_whole_tiles(row, monkeypatch):
    """Rows 8 (192x192) and 12 (192x128), three consumer warpgroups, run whole tiles only: a forced
    K slice count or stream-K tail leaves the result bit for bit that of the plain call (gemm.cpp,
    whole_tiles_only)."""
    use_family(monkeypatch, "sm90")
    monkeypatch.setenv("CUTE_GEMM_SM90_CONFIG", str(row))
    for (m, n, k), dtype in itertools.product([(300, 520, 2056), (2100, 2200, 1000)], DTYPES):
        a, b = make_operand(m, k, "n", dtype), make_operand(k, n, "n", dtype)
        plain = check(a, b)
        for knob, value in (("CUTE_GEMM_SPLITS", "3"), ("CUTE_GEMM_STREAM_K", "1")):
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv(knob, value)
                assert torch.equal(cute_gemm.mm(a, b), plain), (m, n, k, knob)


# The L2 policies of the sm90 TMA loads (sm90::l2_policies, CUTE_GEMM_L2_HINT) are hints: every
# mode gives the same bits. One problem per case the rule tells apart: the swapped decode path (its
# A, the weight, read once), a decode row (B read once), one row of tiles (B), a cluster pair of
# tile rows (B, multicast), a batch with a broadcast B (read by every batch), and many tiles each
# way (no hint).
L2_CASES = [(1, 2048, 1024, 1), (48, 1024, 2048, 1), (128, 2048, 1024, 1), (256, 7168, 2048, 1),
            (40, 512, 1024, 3), (1024, 1024, 512, 1)]


@pytest.mark.parametrize("m, n, k, batch", L2_CASES, ids=[f"{m}x{n}x{k}x{b}" for m, n, k, b in L2_CASES])
def test_l2_policies_keep_the_bits(m, n, k, batch, monkeypatch):
    use_family(monkeypatch, "sm90")
    torch.manual_seed(5)
    # (batches interleaved by rows, so that they are not folded into one problem of batch * m rows)
    a = torch.randn(m, batch, k, device="cuda").to(torch.bfloat16).transpose(0, 1)
    w = torch.randn(n, k, device="cuda").to(torch.bfloat16)  # x @ w.t(), as a Linear: B K-major

    def run(mode):
        monkeypatch.setenv("CUTE_GEMM_L2_HINT", mode)
        out = torch.full((batch, m, n), float("nan"), device="cuda", dtype=torch.bfloat16)
        return cute_gemm.bmm(a, w.t().expand(batch, k, n), out=out) if batch > 1 else cute_gemm.mm(a[0], w.t(), out=out[0])

    want = run("0")
    assert rel_err(want.double(), a.double() @ w.double().t()) <= REL_BOUND[torch.bfloat16]
    for mode in ("1", "2"):
        assert torch.equal(run(mode), want), mode


# Programmatic dependent launch (sm90, on unless CUTE_GEMM_PDL=0): each call of this chain reads
# the previous call's output (a read after a write) and overwrites the input the previous call read
# (a write after a read), and consecutive calls run other rows: few blocks (row 0 makes 32 here)
# before many (row 5: 256 tiles), whose blocks start on the idle SMs while the first kernel runs
# and must wait for it; two split calls in a row (the second's counter-zeroing kernel may reuse
# the first's workspace while that GEMM still counts in it); the cluster tile.
PDL_CHAIN = [None, "0", "5", "2", "3/3", "1/2", "4", "0", "1", None]  # "row" or "row/K slices", None: the chooser


@pytest.mark.parametrize("n", [1024, 1030], ids=["aligned", "unaligned"])
@pytest.mark.parametrize("graph", [False, True], ids=["eager", "graph"])
def test_back_to_back_calls_with_pdl(graph, n, monkeypatch):
    """The chain run back to back with PDL, eagerly or replayed from a CUDA graph, gives the bits of
    the same calls run one at a time (synchronized) without it, and those match a float64 chain.
    n = 1030: every call copies both operands (rows of 1030 elements: the row copy kernel, which
    reads the previous call's output) and the GEMM follows the copies with PDL; its C rows are
    written from the staging (GemmParams::c_staged)."""
    use_family(monkeypatch, "sm90")
    torch.manual_seed(11)
    dtype = torch.float16
    x0 = torch.randn(n, n, device="cuda").to(dtype)
    ws = [(torch.randn(n, n, device="cuda") / n**0.5).to(dtype) for _ in PDL_CHAIN]
    bufs = [torch.empty(n, n, device="cuda", dtype=dtype) for _ in range(2)]

    def chain(sync):
        src = x0
        for i, (w, step) in enumerate(zip(ws, PDL_CHAIN)):
            row, _, splits = (step or "").partition("/")
            for var, value in (("CUTE_GEMM_SM90_CONFIG", row), ("CUTE_GEMM_SPLITS", splits)):
                if value:
                    monkeypatch.setenv(var, value)
                else:
                    monkeypatch.delenv(var, raising=False)
            cute_gemm.mm(src, w, out=bufs[i % 2])
            if sync:
                torch.cuda.synchronize()
            src = bufs[i % 2]
        return src

    def poison():
        for buf in bufs:
            buf.fill_(float("nan"))

    monkeypatch.setenv("CUTE_GEMM_PDL", "0")
    poison()
    want = chain(sync=True).clone()
    ref = x0.double()
    for w in ws:
        ref = ref @ w.double()
    assert not want.isnan().any() and rel_err(want, ref) <= 4 * REL_BOUND[dtype]

    monkeypatch.setenv("CUTE_GEMM_PDL", "1")
    if graph:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the graph
            chain(sync=False)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            got = chain(sync=False)
        for _ in range(2):
            poison()
            g.replay()
            torch.cuda.synchronize()
            assert torch.equal(got, want)
    else:
        for _ in range(3):
            poison()
            # The GPU busy for ~30 ms first, so that the chain's kernels queue up behind it and run
            # back to back (launched one by one from here, each would find the GPU idle).
            torch.cuda._sleep(50_000_000)
            got = chain(sync=False)
            torch.cuda.synchronize()
            assert torch.equal(got, want)


# (config row, M, N, K): more tiles than one wave of 132 SMs (the H100), so the forced stream-K
# tail (CUTE_GEMM_STREAM_K=1; the default rule would not take it on these small problems, and it
# runs the same kernel path) applies: remainders under half a wave (a full wave joins the tail,
# each tile in at most two pieces), over half a wave (pieces of about half a tile: up to three per
# tile), the cluster tile, and K not a whole number of k-tiles.
STREAM_K_CASES = [(3, 1100, 2100, 1000), (3, 1100, 2560, 1500), (0, 2100, 2200, 1000), (2, 2100, 4400, 720),
                  (1, 1300, 2000, 777), (7, 2100, 3100, 900)]


@pytest.mark.parametrize("case", STREAM_K_CASES, ids=lambda c: "row{}-{}x{}x{}".format(*c))
@pytest.mark.parametrize("layout", LAYOUTS)
def test_stream_k(case, layout, monkeypatch):
    """The stream-K tail (sm90, CUTE_GEMM_STREAM_K=1): right, the same bits on every call and on
    another stream, and a different summation from the whole-tile kernel (CUTE_GEMM_STREAM_K=0), so
    the path really ran."""
    use_family(monkeypatch, "sm90")
    monkeypatch.setenv("CUTE_GEMM_STREAM_K", "1")
    row, m, n, k = case
    monkeypatch.setenv("CUTE_GEMM_SM90_CONFIG", str(row))
    for dtype in DTYPES:
        a, b = make_operand(m, k, layout[0], dtype), make_operand(k, n, layout[1], dtype)
        check_reproducible(a, b)
    out32 = cute_gemm.mm(a, b, out_dtype=torch.float32)
    assert rel_err(out32, a.double() @ b.double()) <= 1e-4
    monkeypatch.setenv("CUTE_GEMM_STREAM_K", "0")
    whole = cute_gemm.mm(a, b, out_dtype=torch.float32)
    assert rel_err(whole, a.double() @ b.double()) <= 1e-4
    if torch.cuda.get_device_properties(0).multi_processor_count == 132:
        assert not torch.equal(out32, whole), "the stream-K tail did not run"


# (config row or None for the chooser, M, N, K, stream-K): 128x256 tiles with several units per
# block, so that a tile's first two C chunks are stored under the next unit's main loop (the late
# C pair): short K (fewer k-tiles than store events), edges in M and N, the cluster tile, the
# stream-K tail. Every case has more tiles than a 132-SM GPU has blocks, so blocks store several
# tiles in turn. (N a multiple of 8: C rows that TMA stores; staged rows are never deferred.)
LATE_C_CASES = [(0, 2000, 2312, 64), (0, 1800, 2600, 1000), (2, 4100, 4104, 300), (None, 2500, 4000, 4100),
                (2, 2100, 4400, 720, "sk")]


@pytest.mark.parametrize("case", LATE_C_CASES, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("layout", ["nn", "tt"])
def test_late_c_pair(case, layout, monkeypatch):
    """The late C pair (a 128x256 tile's first two C chunks fenced and TMA-stored under the next
    unit's main loop) writes every element (NaN-poisoned outputs against float64), plain and with
    a bias and relu in the consumers' epilogue; and the first tiles hold the bits of the same
    product computed alone, four tiles on as many blocks, where no tile is deferred."""
    use_family(monkeypatch, "sm90")
    monkeypatch.setenv("CUTE_GEMM_ACT_OFFLOAD", "0")
    row, m, n, k, *sk = case
    if row is not None:
        monkeypatch.setenv("CUTE_GEMM_SM90_CONFIG", str(row))
    monkeypatch.setenv("CUTE_GEMM_STREAM_K", "1" if sk else "0")
    for dtype in DTYPES:
        a, b = make_operand(m, k, layout[0], dtype), make_operand(k, n, layout[1], dtype)
        bias = torch.randn(n, device="cuda").to(dtype)
        whole = check(a, b)
        z = a.double() @ b.double() + bias.double()
        relu = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
        cute_gemm.addmm(bias, a, b, activation="relu", out=relu)
        assert not relu.isnan().any() and rel_err(relu, z.clamp_min(0)) <= REL_BOUND[dtype]
        corner = (slice(0, 256), slice(0, 512))  # the chooser's pick may differ there: the row is pinned
        if row is not None:
            assert torch.equal(whole[corner], cute_gemm.mm(a[corner[0]], b[:, corner[1]]))
            assert torch.equal(relu[corner], cute_gemm.addmm(bias[corner[1]], a[corner[0]], b[:, corner[1]],
                                                             activation="relu"))


# (config row, M, N, K, K slices: 1, 3 or "sk" for the stream-K tail): every row with a lean
# kernel, edges in M and N, several tiles per block, split-K and stream-K sums.
# (N a multiple of 8: rows TMA can store, the lean kernel's C.)
LEAN_CASES = [(0, 2000, 2304, 200, 1), (1, 1500, 2104, 520, 1), (2, 4100, 4104, 300, 1), (3, 700, 904, 1000, 3),
              (4, 300, 1000, 72, 1), (5, 130, 520, 4100, 3), (7, 2100, 3104, 300, 1), (8, 2000, 1904, 640, 1),
              (9, 1300, 1400, 2000, 3), (12, 1900, 2104, 640, 1), (2, 2100, 4400, 720, "sk"), (0, 1000, 1000, 2504, "sk")]


@pytest.mark.parametrize("case", LEAN_CASES, ids=lambda c: "-".join(map(str, c)))
@pytest.mark.parametrize("layout", ["nt", "tn"])
def test_lean_kernel_gives_the_general_kernels_bits(case, layout, monkeypatch):
    """The lean sm90 kernel (no general X, activation or staged rows in its code) runs the plain
    product, a 16-bit bias and alpha / beta scaling, and gives the bits of the general kernel, which
    runs the same terms given as an (M, N) input (zeros, the bias's rows), on NaN-poisoned outputs;
    a C input, an activation and fp32 C take the general kernel."""
    use_family(monkeypatch, "sm90")
    row, m, n, k, slices = case
    monkeypatch.setenv("CUTE_GEMM_SM90_CONFIG", str(row))
    monkeypatch.setenv("CUTE_GEMM_STREAM_K", "1" if slices == "sk" else "0")
    if slices != "sk":
        monkeypatch.setenv("CUTE_GEMM_SPLITS", str(slices))
    for dtype in DTYPES:
        a, b = make_operand(m, k, layout[0], dtype), make_operand(k, n, layout[1], dtype)
        bias = torch.randn(n, device="cuda").to(dtype)
        ref = a.double() @ b.double()

        def calls(zeros, terms):  # terms: the bias as a row (the lean kernel's) or as (M, N) rows
            outs = [torch.full((m, n), float("nan"), device="cuda", dtype=dtype) for _ in range(3)]
            if zeros is None:
                cute_gemm.mm(a, b, out=outs[0])
            else:
                cute_gemm.addmm(zeros, a, b, out=outs[0])
            cute_gemm.addmm(terms, a, b, out=outs[1])
            cute_gemm.addmm(terms, a, b, beta=0.5, alpha=2.0, out=outs[2])
            return outs

        got = {}
        rows = bias.expand(m, n).contiguous()
        for kind, args in (("lean", (None, bias)), ("general", (torch.zeros(m, n, device="cuda", dtype=dtype), rows))):
            holder = []
            assert sm90_kernel_kinds(lambda: holder.append(calls(*args))) == {kind}
            got[kind] = holder[0]
        for x, y in zip(got["lean"], got["general"]):
            assert not x.isnan().any() and torch.equal(x, y)
        refs = [ref, ref + bias.double(), 2.0 * ref + 0.5 * bias.double()]
        for out, r in zip(got["lean"], refs):
            assert rel_err(out, r) <= REL_BOUND[dtype]
        # Forms the lean kernel leaves out: the general kernel runs them.
        c_in = torch.randn(m, n, device="cuda").to(dtype)
        assert sm90_kernel_kinds(lambda: cute_gemm.addmm(c_in, a, b)) == {"general"}
        assert sm90_kernel_kinds(lambda: cute_gemm.mm(a, b, out_dtype=torch.float32)) == {"general"}
        if slices == 1:  # (an activation takes whole tiles: no K slices)
            assert sm90_kernel_kinds(lambda: cute_gemm.addmm(bias, a, b, activation="relu")) <= {"general", "offload"}


# explain's epilogue names against sm90_kernel_kinds' names of the instantiation that ran.
EPILOGUE_KINDS = {"lean": "lean", "activation warps": "offload", "general": "general"}
# (M, N, K, layout, with a bias): the chooser's rows 2, 0, 12, 9 and 5, a swapped decode row, row 4
# (1024^3) and row 9 again where B's rows are off the 128-byte lines (1000^3).
EXPLAIN_CASES = [(4096, 4096, 4096, "nt", False), (8192, 4096, 1024, "nt", True), (2048, 2048, 2048, "nn", False),
                 (3072, 1024, 8192, "tn", False), (512, 1024, 8192, "nn", False), (64, 8192, 8192, "nt", True),
                 (16, 4096, 4096, "nn", False), (1024, 1024, 1024, "nt", False), (1000, 1000, 1000, "nn", False)]


@pytest.mark.parametrize("case", EXPLAIN_CASES, ids=lambda c: "-".join(map(str, c)))
def test_explain_names_the_kernel_that_runs(case, monkeypatch):
    """cute_gemm.explain() launches nothing, allocates nothing, and names the sm90 row that the
    call then runs (kernel names, sm90_rows_run below); the copies it lists are the call's
    allocations."""
    use_family(monkeypatch, "sm90")
    m, n, k, layout, with_bias = case
    a, b = make_operand(m, k, layout[0], torch.bfloat16), make_operand(k, n, layout[1], torch.bfloat16)
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    args = (a, b, bias) if with_bias else (a, b)
    before = allocations()
    plan = {}
    assert sm90_rows_run(lambda: plan.update(cute_gemm.explain(*args))) == set()
    assert allocations() == before
    assert plan["route"] == "kernel" and plan["family"] == "sm90" and plan["rule"], plan
    # (M <= 32 without a bias is swapped in the product build, test_plan.py and
    # test_swapped_decode_path check it; a development build without the swapped layout's kernels
    # runs it unswapped.)
    assert plan["swapped"] == (plan["row"] in SWAP_ROWS)
    run = (lambda: cute_gemm.addmm(bias, a, b)) if with_bias else (lambda: cute_gemm.mm(a, b))
    assert sm90_rows_run(run) == {plan["row"]}, str(plan)
    assert sm90_kernel_kinds(run) == {EPILOGUE_KINDS[plan["epilogue"]]}, str(plan)
    copies = plan["a"].endswith("copied") + plan["b"].endswith("copied")
    before = allocations()
    run()
    # The output, the copies, a split-K or stream-K workspace.
    assert allocations() - before == 1 + copies + (plan["splits"] > 1 or plan["stream_k_tiles"] > 0), str(plan)
    # bmm, and a CUTE_GEMM_* knob, as the call sees them.
    monkeypatch.setenv("CUTE_GEMM_SM90_CONFIG", "1")
    assert cute_gemm.explain(a, b)["row"] == 1
    assert cute_gemm.explain(a.unsqueeze(0), b.unsqueeze(0))["row"] == 1


def test_explain_names_the_epilogue_kernel(monkeypatch):
    """explain's epilogue is the sm90 kernel instantiation that runs (sm90::choose_epilogue_kernel):
    the activation warps for an activation on many 128x256 tiles, the lean kernel for a bias alone,
    the general kernel for an (M, N) input."""
    use_family(monkeypatch, "sm90")
    a, b = make_operand(8192, 1024, "n", torch.bfloat16), make_operand(1024, 8192, "t", torch.bfloat16)
    bias = torch.randn(8192, device="cuda").to(torch.bfloat16)
    c_in = torch.randn(8192, 8192, device="cuda").to(torch.bfloat16)
    cases = [((bias, a, b), {"activation": "gelu"}), ((bias, a, b), {}), ((c_in, a, b), {})]
    plans = [cute_gemm.explain(a, b, x, **kw) for (x, _, _), kw in cases]
    assert [p["epilogue"] for p in plans] == ["activation warps", "lean", "general"]
    for (args, kw), plan in zip(cases, plans):
        assert sm90_kernel_kinds(lambda: cute_gemm.addmm(*args, **kw)) == {EPILOGUE_KINDS[plan["epilogue"]]}, str(plan)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_row7_several_tiles(layout, monkeypatch):
    """Row 7 (128x192 tiles: six 32-column C chunks, all stored under the next unit's main loop)
    with more tiles than a 132-SM GPU has blocks: NaN-poisoned outputs fully written and right,
    plain and with a 16-bit bias and an activation (the bias pairs of 32-column chunks)."""
    use_family(monkeypatch, "sm90")
    monkeypatch.setenv("CUTE_GEMM_SM90_CONFIG", "7")
    for (m, n, k), dtype in itertools.product([(2100, 3100, 300), (1500, 2504, 64)], DTYPES):
        a, b = make_operand(m, k, layout[0], dtype), make_operand(k, n, layout[1], dtype)
        check(a, b)
        bias = torch.randn(n, device="cuda").to(dtype)
        out = torch.full((m, n), float("nan"), device="cuda", dtype=dtype)
        cute_gemm.addmm(bias, a, b, activation="relu", out=out)
        ref = torch.relu(a.double() @ b.double() + bias.double())
        assert not out.isnan().any() and rel_err(out, ref) <= REL_BOUND[dtype]


def check_bias_gelu(m, n, k):
    """addmm(bias, a, b, activation="gelu") in bf16 against float64; returns a, b, bias, a @ b + bias."""
    a = make_operand(m, k, "n", torch.bfloat16)
    b = make_operand(k, n, "t", torch.bfloat16)
    bias = torch.randn(n, device="cuda").to(torch.bfloat16)
    z = a.double() @ b.double() + bias.double()
    out = cute_gemm.addmm(bias, a, b, activation="gelu")
    assert rel_err(out, torch.nn.functional.gelu(z)) <= REL_BOUND[torch.bfloat16]
    return a, b, bias, z


def test_stream_k_epilogue_and_batches(monkeypatch):
    """A stream-K tile's last piece runs the whole epilogue (bias, activation, fp32 out), and the
    tail spans the batches of a bmm."""
    use_family(monkeypatch, "sm90")
    monkeypatch.setenv("CUTE_GEMM_STREAM_K", "1")
    monkeypatch.setenv("CUTE_GEMM_SM90_CONFIG", "3")
    m, n, k = 1100, 2560, 1500
    a, b, bias, z = check_bias_gelu(m, n, k)
    c = torch.randn(m, n, device="cuda")
    outc = cute_gemm.addmm(c.to(torch.bfloat16), a, b, beta=0.5, alpha=2.0)
    assert rel_err(outc, 2.0 * (a.double() @ b.double()) + 0.5 * c.to(torch.bfloat16).double()) <= 1e-2
    out32 = cute_gemm.addmm(bias, a, b, activation="relu", out_dtype=torch.float32)
    assert rel_err(out32, torch.relu(z)) <= 1e-4
    monkeypatch.setenv("CUTE_GEMM_STREAM_K", "0")
    whole = cute_gemm.addmm(bias, a, b, activation="relu", out_dtype=torch.float32)
    if torch.cuda.get_device_properties(0).multi_processor_count == 132:
        assert not torch.equal(out32, whole), "the stream-K tail did not run"
    monkeypatch.setenv("CUTE_GEMM_STREAM_K", "1")
    a3 = torch.randn(3, 600, 1600, device="cuda").to(torch.float16)  # 240 tiles, 108 of them the tail
    b3 = torch.randn(3, 1600, 1000, device="cuda").to(torch.float16)
    got = cute_gemm.bmm(a3, b3)
    assert rel_err(got, a3.double() @ b3.double()) <= REL_BOUND[torch.float16]
    assert torch.equal(got, cute_gemm.bmm(a3, b3))


@pytest.mark.parametrize("splits", [1, 4])
def test_split_k_epilogue(splits, monkeypatch):
    """The finisher of a split tile runs the whole epilogue: bias, activation, fp32 out."""
    use_family(monkeypatch, "sm90")
    monkeypatch.setenv("CUTE_GEMM_SPLITS", str(splits))
    m, n, k = 200, 300, 4096
    a, b, _, _ = check_bias_gelu(m, n, k)
    # N a multiple of 8: the TMA-store epilogue, in fp16.
    a16, b16 = make_operand(m, k, "n", torch.float16), make_operand(k, 256, "t", torch.float16)
    bias16 = torch.randn(256, device="cuda").to(torch.float16)
    z16 = a16.double() @ b16.double() + bias16.double()
    out16 = cute_gemm.addmm(bias16, a16, b16, activation="silu")
    assert rel_err(out16, torch.nn.functional.silu(z16)) <= REL_BOUND[torch.float16]
    out32 = cute_gemm.mm(a, b, out_dtype=torch.float32)
    assert out32.dtype == torch.float32 and rel_err(out32, a.double() @ b.double()) <= 1e-4
    # TF32 (float32 inputs under allow_tf32) runs the same kernel with its own K tile.
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", True)
    af, bf = a.float(), b.float()
    tf = cute_gemm.mm(af, bf)
    assert tf.dtype == torch.float32 and rel_err(tf, af.double() @ bf.double()) <= 5e-3
    assert torch.equal(tf, cute_gemm.mm(af, bf))


@pytest.mark.parametrize("shape", [(256, 1024, 8192), (300, 520, 8192), (512, 1024, 8192)],
                         ids=lambda s: "x".join(map(str, s)))
def test_split_k_chosen_for_few_tiles(shape, monkeypatch):
    """Few-tile shapes that the chooser splits: right and bitwise reproducible."""
    use_family(monkeypatch, "sm90")
    m, n, k = shape
    a = make_operand(m, k, "n", torch.bfloat16)
    b = make_operand(k, n, "t", torch.bfloat16)
    out = check(a, b)
    assert all(torch.equal(out, cute_gemm.mm(a, b)) for _ in range(3))


DECODE_SHAPES = [(1, 4096, 4096), (7, 574, 129), (16, 4097, 1000), (33, 1030, 4104), (64, 8192, 56),
                 (64, 127, 7), (2, 70000, 64), (5, 6, 1)]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_decode_rows(layout, family):
    """M <= 64 rows (decode shapes): into fresh, strided (column-major, offset) and fp32 outputs,
    forced into split-K, with the epilogue's scaling and activation, with a bias, batched."""
    for (m, n, k), dtype in itertools.product(DECODE_SHAPES, DTYPES):
        a, b = make_operand(m, k, layout[0], dtype), make_operand(k, n, layout[1], dtype)
        out = check(a, b)
        assert torch.equal(out, cute_gemm.mm(a, b))
        ref = a.double() @ b.double()
        buf = torch.full((n + 1, m + 2), float("nan"), dtype=dtype, device="cuda")
        view = buf[1:, 1:m + 1].t()  # column-major (M, N) with an offset
        cute_gemm.mm(a, b, out=view)
        assert rel_err(view, ref) <= REL_BOUND[dtype]
        assert buf[0].isnan().all() and buf[:, 0].isnan().all() and buf[:, m + 1:].isnan().all()
        out32 = cute_gemm.mm(a, b, out_dtype=torch.float32)
        assert out32.dtype == torch.float32 and rel_err(out32, ref) <= 1e-4
        got = cute_gemm.addmm(torch.randn(m, n, device="cuda").to(dtype), a, b, beta=0, alpha=0.5, activation="silu")
        assert rel_err(got, torch.nn.functional.silu(0.5 * ref)) <= REL_BOUND[dtype]
        bias = torch.randn(n, device="cuda").to(dtype)
        got = cute_gemm.addmm(bias, a, b, activation="gelu_tanh")
        assert rel_err(got, torch.nn.functional.gelu(ref + bias.double(), approximate="tanh")) <= REL_BOUND[dtype]
        if k >= 129 and family == "sm90":
            with pytest.MonkeyPatch.context() as mp:
                mp.setenv("CUTE_GEMM_SPLITS", "3")
                split = check(a, b)
                assert torch.equal(split, cute_gemm.mm(a, b))
    a3 = make_operand(3 * 16, 520, layout[0], torch.bfloat16).reshape(3, 16, 520)
    b3 = torch.randn(3, 1000, 520, device="cuda").to(torch.bfloat16).transpose(1, 2)
    got = cute_gemm.bmm(a3, b3)
    assert rel_err(got, a3.double() @ b3.double()) <= REL_BOUND[torch.bfloat16]


@pytest.mark.parametrize("var, value, pattern", [
    ("CUTE_GEMM_SM80_CONFIG", "99", r"CUTE_GEMM_SM80_CONFIG must be an integer in \[0, "),
    ("CUTE_GEMM_FAMILY", "sm70", r"CUTE_GEMM_FAMILY must be auto, sm80 or sm90, got 'sm70'"),
    ("CUTE_GEMM_SPLITS", "0", r"CUTE_GEMM_SPLITS must be an integer in \[1, 64\]"),
    ("CUTE_GEMM_STREAM_K", "2", r"CUTE_GEMM_STREAM_K must be an integer in \[0, 1\]"),
    ("CUTE_GEMM_PDL", "yes", r"CUTE_GEMM_PDL must be an integer in \[0, 1\]"),
    ("CUTE_GEMM_NARROW", "2", r"CUTE_GEMM_NARROW must be an integer in \[0, 1\]"),
    ("CUTE_GEMM_SM90_NARROW", "2", r"CUTE_GEMM_SM90_NARROW must be an integer in \[0, 1\]"),
    ("CUTE_GEMM_SWAP_CONFIG", "3", r"CUTE_GEMM_SWAP_CONFIG must be 6, 10 or 11 \(the swapped decode rows"),
    ("CUTE_GEMM_SWAP_CONFIG", "99", r"CUTE_GEMM_SWAP_CONFIG must be an integer in \[0, "),
    ("CUTE_GEMM_FAST_HBM", "2", r"CUTE_GEMM_FAST_HBM must be an integer in \[0, 1\]"),
    ("CUTE_GEMM_L2_HINT", "3", r"CUTE_GEMM_L2_HINT must be an integer in \[0, 2\]"),
    # Exactly the documented values: no spaces, signs or words.
    ("CUTE_GEMM_SPLITS", " 2", r"CUTE_GEMM_SPLITS must be an integer in \[1, 64\], got ' 2'"),
    ("CUTE_GEMM_PDL", "+1", r"CUTE_GEMM_PDL must be an integer in \[0, 1\], got '\+1'"),
    ("CUTE_GEMM_GROUP_M", "\t8", r"CUTE_GEMM_GROUP_M must be an integer in \[1, 64\]"),
    ("CUTE_GEMM_GROUP_M", "8 ", r"CUTE_GEMM_GROUP_M must be an integer in \[1, 64\]"),
    ("CUTE_GEMM_AUTOTUNE", "true", r"CUTE_GEMM_AUTOTUNE must be an integer in \[0, 1\], got 'true'"),
    ("CUTE_GEMM_AUTOTUNE", "2", r"CUTE_GEMM_AUTOTUNE must be an integer in \[0, 1\]"),
])
def test_bad_env_knob_is_an_error(var, value, pattern, monkeypatch):
    monkeypatch.setenv("CUTE_GEMM_FAMILY", "sm80")
    monkeypatch.setenv(var, value)
    a = make_operand(8, 8, "n", torch.float16)
    with pytest.raises(ValueError, match=pattern):
        cute_gemm.mm(a, a)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f16", "bf16"])
def test_strided_and_offset_views(dtype, family):
    """Inputs the fast path cannot read in place still give the right answer (padded copy)."""
    base_a = torch.randn(300, 521, device="cuda").to(dtype)
    base_b = torch.randn(700, 260, device="cuda").to(dtype)
    cases = [
        (base_a[:, 1:257], base_b[3:259, :200]),             # storage offsets breaking 16-byte alignment
        (base_a[::2, :256], base_b[:256:1, ::3]),            # row step 2; column stride 3
        (base_a[:, :300].t()[1:, :], base_b[:300, 4:68]),    # transposed view with an offset
        (torch.randn(1, 264, device="cuda").to(dtype).expand(100, 264),
         torch.randn(264, 1, device="cuda").to(dtype).expand(264, 72)),  # stride-0 (expanded)
        (base_a[:64, :123], base_b[:123, :77]),              # K and N not multiples of 8, ld aligned
    ]
    for a, b in cases:
        check(a, b)


@pytest.mark.parametrize("dtype", DTYPES, ids=["f16", "bf16"])
def test_empty_and_zero_k(dtype):
    a = torch.randn(0, 16, device="cuda").to(dtype)
    b = torch.randn(16, 5, device="cuda").to(dtype)
    assert cute_gemm.mm(a, b).shape == (0, 5)
    assert cute_gemm.mm(b.t(), torch.randn(16, 0, device="cuda").to(dtype)).shape == (5, 0)
    out = poisoned_mm(torch.randn(6, 0, device="cuda").to(dtype), torch.randn(0, 9, device="cuda").to(dtype))
    assert out.shape == (6, 9) and torch.equal(out, torch.zeros_like(out))


def test_runs_on_the_current_stream(family):
    a = make_operand(512, 512, "n", torch.bfloat16)
    b = make_operand(512, 512, "t", torch.bfloat16)
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        out = cute_gemm.mm(a, b)
    side.synchronize()
    assert rel_err(out, a.double() @ b.double()) <= REL_BOUND[torch.bfloat16]


def test_nan_and_inf_propagate_like_torch(family):
    a = make_operand(64, 64, "n", torch.float16)
    b = make_operand(64, 64, "n", torch.float16)
    a[3, 5] = float("nan")
    b[7, 9] = float("inf")
    ours, theirs = cute_gemm.mm(a, b), torch.mm(a, b)
    assert torch.equal(ours.isnan(), theirs.isnan())
    assert torch.equal(ours.isinf(), theirs.isinf())


@pytest.mark.parametrize("dtype", DTYPES, ids=["f16", "bf16"])
def test_unaligned_c_rows(dtype, monkeypatch):
    """C rows the TMA store cannot write (N % 8 != 0, odd and even; a misaligned out= view; bmm):
    the sm90 family stages each C chunk in shared memory and writes its rows from there (rows that
    start 4-byte aligned and rows that start 2 bytes past, odd ldc: every other row); with an
    activation it computes C into a padded scratch buffer (one more allocation) and copies it out.
    Both are right and write nothing outside C. (A bias keeps M <= 32 off the swapped decode path,
    which stores C's columns element by element; test_swapped_decode_path covers its out= views.)"""
    use_family(monkeypatch, "sm90")
    for m, n, k in [(129, 130, 257), (300, 131, 520), (33, 1030, 64), (513, 2050, 1000), (640, 765, 192)]:
        check(make_operand(m, k, "n", dtype), make_operand(k, n, "t", dtype))
        a, b = make_operand(m, k, "t", dtype), make_operand(k, n, "n", dtype)
        bias = torch.randn(n, device="cuda").to(dtype)
        z = a.double() @ b.double() + bias.double()
        for shift in (1, 2):  # bases one or two elements past 16-byte alignment; rows of n + 3 elements
            allocated = {}
            for act in (None, "relu"):
                buf = torch.full((m + 1, n + 3), float("nan"), dtype=dtype, device="cuda")
                out = buf[1:, shift:n + shift]  # never 16-byte aligned
                before = allocations()
                cute_gemm.addmm(bias, a, b, activation=act, out=out)
                allocated[act] = allocations() - before
                assert rel_err(out, z if act is None else z.clamp_min(0)) <= REL_BOUND[dtype], (m, n, k, shift, act)
                assert buf[0].isnan().all() and buf[:, :shift].isnan().all() and buf[:, n + shift:].isnan().all()
            assert allocated["relu"] == allocated[None] + 1, allocated  # staged without, scratch with
    # bmm into rows of 77 elements (odd rows and odd batches 2 bytes past 4-byte alignment) and of
    # 78 (batch stride 200 * 78, rows 4-byte aligned but not 16), staged; then a forced split-K (the
    # last piece's epilogue writes the rows).
    for n in (77, 78):
        a = make_operand(3 * 200, 136, "n", dtype).view(3, 200, 136)
        b3 = make_operand(136, 3 * n, "n", dtype).view(136, 3, n).permute(1, 0, 2)
        got = torch.full((3, 200, n), float("nan"), dtype=dtype, device="cuda")
        cute_gemm.bmm(a, b3, out=got)  # NaN left anywhere fails the bound
        assert rel_err(got, a.double() @ b3.double()) <= REL_BOUND[dtype], n
    monkeypatch.setenv("CUTE_GEMM_SPLITS", "3")
    a, b = make_operand(257, 1000, "n", dtype), make_operand(1000, 1030, "n", dtype)
    got = torch.full((257, 1030), float("nan"), dtype=dtype, device="cuda")
    cute_gemm.mm(a, b, out=got)
    assert rel_err(got, a.double() @ b.double()) <= REL_BOUND[dtype]


def offset_matrix(rows, cols, ld, offset, dtype, batch=None):
    """A (rows, cols) view (batch x rows x cols with `batch`) of rows `ld` elements apart, starting
    `offset` elements into a fresh allocation: every 16-byte misalignment of base and rows."""
    count = (batch or 1) * rows * ld
    flat = torch.randn(count + offset + 8, device="cuda").to(dtype)[offset:offset + count]
    shape = (rows, ld) if batch is None else (batch, rows, ld)
    return flat.view(shape)[..., :cols]


@pytest.mark.parametrize("dtype", DTYPES, ids=["f16", "bf16"])
def test_row_copies(family, dtype, monkeypatch):
    """The unaligned path's row copies (csrc/row_copy.cu: padded operand buffers; on the sm90 family
    also a scratch C copied out, which an activation takes where the consumers would write C's rows
    from the staging) at every element offset mod 8 of the operands' bases and rows and of the
    output's base, in every layout, batched too, into packed and padded output rows, and for rows
    shorter than a vector: right against float64 (a misplaced element is far outside the bound),
    and nothing written outside the output view (NaN around and between its rows)."""
    monkeypatch.setenv("CUTE_GEMM_NARROW", "0")  # the copies, not the narrow kernels
    cases = [(37 + 5 * off, 45 + 3 * off, 67 + 2 * off, off, layout)
             for off, layout in itertools.product(range(8), LAYOUTS)]
    cases += [(1, 3, 5, 3, "nn"), (7, 1, 6, 5, "tn"), (2, 9, 3, 1, "nt"), (5, 7, 11, 6, "tt")]
    for m, n, k, off, layout in cases:
        batch = 2 if off % 2 else None
        def operand(rows, cols, major, offset):
            if major == "n":
                return offset_matrix(rows, cols, cols + offset % 3, offset, dtype, batch)
            return offset_matrix(cols, rows, rows + offset % 3, offset, dtype, batch).transpose(-1, -2)
        a, b = operand(m, k, layout[0], off), operand(k, n, layout[1], 7 - off)
        ref = a.double() @ b.double()
        # Packed output rows, then 3 apart; plain, and (unbatched) with a relu over a zero bias.
        for pad, act in itertools.product((0, 3), (None, "relu") if batch is None else (None,)):
            rows = (batch or 1) * m
            buf = torch.full((rows * (n + pad) + 16,), float("nan"), dtype=dtype, device="cuda")
            body = buf[off + 1:off + 1 + rows * (n + pad)].view(rows, n + pad)
            out = body[:, :n] if batch is None else body[:, :n].view(batch, m, n)
            if act is not None:
                cute_gemm.addmm(torch.zeros(n, device="cuda", dtype=dtype), a, b, activation=act, out=out)
            else:
                (cute_gemm.mm if batch is None else cute_gemm.bmm)(a, b, out=out)
            assert buf[:off + 1].isnan().all() and buf[off + 1 + rows * (n + pad):].isnan().all()
            assert body[:, n:].isnan().all(), (m, n, k, off, layout, pad, act)
            want = ref if act is None else ref.clamp_min(0)
            assert rel_err(out, want) <= REL_BOUND[dtype], (m, n, k, off, layout, pad, act)


# The narrow kernels (CUTE_GEMM_NARROW=1): 16-bit operands whose contiguous extent and leading
# dimension are even but not multiples of 8 are read in place by the SM80 kernels with 4-byte
# cp.async. Every shape below needs it for at least one operand in every layout: the extents
# that are contiguous in some layout are even (M = 1 is read K-major), and K or N is not a multiple of 8.
NARROW_SHAPES = [
    (574, 574, 574),
    (130, 66, 2050),       # K runs past one 64-wide k-tile by two elements
    (2, 1026, 10),         # K shorter than one k-tile
    (126, 6, 130),
    (4098, 258, 34),       # many tiles of either row
    (256, 574, 514),       # A aligned in the "t" layouts (M-major, M = 256): only B is unaligned there
    (1, 574, 574),         # one row
]



@pytest.mark.parametrize("config", [None, 1, 2], ids=["rule", "row1", "row2"])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_narrow_kernels_read_unaligned_operands_in_place(config, layout, monkeypatch):
    """Right against float64 (NaN-poisoned output), the same bits again, and no padded copies: the
    call allocates its output and nothing else (the copy path allocates a buffer per copied operand)."""
    monkeypatch.setenv("CUTE_GEMM_NARROW", "1")
    if config is not None:
        monkeypatch.setenv("CUTE_GEMM_SM80_CONFIG", str(config))
    for (m, n, k), dtype in itertools.product(NARROW_SHAPES, DTYPES):
        a, b = make_operand(m, k, layout[0], dtype), make_operand(k, n, layout[1], dtype)
        out = check(a, b)
        before = allocations()
        again = cute_gemm.mm(a, b)
        assert allocations() - before == 1, (m, n, k, layout)
        assert torch.equal(out, again)
        # addmm's epilogue on the same path: bias row, scaled C, activation.
        bias = torch.randn(n, device="cuda").to(dtype)
        ref = a.double() @ b.double()
        got = cute_gemm.addmm(bias, a, b, activation="relu")
        assert rel_err(got, torch.relu(ref + bias.double())) <= REL_BOUND[dtype]


def plain_and_narrow(a, b, monkeypatch, mm=cute_gemm.mm):
    """mm(a, b) with CUTE_GEMM_NARROW=0, then 1, and the second call's allocation count."""
    monkeypatch.setenv("CUTE_GEMM_NARROW", "0")
    plain = mm(a, b)
    monkeypatch.setenv("CUTE_GEMM_NARROW", "1")
    before = allocations()
    narrow = mm(a, b)
    return plain, narrow, allocations() - before


def test_narrow_kernels_only_where_an_operand_needs_them(monkeypatch):
    """With CUTE_GEMM_NARROW=1: an odd contiguous extent (no 4-byte vectors) still takes the padded
    copies; an aligned problem, and an expanded weight that only TMA refuses (bmm, A not stacked), run
    the default kernels (same bits as with the knob at 0); an odd K that is not contiguous in either
    operand is read in place; CUTE_GEMM_FAMILY=sm90 keeps the copies; a pinned row without a narrow
    kernel is refused by name."""
    for dtype in DTYPES:
        # (shape, layout, narrow taken): "nn" 574x574x575 has A rows of 575 elements.
        for (m, n, k), layout, taken in [((574, 574, 575), "nn", False), ((574, 574, 575), "tn", True),
                                         ((575, 573, 574), "nt", True), ((575, 573, 574), "tn", False),
                                         ((512, 256, 1024), "nn", False)]:
            a, b = make_operand(m, k, layout[0], dtype), make_operand(k, n, layout[1], dtype)
            plain, narrow, allocated = plain_and_narrow(a, b, monkeypatch)
            check(a, b)
            if taken:
                assert allocated == 1, (m, n, k, layout)  # the output only
            elif (m, n, k) == (512, 256, 1024):
                assert allocated == 1 and torch.equal(plain, narrow)  # the default kernel
            else:
                assert allocated > 1, (m, n, k, layout)  # padded copies
        base = torch.randn(4, 96, 200, device="cuda").to(dtype)
        a3 = base[:, :80, :64]  # batches not stacked row after row: no fold into one problem
        w = torch.randn(64, 72, device="cuda").to(dtype).expand(4, 64, 72)
        plain, narrow, _ = plain_and_narrow(a3, w, monkeypatch, mm=cute_gemm.bmm)
        assert torch.equal(plain, narrow)
        assert rel_err(narrow, a3.double() @ w.double()) <= REL_BOUND[dtype]
    monkeypatch.setenv("CUTE_GEMM_NARROW", "1")
    a, b = make_operand(574, 574, "n", torch.float16), make_operand(574, 574, "n", torch.float16)
    if torch.cuda.get_device_capability() == (9, 0):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("CUTE_GEMM_FAMILY", "sm90")
            before = allocations()
            cute_gemm.mm(a, b)
            assert allocations() - before > 1  # padded copies of A and B
    monkeypatch.setenv("CUTE_GEMM_SM80_CONFIG", "0")
    with pytest.raises(ValueError, match=r"CUTE_GEMM_SM80_CONFIG=0 has no narrow kernel"):
        cute_gemm.mm(a, b)


def test_narrow_kernels_by_default_where_they_win(monkeypatch):
    """CUTE_GEMM_NARROW unset: the rule (sm80::narrow_pays, tests/test_chooser.py) takes the narrow
    kernels (on Hopper the sm90 rows', elsewhere the sm80 ones: explain's family) where the copies
    would cost more than they save (574^3; a decode shape whose large B needs the copy) and keeps
    the copies where the GEMM is large or the copied operand small; 0 keeps the copies everywhere;
    a pinned row without a narrow kernel, or a pinned sm90 row or K slice count, takes the copies,
    no error."""
    monkeypatch.delenv("CUTE_GEMM_NARROW", raising=False)
    # Behind the SM80 family (no Hopper) the copy path's kernel walks K = 4100 in 32-wide k-tiles too,
    # and the rule takes the narrow kernels for 16x4096x4100 as well.
    # The sm90 family where the GPU and the build have it (explain's family for an aligned problem).
    aligned = torch.randn(64, 64, device="cuda").half()
    hopper = cute_gemm.explain(aligned, aligned)["family"] == "sm90"
    for dtype in DTYPES:
        for (m, n, k), taken in [((574, 574, 574), True), ((16, 4100, 4096), True), ((16, 4096, 4100), not hopper),
                                 ((2050, 2050, 2050), False)]:
            a, b = make_operand(m, k, "n", dtype), make_operand(k, n, "n", dtype)
            out = check(a, b)
            plan = cute_gemm.explain(a, b)
            if taken:  # both operands read in place
                assert plan["family"] == ("sm90 narrow" if hopper else "sm80 narrow"), plan
                assert "copied" not in plan["a"] + plan["b"], plan
            else:
                assert "narrow" not in plan["family"], plan
            assert torch.equal(out, cute_gemm.mm(a, b))
        a, b = make_operand(574, 574, "n", dtype), make_operand(574, 574, "n", dtype)
        pins = [({"CUTE_GEMM_NARROW": "0"}, True), ({"CUTE_GEMM_SM80_CONFIG": "1"}, False)]
        props = torch.cuda.get_device_properties(torch.cuda.current_device())
        if getattr(props, "shared_memory_per_block_optin", 0) >= 144 * 1024:
            pins.append(({"CUTE_GEMM_SM80_CONFIG": "0"}, True))  # row 0 (144 KB) where it fits
        if hopper:  # a pinned sm90 row or K slice count keeps the sm90 kernel and its copies
            pins += [({"CUTE_GEMM_SM90_CONFIG": "4"}, True), ({"CUTE_GEMM_SPLITS": "2"}, True)]
        for env, copied in pins:
            with pytest.MonkeyPatch.context() as mp:
                for key, value in env.items():
                    mp.setenv(key, value)
                check(a, b)
                before = allocations()
                cute_gemm.mm(a, b)
                assert (allocations() - before > 1) == copied, env


@pytest.mark.parametrize("kernels", ["sm80", "sm90"])
@pytest.mark.parametrize("dtype", DTYPES, ids=["f16", "bf16"])
def test_narrow_kernels_on_views_batches_and_edges(dtype, kernels, monkeypatch):
    """The narrow path on inputs that are not fresh matrices: a base 4 but not 16 bytes aligned, padded
    rows, bmm batches, a shared weight folded into one problem, a strided out=, N = 1. The sm80
    narrow kernels (CUTE_GEMM_NARROW=1) and the sm90 rows' (CUTE_GEMM_SM90_NARROW=1, sm90 GPUs:
    their kernels named in a profiler trace on the first cases)."""
    if kernels == "sm90":
        use_sm90_narrow(monkeypatch)
    else:
        monkeypatch.setenv("CUTE_GEMM_NARROW", "1")
    raw_a = torch.randn(131, 68, device="cuda").to(dtype)
    raw_b = torch.randn(132, 40, device="cuda").to(dtype)
    cases = [
        (raw_a[1:, 2:], raw_b[2:68, 4:38]),      # bases 4 and 8 bytes past 16-byte alignment, rows of 68
        (raw_a[:, 2:].t()[:, 1:], raw_b[2:, :]),  # A (66, 130) M-major, offset; B (130, 40) aligned
        (raw_a[1:, :66], torch.randn(66, 1, device="cuda").to(dtype)),  # N = 1
    ]
    for a, b in cases:
        before = allocations()
        out = cute_gemm.mm(a, b)
        assert allocations() - before == 1, (a.shape, a.stride(), b.shape, b.stride())
        assert not out.isnan().any() and rel_err(out, a.double() @ b.double()) <= REL_BOUND[dtype]
        if kernels == "sm90":
            ran = sm90_kernels_run(lambda: cute_gemm.mm(a, b))
            assert ran and all(narrow for _, narrow in ran), (a.shape, a.stride(), ran)
    a3 = torch.randn(3, 130, 66, device="cuda").to(dtype)
    b3 = torch.randn(3, 66, 34, device="cuda").to(dtype)
    w = torch.randn(66, 34, device="cuda").to(dtype)
    for x, y in [(a3, b3), (a3, w.expand(3, 66, 34)), (a3.transpose(1, 2).contiguous().transpose(1, 2), b3)]:
        before = allocations()
        got = cute_gemm.bmm(x, y)
        assert allocations() - before == 1
        assert rel_err(got, x.double() @ y.double()) <= REL_BOUND[dtype]
    buf = torch.full((130, 35), float("nan"), dtype=dtype, device="cuda")
    out = buf[:, :34]
    cute_gemm.mm(a3[0], b3[0], out=out)
    assert rel_err(out, a3[0].double() @ b3[0].double()) <= REL_BOUND[dtype] and buf[:, 34].isnan().all()


# The sm90 narrow kernels (sm90/traits.h CpAsync): the same operands as the SM80 narrow kernels
# (even extents and leading dimensions, not multiples of 8) read in place by the sm90 rows'
# kernels whose producer moves the tiles with 4-byte cp.async; rows of sm90::kNarrowConfigs.
SM90_NARROW_ROWS = (0, 1, 3, 5)


@pytest.mark.parametrize("config", [None, *SM90_NARROW_ROWS], ids=["rule", *[f"row{r}" for r in SM90_NARROW_ROWS]])
@pytest.mark.parametrize("layout", LAYOUTS)
def test_sm90_narrow_kernels_read_unaligned_operands_in_place(config, layout, monkeypatch):
    """CUTE_GEMM_SM90_NARROW=1: the narrow sm90 kernel runs (kernel names; the pinned row), right
    against float64 with a NaN-poisoned output, the same bits again, no padded copies (the call
    allocates its output only), addmm's epilogue on the same path, and split-K on the narrow kernel
    (two and three K slices: the same bits twice)."""
    use_sm90_narrow(monkeypatch)
    if config is not None:
        monkeypatch.setenv("CUTE_GEMM_SM90_CONFIG", str(config))
    for (m, n, k), dtype in itertools.product(NARROW_SHAPES + [(2050, 2050, 2050), (66, 4098, 4098)], DTYPES):
        a, b = make_operand(m, k, layout[0], dtype), make_operand(k, n, layout[1], dtype)
        kernels = sm90_kernels_run(lambda: check(a, b))
        assert kernels and all(narrow for _, narrow in kernels), (m, n, k, layout, kernels)
        if config is not None:
            assert {row for row, _ in kernels} == {config}
        out = cute_gemm.mm(a, b)
        with pytest.MonkeyPatch.context() as mp:  # whole tiles: no split-K or stream-K workspace either
            mp.setenv("CUTE_GEMM_SPLITS", "1")
            mp.setenv("CUTE_GEMM_STREAM_K", "0")
            before = allocations()
            whole = cute_gemm.mm(a, b)
            assert allocations() - before == 1, (m, n, k, layout)
        assert rel_err(whole, a.double() @ b.double()) <= REL_BOUND[dtype]
        assert torch.equal(out, cute_gemm.mm(a, b))
        bias = torch.randn(n, device="cuda").to(dtype)
        got = cute_gemm.addmm(bias, a, b, activation="relu")
        assert rel_err(got, torch.relu(a.double() @ b.double() + bias.double())) <= REL_BOUND[dtype]
    for splits in ("2", "3"):
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("CUTE_GEMM_SPLITS", splits)
            a, b = make_operand(130, 4098, layout[0], torch.bfloat16), make_operand(4098, 258, layout[1], torch.bfloat16)
            kernels = sm90_kernels_run(lambda: check_reproducible(a, b))
            assert kernels and all(narrow for _, narrow in kernels), (splits, layout, kernels)


# The swapped decode path (sm90, M <= 32, no X term): C^T = B^T A^T on sm90 row 6 (128x16 tiles),
# row 10 (64x16) or row 11 (64x32), stored into C's columns element by element.
SWAP_ROWS = (6, 10, 11)  # sm90 rows 6 (128x16), 10 (64x16), 11 (64x32): CUTE_GEMM_SWAP_CONFIG picks one


def sm90_kernels_run(fn):
    """(row, narrow) of the sm90 kernels fn launched, from their names in a profiler trace
    (gemm_kernel<KernelTraits<dtype, a k-major, b k-major, row, narrow, gated>, ...>)."""
    kernels = set()
    for name in kernel_names(fn):
        # The sm90 traits end in two bools (the cp.async producer of the narrow kernels, the gated
        # epilogue), the sm80 ones in the vector bytes (16 or 4).
        m = re.search(r"gemm_kernel<[\w:]*KernelTraits<([^<>]*)>", name)
        args = [x.strip() for x in m.group(1).split(",")] if m else []
        if len(args) == 6 and args[4] in ("false", "true") and args[5] in ("false", "true"):
            kernels.add((int(re.sub(r"\D", "", args[3])), args[4] == "true"))
    return kernels


def sm90_rows_run(fn):
    """The sm90 config rows of the kernels fn launched (sm90_kernels_run)."""
    return {row for row, _ in sm90_kernels_run(fn)}


@pytest.mark.parametrize("swap_row", SWAP_ROWS)
def test_swapped_decode_path(monkeypatch, swap_row):
    """M <= 32: the pinned swapped row runs (kernel names), right against float64 with NaN-poisoned
    outputs for odd M, N and K (M past the row's 16 or 32 columns: two column tiles on rows 6 and
    10) in every layout of A and B (an M-major A is the kernel's N-major B) and both dtypes, into
    strided out= views and fp32 outputs, with split-K (the same bits twice); M = 33 or a bias keep
    the unswapped rows; a pinned CUTE_GEMM_SM90_CONFIG row runs unswapped."""
    use_family(monkeypatch, "sm90")
    monkeypatch.setenv("CUTE_GEMM_SWAP_CONFIG", str(swap_row))
    a, b = make_operand(16, 4096, "n", torch.bfloat16), make_operand(4096, 4096, "n", torch.bfloat16)
    assert sm90_rows_run(lambda: cute_gemm.mm(a, b)) == {swap_row}
    a32 = make_operand(32, 4096, "n", torch.bfloat16)
    assert sm90_rows_run(lambda: cute_gemm.mm(a32, b)) == {swap_row}
    for dtype in DTYPES:
        for m, n, k in itertools.product([1, 2, 7, 16, 17, 32], [1, 8, 127, 129, 1000], [1, 7, 64, 129, 1030]):
            for la, lb in itertools.product("nt", "nt"):
                check(make_operand(m, k, la, dtype), make_operand(k, n, lb, dtype))
        # Split-K (16x2048x4096, 64 K tiles: row 6's 16 tiles in 4 slices, rows 10 and 11's 32 in 2): reproducible
        # bits; at 24 rows row 11 splits in 2 (rows 6 and 10 make two column tiles, unsplit on the H100's rule).
        check_reproducible(make_operand(16, 4096, "n", dtype), make_operand(4096, 2048, "t", dtype))
        check_reproducible(make_operand(24, 4096, "n", dtype), make_operand(4096, 2048, "t", dtype))
        for m in (9, 27):  # out= views, fp32 and column-major outputs, within one column tile and past 16 rows
            a, b = make_operand(m, 300, "n", dtype), make_operand(300, 520, "t", dtype)
            ref = a.double() @ b.double()
            buf = torch.full((m, 530), float("nan"), dtype=dtype, device="cuda")
            out = buf[:, 3:523]
            cute_gemm.mm(a, b, out=out)
            assert rel_err(out, ref) <= REL_BOUND[dtype]
            assert buf[:, :3].isnan().all() and buf[:, 523:].isnan().all()
            assert rel_err(cute_gemm.mm(a, b, out_dtype=torch.float32), ref) <= 1e-5
            col = torch.full((520, m), float("nan"), dtype=dtype, device="cuda").t()  # a column-major out=
            cute_gemm.mm(a, b, out=col)
            assert rel_err(col, ref) <= REL_BOUND[dtype]
    # The stream-K tail on the swapped row (CUTE_GEMM_STREAM_K=1; 3x28672x1024: 224 tiles of row 6,
    # 448 of rows 10 and 11, on at most 132 SMs; at 20 rows twice that on rows 6 and 10), and split-K
    # forced to 7 slices, with A in either layout (at 3 rows an M-major A is copied: its rows are not
    # 16 bytes apart): right and reproducible.
    for env, m, la in itertools.product(({"CUTE_GEMM_STREAM_K": "1"}, {"CUTE_GEMM_SPLITS": "7"}), (3, 20), "nt"):
        with pytest.MonkeyPatch.context() as mp:
            for key, value in env.items():
                mp.setenv(key, value)
            a, b = make_operand(m, 1024, la, torch.bfloat16), make_operand(1024, 28672, "t", torch.bfloat16)
            assert sm90_rows_run(lambda: cute_gemm.mm(a, b)) == {swap_row}
            check_reproducible(a, b)
    a16, b16 = make_operand(16, 256, "n", torch.float16), make_operand(256, 512, "n", torch.float16)
    a33 = make_operand(33, 256, "n", torch.float16)
    bias = torch.randn(512, device="cuda").half()
    # A bmm whose weight is shared (batch stride 0) and whose batches of A stack row after row is
    # one problem of L * M rows: 2 x 5 and 2 x 13 rows take the swapped path, and C's rows land per batch.
    w = torch.randn(64, 100, device="cuda").half().expand(2, 64, 100)
    for m in (5, 13):
        a3 = torch.randn(2, m, 64, device="cuda").half()
        assert sm90_rows_run(lambda: cute_gemm.bmm(a3, w)) == {swap_row}
        assert rel_err(cute_gemm.bmm(a3, w), a3.double() @ w.double()) <= REL_BOUND[torch.float16]
    # An M-major A (x.t() @ w) read in place: the kernel's N-major B.
    assert sm90_rows_run(lambda: cute_gemm.mm(make_operand(16, 256, "t", torch.float16), b16)) == {swap_row}
    # Where it does not apply (each call must show some sm90 row, so an unparsed trace cannot pass).
    for fn in (lambda: cute_gemm.mm(a33, b16), lambda: cute_gemm.addmm(bias, a16, b16)):
        rows = sm90_rows_run(fn)
        assert rows and swap_row not in rows, rows
    monkeypatch.delenv("CUTE_GEMM_SWAP_CONFIG")
    monkeypatch.setenv("CUTE_GEMM_SM90_CONFIG", "4")
    assert sm90_rows_run(lambda: cute_gemm.mm(a16, b16)) == {4}
    check(a16, b16)


def fast_hbm_class() -> bool | None:
    """Whether plan_for takes sm90's rules for fast HBM on the current GPU: its peak HBM bandwidth
    (memory clock x bus width x 2) per SM against configs.h's kFastHbmMBsPerSm; None where this
    torch does not report the memory clock."""
    props = torch.cuda.get_device_properties(torch.cuda.current_device())
    khz, bits = getattr(props, "memory_clock_rate", 0), getattr(props, "memory_bus_width", 0)
    if not (khz and bits):
        return None
    threshold = re.search(r"kFastHbmMBsPerSm = (\d+);", (CSRC / "sm90" / "configs.h").read_text())
    gbs = int(2 * khz * 1e3 * bits / 8 / 1e9)  # knobs.cpp's peak_hbm_gbs
    return 1000 * gbs >= int(threshold.group(1)) * props.multi_processor_count


@pytest.mark.parametrize("fast_hbm", ["0", "1", None])
def test_swapped_rows_by_rule(monkeypatch, fast_hbm):
    """Unpinned, the swapped path takes row 10 (64x16) where its tiles fit in one wave and leave
    half the SMs to K slices or busy 7/8 of them, else row 6 (sm90::choose_swap_config); on a GPU
    of fast HBM (CUTE_GEMM_FAST_HBM=1, unset: by its peak bandwidth per SM) wherever they fit in one wave."""
    use_family(monkeypatch, "sm90")
    if fast_hbm is None:
        fast = fast_hbm_class()
        if fast is None:
            pytest.skip("this torch does not report the memory clock: the unset knob's class is unknown here")
        monkeypatch.delenv("CUTE_GEMM_FAST_HBM", raising=False)
    else:
        monkeypatch.setenv("CUTE_GEMM_FAST_HBM", fast_hbm)
        fast = fast_hbm == "1"
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for n in (1024, 4096, 5120, 8192, 14336):
        tiles = -(-n // 64)
        want = 10 if tiles <= sms and (fast or 2 * tiles <= sms or 8 * tiles >= 7 * sms) else 6
        a, b = make_operand(16, 2048, "n", torch.bfloat16), make_operand(2048, n, "n", torch.bfloat16)
        assert sm90_rows_run(lambda: cute_gemm.mm(a, b)) == {want}, n
        check(a, b)


def test_swap32_rows_by_rule(monkeypatch):
    """17 <= M <= 32, unpinned: the swapped path on row 11 (64x32), within a wave of its tiles and
    past it, unsplit and in its rule's K slices; right and reproducible, both dtypes and B layouts."""
    use_family(monkeypatch, "sm90")
    monkeypatch.delenv("CUTE_GEMM_SWAP_CONFIG", raising=False)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    for m, n, k, dtype, lb in ((17, 4096, 1024, torch.bfloat16, "t"), (32, 64 * sms, 1024, torch.bfloat16, "t"),
                               (32, 64 * sms + 1, 1024, torch.float16, "n"), (24, 14336, 1024, torch.bfloat16, "t"),
                               (32, 2048, 4096, torch.float16, "n"), (17, 1024, 4096, torch.bfloat16, "n")):
        # (the last two: 32 and 16 tiles of 64 K tiles, which the rule splits in 2 and 4)
        a, b = make_operand(m, k, "n", dtype), make_operand(k, n, lb, dtype)
        assert sm90_rows_run(lambda: cute_gemm.mm(a, b)) == {11}, (m, n)
        check_reproducible(a, b)


@pytest.mark.parametrize("fast_hbm, row", [("0", 1), ("1", 0)])
def test_short_k_row_by_hbm_rule(monkeypatch, fast_hbm, row):
    """K <= 256 with two waves of 128x256 tiles: the 128x128 tile (row 1) by the H100's rules, the
    128x256 one (row 0) by the rules for fast HBM (sm90::choose_config, 2026-11-28)."""
    use_family(monkeypatch, "sm90")
    monkeypatch.setenv("CUTE_GEMM_FAST_HBM", fast_hbm)
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    a, b = make_operand(2 * 128 * sms, 256, "n", torch.bfloat16), make_operand(256, 256, "n", torch.bfloat16)
    assert sm90_rows_run(lambda: cute_gemm.mm(a, b)) == {row}
    check(a, b)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_one_wave_rows_by_rule(layout, monkeypatch):
    """Fewer 128x256 tiles than three quarters of the SMs: the 192x128 tile (row 12) where its
    tiles fill one wave (a QKV projection's weight gradient, 3072x1024 of K = 8192 tokens), the
    128x192 one (row 7) for the transposed problem (sm90::one_wave_config); right against float64."""
    use_family(monkeypatch, "sm90")
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    if sms != 132:
        pytest.skip("the shapes are sized for 132 SMs")
    for (m, n), row in (((3072, 1024), 12), ((1024, 3072), 7), ((3000, 1000), 12)):
        a, b = make_operand(m, 1031, layout[0], torch.bfloat16), make_operand(1031, n, layout[1], torch.bfloat16)
        assert sm90_rows_run(lambda: cute_gemm.mm(a, b)) == {row}, (m, n)
        check(a, b)
