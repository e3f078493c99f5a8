// The order in which thread blocks visit output tiles. One definition for every kernel family;
// cute_gemm/tile_order.py mirrors it in Python and tests/test_tile_order.py checks both agree
// with the rules (a bijection onto the tile grid; a group walks down its columns).
#pragma once

#include <cstdint>

#include "gemm_params.h"  // CUTE_GEMM_HOST_DEVICE

namespace cute_gemm {

struct TileCoord {
  int m;
  int n;
};

// Grouped ("GROUP_SIZE_M") order: consecutive block ids fill a column of `group` tile rows before
// moving to the next column, so the blocks resident at one time share a few A row-panels and
// B column-panels in L2 instead of streaming all of B for every row of tiles.
// Index: int64_t, or int where the caller knows the tile count fits (32-bit division is a few
// instructions, 64-bit division a subroutine with its own registers).
template <class Index>
CUTE_GEMM_HOST_DEVICE TileCoord grouped_tile(Index pid, int num_m, int num_n, int group) {
  const Index num_in_group = Index(group) * num_n;
  const Index first_m = (pid / num_in_group) * group;
  const Index rows_left = num_m - first_m;
  const Index gsize = rows_left < group ? rows_left : group;  // the last group may be short
  const Index local = pid % num_in_group;
  return {int(first_m + local % gsize), int(local / gsize)};
}

// One unit of a block's work: k-tiles [kb, ke) of cluster tile `tile`, piece `part` of the `parts`
// blocks that share the tile (split-K slices or stream-K segments). Pieces of a shared tile leave
// fp32 partials in the workspace's slot group `slot_tile`; the last to arrive sums them.
struct Unit {
  int tile, kb, ke, part, parts, slot_tile;
};

// floor(a b / d) for 0 <= a <= d < 2^16 and 0 <= b < 2^31, in 32-bit arithmetic: a (b / d) <= b
// and a (b % d) < 2^32 (the host keeps split counts and stream-K workers below 2^16). The sm90
// consumers call the cursor while their accumulators and deferred C values fill all but a few
// registers: a 64-bit division is a subroutine, whose registers and return address ptxas spilled
// there (2026-11-26).
CUTE_GEMM_HOST_DEVICE int mul_div_small(int a, int b, int d) {
  return a * (b / d) + int(unsigned(a) * unsigned(b % d) / unsigned(d));
}

// A block's units, in order: the data-parallel units u = first, first + step, ... (whole tiles, or
// split-K slices: unit u is slice u % splits of tile u / splits), then, with a stream-K tail, the
// segments of the virtual workers w = first, first + step, ... (one each when the grid has
// sk_workers clusters): worker w computes iterations [w I / W, (w + 1) I / W) of the I = sk_tiles x
// k_tiles iterations of the tail. Producer and consumers walk the same cursor.
//
// A segment's pieces (one per tile it touches) run last piece first, then the first, then the
// whole tiles between: the last piece starts at k-tile 0 and the first ends at k-tile k_tiles, so
// every worker whose segment crosses a tile boundary reads k-tile t at time t (and then k-tile
// k_tiles - L + t, L its length). In K order the workers' k-positions would be spread over the
// whole of K, no two blocks would read the same A or B k-tile at once, and the tail would stream
// its operands from DRAM: on the H100 it ran 1.5x to 1.8x slower than the same work data-parallel
// (4096x4096x14336: 0.88x torch.mm against 0.99x without the tail; 2026-11-23).
struct WorkCursor {
  int dp_units, dp_tiles, splits, step, k_tiles, sk_workers, sk_iters;
  int u, w, s = 0, e = 0, j = 0;  // next data-parallel unit, next worker; its segment [s, e), next piece j

  // Block (cluster) `first` of a grid of `step`, over `tiles` cluster tiles of `k_tiles` k-tiles:
  // the last `sk_tiles` of them the stream-K tail of `sk_workers` workers (0: none).
  CUTE_GEMM_HOST_DEVICE static WorkCursor make(int tiles, int k_tiles, int splits, int sk_tiles, int sk_workers,
                                               int first, int step) {
    const int dp_tiles = tiles - sk_tiles;
    return {dp_tiles * splits, dp_tiles, splits, step, k_tiles, sk_tiles > 0 ? sk_workers : 0, sk_tiles * k_tiles,
            first, first};
  }

  // floor(worker I / W), I = sk_iters, W = sk_workers (worker <= W).
  CUTE_GEMM_HOST_DEVICE int seg_begin(int worker) const { return mul_div_small(worker, sk_iters, sk_workers); }
  // The worker whose segment holds iteration `it`: the largest w with seg_begin(w) <= it, that is
  // floor(((it + 1) W - 1) / I). A 32-bit float estimate (off by less than one: W < 2^16), then
  // exact corrections against seg_begin.
  CUTE_GEMM_HOST_DEVICE int worker_of(int it) const {
#if defined(__CUDA_ARCH__)
    int w = int(__fdividef(float(it) * float(sk_workers), float(sk_iters)));  // no slow-path call
#else
    int w = int(float(it) * float(sk_workers) / float(sk_iters));
#endif
    w = w < 0 ? 0 : w >= sk_workers ? sk_workers - 1 : w;
    while (w + 1 < sk_workers && seg_begin(w + 1) <= it) ++w;
    while (w > 0 && seg_begin(w) > it) --w;
    return w;
  }
  // Tiles the current segment touches (0 before the first; every segment holds an iteration or more).
  CUTE_GEMM_HOST_DEVICE int pieces() const { return e > s ? (e - 1) / k_tiles - s / k_tiles + 1 : 0; }
  // Whether next() has another unit.
  CUTE_GEMM_HOST_DEVICE bool has_next() const { return u < dp_units || j < pieces() || w < sk_workers; }
  CUTE_GEMM_HOST_DEVICE bool next(Unit& out) {
    if (u < dp_units) {
      if (splits == 1) {  // whole tiles, the common case: no divisions
        out = {u, 0, k_tiles, 0, 1, u};
        u += step;
        return true;
      }
      const int tile = u / splits, slice = u % splits;
      out = {tile, mul_div_small(slice, k_tiles, splits), mul_div_small(slice + 1, k_tiles, splits), slice, splits,
             tile};
      u += step;
      return true;
    }
    if (j >= pieces()) {
      if (w >= sk_workers) return false;
      s = seg_begin(w);
      e = seg_begin(w + 1);
      j = 0;
      w += step;
    }
    const int n = pieces();
    // Piece j in running order: the segment's last tile, then its first, then those between.
    const int t = s / k_tiles + (j == 0 ? n - 1 : j - 1), t0 = t * k_tiles;
    const int first_worker = worker_of(t0);
    out = {dp_tiles + t,
           (s > t0 ? s : t0) - t0,
           (e < t0 + k_tiles ? e : t0 + k_tiles) - t0,
           (w - step) - first_worker,
           worker_of(t0 + k_tiles - 1) - first_worker + 1,
           t};
    ++j;
    return true;
  }
};

// How many bm x bn output tiles cover an m x n result.
inline long long tile_count(int m, int n, int bm, int bn) {
  return (long long)((m + bm - 1) / bm) * ((n + bn - 1) / bn);
}

// Host rule shared by the families' tile choices: bm x bn tiles give at least three quarters of
// the SMs a block. Below that, a tile that makes more blocks wins (docs/tuning.md).
inline bool tiles_fill_gpu(int m, int n, int bm, int bn, int num_sms) {
  return 4 * tile_count(m, n, bm, bn) >= 3 * (long long)num_sms;
}

}  // namespace cute_gemm
