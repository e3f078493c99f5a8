// The SM90 (TMA + mbarrier ring + WGMMA, warp-specialized, persistent) tile configurations:
// one table read by the kernel traits and the host dispatch, as for SM80.
#pragma once

#include "tile_scheduler.h"

namespace cute_gemm::sm90 {

struct TileConfig {
  int bm, bn, bk;
  int stages;     // shared-memory ring depth
  int consumers;  // math warpgroups; each owns bm / consumers rows of the tile
  int cluster_m;  // blocks per cluster along M; they share (multicast) each B tile
  const char* name;
};

// One row per line, "/* index */ {...}": csrc/instantiations/generate.py and the tests parse it.
inline constexpr TileConfig kConfigs[] = {
    /* 0 */ {128, 256, 64, 4, 2, 1, "128x256x64_s4_c2"},     // cooperative: 2 x (64x256) per tile
    /* 1 */ {128, 128, 64, 6, 2, 1, "128x128x64_s6_c2"},     // 2 x (64x128): deeper ring, twice the tiles
    /* 2 */ {128, 256, 64, 4, 2, 2, "128x256x64_s4_c2_m2"},  // row 0 + 2x1 cluster: B multicast to both blocks
    /* 3 */ {128, 64, 64, 8, 2, 1, "128x64x64_s8_c2"},       // 2 x (64x64): small problems, 4x the tiles of row 0
    /* 4 */ {64, 128, 64, 8, 1, 1, "64x128x64_s8_c1"},       // one consumer: 64-row tiles, twice row 1's tiles
    /* 5 */ {64, 64, 64, 12, 1, 1, "64x64x64_s12_c1"},       // one consumer, 64 columns: decode rows, twice row 4's tiles
    /* 6 */ {128, 16, 64, 11, 1, 1, "128x16x64_s11_c1"},     // decode, operands swapped: 128 of N x 16 of M
    /* 7 */ {128, 192, 64, 5, 2, 1, "128x192x64_s5_c2"},     // 2 x (64x192): fills the waves where row 0's leave a short last one
    /* 8 */ {192, 192, 64, 4, 3, 1, "192x192x64_s4_c3"},     // 3 x (64x192): one wave where 128x256 tiles just pass one
    /* 9 */ {128, 128, 64, 6, 2, 2, "128x128x64_s6_c2_m2"},  // row 1 + 2x1 cluster: B multicast, a quarter less L2 traffic
    /* 10 */ {64, 16, 64, 20, 1, 1, "64x16x64_s20_c1"},      // decode, swapped: row 6's tile at half the rows, twice the blocks
    /* 11 */ {64, 32, 64, 18, 1, 1, "64x32x64_s18_c1"},      // decode, swapped, 17 <= M <= 32: row 10's tile at 32 rows of M
    /* 12 */ {192, 128, 64, 4, 3, 1, "192x128x64_s4_c3"},    // 3 x (64x128): one full wave where 128x256 tiles leave a quarter idle
};
inline constexpr int kNumConfigs = sizeof(kConfigs) / sizeof(kConfigs[0]);

// The rows by name, as the rules and the host code refer to them: the tile (M x N of C; of C^T for
// the swapped decode rows), "Pair" for a 2x1 cluster.
enum Row : int {
  k128x256 = 0, k128x128 = 1, k128x256Pair = 2, k128x64 = 3, k64x128 = 4, k64x64 = 5, kSwap128x16 = 6,
  k128x192 = 7, k192x192 = 8, k128x128Pair = 9, kSwap64x16 = 10, kSwap64x32 = 11, k192x128 = 12,
};
constexpr bool row_is(int row, int bm, int bn, int cluster_m) {
  return kConfigs[row].bm == bm && kConfigs[row].bn == bn && kConfigs[row].cluster_m == cluster_m;
}
static_assert(row_is(k128x256, 128, 256, 1) && row_is(k128x128, 128, 128, 1) && row_is(k128x256Pair, 128, 256, 2) &&
                  row_is(k128x64, 128, 64, 1) && row_is(k64x128, 64, 128, 1) && row_is(k64x64, 64, 64, 1) &&
                  row_is(kSwap128x16, 128, 16, 1) && row_is(k128x192, 128, 192, 1) && row_is(k192x192, 192, 192, 1) &&
                  row_is(k128x128Pair, 128, 128, 2) && row_is(kSwap64x16, 64, 16, 1) && row_is(kSwap64x32, 64, 32, 1) &&
                  row_is(k192x128, 192, 128, 1) && kNumConfigs == 13,
              "the row names match the table");

// The rows with a narrow kernel (sm90/traits.h, CpAsync: 4-byte cp.async loads of 16-bit operands
// whose rows TMA cannot read, 574^3 or 2050^3, in place of the padded copies); generate.py reads
// this line. Rows without a cluster, of one or two consumers.
inline constexpr int kNarrowConfigs[] = {0, 1, 3, 5};
constexpr bool has_narrow(int cfg) {
  for (int c : kNarrowConfigs) {
    if (c == cfg) return true;
  }
  return false;
}
// The swapped decode rows 6, 10 and 11 (plan.cpp): C^T = B^T A^T for M <= kSwapMaxM, so that N
// fills the 128- or 64-row tile and the few rows of A are WGMMA's N (16, or 32 on row 11): a
// 64-row tile multiplied every byte of B by 64 rows of A, 63 of them empty at M = 1 (2026-11-26).
// choose_config never picks them; choose_swap_config (below) picks among them.
inline constexpr int kSwapMaxM = 32;  // rows 6 and 10 take M <= 16 (their tiles' 16 columns), row 11 17-32

// Output tiles of one batch that blocks compute, counting a cluster's blocks past M (a cluster
// covers cluster_m tile rows): the kernel's unit count and the split-K workspace's tile count.
inline long long block_tiles(int m, int n, const TileConfig& c) {
  const long long rows = (m + c.bm - 1) / c.bm;
  return (rows + c.cluster_m - 1) / c.cluster_m * c.cluster_m * ((n + c.bn - 1) / c.bn);
}

// Split-K, from the H100 sweep in docs/tuning.md (2026-11-22): when the tiles leave more
// than half the SMs idle (few-tile and decode shapes), each tile's K range goes to `splits`
// blocks, at most 4 and at most what the SMs hold (tiles x splits <= SMs). A split costs a fixed
// few microseconds (partials through L2 and back, zeroing the counters), so every
// slice keeps at least 16 K tiles (K >= 1024 per slice): 1024^3 and 256^3 run faster unsplit.
// Measured, x torch.mm (splits 1 / chosen): 512x1024x8192 0.53 / 0.84 (4), 16x4096x4096
// 0.63 / 0.77 (4), 64x8192x8192 0.69 / 0.87 (2), 128x4096x14336 0.79 / 0.99 (4).
//
// 2026-11-23 (the benchmark's rotated operands; the autotune cache picked the
// same): the one-consumer tiles (rows 4 and 5, rows M <= 64) are never split. Its decode shapes stream B,
// and slices saved less than the partials and the counters' zeroing cost: 64x8192x8192 0.91x ->
// 0.92-0.94x unsplit, 16x4096x4096 0.84-0.85x either way.
//
// The swapped decode row (128x16 tiles of C^T) splits all or nothing: as many slices as fill the
// SMs (up to 4), or none. With fewer than 32 tiles (B streamed by under a quarter of the SMs) it
// splits where each slice keeps 8 K tiles; with 32 or more, only where the slices busy 7/8 of the
// SMs and each keeps 64 K tiles. 2026-11-27 (H100, the benchmark's rotated operands,
// CUTE_GEMM_SPLITS forced, bf16, us, 1 / 2 / 4 slices; torch.mm):
//   8-24 tiles: 16x1024x4096 15.4 / 11.6 / **8.6** (8.4), 16x2048x2048 9.1 / 8.2 / 8.3 (6.5),
//     16x2048x4096 15.6 / 11.6 / **11.5** (11.1), 16x2048x8192 27.7 / 18.0 / **17.9** (16.9),
//     16x3072x4096 16.1 / 15.3 / 15.3 (14.2);
//   32 tiles: 16x4096x4096 **16.0** / 17.5 / 17.3 (16.7), 16x4096x8192 **29.2** / 30.7 / 29.3
//     (28.6), 16x4096x16384 56.1 / 57.0 / **52.1** (50.8);
//   48 tiles (2 slices busy 96 SMs): 16x6144x8192 **40.1** / 44.3 (42.2);
//   64 tiles (2 slices busy 128): 16x8192x4096 **27.9** / 28.6 (26.3), 16x8192x8192 54.7 /
//     **51.8** (49.2), 16x8192x16384 103.7 / **95.8** (92.6);
//   128 tiles: 16x16384x8192 **92.9** / 98.8 (91.6).
// 1x rows alike (1x4096x8192 **28.5** / 30.0 / 29.1). Two slices of 32 tiles lost to both one
// and four wherever measured. The rule before (the most slices keeping 64 K tiles) ran
// 16x2048x4096 unsplit and split 16x4096x8192 and 16x6144x8192 in two.
// The swapped path's 64x16 row (2026-11-28): row 6's tile at half the rows of N, so twice the
// blocks stream B, each with a 20-stage ring (10 KB a stage). H100, bf16, the benchmark's rotated
// operands, forced rows and slices, us, row 6 (the rule's slices) / row 10 with 1, 2, 4 slices
// (torch.mm); N / 64 = row 10's tiles:
//   16 tiles:  16x1024x4096 8.5 / 12.1, 9.2, **7.8** (8.3)
//   32 tiles:  16x2048x2048 8.2 / **7.2**, 7.3, 7.7 (6.3); 16x2048x4096 11.4 / 12.3, **10.3**, 10.6
//     (10.8); 16x2048x8192 18.2 / 22.5, **16.4**, 16.8 (16.8)
//   48 tiles:  16x3072x4096 15.1 / **12.6**, 14.2, 17.7 (13.9)
//   64 tiles:  16x4096x4096 16.4 / **14.3**, 16.4, 20.7 (16.1); 8x4096x4096 16.1 / **14.2** (14.4);
//     1x4096x4096 15.8 / **14.2** (14.6); 16x4096x8192 29.2 / **27.4** (28.5)
//   80, 96 tiles: 16x5120x8192 **32.1** / 34.4 (34.8); 16x6144x8192 **39.5** / 39.9 (41.2)
//   128 tiles: 16x8192x4096 28.8 / **26.9** (26.7); 16x8192x8192 52.3 / **50.0** (49.0)
//   224, 448 tiles (more than a wave): 16x14336x4096 **44.6** / 45.9 (46.9); 1x28672x8192 **164.2** /
//     172.5 (160.2)
// So row 10 where its tiles fit in one wave and either leave half the SMs or more to K slices, or
// busy 7/8 of them (in between, 61-73 % busy, row 6 was faster: not understood). Its slices: as
// many as put about half the SMs to work (two of 32 tiles, four of 16), fewer where a slice would
// keep under 16 K tiles (16x1024x2048: two; unmeasured, where row 6 took four slices of 8).
// A pure streaming read of 16x4096x4096's 33.7 MB (the best of a sweep of Triton read kernels, the
// same timing) took 13.3 us in the same run, within 8 % of row 10's 14.3 us.
// 2026-11-28 (H200: the H100's SMs with HBM3e at 4.8 TB/s against 3.35, so each SM must keep
// more bytes in flight to stream at the memory's rate). The same forced rows and slices, bf16, us,
// row 6 / row 10 with 1, 2, 3, 4 slices (torch.mm):
//   16 tiles:  16x1024x4096 8.5 (4 slices) / 12.6, 9.5, 8.1, **7.5** (8.2)
//   48 tiles:  16x3072x4096 12.4 (2) / 13.1, **11.7**, 15.9, 15.5 (12.3)
//   64 tiles:  16x4096x4096 13.7 (2) / 13.4, **13.0**, 18.2, 17.6 (13.9); 1x4096x8192 22.2 (4) /
//     24.0, **22.2**, 26.6, 25.1 (22.1)
//   80, 96 tiles: 16x5120x8192 30.9 / **26.0**, 34.7, 29.7, 34.9 (27.7); 16x6144x8192 31.2 / 31.5 (30.2)
//   128 tiles: 16x8192x8192 39.8 / **37.0** (36.5)
//   224, 448 tiles: 16x14336x4096 **33.3** / 33.6 (32.7); 1x28672x8192 **114.2** / 118.1 (114.9)
// So on such a GPU (fast_hbm below: peak HBM bandwidth per SM kFastHbmMBsPerSm or more) row 10
// wherever its tiles fit in one wave, and where the rule above leaves it unsplit, two slices where
// they fit in one wave (48 and 64 tiles measured; 34-47 not). The H100's measurements (above) keep
// the rule above there. Per SM, since what the rules answer is how many bytes each SM must keep in
// flight: H100 SXM 25.4 GB/s (3352 / 132), H200 37.2 (4915 / 132); the threshold halfway between
// the two GPUs measured, parts in between (GH200's or the H100 NVL's HBM3, about 30) unmeasured.
inline constexpr int kFastHbmMBsPerSm = 31000;
static_assert(kConfigs[kSwap64x16].bn == kConfigs[kSwap128x16].bn && kConfigs[kSwap64x16].consumers == 1,
              "row 10 is row 6's swapped tile at fewer rows");
// 2026-11-29 (H200, bf16, the benchmark's rotated operands, us): 17 <= M <= 32 takes row 11, row
// 10's 64-row tile with WGMMA's N at 32 (18 stages of 12 KB, 8 KB of them B's, fit the shared
// memory), with row 10's K slices. Unswapped (rows 4 and 5) / row 11 (torch.mm):
// 32x8192x8192 44.7 / **37.0** (36.6), 17x4096x4096 16.9 / **13.8** (13.9), 32x2048x4096 13.2 /
// **10.4** (10.0), 20x1024x4096 12.9 / **7.9** (8.2), 32x5120x8192 33.8 / **26.0** (27.5), and past
// one wave of its tiles, 32x14336x4096 (224) 35.2 / **33.6** (32.1), 32x28672x8192 (448) 124.3 /
// 124.2 (113.2): so every such M. Its slices, 1 / 2 / 4: 32x8192x8192 **36.9** / 43.5 / 48.9,
// 32x4096x4096 13.9 / **13.6** / 18.2, 32x2048x4096 13.3 / 10.3 / **9.5**, 20x1024x4096 13.0 / 9.8 /
// **7.9**, 32x5120x8192 **25.9** / 36.2 / 35.6 (row 10's rule takes 1, 2, 2, 4, 1).
static_assert(kConfigs[kSwap64x32].bm == kConfigs[kSwap64x16].bm && kConfigs[kSwap64x32].bn == kSwapMaxM &&
                  kConfigs[kSwap64x32].consumers == 1 && kConfigs[kSwap128x16].bn == 16,
              "row 11 is row 10's tile at 32 columns; rows 6 and 10 hold 16");
// The swapped decode path's rows (CUTE_GEMM_SWAP_CONFIG's values; choose_splits' slice rules).
inline constexpr bool is_swap_config(int cfg) {
  return cfg == kSwap128x16 || cfg == kSwap64x16 || cfg == kSwap64x32;
}
// The layouts a row has a kernel for (generate.py writes the same set): every row in every layout,
// but the swapped decode rows only where the kernel's B is K-major. The swapped path's B is the
// call's A, which it reads K-major (plan.cpp), and no rule takes these rows unswapped; a pinned
// CUTE_GEMM_SM90_CONFIG of one of them reads B K-major (copied where it is not).
constexpr bool has_kernel(bool b_kmajor, int cfg) { return b_kmajor || !is_swap_config(cfg); }

// n: C's columns, the swapped kernel's M; m: C's rows (at most kSwapMaxM).
inline int choose_swap_config(int n, int num_sms, bool fast_hbm = false, int m = 1) {
  if (m > kConfigs[kSwap128x16].bn) return kSwap64x32;
  const long long tiles = (n + kConfigs[kSwap64x16].bm - 1) / kConfigs[kSwap64x16].bm;
  return tiles <= num_sms && (fast_hbm || 2 * tiles <= num_sms || 8 * tiles >= 7LL * num_sms) ? kSwap64x16
                                                                                              : kSwap128x16;
}

// fast_hbm: the GPU's peak HBM bandwidth per SM is kFastHbmMBsPerSm or more (plan.cpp; the 2026-11-28 rules).
inline int choose_splits(int m, int n, int k, long long batch, int cfg, int num_sms, bool fast_hbm = false) {
  const TileConfig& c = kConfigs[cfg];
  if (c.consumers < 2 && !is_swap_config(cfg)) return 1;
  const long long tiles = tile_count(m, n, c.bm, c.bn) * batch;
  const long long k_tiles = (k + c.bk - 1) / c.bk;
  if (cfg == kSwap64x16 || cfg == kSwap64x32) {
    long long s = num_sms / 2 / tiles;
    if (fast_hbm && s < 2 && 2 * tiles <= num_sms) s = 2;  // two slices in one wave (2026-11-28)
    s = s < 4 ? s : 4;
    while (s >= 2 && k_tiles / s < 16) --s;
    return s >= 2 ? int(s) : 1;
  }
  long long s = num_sms / tiles;
  s = s < 4 ? s : 4;
  if (cfg == kSwap128x16) {
    if (s < 2) return 1;
    return (tiles < 32 ? k_tiles / s >= 8 : k_tiles / s >= 64 && 8 * tiles * s >= 7LL * num_sms) ? int(s) : 1;
  }
  s = s < k_tiles / 16 ? s : k_tiles / 16;  // K tiles a slice keeps
  return s > 1 ? int(s) : 1;
}

// Stream-K tail (GemmParams::sk_tiles). With `tiles` cluster tiles on `workers` resident clusters
// the last wave is partial (13.6 waves run as 14 at 4096x14336x4096): the tiles past the last full
// wave have their k-tiles spread evenly over all workers instead. A remainder under half a wave
// takes the last full wave with it, so that every worker's segment spans at least one tile's
// k-tiles and no tile is cut into more than two pieces; a tile is never cut into more than
// `slots` (the workspace's partials per tile). Needs a full wave before the tail (fewer tiles
// than workers leave nothing to balance) and 8 k-tiles or more.
struct StreamK {
  int tiles = 0;  // the last `tiles` cluster tiles, 0: none
  int slots = 0;
};
// By default (not `forced`) the tail is taken only where it pays. On the H100 (2026-11-23,
// 128x256 tiles) it costs about 22 us more than its k-tiles' math, whatever the shape
// (the cut tiles' partials through L2 and the last pieces' sums, none of it under tensor-core
// work): about 26 k-tiles of a 128x256 tile. By k-tiles saved against running the tail's tiles
// whole: 8192^3 62 (1.6-1.8 % faster), 16384^2x8192 120 (1.3-1.5 %); break-even at
// 4096x4096x14336 27 and 4096x14336x4096 27; slower at 4096^3 7 (8 %) and
// 8192x8192x1024 7 (5 %). So: segments of kMinStreamKIters k-tiles or more, and
// kStreamKSaved k-tiles saved, on 128x256 tiles only (the only ones measured).
// `forced` (CUTE_GEMM_STREAM_K=1: tests, benchmarks) takes it wherever it can run.
inline constexpr int kMinStreamKIters = 16;
inline constexpr int kStreamKSaved = 32;
inline StreamK choose_stream_k(long long tiles, int k_tiles, int workers, const TileConfig& tc, bool forced) {
  if (workers < 2 || tiles <= workers || k_tiles < 8) return {};
  long long sk = tiles % workers;
  if (sk == 0) return {};
  if (2 * sk < workers) sk += workers;
  const long long iters = sk * k_tiles;
  if (iters > (1ll << 30)) return {};  // 32-bit iteration ids in the kernel
  const long long per_worker = iters / workers;  // >= k_tiles / 2
  if (!forced) {
    const long long rounds = (sk + workers - 1) / workers;  // the tail's tiles, whole: 1 or 2 rounds
    const long long saved = rounds * k_tiles - (iters + workers - 1) / workers;
    if (tc.bm * tc.bn < 128 * 256 || per_worker < kMinStreamKIters || saved < kStreamKSaved) return {};
  }
  return {int(sk), int(k_tiles / per_worker + 2)};
}

// Host rule, from the H100 runs in docs/tuning.md: with at least two waves of 128x256 tiles the
// 2x1 cluster (B fetched from L2 once per pair of blocks: 4096x14336x4096 0.99x torch.mm against
// 0.91x without it); with about one wave the plain 128x256 tile (2048^3: 0.98x against 0.92x);
// below that the 128x128 tile with its deeper ring, which makes twice the blocks. 128x64 tiles
// (2026-11-22) for one row of tiles (64 < M <= 128) that 128x128 tiles would leave half
// the SMs idle: B streams through twice the blocks with no split-K partials (128x8192x8192
// 0.87x -> 0.98x, 128x4096x14336 0.98x -> 1.07x); and for problems of at most four 128x128
// tiles (256^3 0.60x -> 0.70x; since 2026-11-25 those with K too short to split take row 5,
// below). 2026-11-22 also found split-K the way to stream decode rows
// (16x4096x4096 0.76x against 0.62x unsplit). 2026-11-23:
// rows M <= 64 take the one-consumer 64x128 tile (a 128-row tile computes a second, empty half):
// 16x4096x4096 0.77x -> 0.85x, 16x14336x4096 0.93x -> 1.08x, 64x8192x8192 0.83x -> 0.89x; and
// problems whose 128x128 tiles fill at most half the SMs and that split-K would not split (short
// K) take it too, for twice the blocks: 1024^3 0.69x -> 0.74x, 574^3 0.97x -> 1.02x. Where split-K
// applies (512x1024x8192: 0.81x against 0.70x) and on full GPUs (4096^3: 0.49x) it loses: one
// consumer warpgroup keeps the tensor cores about half busy.
//
// 2026-11-23 (the autotune cache's picks for all 46 benchmark problems, next to this
// rule's; docs/tuning.md has the table): the picks agreed except on two counts, now rules. More
// than one wave of 128x256 tiles but less than two takes the cluster tile too (2050^3, 153 tiles:
// 98.3 us -> 91.8 us bf16, operand copies included); and short K (<= 256) with two waves or more
// takes the 128x128 tile, whose epilogues (most of such a tile's time) run on twice the blocks
// (81920x256x256: 38.4 us -> 36.5 us; bf16); on a GPU of fast HBM the 128x256 one
// (2026-11-28, below choose_decode_config).
// Rows M <= 64 (decode) stream B through one consumer warpgroup per block. Row 5's 64-column
// tiles make twice row 4's blocks; where row 4's leave SMs idle that paid on the H100
// (2026-11-25, bf16, us, row 4 / row 5): 64x8192x8192 54.4 / 51.9, 64x4096x8192 33.3 / 28.1,
// 64x4096x4096 18.6 / 16.0, 64x8192x4096 29.4 / 28.1, 32x8192x8192 56.2 / 53.1, 16x8192x8192
// 58.9 / 53.8; but not at 16x4096x4096, 20.4 / 21.8 (M <= 16 fills a quarter of the 64-row A tile
// and K = 4096 gives each block half as many k-tiles to stream: kept on row 4 by rule, no more
// than that one measurement behind it). Every shape measured had fewer row-4 tiles than SMs;
// with a wave or more of them (1x28672x8192: 224 tiles, 85 % of the SMs' waves busy with either
// row; row 4 0.93x torch.mm, row 5 0.85x) row 4 stays. So: row 5 where its tiles fit in one wave
// (past that, row 4's fill the waves as well or better) and busy more than 1 % of the SMs beyond
// row 4's.
inline int choose_decode_config(int m, int n, int k, long long batch, int num_sms, const char** why = nullptr) {
  auto pick = [&](int cfg, const char* rule) {
    if (why != nullptr) *why = rule;
    return cfg;
  };
  if (m <= 16 && k < 8192) return pick(k64x128, "decode: M <= 16 with K < 8192, the 64x128 one-consumer tile");
  const long long tiles5 = tile_count(m, n, kConfigs[k64x64].bm, kConfigs[k64x64].bn) * batch;
  const long long tiles4 = tile_count(m, n, kConfigs[k64x128].bm, kConfigs[k64x128].bn) * batch;
  return tiles5 <= num_sms && 100 * (tiles5 - tiles4) > num_sms
             ? pick(k64x64, "decode: the 64x64 tiles fit in one wave and busy more SMs than 64x128 ones")
             : pick(k64x128, "decode: M <= 64, the 64x128 one-consumer tile");
}

// 2026-11-25 (with PDL): the smallest problems (at most four 128x128 tiles, K too
// short to split) take row 5, whose 64x64 tiles make four times the blocks of row 3: 256^3 bf16
// 2.8 us against 3.6 us (0.99x torch.mm against 0.76x). Measured with PDL on, as every call
// launches unless it copies a bias in or a scratch C out, or CUTE_GEMM_PDL=0.
// 2026-11-26 (bf16, us): row 7's 128x192 tiles where the 2x1 cluster row's last
// wave is short and row 7's waves are full: 3072^3 106.2 -> 88.6 (0.80x -> 0.95x torch.mm),
// 3072x3072x4096 136.8 -> 117.6 (0.84x -> 0.98x), 1536x6144x4096 141.3 -> 121.5 (0.83x ->
// 0.97x): 144 cluster tiles on 66 clusters are 2.2 waves (three), 384 tiles of 128x192 on 132
// SMs 2.9. Where both fill their waves the 128x256 cluster tile is faster (4096^3 207.9 against
// 246.2, 6144^3 703 against 751, 5120^3 416 against 465). The model: a wave of row 7 costs 3/4 of
// one of row 2 at 95 % of its throughput, and row 7 must win by more than 10 % (row 2's stream-K
// tail recovers part of a short last wave: 5120^3's 6.06 waves). tests/test_chooser.py.
inline bool tile192_pays(int m, int n, long long batch, int num_sms) {
  const TileConfig &c2 = kConfigs[k128x256Pair], &c7 = kConfigs[k128x192];
  const long long clusters = num_sms / c2.cluster_m;
  const long long waves2 = (block_tiles(m, n, c2) / c2.cluster_m * batch + clusters - 1) / clusters;
  const long long waves7 = (tile_count(m, n, c7.bm, c7.bn) * batch + num_sms - 1) / num_sms;
  return 877 * waves7 < 1000 * waves2;
}

// 2026-11-27 (H100, bf16, the benchmark's rotated operands, us, row 1 / row 9 at the K slices
// the rule gives both; torch.mm): row 9 (row 1's 128x128 tile in 2x1 clusters, B multicast: 24 KB
// of L2 reads per block and k-tile instead of 32) where its blocks (tiles x slices) busy two
// thirds of the SMs or more and K is long (64 K tiles; 32 with two tile rows):
//   512x1024x8192 (32 tiles x 4 slices) 25.6 / 24.7 and 25.9 / 24.5 (21.5), 1024x1024x8192 (64 x
//   2) 36.5 / 34.7 (27.9), 512x2048x4096 (64 x 2) 22.3 / 21.2 (18.1), 768x1024x8192 (48 x 2) 34.3
//   / 33.0 (42.0), 256x4096x4096 (64 x 2) 26.3 / 24.8 (20.0), 256x2048x4096 (32 x 4) 18.6 / 18.3
//   (13.3), 256x7168x2048 (112 x 1) 18.1 / 17.6 and 18.0 / 17.5 (19.3); ties: 512x4096x4096 (128 x
//   1) 29.7 / 29.6 (27.7), 1536x512x4096 (48 x 2) 21.7 / 21.8 (15.8).
// Shorter K loses: 1024x2048x1024 9.7 / 10.6, 2048x1024x2048 15.9 / 16.9, 768x2048x2048 14.6 /
// 15.1, 1024x1024x2048 15.1 / 15.6, 512x3072x1024 9.7 / 9.9 (512x1536x2048 14.6 both). So do
// fewer blocks: 256x1024x8192 and 512x512x8192 (16 x 4) 19.9 / 21.2 and 19.3 / 20.8, where the L2
// is not what limits them and the pair's coupling costs. Only with whole pairs of tile rows (an
// odd one would compute an empty tile per column) and at most a tile per SM (the range measured;
// fewer 2x1 clusters than SM pairs may fit at once).
static_assert(kConfigs[k128x128Pair].cluster_m == 2 && kConfigs[k128x128Pair].bm == kConfigs[k128x128].bm &&
                  kConfigs[k128x128Pair].bn == kConfigs[k128x128].bn,
              "row 9 is row 1's tile in 2x1 clusters");
inline bool cluster128_pays(int m, int n, int k, long long batch, int num_sms) {
  const TileConfig& c = kConfigs[k128x128Pair];
  const long long rows = (m + c.bm - 1) / c.bm;
  const long long tiles = tile_count(m, n, c.bm, c.bn) * batch;
  const long long k_tiles = (k + c.bk - 1) / c.bk;
  return rows % c.cluster_m == 0 && tiles <= num_sms && (k_tiles >= 64 || (rows == 2 && k_tiles >= 32)) &&
         3 * tiles * choose_splits(m, n, k, batch, k128x128Pair, num_sms) >= 2LL * num_sms;
}

// Fewer 128x256 tiles than three quarters of the SMs (3072x1024x8192, a QKV projection's weight
// gradient: 96 tiles on 132 SMs): tiles of three quarters the work, 192x128 (row 12) or 128x192
// (row 7), whichever fills three quarters of one wave or more and pads the problem by at most an
// eighth (3072x1024: 128 tiles of 192x128; 1024x3072: 128 of 128x192; not 256x7168, whose two
// rows of 192 would compute half again its rows), the fewer tiles if both do. Whole tiles, no K
// slices: every SM holds one. -1: neither. 2026-12-02 (H200, bf16, the benchmark's rotated operands,
// us, the rule's row / row 0 (128x256) / row 1 in 2 K slices; torch.mm), layouts tn, nn, nt:
//   3072x1024x8192 (row 12) 73.6 / 93.5 / 95.1 (73.1), 73.6 (73.1), 74.4 (73.4): 0.78x -> 0.99x;
//   1024x3072x8192 (row 7) 76.0 / 94.4 / 93.9 (73.1), 76.1 (73.2), 76.5 (73.4);
//   3072x1024x1024 (row 12) 12.5 / 15.1 / 27.2 (12.0); 2048x1536x4096 (row 7; row 12 alike)
//   39.1 / 48.8 / 56.0 (38.0). cuBLAS ran 3072x1024x8192 on 128x192 tiles in 2x1 clusters.
// (A 64x128 tile in 2x1 clusters, cuBLAS's for 1024x1024x8192, lost there to row 1 in two
// slices: 37.5 against 32.2, torch.mm 27.3; not kept.)
static_assert(kConfigs[k192x128].bm == kConfigs[k128x192].bn && kConfigs[k192x128].bn == kConfigs[k128x192].bm,
              "row 12 is row 7's tile transposed");
inline int one_wave_config(int m, int n, long long batch, int num_sms) {
  auto fills = [&](const TileConfig& c, long long tiles) {
    return tiles <= num_sms && 4 * tiles >= 3LL * num_sms && 8 * tiles * c.bm * c.bn <= 9LL * m * n * batch;
  };
  const TileConfig &c12 = kConfigs[k192x128], &c7 = kConfigs[k128x192];
  const long long t12 = tile_count(m, n, c12.bm, c12.bn) * batch, t7 = tile_count(m, n, c7.bm, c7.bn) * batch;
  const bool fills12 = fills(c12, t12), fills7 = fills(c7, t7);
  if (fills12 && (!fills7 || t12 <= t7)) return k192x128;
  return fills7 ? k128x192 : -1;
}

// 2026-11-26: just past one wave of 128x256 tiles (2056^3: 153 tiles on 132 SMs, two waves, 0.53x
// cuBLAS), 192x192 tiles in three consumer warpgroups make one wave (121 tiles) of 12.5 % more work
// each: row 8 wherever its tiles (of every batch) fit in one wave and one batch's 128x256 tiles do
// not. It runs whole tiles only (plan.cpp: no K slices, no stream-K tail).
// 2026-11-28 (H200, bf16, us): the short-K rule's 128x128 tile lost there to the 128x256 one,
// 81920x256x256 33.7 against 31.2 (torch.mm 29.5; one shape, why not traced). So on such a GPU
// (fast_hbm) row 0.
// why: where not null, the rule that chose the row (cute_gemm.explain).
inline int choose_config(int m, int n, int k, long long batch, int num_sms, bool fast_hbm = false,
                         const char** why = nullptr) {
  auto pick = [&](int cfg, const char* rule) {
    if (why != nullptr) *why = rule;
    return cfg;
  };
  if (m <= 64) return choose_decode_config(m, n, k, batch, num_sms, why);
  const long long tiles256 = tile_count(m, n, kConfigs[k128x256].bm, kConfigs[k128x256].bn);
  if (k <= 256 && tiles256 >= 2LL * num_sms) {
    return fast_hbm ? pick(k128x256, "short K with two waves of 128x256 tiles, fast HBM: 128x256")
                    : pick(k128x128, "short K with two waves of 128x256 tiles: 128x128, twice the blocks");
  }
  if (tiles256 > num_sms) {
    if (tile_count(m, n, kConfigs[k192x192].bm, kConfigs[k192x192].bn) * batch <= num_sms) {
      return pick(k192x192, "past one wave of 128x256 tiles, one wave of 192x192");
    }
    return num_sms >= 2 && tile192_pays(m, n, batch, num_sms)
               ? pick(k128x192, "the 2x1 cluster tile's last wave short, 128x192 fills its waves (tile192_pays)")
               : pick(k128x256Pair, "more than one wave of 128x256 tiles: the 2x1 cluster tile");
  }
  if (tiles_fill_gpu(m, n, kConfigs[k128x256].bm, kConfigs[k128x256].bn, num_sms)) return pick(k128x256, "about one wave of 128x256 tiles");
  if (const int c = one_wave_config(m, n, batch, num_sms); c >= 0) {
    return pick(c, "under 3/4 of a wave of 128x256 tiles: one full wave of 3/4 the work (one_wave_config)");
  }
  const long long tiles128 = tile_count(m, n, kConfigs[k128x128].bm, kConfigs[k128x128].bn) * batch;
  if (tiles128 <= 4 && choose_splits(m, n, k, batch, k128x64, num_sms) == 1) {
    return pick(k64x64, "at most four 128x128 tiles, K too short to split: 64x64 tiles");
  }
  if ((m > 64 && m <= 128 && 2 * tiles128 <= num_sms) || tiles128 <= 4) {
    return pick(k128x64, "one row of tiles or at most four 128x128 tiles: 128x64");
  }
  if (2 * tiles128 <= num_sms && choose_splits(m, n, k, batch, k128x128, num_sms) == 1) {
    return pick(k64x128, "128x128 tiles fill at most half the SMs and K does not split: 64x128");
  }
  return cluster128_pays(m, n, k, batch, num_sms)
             ? pick(k128x128Pair, "few tiles, long K: 128x128 in 2x1 clusters (cluster128_pays)")
             : pick(k128x128, "few tiles: 128x128");
}

// The narrow kernels' row (plan.cpp, CUTE_GEMM_SM90_NARROW=1). 2026-11-29 (H200, bf16 nn, us; the
// narrow kernels on rows 5 / 1 / 0, the chooser's aligned row mapped; the padded copies, the sm80
// narrow kernels): 574^3 **7.6** / 14.3 / 21.5 (copies about 9, sm80 narrow 9.0); 256x574x514
// **7.5** / 14.7 (8.4); 130x66x2050 **17.4** / 26.6 (17.7); 16x4100x4096 27.9 / **23.5** (29.1,
// row 1 in 4 K slices); 66x4098x4098 30.5 / **28.6** (33.0); 1030^3 25.3 / **21.2** (copies 16.2);
// 258x4102x4096 75.6 / **66.2** (copies 59.6); 2050^3 121 / **101** / 106 (copies 47); 4098^3 838 /
// 574 / **431** (copies 267). So where row 5's 64x64 tiles fit in one wave, row 1 if its tiles and
// K slices make more blocks than row 5's tiles, else row 5; past one wave, the aligned rule's row
// (choose_config) or the row with a narrow kernel nearest it (a cluster row's tile without the
// cluster, a 128x192 or 192x192 tile as 128x256, the 64x128 one-consumer tile as 64x64). Large
// problems run faster on the copies (the producer's 4-byte copies cost more than the copies'
// one pass): the knob stays opt-in, and its rule for when to take these kernels is still to come.
inline int choose_narrow_config(int m, int n, int k, long long batch, int num_sms, bool fast_hbm = false) {
  const long long tiles64 = tile_count(m, n, kConfigs[k64x64].bm, kConfigs[k64x64].bn) * batch;
  if (tiles64 <= num_sms) {
    const long long blocks128 = tile_count(m, n, kConfigs[k128x128].bm, kConfigs[k128x128].bn) * batch *
                                choose_splits(m, n, k, batch, k128x128, num_sms, fast_hbm);
    return blocks128 > tiles64 ? k128x128 : k64x64;
  }
  switch (const int c = choose_config(m, n, k, batch, num_sms, fast_hbm)) {
    case k128x256Pair: case k128x192: case k192x192: return k128x256;
    case k64x128: return k64x64;
    case k128x128Pair: case k192x128: return k128x128;
    default: return has_narrow(c) ? c : k128x128;
  }
}

}  // namespace cute_gemm::sm90
