// The SM90 (TMA + mbarrier ring + WGMMA, warp-specialized, persistent) tile configurations:
// one table read by the kernel traits and the host dispatch, as for SM80.
#pragma once

#include "gemm_params.h"
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
// this line. Rows without a cluster, of one or two consumers (docs/tuning.md section 15).
inline constexpr int kNarrowConfigs[] = {0, 1, 3, 5};
constexpr bool has_narrow(int cfg) {
  for (int c : kNarrowConfigs) {
    if (c == cfg) return true;
  }
  return false;
}
// The rows with a gated kernel (sm90/traits.h, Gated: C = act(A B) * (A B2), nn.GatedMLP's gate and
// up projections as one GEMM over both weights), for K-major A and B; generate.py reads this line.
// The cooperative tiles, 128 (rows 0 and 2, row 2 in 2x1 clusters) or 64 (row 1) columns of C per
// tile, and row 4's 64-row tile (64 columns of C) for decode.
inline constexpr int kGatedConfigs[] = {0, 1, 2, 4};
constexpr bool has_gated(int cfg) {
  for (int c : kGatedConfigs) {
    if (c == cfg) return true;
  }
  return false;
}
// The swapped decode rows 6, 10 and 11 (plan.cpp): C^T = B^T A^T for M <= kSwapMaxM, so that N
// fills the tile and the few rows of A are WGMMA's N (16, or 32 on row 11), not a 64-row tile of
// mostly empty rows. choose_swap_config (below) picks among them (docs/tuning.md section 9).
inline constexpr int kSwapMaxM = 32;  // rows 6 and 10 take M <= 16 (their tiles' 16 columns), row 11 17-32

// Output tiles of one batch that blocks compute, counting a cluster's blocks past M (a cluster
// covers cluster_m tile rows): the kernel's unit count and the split-K workspace's tile count.
inline long long block_tiles(int m, int n, const TileConfig& c) {
  const long long rows = (m + c.bm - 1) / c.bm;
  return (rows + c.cluster_m - 1) / c.cluster_m * c.cluster_m * ((n + c.bn - 1) / c.bn);
}

// Whether a cluster row's clusters pair up the tile rows of an M-row problem (an odd tile row
// would leave a block of each pair on a tile past M).
inline bool pairs_tile_rows(int m, int row) {
  const TileConfig& c = kConfigs[row];
  return (m + c.bm - 1) / c.bm % c.cluster_m == 0;
}

// The L2 policies of a launch's TMA loads (GemmParams::l2_policy_a / _b). mode 0: every line
// evict-normal. mode 1: an operand that the launch reads once (A where one tile column covers N, B
// where one cluster's tile rows cover M, and neither broadcast over batches: a decode step's
// weight) evict-first, so that its stream replaces its own lines rather than what the other
// kernels of a step keep in L2. mode 2: mode 1 and the other operand, read again by every tile,
// evict-last.
struct L2Policies {
  uint64_t a = kL2EvictNormal, b = kL2EvictNormal;
};
inline L2Policies l2_policies(const GemmParams& p, const TileConfig& c, int mode) {
  L2Policies pol;
  if (mode == 0) return pol;
  const bool a_once = (p.n + c.bn - 1) / c.bn == 1 && (p.batch == 1 || p.batch_a != 0);
  const bool b_once = (p.m + c.bm - 1) / c.bm <= c.cluster_m && (p.batch == 1 || p.batch_b != 0);
  if (a_once != b_once) {
    pol.a = a_once ? kL2EvictFirst : mode == 2 ? kL2EvictLast : kL2EvictNormal;
    pol.b = b_once ? kL2EvictFirst : mode == 2 ? kL2EvictLast : kL2EvictNormal;
  }
  return pol;
}

// Fast HBM: peak HBM bandwidth per SM (MB/s) from which the H200's rules apply, since what they
// answer is how many bytes each SM must keep in flight. Halfway between the H100 SXM (25.4 GB/s)
// and the H200 (37.2); parts in between are unmeasured (docs/tuning.md section 10).
inline constexpr int kFastHbmMBsPerSm = 31000;
static_assert(kConfigs[kSwap64x16].bn == kConfigs[kSwap128x16].bn && kConfigs[kSwap64x16].consumers == 1,
              "row 10 is row 6's swapped tile at fewer rows");
// Row 11 is row 10's 64-row tile with WGMMA's N at 32 (18 stages of 12 KB fit the shared memory),
// for 17 <= M <= 32 with row 10's K slices: it beat or tied the unswapped rows wherever measured
// (docs/tuning.md section 9, row 11).
static_assert(kConfigs[kSwap64x32].bm == kConfigs[kSwap64x16].bm && kConfigs[kSwap64x32].bn == kSwapMaxM &&
                  kConfigs[kSwap64x32].consumers == 1 && kConfigs[kSwap128x16].bn == 16,
              "row 11 is row 10's tile at 32 columns; rows 6 and 10 hold 16");
