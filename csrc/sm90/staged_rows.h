// C rows that TMA cannot store, written by a consumer warpgroup from its staging buffer: the
// SM90 epilogue's path for a C whose N, ldc or base is not 16-byte aligned (epilogue_c.h).
#pragma once

#include <cstdint>

#include <cute/tensor.hpp>

#include "sm90/traits.h"

namespace cute_gemm::sm90 {

// C rows that TMA cannot store (GemmParams::c_staged: N, ldc or the base not 16-byte aligned):
// consumer c's slice (kRowsPerConsumer rows, kChunkN columns from (row0, col0) of the batch's C
// at `base`), staged in buffer buf of sC, written by the warpgroup's 128 threads. A thread takes 8
// consecutive elements of a row at a time (one 16-byte unit of the staging: its swizzle moves
// whole units), a warp consecutive units along the rows, and stores them in the widest pieces the
// address allows: 16, 8 or 4 bytes. A row that starts 2 bytes past a 4-byte boundary (every
// other row of an odd ldc) is written in aligned 4-byte pairs too, each straddling two of the
// unit's words, the last one with the next unit's first element (read from the staging); only a
// chunk row's first and last elements go alone (2-byte stores of a word another store completes
// cost more: 2026-11-27). Element by element at the row's end (bounded by N); rows past M
// skipped. Called by the 128 threads after the barrier that follows the staging; the next
// staging's barrier orders these reads before it. Inlined: made __noinline__, the call's register
// saves made ptxas spill the tile cursor (40 bytes) in the 128x256 cluster kernel, which spills
// nothing inlined, and the file compiled no faster (2026-11-27).
template <class Tr, class SmemC>
CUTE_DEVICE void write_staged_rows(SmemC sC, int buf, int c, typename Tr::CElement* base, int64_t ldc,
                                   int row0, int col0, int m, int n) {
  using CE = typename Tr::CElement;
  Tensor sCchunk = local_tile(sC(_, _, buf), make_tile(Int<Tr::kRowsPerConsumer>{}, Int<Tr::kChunkN>{}),
                              make_coord(c, 0));  // (64 rows, kChunkN)
  constexpr int kUnits = Tr::kChunkN / 8;  // 16-byte units per row
  const int lt = threadIdx.x % 128;
#pragma unroll 1
  for (int idx = lt; idx < Tr::kRowsPerConsumer * kUnits; idx += 128) {
    const int r = idx / kUnits, cc = 8 * (idx % kUnits);
    const int grow = row0 + r, gcol = col0 + cc;
    if (grow >= m || gcol >= n) continue;
    const uint4 v = *reinterpret_cast<const uint4*>(&sCchunk(r, cc));
    CE* dst = base + int64_t(grow) * ldc + gcol;
    uint16_t* d = reinterpret_cast<uint16_t*>(dst);
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};  // element 2i: word i's low half
    // A row 2 bytes past a 4-byte boundary is written in pairs (1, 2), (3, 4), (5, 6), (7, the
    // next unit's 0); its element 0 is the previous unit's last pair's high half, but in a chunk
    // row's first unit.
    const uintptr_t addr = reinterpret_cast<uintptr_t>(dst);
    const bool odd = addr % 4 != 0;
    if (odd && cc == 0) d[0] = uint16_t(v.x);
    if (gcol + 8 > n) {  // the row's end: element by element (an odd row's element 0 is written)
      CUTE_UNROLL
      for (int e = 0; e < 8; ++e) {
        if (e >= int(odd) && gcol + e < n) d[e] = uint16_t(w[e / 2] >> (16 * (e % 2)));
      }
    } else if (!odd) {
      if (addr % 16 == 0) {
        *reinterpret_cast<uint4*>(dst) = v;
      } else if (addr % 8 == 0) {
        reinterpret_cast<uint2*>(dst)[0] = make_uint2(v.x, v.y);
        reinterpret_cast<uint2*>(dst)[1] = make_uint2(v.z, v.w);
      } else {
        uint32_t* p = reinterpret_cast<uint32_t*>(dst);
        p[0] = v.x, p[1] = v.y, p[2] = v.z, p[3] = v.w;
      }
    } else {
      uint32_t* pairs = reinterpret_cast<uint32_t*>(d + 1);
      pairs[0] = __funnelshift_r(v.x, v.y, 16);
      pairs[1] = __funnelshift_r(v.y, v.z, 16);
      pairs[2] = __funnelshift_r(v.z, v.w, 16);
      if (cc + 8 < Tr::kChunkN && gcol + 8 < n) {  // the next unit's first element: a whole pair
        const uint32_t next = *reinterpret_cast<const uint16_t*>(&sCchunk(r, cc + 8));
        pairs[3] = __funnelshift_r(v.w, next, 16);
      } else {
        d[7] = uint16_t(v.w >> 16);
      }
    }
  }
}

}  // namespace cute_gemm::sm90
