// The consumers' epilogue of the SM90 kernel: the fused epilogue's math (epilogue.h) on a tile's
// fp32 accumulators, one kChunkN-column chunk at a time, then C's stores: staged through two
// shared-memory buffers and TMA-stored (16-bit C), some chunks deferred into the next unit's main
// loop, the late pair; or written by the warpgroup itself (rows TMA cannot store); or stored
// straight from registers (fp32 C, rows not 16-byte aligned); the gated kernel's act(gate) * up.
// (Rows TMA cannot store: sm90/staged_rows.h.)
// Included by sm90/kernel.h and sm90/activation_warps.h (the TMA store of a staged slice).
#pragma once

#include <type_traits>

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "epilogue.h"
#include "sm90/kernel_parts.h"
#include "sm90/staged_rows.h"
#include "sm90/trace.h"

namespace cute_gemm::sm90 {

// The staging buffers (BM,CHUNK_N,BUF) in smem.
template <class Tr>
CUTE_DEVICE auto staging_c(typename Tr::SharedStorage& smem) {
  return make_tensor(make_smem_ptr(smem.c), typename Tr::SmemLayoutC{});
}

// TMA-store consumer c's kRowsPerConsumer-row slice of chunk j of tile t from staging buffer buf
// (one thread).
template <class Tr>
CUTE_DEVICE void tma_store_slice(KernelParams<Tr> const& params, typename Tr::SharedStorage& smem, const BatchTile& t,
                                 int c, int j, int buf) {
  const GemmParams& p = params.p;
  Tensor sC = staging_c<Tr>(smem);
  Tensor mCt = params.tma_c.get_tma_tensor(make_shape(p.m, p.n, p.batch));  // (M,N,L) TMA coordinates
  auto chunk = make_tile(Int<Tr::kRowsPerConsumer>{}, Int<Tr::kChunkN>{});
  Tensor gC = local_tile(mCt(_, _, t.l), chunk, make_coord(t.m * Tr::kConsumers + c, t.n * Tr::kOutChunks + j));
  Tensor sCchunk = local_tile(sC(_, _, buf), chunk, make_coord(c, 0));
  auto [tTgC, tTsC] = tma_partition(params.tma_c, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sCchunk),
                                    group_modes<0, 2>(gC));
  copy(params.tma_c, tTsC, tTgC);
}

// A consumer warpgroup's epilogue, on its kRowsPerConsumer-row slice of each tile. The general
// kernel serves every call; kOffload: the activation warps' kernel (the activation left to them);
// kLean: TMA-stored 16-bit C with at most alpha and a 16-bit bias row (choose_epilogue_kernel,
// sm90/configs.h).
//
// Deferred C (16-bit C with 16-byte aligned rows, the TMA-store path): a tile's epilogue converts
// its values into rCd and stops there; the stmatrix + TMA store of each deferred chunk runs in one
// of the next unit's k-tiles (spread over its main loop: run_due), between issuing its WGMMAs and
// waiting for them, so the tensor cores work while the stores are staged (a cooperative kernel
// otherwise idles them for the whole epilogue). A block's last unit, with no main loop after it,
// stores its own chunks.
template <class Tr, bool kOffload, bool kLean, class ThrR2S, class StagingPartition, class Coords>
struct EpilogueC {
  using T = typename Tr::Element;
  using CT = typename Tr::CElement;
  static constexpr int kBM = Tr::kBM, kBN = Tr::kBN, kChunks = kBN / Tr::kChunkN;
  // Chunk j of the accumulators (columns kChunkN j onward; 64 wide, or the whole tile on the
  // swapped rows' 16 columns) is converted into a ChunkMma-shaped register fragment and
  // stmatrix-ed into buffer j % 2.
  using ChunkShape =
      decltype(partition_shape_C(typename Tr::ChunkMma{}, make_shape(Int<kBM>{}, Int<Tr::kChunkN>{})));  // (MMA,1,1)
  static constexpr int kChunkValues = decltype(size(ChunkShape{}))::value;
  // The first kImmediate chunks are stored in the epilogue itself: 128 accumulators next to
  // the 16-bit values of four (64 registers) or three chunks of a 64x256 slice outgrow the
  // consumers' 232 registers (ptxas spilled 300 and 28 bytes); two deferred chunks fit.
  // Three consumers (160 registers) store every chunk in the epilogue: 96 accumulators next to
  // six deferred 32-column chunks would not fit.
  // The gated kernel stores its chunks in the epilogue too (store_gated_tile).
  static constexpr int kImmediate = Tr::kGated || Tr::kConsumers == 3 ? kChunks : kChunks == 4 ? 2 : 0;
  // A 128x256 tile's two immediate chunks (buffers 0 and 1) are staged together (n = 2): one
  // wait for the stores that last read both buffers (the previous tile's deferred chunks, long
  // done), one barrier pair instead of two, then two stores in two commit groups, so that the
  // next tile's deferred chunk 2, which waits until at most one group is pending, still finds
  // chunk 0's store done with buffer 0. 2026-11-25: 8192x8192x1024 0.92 -> 0.94x torch.mm, the
  // other large shapes equal or up to 1 % faster (docs/tuning.md).
  static constexpr bool kPairImmediate = !kOffload && kImmediate == 2;
  // Events of the next unit's main loop (run_due): with a late pair (see store_tile), its
  // fence and TMA stores first; then the deferred chunks' staging and stores; with a late pair, at
  // the last k-tile, a wait until every store has read its buffer, so that the next epilogue
  // writes buffers 0 and 1 without waiting.
  static constexpr int kDeferred = kChunks - kImmediate;
  static constexpr int kLead = kPairImmediate ? 1 : 0;  // event 0: the late pair's stores; last: the wait
  static constexpr int kEvents = kLead + kDeferred + kLead;
  // stage_chunks' parts: kWriteOnly writes the chunks and stops (a late pair: the buffers are
  // known free), kStoreOnly fences and stores chunks written before.
  static constexpr int kStageAll = 0, kWriteOnly = 1, kStoreOnly = 2;
  using DeferredC = decltype(make_tensor<CT>(append(ChunkShape{}, Int<kChunks>{})));  // (MMA,1,1,CHUNK)

