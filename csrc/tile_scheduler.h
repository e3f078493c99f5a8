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