// The swapped decode path's rows (CUTE_GEMM_SWAP_CONFIG's values; choose_splits' slice rules).
inline constexpr bool is_swap_config(int cfg) {
  return cfg == kSwap128x16 || cfg == kSwap64x16 || cfg == kSwap64x32;
}

// The swapped row: row 11 for M > 16; else row 10 (row 6's tile at half the rows, twice the blocks)
// where its tiles fit in one wave and leave half the SMs to K slices or busy 7/8 of them (fast HBM:
// wherever they fit in one wave), else row 6 (docs/tuning.md section 9, row 10; section 10).
// n: C's columns, the swapped kernel's M; m: C's rows (at most kSwapMaxM).
inline int choose_swap_config(int n, int num_sms, bool fast_hbm = false, int m = 1) {
  if (m > kConfigs[kSwap128x16].bn) return kSwap64x32;
  const long long tiles = (n + kConfigs[kSwap64x16].bm - 1) / kConfigs[kSwap64x16].bm;
  return tiles <= num_sms && (fast_hbm || 2 * tiles <= num_sms || 8 * tiles >= 7LL * num_sms) ? kSwap64x16
                                                                                              : kSwap128x16;
}

// K slices (split-K) where the tiles leave SMs idle: at most 4, tiles x slices <= SMs, and every
// slice keeps 16 K tiles, since a split costs a few microseconds. The one-consumer rows are not
// split: their slices saved less than the partials cost (docs/tuning.md section 7); but the decode
// rows 4 and 5 (M <= 64) take two where their tiles leave half the SMs idle and a slice keeps 64 K
// tiles or more, so that twice the SMs stream the weight (H200, 64x4096x14336 on row 5: 45.8 ->
// 36.2 us, torch.mm 37.1; 64x4096x4096's 32 K tiles a slice lost after another kernel; section 9).
// Swapped rows: row 6 all or nothing (8 K tiles a slice under 32 tiles; from 32, 64 K tiles and 7/8
// of the SMs busy); rows 10 and 11 as many as put about half the SMs to work, two where they fit in
// one wave on fast HBM or where a slice keeps 96 K tiles (docs/tuning.md section 9, rows 6 and 10;
// section 10; section 24).
// fast_hbm: the GPU's peak HBM bandwidth per SM is kFastHbmMBsPerSm or more (plan.cpp).
inline int choose_splits(int m, int n, int k, long long batch, int cfg, int num_sms, bool fast_hbm = false) {
  const TileConfig& c = kConfigs[cfg];
  const long long tiles = tile_count(m, n, c.bm, c.bn) * batch;
  const long long k_tiles = (k + c.bk - 1) / c.bk;
  if (c.consumers < 2 && !is_swap_config(cfg)) {
    const bool decode_row = m <= 64 && (cfg == k64x128 || cfg == k64x64);
    return decode_row && 2 * tiles <= num_sms && k_tiles / 2 >= 64 ? 2 : 1;
  }
  if (cfg == kSwap64x16 || cfg == kSwap64x32) {
    long long s = num_sms / 2 / tiles;
    // Two slices in one wave on fast HBM (docs/tuning.md section 10), and on any HBM where a slice
    // keeps 96 K tiles or more (the H100: 1x4096x14336 in the decode step 357.8 us against 373.5
    // unsplit over 8 calls, 32x4096x14336 after another kernel 52.1 against 57.8; K = 8192's 64 a
    // slice tied; docs/tuning.md section 24).
    if (s < 2 && 2 * tiles <= num_sms && (fast_hbm || k_tiles / 2 >= 96)) s = 2;
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

// The gated kernel's row for an (m, n) C (the kernel computes 2 n columns): M <= 64 (decode) on row
// 4's 64-row tiles, whole (gated_plan.cpp); past one wave of 128x256 tiles with the tile rows in
// whole pairs, their 2x1 cluster tile (B and B2 read from L2 once per pair: at 512-8192 tokens as
// fast as 128x256 alone or 6-14 % faster; an odd tile row would make its pair compute a tile past
// M); else 128x256 tiles where they give three quarters of the SMs a block, else 128x128 (twice the
// tiles). Streaming the weights at M <= 64, the 64-row tiles beat 128x256 by 8 % and K slices lose:
// the partials cost more than the SMs that the last wave leaves idle (docs/tuning.md section 24,
// the gated kernel at decode and in 2x1 clusters).
inline int choose_gated_config(int m, int n, int num_sms) {
  if (m <= 64) return k64x128;
  const TileConfig& c = kConfigs[k128x256];
  if (pairs_tile_rows(m, k128x256Pair) && tile_count(m, 2 * n, c.bm, c.bn) > num_sms) return k128x256Pair;
  return tiles_fill_gpu(m, 2 * n, c.bm, c.bn, num_sms) ? k128x256 : k128x128;
}

// Stream-K tail (GemmParams::sk_tiles): where the last wave is partial, the tiles past the last
// full wave have their k-tiles spread evenly over all workers (resident clusters). A remainder
// under half a wave takes the last full wave with it, so that every segment spans at least one
// tile's k-tiles; a tile is cut into at most `slots` pieces (the workspace's partials per tile).
// Needs a full wave before the tail and 8 k-tiles or more (docs/tuning.md section 8).
struct StreamK {
  int tiles = 0;  // the last `tiles` cluster tiles, 0: none
  int slots = 0;
};
// By default (not `forced`) the tail runs only where it pays: its partials and sums cost about 26
// k-tiles of a 128x256 tile, so it needs kMinStreamKIters k-tiles a segment and kStreamKSaved saved,
// on 128x256 tiles only, the only ones measured (docs/tuning.md section 8, the rule).
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

// Rows M <= 64 (decode) stream B through one consumer warpgroup: row 5's 64x64 tiles where they fit
// in one wave and busy more than 1 % of the SMs beyond row 4's 64x128 ones, else row 4; M <= 16 with
// K < 8192 stays on row 4, its one loss (docs/tuning.md section 6, rows 4 and 5).
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

// Row 7's 128x192 tiles where the 2x1 cluster row's last wave is short and row 7's are full: a wave
// of row 7 costs 3/4 of one of row 2 at 95 % of its throughput, and must win by 10 %, since row 2's
// stream-K tail recovers part of a short last wave (docs/tuning.md section 6, row 7).
inline bool tile192_pays(int m, int n, long long batch, int num_sms) {
  const TileConfig &c2 = kConfigs[k128x256Pair], &c7 = kConfigs[k128x192];
  const long long clusters = num_sms / c2.cluster_m;
  const long long waves2 = (block_tiles(m, n, c2) / c2.cluster_m * batch + clusters - 1) / clusters;
  const long long waves7 = (tile_count(m, n, c7.bm, c7.bn) * batch + num_sms - 1) / num_sms;
  return 877 * waves7 < 1000 * waves2;
}

// Row 9 (row 1's tile in 2x1 clusters, B multicast: 24 KB of L2 reads per block and k-tile, not 32)
// where its blocks busy 2/3 of the SMs and K is long (64 K tiles; 32 with two tile rows); shorter K
// and fewer blocks lost. Whole pairs of tile rows, at most a tile per SM (docs/tuning.md section 6).
static_assert(kConfigs[k128x128Pair].cluster_m == 2 && kConfigs[k128x128Pair].bm == kConfigs[k128x128].bm &&
                  kConfigs[k128x128Pair].bn == kConfigs[k128x128].bn,
              "row 9 is row 1's tile in 2x1 clusters");
inline bool cluster128_pays(int m, int n, int k, long long batch, int num_sms) {
  const TileConfig& c = kConfigs[k128x128Pair];
  const long long rows = (m + c.bm - 1) / c.bm;
  const long long tiles = tile_count(m, n, c.bm, c.bn) * batch;
  const long long k_tiles = (k + c.bk - 1) / c.bk;
  return pairs_tile_rows(m, k128x128Pair) && tiles <= num_sms && (k_tiles >= 64 || (rows == 2 && k_tiles >= 32)) &&
         3 * tiles * choose_splits(m, n, k, batch, k128x128Pair, num_sms) >= 2LL * num_sms;
}

// Under 3/4 of a wave of 128x256 tiles (3072x1024x8192: 96 tiles on 132 SMs): row 12 or row 7, tiles
// of 3/4 the work, whichever fills 3/4 of one wave with at most an eighth of padding (the fewer tiles
// if both do), whole tiles. -1: neither (docs/tuning.md section 24, the QKV weight's gradient).
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

// The unswapped row, in the order of docs/tuning.md section 6: M <= 64 apart; short K with two
// waves of 128x256 tiles on 128x128 tiles, whose epilogues run on twice the blocks (128x256 on fast
// HBM); past one wave, 192x192 (one wave, whole tiles only), 128x192 or the 2x1 cluster (B read from
// L2 once per pair); about one wave, 128x256; below that, smaller tiles or K slices for more blocks.
// b_lined: B's rows, as the kernel reads them, start on the L2's 128-byte lines (plan.cpp).
// why: where not null, the rule that chose the row (cute_gemm.explain).
inline int choose_config(int m, int n, int k, long long batch, int num_sms, bool fast_hbm = false,
                         bool b_lined = true, const char** why = nullptr) {
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
    // Row 4 reads 128 columns of B per 64 rows of C; where B's rows straddle the L2's 128-byte
    // lines, its blocks queue at the L2 (1000^3: 11.4 us against 6.6 on 1024^3): the 128x128 tile
    // in 2x1 clusters reads B once per pair, and plain 128x128 tiles where the tile rows do not
    // pair (docs/tuning.md section 6, B's rows off the lines).
    if (!b_lined) {
      return pairs_tile_rows(m, k128x128Pair)
                 ? pick(k128x128Pair, "few tiles, K does not split, B's rows off the 128-byte lines: 128x128 in 2x1 "
                                      "clusters")
                 : pick(k128x128, "few tiles, K does not split, B's rows off the 128-byte lines: 128x128");
    }
    return pick(k64x128, "128x128 tiles fill at most half the SMs and K does not split: 64x128");
  }
  return cluster128_pays(m, n, k, batch, num_sms)
             ? pick(k128x128Pair, "few tiles, long K: 128x128 in 2x1 clusters (cluster128_pays)")
             : pick(k128x128, "few tiles: 128x128");
}

// The narrow kernels' row (plan.cpp, choose_narrow: where the narrow rule takes narrow kernels, and
// anywhere under CUTE_GEMM_SM90_NARROW=1; large problems run faster on the padded copies): where
// row 5's tiles fit in one wave, row 1 if its tiles and K slices make more blocks, else row 5;
// past one wave, choose_config's row or the nearest narrow row (docs/tuning.md section 15, the
// narrow sm90 kernels).
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

// Which instantiation of the row's kernel runs a call (sm90/run.h launches it, plan.cpp reports it
// in cute_gemm.explain): the lean kernel (no general X term, activation or staged rows in its code)
// for the common epilogues, the activation warps' kernel for an activation on 128x256 tiles, else
// the general kernel (docs/design.md, the lean kernel and the activation warps).
enum class EpilogueKernel : int { kGeneral = 0, kLean = 1, kActWarps = 2 };

// The rows that have each kernel: 16-bit operands (a staged, TMA-stored C of the operands' type),
// not the narrow kernels (their cp.async producer). The lean kernel needs C chunks of 64 columns
// or more (the swapped rows' 16- and 32-column chunks are small already); the activation warps
// need 128x256 tiles (a tile's epilogue with a main loop to hide under).
constexpr bool has_lean_kernel(int cfg, bool narrow, int elem_bytes) {
  return elem_bytes == 2 && !narrow && kConfigs[cfg].bn >= 64;
}
constexpr bool has_act_warps_kernel(int cfg, bool narrow, int elem_bytes) {
  return elem_bytes == 2 && !narrow && kConfigs[cfg].bm == 128 && kConfigs[cfg].bn == 256;
}

// What the choice reads of a call: its C and epilogue, its split, the activation-warps knob, and its work.
struct EpilogueForm {
  bool c_vector_ok = false;  // 16-byte aligned C rows that TMA stores (GemmParams::c_vector_ok)
  bool c_f32 = false;
  bool act = false;          // an activation
  bool x_bias16 = true;      // no X, or X a 16-bit bias row (x_ldm == 0, x_ldn == 1)
  bool whole_tiles = true;   // no K slices and no stream-K tail
  bool act_offload = true;   // CUTE_GEMM_ACT_OFFLOAD
  long long units = 0;       // (cluster tile, K slice) units of the launch
  long long resident = 0;    // clusters that run at once
};

// The activation warps' kernel where its row has it, for 16-bit TMA-stored C with an activation and
// at most a 16-bit bias, whole tiles, and two tiles or more per block (a block's last tile has no
// main loop after it to hide their work under); else the lean kernel where its row has it, for
// 16-bit TMA-stored C without an activation and at most a 16-bit bias (split-K and stream-K
// alike); else the general kernel.
constexpr EpilogueKernel choose_epilogue_kernel(int cfg, bool narrow, int elem_bytes, const EpilogueForm& f) {
  const bool plain_c = f.c_vector_ok && !f.c_f32 && f.x_bias16;
  if (has_act_warps_kernel(cfg, narrow, elem_bytes) && f.act_offload && plain_c && f.act && f.whole_tiles &&
      f.units >= 2 * f.resident) {
    return EpilogueKernel::kActWarps;
  }
  if (has_lean_kernel(cfg, narrow, elem_bytes) && plain_c && !f.act) return EpilogueKernel::kLean;
  return EpilogueKernel::kGeneral;
}

}  // namespace cute_gemm::sm90
