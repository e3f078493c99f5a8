// The producer warpgroup of the SM90 kernel: the TMA producer (one thread issues each stage's
// boxes, two of B in the gated kernels) and the narrow one (Tr::kCpAsync: 128 threads copy 4-byte
// vectors with cp.async, for 16-bit operands whose rows TMA cannot read). Both fill the same ring of kStages slots, guarded
// by the full and empty barriers (sm90/kernel_parts.h). Included by sm90/kernel.h only.
#pragma once

#include <cute/tensor.hpp>

#include "sm90/kernel_parts.h"
#include "sm90/trace.h"

namespace cute_gemm::sm90 {

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

// The TMA producer (one elected thread of warpgroup 0): for each unit, each k-tile's A tile and
// this block's share of the B tile (multicast to every block of the cluster) into the next ring
// slot, once every consumer of the cluster released it. Boxes past M, N or K are zero-filled by
// TMA and still count their full bytes. The gated kernel (Tr::kGated) loads the B tile in two
// boxes: its first kBN / 2 rows from B (the gate's weight), its last kBN / 2 from the same rows of
// B2 (the up projection's), so that each consumer thread holds a gate value and its up value in
// accumulators of the same row, kBN / 2 columns apart (epilogue_c.h, store_gated_tile); in a
// cluster each block loads its share of both boxes and multicasts it, as for B alone.
template <class Tr>
CUTE_DEVICE void produce_tma(KernelParams<Tr> const& params, typename Tr::SharedStorage& smem, const TileWalk<Tr>& walk) {
  constexpr int kBM = Tr::kBM, kBoxN = Tr::kBoxN, kBK = Tr::kBK, kCluster = Tr::kCluster;
  const GemmParams& p = params.p;
  Tensor sA = make_tensor(make_smem_ptr(smem.a), typename Tr::SmemLayoutA{});  // (BM,BK,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(smem.b), typename Tr::SmemLayoutB{});  // (BN,BK,PIPE)
  // B's box in the slot: the whole tile, or (gated) its half for B, then its half for B2.
  auto box = make_shape(Int<kBoxN>{}, Int<kBK>{}, Int<Tr::kStages>{});
  auto sB_box = [&] {  // (BOX_N,BK,PIPE)
    if constexpr (Tr::kGated) {
      return local_tile(sB, box, make_coord(0, 0, 0));
    } else {
      return sB;
    }
  }();
  RingState<Tr::kStages> ring;
  Tracer trace(p.trace, 0, true);  // a CUTE_GEMM_TRACE build only
  trace(kTrStart);
  uint32_t loads = 0;
  const int n_b = Tr::kGated ? p.n / 2 : p.n;
  const auto hint_a = TMA::CacheHintSm90(p.l2_policy_a), hint_b = TMA::CacheHintSm90(p.l2_policy_b);
  Tensor mA = params.tma_a.get_tma_tensor(make_shape(p.m, p.k, p.batch));  // (M,K,L) TMA coordinates
  Tensor mB = params.tma_b.get_tma_tensor(make_shape(n_b, p.k, p.batch));  // (N,K,L)
  WorkCursor cursor = walk.start;
  Unit unit;
  while (cursor.next(unit)) {
    const BatchTile tile = walk.tile_of(unit.tile);
    // A broadcast operand (batch stride 0) is one matrix to TMA: its batch 0 (sm90/run.h).
    const int la = p.batch_a == 0 ? 0 : tile.l, lb = p.batch_b == 0 ? 0 : tile.l;
    Tensor gA = local_tile(mA(_, _, la), make_tile(Int<kBM>{}, Int<kBK>{}), make_coord(tile.m, _));  // (BM,BK,k)
    Tensor gB = local_tile(mB(_, _, lb), make_tile(Int<kBoxN>{}, Int<kBK>{}), make_coord(tile.n, _));  // (BOX_N,BK,k)
    auto [tAgA, tAsA] = tma_partition(params.tma_a, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sA),
                                      group_modes<0, 2>(gA));  // (TMA,k), (TMA,PIPE)
    auto [tBgB, tBsB] = tma_partition(params.tma_b, walk.rank, Layout<Int<kCluster>>{}, group_modes<0, 2>(sB_box),
                                      group_modes<0, 2>(gB));  // (TMA,k), (TMA,PIPE): this block's share
    auto b2 = [&] {  // the gated kernel's B2 box: (TMA,k), (TMA,PIPE)
      if constexpr (Tr::kGated) {
        Tensor mB2 = params.tma_b2.get_tma_tensor(make_shape(n_b, p.k, p.batch));
        Tensor gB2 = local_tile(mB2(_, _, lb), make_tile(Int<kBoxN>{}, Int<kBK>{}), make_coord(tile.n, _));
        return tma_partition(params.tma_b2, walk.rank, Layout<Int<kCluster>>{},
                             group_modes<0, 2>(local_tile(sB, box, make_coord(1, 0, 0))), group_modes<0, 2>(gB2));
      } else {
        return 0;
      }
    }();
    // Not unrolled: the producer runs in 40 registers (the consumers take the rest), and the
    // unrolled loop's extra addresses spilled one with a multicast MN-major B.
#pragma unroll 1
    for (int kt = unit.kb; kt < unit.ke; ++kt) {
      // Wait until every consumer released this slot (a fresh barrier passes parity 1).
      trace(kTrEmptyWait, loads);
      EmptyBarrier::wait(&smem.empty[ring.stage], ring.phase ^ 1);
      FullBarrier::arrive_and_expect_tx(&smem.full[ring.stage], Tr::kTmaBytesPerStage);  // every box
      copy(params.tma_a.with(smem.full[ring.stage], 0, hint_a), tAgA(_, kt), tAsA(_, ring.stage));
      // Each share of B (and B2) goes to every block of the cluster; without one the mask is unused.
      constexpr uint16_t kPeers = kCluster > 1 ? uint16_t((1u << kCluster) - 1) : 0;
      copy(params.tma_b.with(smem.full[ring.stage], kPeers, hint_b), tBgB(_, kt), tBsB(_, ring.stage));
      if constexpr (Tr::kGated) {
        copy(params.tma_b2.with(smem.full[ring.stage], kPeers, hint_b), get<0>(b2)(_, kt), get<1>(b2)(_, ring.stage));
      }
      trace(kTrIssued, loads++);
      ring.advance();
    }
  }
  trace(kTrEnd, loads);
}