  KernelParams<Tr> const& params;
  const GemmParams& p;
  typename Tr::SharedStorage& smem;
  Tracer& trace;
  typename Tr::StoreC r2s;
  ThrR2S thr_r2s;
  StagingPartition tRSsC;  // (CPY,CPY_M,CPY_N,BUF)
  Coords tCcC;             // (row, col) in the tile of each accumulator
  DeferredC rCd;           // the 16-bit values of every chunk
  int ctid, consumer;
  uint32_t epilogue_barrier;
  bool bias16;    // a 16-bit bias: the tile's pairs are loaded when its epilogue starts (load_bias)
  bool stage_c;   // C goes through the staging buffers
  bool c_staged;  // rows TMA cannot store (GemmParams::c_staged), written by the consumers; never lean
  bool leader;    // the warpgroup's thread that issues its TMA stores
  // What the previous tile left for this unit's main loop: 0 nothing, 1 its deferred chunks,
  // 2 those and a late pair (its chunks 0 and 1 in buffers 0 and 1, written but not yet
  // fenced or stored: see store_tile).
  int deferred = 0;
  uint32_t free_phase = 0;  // offload: bit b, the parity of buffer b's last store (a fresh barrier passes 1)

  CUTE_DEVICE EpilogueC(KernelParams<Tr> const& params_, typename Tr::SharedStorage& smem_, Tracer& trace_,
                        ThrR2S const& thr_r2s_, StagingPartition const& tRSsC_, Coords const& tCcC_, int ctid_,
                        int consumer_)
      : params(params_),
        p(params_.p),
        smem(smem_),
        trace(trace_),
        thr_r2s(thr_r2s_),
        tRSsC(tRSsC_),
        tCcC(tCcC_),
        ctid(ctid_),
        consumer(consumer_),
        epilogue_barrier(epilogue_barrier_of(consumer_)),
        bias16(Tr::kStageC && p.x != nullptr && p.x_ldm == 0 && !p.x_f32),
        stage_c(kLean || (Tr::kStageC && (kOffload || p.c_vector_ok || p.c_staged))),
        c_staged(!kLean && p.c_staged),
        leader(ctid_ % 128 == 0) {}

  // C rows that TMA cannot store: write_staged_rows (sm90/staged_rows.h).
  CUTE_DEVICE void write_slice(int c, int j, int buf) {
    const BatchTile t = smem.c_tile[c];
    write_staged_rows<Tr>(staging_c<Tr>(smem), buf, c, static_cast<CT*>(p.c) + t.l * p.batch_c, p.ldc,
                          t.m * kBM + c * Tr::kRowsPerConsumer, t.n * kBN + j * Tr::kChunkN, p.m, p.n);
  }

