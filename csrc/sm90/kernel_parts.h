// The SM90 kernel's parts outside its body: the kernel parameters, the ring's (stage, phase)
// state, the narrow producer's cp.async loader and the writer of staged C rows. Included by
// sm90/kernel.h only, in its sm_90a device pass and its host pass.
#pragma once

#include <cute/tensor.hpp>

#include "sm90/traits.h"

namespace cute_gemm::sm90 {

template <class Tr>
struct KernelParams {
  typename Tr::TmaA tma_a;
  typename Tr::TmaB tma_b;
  typename Tr::TmaC tma_c;  // built only when p.c_vector_ok (16-bit C, 16-byte aligned rows)
  GemmParams p;
};

// (stage, phase) of a ring walked in lockstep by producer and consumers across tiles.
template <int kStages>
struct RingState {
  int stage = 0;
  uint32_t phase = 0;
  CUTE_DEVICE void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

// threadIdx.x read where it is used: the front end neither hoists an asm volatile nor shares it
// with other reads, so a value derived from it is not held in a register (or spilled) until then
// (ptxas could still move the read; the build's -Xptxas -v report is the check).
CUTE_DEVICE int fresh_tid_x() {
  int t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t;
}

// A narrow kernel's loads of one operand (Tr::kCpAsync): the (R, kBK) tile of each k-tile in 4-byte
// cp.async vectors (two elements) along the operand's contiguous dimension, by the producer
// warpgroup's 128 threads. K-major: a warp covers one row's 64 elements, four rows a pass, R / 4
// passes. MN-major: kThrMN threads cover a K row's R elements, 128 / kThrMN K rows a pass. Pass i
// of a thread reads its first element's source plus i x kStep x ld. Its shared address: the
// 128-byte swizzle atoms hold 128-byte rows (a K-major row of the tile, or an MN-major K row of
// 64 elements), 8 to an atom, with row r's 16-byte units permuted by r % 8; a thread's rows are
// t + kStep i with t < kStep (a power of two), so (t + kStep i) % 8 = t ^ (kStep i % 8) and pass
// i lies at (its first address ^ ((kStep i % 8) << 4)) + kStep i x 128 bytes: one register, not
// one per pass (twelve such registers spilled in 40). addresses_hold checks this against the
// CuTe layout for every thread and pass at compile time (the kernel asserts it). A vector whose first element lies
// past M / N or K is zero-filled (the host takes these kernels only where each extent is even, so
// no vector straddles one).
template <class Tr, bool KMajor, int R>
struct NarrowLoader {
  using E = typename Tr::Element;
  static constexpr int kBK = Tr::kBK;
  static constexpr int kThrMN = KMajor ? 1 : (R / 2 < 128 ? R / 2 : 128);
  static constexpr int kStep = KMajor ? 4 : 128 / kThrMN;  // rows a pass moves on: MN rows (K-major), K rows
  static constexpr int kPasses = KMajor ? R / kStep : kBK / kStep;
  static constexpr uint32_t kStageBytes = R * kBK * sizeof(E);  // one ring slot
  static_assert(kBK * sizeof(E) == 128 && (KMajor || R % 64 == 0) && R % kStep == 0 && kStep <= 8 &&
                    kStageBytes % 1024 == 0,
                "narrow copy tiling (and slots of whole swizzle atoms: the same swizzle in every slot)");

  // Thread t's first element (mn, k) in the tile.
  static constexpr int first_mn(int t) { return KMajor ? t / 32 : 2 * (t % kThrMN); }
  static constexpr int first_k(int t) { return KMajor ? 2 * (t % 32) : t / kThrMN; }
  // Pass i's byte offset from the thread's first, by the swizzle rule above.
  static constexpr uint32_t pass_bytes(uint32_t first, int i) {
    return ((first ^ (uint32_t(kStep * i % 8) << 4)) - first) + uint32_t(kStep * i) * 128;
  }
  // The rule against the layout the tensor sX addresses with: its swizzle applied to the byte
  // address (from a 1 KB aligned base) of the unswizzled layout's element offset.
  template <class Layout>
  static constexpr bool addresses_hold(Layout layout) {
    const auto swizzle = get_swizzle_portion(layout);
    const auto plain = get_nonswizzle_portion(layout);
    auto address = [&](int mn, int k) { return uint32_t(swizzle(uint32_t(plain(mn, k, 0)) * uint32_t(sizeof(E)))); };
    // Every thread; the passes over two atoms and the last (the rest repeat the second atom's
    // pattern 1 KB further: the front end's constexpr budget does not stretch to all of them).
    constexpr int kChecked = 16 / kStep < kPasses ? 16 / kStep : kPasses;
    if (uint32_t(plain(0, 0, 1)) * sizeof(E) != kStageBytes) return false;  // load()'s slot stride
    for (int t = 0; t < 128; ++t) {
      const uint32_t first = address(first_mn(t), first_k(t));
      for (int i = 0; i < kPasses; i = i + 1 == kChecked && kChecked < kPasses ? kPasses - 1 : i + 1) {
        const int mn = first_mn(t) + (KMajor ? kStep * i : 0), k = first_k(t) + (KMajor ? 0 : kStep * i);
        if (address(mn, k) != first + pass_bytes(first, i)) return false;
      }
    }
    return true;
  }

  uint32_t s_first;     // shared address of the thread's first element in slot 0
  int t_mn, t_k;        // the thread's first element in the tile
  const E* g = nullptr;  // its source in the current tile at k-tile 0
  int64_t step = 0;      // elements between passes: kStep x ld
  int mn_left = 0;       // MN extent left from the thread's first MN index

  template <class SmemTensor>
  CUTE_DEVICE NarrowLoader(SmemTensor const& sX, int t) {
    t_mn = first_mn(t);
    t_k = first_k(t);
    s_first = cute::cast_smem_ptr_to_uint(&sX(t_mn, t_k, 0));
  }
  // The tile whose MN rows start at mn0, of batch l.
  CUTE_DEVICE void start_tile(const void* base, int64_t ld, int64_t batch, int l, int mn0, int mn_extent) {
    const int64_t first = KMajor ? int64_t(mn0 + t_mn) * ld + t_k : int64_t(t_k) * ld + mn0 + t_mn;
    g = static_cast<const E*>(base) + int64_t(l) * batch + first;
    step = kStep * ld;
    mn_left = mn_extent - mn0 - t_mn;
  }
  CUTE_DEVICE void load(int kt, int k_extent, int64_t ld, int stage) const {
    const int k_left = k_extent - kt * kBK - t_k;
    const E* src = g + (KMajor ? int64_t(kt) * kBK : int64_t(kt) * kBK * ld);
    const bool fixed = KMajor ? k_left > 0 : mn_left > 0;
    const int rem = KMajor ? mn_left : k_left;
    const uint32_t first = s_first + uint32_t(stage) * kStageBytes;  // slots are 1 KB multiples: same swizzle
    CUTE_UNROLL
    for (int i = 0; i < kPasses; ++i) {
      const bool ok = fixed && kStep * i < rem;
      const uint32_t dst = (first ^ (uint32_t(kStep * i % 8) << 4)) + uint32_t(kStep * i) * 128;
      const uint32_t bytes = ok ? 4 : 0;  // 0: no read, 4 zero bytes written
      asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(src + i * step), "r"(bytes));
    }
  }
};

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