// The narrow producer (Tr::kCpAsync: all 128 threads of warpgroup 0): every thread copies its
// share of each stage's A and B tiles (zero-filled past M, N and K), then arrives on the stage's
// full barrier once they have landed.
template <class Tr>
CUTE_DEVICE void produce_narrow(const GemmParams& p, typename Tr::SharedStorage& smem, const TileWalk<Tr>& walk) {
  constexpr int kBM = Tr::kBM, kBN = Tr::kBN;
  Tensor sA = make_tensor(make_smem_ptr(smem.a), typename Tr::SmemLayoutA{});  // (BM,BK,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(smem.b), typename Tr::SmemLayoutB{});  // (BN,BK,PIPE)
  RingState<Tr::kStages> ring;
  const int pt = threadIdx.x;  // 0 .. 127
  using LoadA = NarrowLoader<Tr, Tr::kAKMajor, kBM>;
  using LoadB = NarrowLoader<Tr, Tr::kBKMajor, kBN>;
  static_assert(LoadA::addresses_hold(typename Tr::SmemLayoutA{}) && LoadB::addresses_hold(typename Tr::SmemLayoutB{}),
                "narrow copies: the swizzle rule disagrees with the shared-memory layout");
  LoadA load_a(sA, pt);
  LoadB load_b(sB, pt);
  WorkCursor cursor = walk.start;
  Unit unit;
  while (cursor.next(unit)) {
    const BatchTile tile = walk.tile_of(unit.tile);
    load_a.start_tile(p.a, p.lda, p.batch_a, tile.l, tile.m * kBM, p.m);
    load_b.start_tile(p.b, p.ldb, p.batch_b, tile.l, tile.n * kBN, p.n);
#pragma unroll 1
    for (int kt = unit.kb; kt < unit.ke; ++kt) {
      EmptyBarrier::wait(&smem.empty[ring.stage], ring.phase ^ 1);
      load_a.load(kt, p.k, p.lda, ring.stage);
      load_b.load(kt, p.k, p.ldb, ring.stage);
      // Arrives (one of the barrier's 128) once this thread's copies so far have landed. The
      // consumers fence the proxies after their wait (sm90/mainloop.h): this thread cannot fence
      // writes that land after it moves on.
      cutlass::arch::cpasync_barrier_arrive_noinc(&smem.full[ring.stage]);
      ring.advance();
    }
  }
  cp_async_wait<0>();
}

}  // namespace cute_gemm::sm90