  // Stage chunks j0 .. j0 + n - 1 (n = 1, or 2 for the pair) into their buffers (chunk j:
  // buffer j % 2) and TMA-store each in its own commit group (staged rows, GemmParams::c_staged:
  // the warpgroup writes them itself, write_slice). The stores that last read those
  // buffers (two chunks ago, maybe in the previous tile; with one chunk per tile, the previous
  // tile's) must have finished reading before anyone overwrites them: of the two buffers' latest
  // stores, the other buffer's may still be pending when one chunk is staged, none for two.
  template <int j0, int n, int part = kStageAll>
  CUTE_DEVICE void stage_chunks() {
    trace(kTrStoreBegin, j0);
    if constexpr (part != kStoreOnly) {
      if constexpr (part == kStageAll) {
        if (leader) tma_store_wait<(n == 1 && Tr::kOutChunks > 1 ? 1 : 0)>();
        cutlass::arch::NamedBarrier::sync(128, epilogue_barrier);
      }
      for_each(make_int_sequence<n>{}, [&](auto i) {
        copy(r2s, thr_r2s.retile_S(rCd(_, _, _, j0 + i)), tRSsC(_, _, _, (j0 + i) % 2));
      });
      if constexpr (part == kWriteOnly) return;
    }
    tma_store_fence();  // make these generic-proxy writes visible to the TMA (async proxy)
    cutlass::arch::NamedBarrier::sync(128, epilogue_barrier);
    if (c_staged) {  // rows TMA cannot store: the warpgroup writes them (never deferred)
      for_each(make_int_sequence<n>{}, [&](auto i) { write_slice(consumer, j0 + i, (j0 + i) % 2); });
    } else if (leader) {
      for_each(make_int_sequence<n>{}, [&](auto i) {
        tma_store_slice(params, smem, smem.c_tile[consumer], consumer, j0 + i, (j0 + i) % 2);
        tma_store_arrive();
      });
    }
    trace(kTrStoreEnd, j0 + n - 1);
  }

  // Chunk j's stores; the activation warps' kernel hands the chunk to them.
  template <int j>
  CUTE_DEVICE void store_chunk() {
    if constexpr (kOffload) {
      constexpr int buf = j % 2;
      EmptyBarrier::wait(&smem.c_free[buf], ((free_phase >> buf) & 1) ^ 1);
      free_phase ^= 1u << buf;
      copy(r2s, thr_r2s.retile_S(rCd(_, _, _, j)), tRSsC(_, _, _, buf));
      if (ctid == 0) smem.c_buf_tile[buf] = smem.c_tile[0];
      EmptyBarrier::arrive(&smem.c_ready[buf]);  // releases this thread's stmatrix writes
    } else {
      stage_chunks<j, 1>();
    }
  }

  // The previous tile's deferred work in the main loop of a unit of k-tiles [kt, kt_end): each
  // event between issuing a k-tile's WGMMAs and waiting for them, spread evenly over the k-tiles
  // (several at the last k-tile when K is short). A deferred chunk is staged once the store that
  // last read its buffer is done: chunk j - 2's. Until 2026-11-26 the chunks went under k-tiles 0
  // and 1, where chunk 2 waited for chunk 0's store while every block stored C at once. Spread
  // (H100, 2026-11-26: 8192x8192x1024 0.938 -> 0.948x torch.mm bf16 (0.935 -> 0.949 fp16),
  // 8192x8192x2048 0.997 -> 1.009; issue 3's seven shapes 0.991 -> 0.994 bf16, 0.991 -> 0.998
  // fp16.
  struct Events {
    int ev, ev_end;  // the next event, past the last
    int spread;      // event i at k-tile kt + (i + 1) (spread + 1) - 1
    int next_at;
  };
  CUTE_DEVICE Events schedule_deferred(int kt, int kt_end) {
    const bool lead = kLead && deferred == 2;
    Events e;
    e.ev = lead ? 0 : kLead;
    e.ev_end = deferred == 0 ? 0 : lead ? kEvents : kLead + kDeferred;
    // Every event left at the last k-tile (the final wait is always left: it falls past the
    // last). Constant divisors, and one running position: a register or two fewer across the loop.
    // (The form of 2026-11-26 spilled 4-48 bytes; later that day the registers were freed
    // elsewhere: the shared storage's base and the cursor's 64-bit divisions.)
    e.spread = lead ? (kt_end - kt) / (kDeferred + 2) : (kt_end - kt) / (kDeferred + 1);
    e.next_at = kt + e.spread;
    deferred = 0;
    return e;
  }
  CUTE_DEVICE void run_due(Events& e, int kt, int kt_end) {
#pragma unroll 1
    for (; e.ev < e.ev_end && (kt >= e.next_at || kt + 1 == kt_end); ++e.ev, e.next_at += e.spread + 1) {
      for_each(make_int_sequence<kEvents>{}, [&](auto ec) {
        constexpr int i = decltype(ec)::value;
        if (e.ev != i) return;
        if constexpr (kLead && i == 0) {
          stage_chunks<0, 2, kStoreOnly>();
        } else if constexpr (kLead && i == kEvents - 1) {
          if (leader) tma_store_wait<0>();
          cutlass::arch::NamedBarrier::sync(128, epilogue_barrier);
        } else {
          store_chunk<i - kLead + kImmediate>();
        }
      });
    }
  }

  // A 16-bit bias's pairs for each chunk of a tile from column col0 (epilogue.h, load_bias_pair).
  struct BiasPairs {
    uint32_t v[kChunks];
  };
  CUTE_DEVICE BiasPairs load_bias(int col0) const {
    BiasPairs b = {};
    if (bias16) {
      CUTE_UNROLL
      for (int c = 0; c < kChunks; ++c) b.v[c] = load_bias_pair<T>(p, col0 + c * Tr::kChunkN + 2 * (ctid % 32));
    }
    return b;
  }

  // Tile `tile`'s epilogue, one chunk (kChunkN columns: 64, rows 7 and 11's 32, rows 6 and 10's
  // 16) at a time: bias/C term, scaling and activation on the chunk's fp32 accumulators (addmm),
  // then its stores. A compile-time loop: every index and coordinate is a constant, so the values
  // stay in registers (a runtime chunk index would put the accumulators in local memory), and each
  // chunk's registers are free once it is stored. (The activation warps' kernel: everything but
  // the activation, which they apply.) has_next: this block has another unit to hide deferred
  // stores under.
  template <class Acc>
  CUTE_DEVICE void store_tile(Acc& acc, const BatchTile& tile, const BiasPairs& bias, bool has_next) {
    static_assert(kChunkValues * kChunks == decltype(size(acc))::value, "chunks cover the accumulators");
    Tensor acc_chunks = make_tensor(acc.data(), make_layout(make_shape(Int<kChunkValues>{}, Int<kChunks>{})));
    const int row0 = tile.m * kBM, col0 = tile.n * kBN;
    const bool math = kOffload ? p.x != nullptr || p.alpha != 1.f : p.epilogue_math();
    // (Rows TMA cannot store are written by the consumers themselves: in the epilogue.)
    const bool defer_tile = stage_c && !c_staged && has_next;
    // The tile whose chunks are stored, kept where the leader finds it when it stores them: in
    // shared memory, not registers (ptxas spilled), and not recomputed per chunk (tile_of's
    // divisions held the warpgroup at every chunk's barrier: 8192x8192x1024 5 % slower).
    if (stage_c && leader) smem.c_tile[consumer] = tile;
    for_each(make_int_sequence<kChunks>{}, [&](auto jc) {
      constexpr int j = decltype(jc)::value;
      Tensor v = acc_chunks(_, j);
      const int ccol0 = col0 + j * Tr::kChunkN;
      // tCcC(i), i < kChunkValues: chunk 0's coordinates; chunk j's are kChunkN j columns further.
      if (__builtin_expect(math, 0)) {
        epilogue_chunk<T, !kOffload && !kLean, !kLean>(v, tCcC, row0, ccol0, bias16, bias.v[j], p);
      }
      if (__builtin_expect(stage_c, 1)) {
        if constexpr (kOffload && std::is_same_v<CT, cutlass::half_t>) {
          // A pre-activation below float16's range: -inf in 16 bits, where every activation
          // gives (-)0 for it, but NaN for -inf (gelu, silu). Its largest negative value gives
          // the 0. (NaN compares false and stays NaN.)
          CUTE_UNROLL
          for (int i = 0; i < kChunkValues; ++i) v(i) = v(i) < -65504.f ? -65504.f : v(i);
        }
        CUTE_UNROLL
        for (int i = 0; i < kChunkValues; ++i) rCd(i + j * kChunkValues) = CT(v(i));
        if (j < kImmediate || !defer_tile) {
          if constexpr (kPairImmediate && j < 2) {
            if constexpr (j == 1) {  // chunks 0 and 1, once both are converted
              if (defer_tile) {
                // Late pair: written to buffers 0 and 1 and left there; the next unit's main loop
                // fences and stores them. The buffers are free: the first unit's are fresh, and
                // every other unit follows a deferring tile, whose last k-tile waited until its
                // stores had read them (run_due). The tensor cores idle only for this stmatrix
                // (2026-11-26: 8192x8192x1024 0.965 -> 1.001x torch.mm against storing the pair
                // here; docs/tuning.md section 11, the late C pair).
                stage_chunks<0, 2, kWriteOnly>();
              } else {
                stage_chunks<0, 2>();
              }
            }
          } else {
            store_chunk<j>();
          }
        }
      } else if constexpr (kLean) {
        // (stage_c holds: nothing else to store with)
      } else if (p.c_f32) {
        store_direct(v, tCcC, row0, ccol0, static_cast<float*>(p.c) + tile.l * p.batch_c, p);
      } else {
        // C rows not 16-byte aligned: bounded element stores straight from the accumulators.
        store_direct(v, tCcC, row0, ccol0, static_cast<T*>(p.c) + tile.l * p.batch_c, p);
      }
    });
    // Staged rows: everyone has read this tile's smem.c_tile before the leader writes the next.
    if (stage_c && c_staged) cutlass::arch::NamedBarrier::sync(128, epilogue_barrier);
    deferred = !defer_tile ? 0 : kPairImmediate ? 2 : 1;
  }

  // The gated kernel's epilogue (Tr::kGated): C's chunk j is act(gate chunk j) * (up chunk j +
  // kOutChunks) of the accumulators, the two kBN / 2 columns apart (produce_tma), computed in
  // fp32 and rounded once, staged and TMA-stored as chunk j of C's tile, kBN / 2 columns wide.
  template <class Acc>
  CUTE_DEVICE void store_gated_tile(Acc& acc, const BatchTile& tile) {
    static_assert(Tr::kGated && kChunkValues * kChunks == decltype(size(acc))::value, "the gated epilogue");
    Tensor acc_chunks = make_tensor(acc.data(), make_layout(make_shape(Int<kChunkValues>{}, Int<kChunks>{})));
    if (leader) smem.c_tile[consumer] = tile;
    for_each(make_int_sequence<Tr::kOutChunks>{}, [&](auto jc) {
      constexpr int j = decltype(jc)::value;
      Tensor gate = acc_chunks(_, j);
      Tensor up = acc_chunks(_, j + Tr::kOutChunks);
      with_activation(p.act, [&](auto a) {
        CUTE_UNROLL
        for (int i = 0; i < kChunkValues; ++i) gate(i) = activate<decltype(a)::value>(gate(i));
      });
      CUTE_UNROLL
      for (int i = 0; i < kChunkValues; ++i) rCd(i + j * kChunkValues) = CT(gate(i) * up(i));
      stage_chunks<j, 1>();
    });
  }

  // (Nothing is pending here: a block's last unit stores its own C.) The TMA store reads shared
  // memory asynchronously: finish before the block exits.
  CUTE_DEVICE void finish() {
    if (stage_c && leader) tma_store_wait<0>();
  }
};

// Consumer `consumer` (thread ctid of all consumers) of the kernel's epilogue form; tCcC: the
// accumulators' coordinates (Mainloop::coordinates).
template <class Tr, bool kOffload, bool kLean, class Coords>
CUTE_DEVICE auto make_epilogue(KernelParams<Tr> const& params, typename Tr::SharedStorage& smem, Tracer& trace,
                               Coords const& tCcC, int ctid, int consumer) {
  auto thr_r2s = typename Tr::StoreC{}.get_thread_slice(ctid);
  Tensor tRSsC = thr_r2s.partition_D(staging_c<Tr>(smem));
  return EpilogueC<Tr, kOffload, kLean, decltype(thr_r2s), decltype(tRSsC), Coords>(params, smem, trace, thr_r2s,
                                                                                    tRSsC, tCcC, ctid, consumer);
}

}  // namespace cute_gemm::sm90
