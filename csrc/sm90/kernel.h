// The SM90 GEMM kernel: the multistage ring of the SM80 family rebuilt from Hopper parts.
// Warpgroup 0 (one elected thread) is the producer: TMA loads of A/B tiles into a kStages
// shared-memory ring, each slot guarded by a "full" mbarrier (transaction bytes) and an "empty"
// mbarrier (consumer arrivals). Warpgroups 1..kConsumers are consumers: WGMMA from shared memory
// with fp32 accumulators; the consumers (two; three on row 8) interleave on the tensor cores while each waits
// for its own batch. The grid is persistent (one block per SM) and walks tiles in the grouped
// order of tile_scheduler.h; the producer runs ahead into the next tile while consumers store C.
// Included only by csrc/instantiations/sm90_*.cu; its parts in sm90/kernel_parts.h, its host
// launcher in sm90/run.h.
#pragma once

#if defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "sm90/kernel_stub.h"  // another arch's device pass: the kernels' names only
#else

#include <algorithm>
#include <limits>
#include <cuda_runtime.h>

#include <cute/arch/cluster_sm90.hpp>
#include <cutlass/arch/reg_reconfig.h>

#include "epilogue.h"
#include "pdl.h"
#include "sm90/launch.h"
#include "sm90/trace.h"
#include "sm90/traits.h"
#include "tile_scheduler.h"

// WGMMA and setmaxnreg exist only in the arch-specific sm_90a target: the only device pass that
// reaches here (other arches take kernel_stub.h above); the host pass leaves the body out.
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define CUTE_GEMM_SM90_ENABLED 1
#endif

#include "sm90/kernel_parts.h"

namespace cute_gemm::sm90 {

// kOffload: the activation warps' kernel (see below), launched by run() (sm90/run.h) where they apply; it has
// no split-K / stream-K and no epilogue math in the consumers, which keeps their registers free.
// kLean: the kernel of the common call (choose_epilogue_kernel, sm90/configs.h): TMA-stored 16-bit C, at most alpha
// and a 16-bit bias row, no activation. It leaves out the general X term, the consumers'
// activations, the staged rows and the element stores, which are most of the general kernel's
// code (21,744 instructions against 3,592 on row 2, docs/tuning.md section 24): the epilogue's
// instruction-cache misses were its largest stall.
template <class Tr, bool kOffload, bool kLean = false>
__global__ void __launch_bounds__(Tr::kThreads, 1) gemm_kernel(CUTE_GRID_CONSTANT KernelParams<Tr> const params) {
#if defined(CUTE_GEMM_SM90_ENABLED)
  using T = typename Tr::Element;
  using FullBarrier = cutlass::arch::ClusterTransactionBarrier;
  using EmptyBarrier = cutlass::arch::ClusterBarrier;
  constexpr int kBM = Tr::kBM, kBN = Tr::kBN, kBK = Tr::kBK, kStages = Tr::kStages;
  const GemmParams& p = params.p;

  // The storage starts at the first 1024-byte aligned shared address (128-byte swizzle atoms),
  // found on the 32-bit shared address and added to the shared array itself: the compiler then
  // knows every member is shared memory and addresses it as such (aligned through a generic
  // 64-bit integer, the base took two registers and the C tile's loads went through generic
  // loads; ptxas spilled around the late C pair, 2026-11-26).
  extern __shared__ char smem_raw[];
  auto& smem = *reinterpret_cast<typename Tr::SharedStorage*>(
      smem_raw + ((1024 - (cute::cast_smem_ptr_to_uint(smem_raw) & 1023)) & 1023));

  const int warp_group = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    CUTE_UNROLL
    for (int s = 0; s < kStages; ++s) {
      // The producer's arrive + TMA bytes; a narrow kernel's: each producer thread's cp.async arrival.
      FullBarrier::init(&smem.full[s], Tr::kCpAsync ? Tr::kCopyThreads : 1);
      EmptyBarrier::init(&smem.empty[s], Tr::kEmptyArrivals);  // consumer warps of the cluster
    }
    CUTE_UNROLL
    for (int b = 0; b < 2; ++b) {
      EmptyBarrier::init(&smem.c_ready[b], 128 * Tr::kConsumers);
      EmptyBarrier::init(&smem.c_free[b], 1);
    }
    cutlass::arch::fence_barrier_init();
    if constexpr (!Tr::kCpAsync) {  // the narrow kernels have no A or B descriptors
      cute::prefetch_tma_descriptor(params.tma_a.get_tma_descriptor());
      cute::prefetch_tma_descriptor(params.tma_b.get_tma_descriptor());
    }
    if (p.c_vector_ok) cute::prefetch_tma_descriptor(params.tma_c.get_tma_descriptor());
  }
  // Barrier inits must be visible to the peer block before it multicasts or arrives here.
  constexpr int kCluster = Tr::kCluster;
  if constexpr (kCluster > 1) {
    cute::cluster_sync();
  } else {
    __syncthreads();
  }
  // Programmatic dependent launch (GemmParams::pdl, pdl.h): the previous kernel may have written
  // A, B or the bias, or still read what this one overwrites.
  pdl_launch_dependents_then_wait();

  // The blocks of a cluster compute vertically adjacent tiles (same B tile): the scheduler walks
  // "cluster tiles" of kCluster x 1 tiles in the grouped order. A block whose tile lies past M
  // (odd tile rows) still loads and computes zeros, since its peer needs its half of B; its
  // stores are clipped.
  const int rank = kCluster > 1 ? int(cute::block_rank_in_cluster()) : 0;
  const int num_m = (p.m + kBM - 1) / kBM;
  const int num_n = (p.n + kBN - 1) / kBN;
  const int num_cm = (num_m + kCluster - 1) / kCluster;
  // Tile and unit counts are 32-bit: the host launches fewer than 2^31 units (sm90::run).
  const int batch_tiles = num_cm * num_n;  // cluster tiles of one batch
  const int num_cluster_tiles = batch_tiles * p.batch;
  const int group = std::max(p.group_m / kCluster, 1);
  const int first = blockIdx.x / kCluster, step = gridDim.x / kCluster;
  // Cluster tile t: batch t / batch_tiles, then the grouped order within the batch.
  auto tile_of = [&](int t) {
    const TileCoord c = grouped_tile(t % batch_tiles, num_cm, num_n, group);
    return BatchTile{c.m * kCluster + rank, c.n, int(t / batch_tiles)};
  };
  const int k_tiles = (p.k + kBK - 1) / kBK;
  // Split-K and stream-K: every piece of a shared tile leaves its fp32 partial in the workspace
  // and counts itself; the last to arrive sums all of them in piece order and runs the epilogue.
  // Nobody waits for another block (no deadlock, whatever is resident), and the sum's order is
  // fixed (bitwise reproducible).
  const int splits = kOffload ? 1 : p.splits;
  const WorkCursor start = WorkCursor::make(num_cluster_tiles, k_tiles, splits, kOffload ? 0 : p.sk_tiles,
                                            kOffload ? 0 : p.sk_workers, first, step);
  const int slot_stride = p.sk_tiles > 0 ? p.sk_slots : splits;  // partials per slot group

  Tensor sA = make_tensor(make_smem_ptr(smem.a), typename Tr::SmemLayoutA{});  // (BM,BK,PIPE)
  Tensor sB = make_tensor(make_smem_ptr(smem.b), typename Tr::SmemLayoutB{});  // (BN,BK,PIPE)
  RingState<kStages> ring;
  constexpr int kChunks = kBN / Tr::kChunkN;
  Tensor sC = make_tensor(make_smem_ptr(smem.c), typename Tr::SmemLayoutC{});  // (BM,CHUNK_N,BUF)
  Tensor mCt = params.tma_c.get_tma_tensor(make_shape(p.m, p.n, p.batch));  // (M,N,L) TMA coordinates
  auto chunk = make_tile(Int<Tr::kRowsPerConsumer>{}, Int<Tr::kChunkN>{});
  // TMA-store consumer c's 64-row slice of chunk j of tile t from staging buffer buf (one thread).
  auto store_slice = [&](const BatchTile& t, int c, int j, int buf) {
    Tensor gC = local_tile(mCt(_, _, t.l), chunk, make_coord(t.m * Tr::kConsumers + c, t.n * kChunks + j));
    Tensor sCchunk = local_tile(sC(_, _, buf), chunk, make_coord(c, 0));
    auto [tTgC, tTsC] = tma_partition(params.tma_c, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sCchunk),
                                      group_modes<0, 2>(gC));
    copy(params.tma_c, tTsC, tTgC);
  };

  // C rows that TMA cannot store (GemmParams::c_staged): write_staged_rows, above.
  auto write_slice = [&](int c, int j, int buf) {
    const BatchTile t = smem.c_tile[c];
    write_staged_rows<Tr>(sC, buf, c, static_cast<typename Tr::CElement*>(p.c) + t.l * p.batch_c, p.ldc,
                          t.m * kBM + c * Tr::kRowsPerConsumer, t.n * kBN + j * Tr::kChunkN, p.m, p.n);
  };

  // The activation warps (warps 1-3, idle in the producer warpgroup otherwise) apply the
  // activation to the 16-bit pre-activations the consumers staged and TMA-store them, while the
  // consumers go on with the next tile's main loop: in this cooperative kernel the activation's
  // math would otherwise run while the tensor cores wait. The consumers compute the
  // pre-activation z = alpha * acc + beta * bias in fp32 and round it once, as torch.addmm rounds
  // its result, so the activation warps see act's argument to 16 bits: an accumulator past
  // float16's range that alpha scales back, or a bias that cancels it, stays exact. Whole tiles
  // only (no split-K, no stream-K), and X at most a 16-bit bias (choose_epilogue_kernel, sm90/configs.h).

  if (warp_group == 0) {
    // ---------------------------------------------------------------- producer
    // The activation warps need more than the producer thread: with no epilogue math of their own
    // the consumers fit in 224 (56 + 2 x 224 = 3 x 168).
    cutlass::arch::warpgroup_reg_dealloc<kOffload ? 56 : Tr::kProducerRegs>();
    if constexpr (Tr::kCpAsync) {
      // ------------------------------------------------------------ narrow producer (cp.async)
      // Every thread of the warpgroup copies its share of each stage's A and B tiles (zero-filled
      // past M, N and K), then arrives on the stage's full barrier once they have landed.
      const int pt = threadIdx.x;  // 0 .. 127
      using LoadA = NarrowLoader<Tr, Tr::kAKMajor, kBM>;
      using LoadB = NarrowLoader<Tr, Tr::kBKMajor, kBN>;
      static_assert(LoadA::addresses_hold(typename Tr::SmemLayoutA{}) && LoadB::addresses_hold(typename Tr::SmemLayoutB{}),
                    "narrow copies: the swizzle rule disagrees with the shared-memory layout");
      LoadA load_a(sA, pt);
      LoadB load_b(sB, pt);
      WorkCursor cursor = start;
      Unit unit;
      while (cursor.next(unit)) {
        const BatchTile tile = tile_of(unit.tile);
        load_a.start_tile(p.a, p.lda, p.batch_a, tile.l, tile.m * kBM, p.m);
        load_b.start_tile(p.b, p.ldb, p.batch_b, tile.l, tile.n * kBN, p.n);
#pragma unroll 1
        for (int kt = unit.kb; kt < unit.ke; ++kt) {
          EmptyBarrier::wait(&smem.empty[ring.stage], ring.phase ^ 1);
          load_a.load(kt, p.k, p.lda, ring.stage);
          load_b.load(kt, p.k, p.ldb, ring.stage);
          // Arrives (one of the barrier's 128) once this thread's copies so far have landed. The
          // consumers fence the proxies after their wait (issue(), below): this thread cannot
          // fence writes that land after it moves on.
          cutlass::arch::cpasync_barrier_arrive_noinc(&smem.full[ring.stage]);
          ring.advance();
        }
      }
      cp_async_wait<0>();
    } else if (threadIdx.x == 0) {
      Tracer trace(p.trace, 0, true);  // a CUTE_GEMM_TRACE build only
      trace(kTrStart);
      uint32_t loads = 0;
      Tensor mA = params.tma_a.get_tma_tensor(make_shape(p.m, p.k, p.batch));  // (M,K,L) TMA coordinates
      Tensor mB = params.tma_b.get_tma_tensor(make_shape(p.n, p.k, p.batch));  // (N,K,L)
      WorkCursor cursor = start;
      Unit unit;
      while (cursor.next(unit)) {
        const BatchTile tile = tile_of(unit.tile);
        // A broadcast operand (batch stride 0) is one matrix to TMA: its batch 0 (run(), below).
        const int la = p.batch_a == 0 ? 0 : tile.l, lb = p.batch_b == 0 ? 0 : tile.l;
        Tensor gA = local_tile(mA(_, _, la), make_tile(Int<kBM>{}, Int<kBK>{}), make_coord(tile.m, _));  // (BM,BK,k)
        Tensor gB = local_tile(mB(_, _, lb), make_tile(Int<kBN>{}, Int<kBK>{}), make_coord(tile.n, _));  // (BN,BK,k)
        auto [tAgA, tAsA] = tma_partition(params.tma_a, Int<0>{}, Layout<_1>{}, group_modes<0, 2>(sA),
                                          group_modes<0, 2>(gA));  // (TMA,k), (TMA,PIPE)
        auto [tBgB, tBsB] = tma_partition(params.tma_b, rank, Layout<Int<kCluster>>{}, group_modes<0, 2>(sB),
                                          group_modes<0, 2>(gB));  // (TMA,k), (TMA,PIPE): this block's share
        // Not unrolled: the producer runs in 40 registers (the consumers take the rest), and the
        // unrolled loop's extra addresses spilled one with a multicast MN-major B.
#pragma unroll 1
        for (int kt = unit.kb; kt < unit.ke; ++kt) {
          // Wait until every consumer released this slot (a fresh barrier passes parity 1).
          trace(kTrEmptyWait, loads);
          EmptyBarrier::wait(&smem.empty[ring.stage], ring.phase ^ 1);
          FullBarrier::arrive_and_expect_tx(&smem.full[ring.stage], Tr::kTmaBytesPerStage);
          // Boxes past M, N or K are zero-filled by TMA and still count their full bytes.
          copy(params.tma_a.with(smem.full[ring.stage]), tAgA(_, kt), tAsA(_, ring.stage));
          if constexpr (kCluster > 1) {
            copy(params.tma_b.with(smem.full[ring.stage], uint16_t((1u << kCluster) - 1)), tBgB(_, kt),
                 tBsB(_, ring.stage));
          } else {
            copy(params.tma_b.with(smem.full[ring.stage]), tBgB(_, kt), tBsB(_, ring.stage));
          }
          trace(kTrIssued, loads++);
          ring.advance();
        }
      }
      trace(kTrEnd, loads);
    } else if (kOffload && threadIdx.x >= 32) {
      // -------------------------------------------------------------- activation warps
      constexpr int kActThreads = 96;
      constexpr uint32_t kActBarrier = 2 + Tr::kConsumers;  // after the consumers' named barriers
      const int at = threadIdx.x - 32;
      // 8 columns at a time (one 16-byte swizzle unit): 8 independent activations per thread.
      constexpr int kVec = 8;
      const int grp = at % (64 / kVec);  // columns kVec grp .. kVec grp + kVec - 1 of each chunk
      const int row_first = at / (64 / kVec);  // rows row_first, + 12, ... of the buffer
      uint32_t ready_phase = 0;       // bit b: the parity buffer b's next chunk completes
      WorkCursor cursor = start;
      Unit unit;
      while (cursor.next(unit)) {
        for_each(make_int_sequence<kChunks>{}, [&](auto jc) {
          constexpr int j = decltype(jc)::value;
          constexpr int buf = j % 2;
          EmptyBarrier::wait(&smem.c_ready[buf], (ready_phase >> buf) & 1);
          ready_phase ^= 1u << buf;
          const BatchTile t = smem.c_buf_tile[buf];
          with_activation(p.act, [&](auto a) {
            constexpr Activation A = decltype(a)::value;
#pragma unroll 1
            for (int r = row_first; r < kBM; r += kActThreads / (64 / kVec)) {
              uint4* vec = reinterpret_cast<uint4*>(&sC(r, grp * kVec, buf));  // one 16-byte swizzle unit
              uint4 v = *vec;
              T* e = reinterpret_cast<T*>(&v);
              CUTE_UNROLL
              for (int i = 0; i < kVec; ++i) e[i] = T(activate<A>(float(e[i])));
              *vec = v;
            }
          });
          tma_store_fence();  // these generic-proxy writes, visible to the TMA store
          cutlass::arch::NamedBarrier::sync(kActThreads, kActBarrier);
          if (at == 0) {
            CUTE_UNROLL
            for (int c = 0; c < Tr::kConsumers; ++c) store_slice(t, c, j, buf);
            tma_store_arrive();
            // Once the store has read the buffer, the consumers may stage their next chunk there.
            // (Released only when the next chunk was stored, as wait<1> would, a tile's second
            // chunk waited for its first to be computed: the consumers stalled ~10 us per tile.)
            tma_store_wait<0>();
            EmptyBarrier::arrive(&smem.c_free[buf]);
          }
        });
      }
    }
  } else {
    // ---------------------------------------------------------------- consumers
    cutlass::arch::warpgroup_reg_alloc<kOffload ? 224 : Tr::kConsumerRegs>();
    const int ctid = threadIdx.x - 128;     // 0 .. 128 * kConsumers - 1
    const int consumer = warp_group - 1;    // which kRowsPerConsumer-row slice of the tile (64; 128 on row 6)
    Tracer trace(p.trace, 1 + consumer, ctid % 128 == 0 && consumer < 2);  // a CUTE_GEMM_TRACE build only (3 roles)
    trace(kTrStart);
    uint32_t loads = 0, units = 0;
    const bool lane0 = ctid % 32 == 0;  // one arrival per warp on the "empty" barriers
    typename Tr::TiledMma mma;
    auto thr_mma = mma.get_thread_slice(ctid);
    Tensor tCsA = thr_mma.partition_A(sA);        // (MMA,MMA_M,MMA_K,PIPE)
    Tensor tCsB = thr_mma.partition_B(sB);        // (MMA,MMA_N,MMA_K,PIPE)
    Tensor tCrA = thr_mma.make_fragment_A(tCsA);  // WGMMA shared-memory descriptors
    Tensor tCrB = thr_mma.make_fragment_B(tCsB);
    auto tile_mn = make_shape(Int<kBM>{}, Int<kBN>{});
    Tensor acc = partition_fragment_C(mma, tile_mn);                   // (MMA,MMA_M,MMA_N) fp32
    Tensor tCcC = thr_mma.partition_C(make_identity_tensor(tile_mn));  // (row, col) in the tile

    // C staging for the TMA-store path: chunk j of the accumulators (columns kChunkN j onward; 64
    // wide, or the whole tile on the swapped rows' 16 columns) is
    // converted into a ChunkMma-shaped register fragment and stmatrix-ed into buffer j % 2.
    typename Tr::StoreC r2s;
    auto thr_r2s = r2s.get_thread_slice(ctid);
    Tensor tRSsC = thr_r2s.partition_D(sC);  // (CPY,CPY_M,CPY_N,BUF)
    using CT = typename Tr::CElement;
    Tensor rC = make_tensor<CT>(partition_shape_C(typename Tr::ChunkMma{}, make_shape(Int<kBM>{}, Int<Tr::kChunkN>{})));  // (MMA,1,1)
    constexpr int kChunkValues = decltype(size(rC))::value;
    static_assert(kChunkValues * kChunks == decltype(size(acc))::value, "chunks cover the accumulators");
    Tensor acc_chunks = make_tensor(acc.data(), make_layout(make_shape(Int<kChunkValues>{}, Int<kChunks>{})));
    const uint32_t epilogue_barrier = 1 + consumer;  // named barrier per consumer warpgroup
    constexpr uint32_t kSplitBarrier = 1 + Tr::kConsumers;  // all consumer threads (split-K)

    // One lane per warp releases a slot, to every block of the cluster, once the warp's WGMMAs
    // that read it are complete.
    auto release = [&](int stage) {
      CUTE_UNROLL
      for (int c = 0; c < kCluster; ++c) {
        if constexpr (kCluster > 1) {
          EmptyBarrier::arrive(&smem.empty[stage], c, lane0);
        } else if (lane0) {
          EmptyBarrier::arrive(&smem.empty[stage]);
        }
      }
    };
    // A 16-bit bias: the tile's pairs are loaded when its epilogue starts (epilogue.h, load_bias_pair).
    const bool bias16 = Tr::kStageC && p.x != nullptr && p.x_ldm == 0 && !p.x_f32;

    // Deferred C (16-bit C with 16-byte aligned rows, the TMA-store path): a tile's epilogue
    // converts its values into rCd and stops there; the stmatrix + TMA store of each deferred
    // chunk runs in one of the next unit's k-tiles (spread over its main loop, below), between
    // issuing its WGMMAs and waiting for them, so the tensor cores work while the stores are
    // staged (a cooperative kernel otherwise idles them for the whole epilogue). A block's last
    // unit, with no main loop after it, stores its own chunks.
    const bool stage_c = kLean || (Tr::kStageC && (kOffload || p.c_vector_ok || p.c_staged));
    // Rows TMA cannot store (GemmParams::c_staged), written by the consumers; never in the lean kernel.
    const bool c_staged = !kLean && p.c_staged;
    // The first kImmediate chunks are stored in the epilogue itself: 128 accumulators next to
    // the 16-bit values of four (64 registers) or three chunks of a 64x256 slice outgrow the
    // consumers' 232 registers (ptxas spilled 300 and 28 bytes); two deferred chunks fit.
    // Three consumers (160 registers) store every chunk in the epilogue: 96 accumulators next to
    // six deferred 32-column chunks would not fit.
    constexpr int kImmediate = Tr::kConsumers == 3 ? kChunks : kChunks == 4 ? 2 : 0;
    Tensor rCd = make_tensor<CT>(append(shape(rC), Int<kChunks>{}));  // (MMA,1,1,CHUNK): 16-bit values
    // What the previous tile left for this unit's main loop: 0 nothing, 1 its deferred chunks,
    // 2 those and a late pair (its chunks 0 and 1 in buffers 0 and 1, written but not yet
    // fenced or stored: GemmParams::late_c, see the epilogue).
    int deferred = 0;
    const bool leader = ctid % 128 == 0;
    uint32_t free_phase = 0;  // offload: bit b, the parity of buffer b's last store (a fresh barrier passes 1)
    // Stage chunks j0 .. j0 + n - 1 (n = 1, or 2 for the pair below) into their buffers (chunk j:
    // buffer j % 2) and TMA-store each in its own commit group (staged rows, GemmParams::c_staged:
    // the warpgroup writes them itself, write_slice). The stores that last read those
    // buffers (two chunks ago, maybe in the previous tile; with one chunk per tile, the previous
    // tile's) must have finished reading before anyone overwrites them: of the two buffers' latest
    // stores, the other buffer's may still be pending when one chunk is staged, none for two.
    // Part (kStageAll by default): kWriteOnly writes the chunks and stops (a late pair, below: the
    // buffers are known free), kStoreOnly fences and stores chunks written before.
    constexpr int kStageAll = 0, kWriteOnly = 1, kStoreOnly = 2;
    auto stage_chunks = [&](auto j0c, auto nc, auto partc) {
      constexpr int j0 = decltype(j0c)::value, n = decltype(nc)::value, part = decltype(partc)::value;
      trace(kTrStoreBegin, j0);
      if constexpr (part != kStoreOnly) {
        if constexpr (part == kStageAll) {
          if (leader) tma_store_wait<(n == 1 && kChunks > 1 ? 1 : 0)>();
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
          store_slice(smem.c_tile[consumer], consumer, j0 + i, (j0 + i) % 2);
          tma_store_arrive();
        });
      }
      trace(kTrStoreEnd, j0 + n - 1);
    };
    auto store_chunk = [&](auto jc) {
      if constexpr (kOffload) {  // hand the chunk to the activation warps
        constexpr int j = decltype(jc)::value;
        constexpr int buf = j % 2;
        EmptyBarrier::wait(&smem.c_free[buf], ((free_phase >> buf) & 1) ^ 1);
        free_phase ^= 1u << buf;
        copy(r2s, thr_r2s.retile_S(rCd(_, _, _, j)), tRSsC(_, _, _, buf));
        if (ctid == 0) smem.c_buf_tile[buf] = smem.c_tile[0];
        EmptyBarrier::arrive(&smem.c_ready[buf]);  // releases this thread's stmatrix writes
      } else {
        stage_chunks(jc, Int<1>{}, Int<kStageAll>{});
      }
    };
    // A 128x256 tile's two immediate chunks (buffers 0 and 1) are staged together (n = 2): one
    // wait for the stores that last read both buffers (the previous tile's deferred chunks, long
    // done), one barrier pair instead of two, then two stores in two commit groups, so that the
    // next tile's deferred chunk 2, which waits until at most one group is pending, still finds
    // chunk 0's store done with buffer 0. 2026-11-25: 8192x8192x1024 0.92 -> 0.94x torch.mm, the
    // other large shapes equal or up to 1 % faster (docs/tuning.md).
    constexpr bool kPairImmediate = !kOffload && kImmediate == 2;
    auto store_deferred = [&](auto jc) { store_chunk(Int<decltype(jc)::value + kImmediate>{}); };
    WorkCursor cursor = start;
    Unit unit;
    while (cursor.next(unit)) {
      const BatchTile tile = tile_of(unit.tile);

      // Main loop: wait for a slot, issue its WGMMAs, then wait until only this batch is in
      // flight, so the previous batch's slot can go back to the producer while the tensor cores
      // work. The operand fences keep the compiler from touching the accumulators meanwhile.
      mma.accumulate_ = GMMA::ScaleOut::Zero;
      int prev_stage = -1;
      warpgroup_fence_operand(acc);
      auto issue = [&] {
        trace(kTrFullWait, loads);
        FullBarrier::wait(&smem.full[ring.stage], ring.phase);
        // The narrow producer's cp.async wrote the slot through the generic proxy; WGMMA reads it
        // through the async proxy. The barrier makes the writes visible to this thread, the proxy
        // fence then orders them before its WGMMAs (the PTX memory model's rule; Triton emits the
        // same fence before a wgmma on cp.async-filled tiles). TMA fills need none.
        if constexpr (Tr::kCpAsync) cutlass::arch::fence_view_async_shared();
        trace(kTrFull, loads++);
        warpgroup_arrive();
        CUTE_UNROLL
        for (int kb = 0; kb < size<2>(tCrA); ++kb) {
          gemm(mma, tCrA(_, _, kb, ring.stage), tCrB(_, _, kb, ring.stage), acc);
          mma.accumulate_ = GMMA::ScaleOut::One;
        }
        warpgroup_commit_batch();
      };
      auto retire = [&] {
        warpgroup_wait<1>();
        trace(kTrRetired);
        if (prev_stage >= 0) release(prev_stage);
        prev_stage = ring.stage;
        ring.advance();
      };
      int kt = unit.kb;
      const int kt_end = unit.ke;
      // The previous tile's deferred C work runs in this unit's main loop, each event between
      // issuing a k-tile's WGMMAs and waiting for them, spread evenly over the k-tiles (several at
      // the last k-tile when K is short). Events: with a late pair (GemmParams::late_c), its fence
      // and TMA stores first; then the deferred chunks' staging and stores (a chunk is staged once
      // the store that last read its buffer is done: chunk j - 2's); with a late pair, at the last
      // k-tile, a wait until every store has read its buffer, so that the next epilogue writes
      // buffers 0 and 1 without waiting. Until 2026-11-26 the chunks went under k-tiles 0 and 1,
      // where chunk 2 waited for chunk 0's store while every block stored C at once. Spread (H100,
      // 2026-11-26: 8192x8192x1024 0.938 -> 0.948x torch.mm bf16 (0.935 -> 0.949
      // fp16), 8192x8192x2048 0.997 -> 1.009; issue 3's seven shapes 0.991 -> 0.994 bf16, 0.991
      // -> 0.998 fp16. One loop issues every k-tile: with a call site per event, ptxas stopped
      // inlining issue() and put the accumulators in local memory.
      constexpr int kDeferred = kChunks - kImmediate;
      constexpr int kLead = kPairImmediate ? 1 : 0;  // event 0: the late pair's stores; last: the wait
      constexpr int kEvents = kLead + kDeferred + kLead;
      const bool lead = kLead && deferred == 2;
      int ev = lead ? 0 : kLead;  // the next event
      const int ev_end = deferred == 0 ? 0 : lead ? kEvents : kLead + kDeferred;
      // Event i at k-tile unit.kb + (i + 1) (spread + 1) - 1; every one left at the last k-tile
      // (the final wait is always left: it falls past the last). Constant divisors, and one
      // running position: a register or two fewer across the loop. (The form of 2026-11-26 spilled 4-48
      // bytes; later that day the registers were freed elsewhere: the shared storage's base and the
      // cursor's 64-bit divisions, above.)
      const int spread = lead ? (kt_end - kt) / (kDeferred + 2) : (kt_end - kt) / (kDeferred + 1);
      int next_at = kt + spread;
      for (; kt < kt_end; ++kt) {
        issue();
#pragma unroll 1
        for (; ev < ev_end && (kt >= next_at || kt + 1 == kt_end); ++ev, next_at += spread + 1) {
          for_each(make_int_sequence<kEvents>{}, [&](auto ec) {
            constexpr int e = decltype(ec)::value;
            if (ev != e) return;
            if constexpr (kLead && e == 0) {
              stage_chunks(Int<0>{}, Int<2>{}, Int<kStoreOnly>{});
            } else if constexpr (kLead && e == kEvents - 1) {
              if (leader) tma_store_wait<0>();
              cutlass::arch::NamedBarrier::sync(128, epilogue_barrier);
            } else {
              store_deferred(Int<e - kLead>{});
            }
          });
        }
        retire();
      }
      deferred = 0;
      warpgroup_wait<0>();
      warpgroup_fence_operand(acc);
      trace(kTrMainDone, units++);
      if (prev_stage >= 0) release(prev_stage);

      const int row0 = tile.m * kBM, col0 = tile.n * kBN;
      uint32_t bias_pairs[kChunks] = {};
      if (bias16) {
        CUTE_UNROLL
        for (int c = 0; c < kChunks; ++c) bias_pairs[c] = load_bias_pair<T>(p, col0 + c * Tr::kChunkN + 2 * (ctid % 32));
      }
      if (!kOffload && unit.parts > 1) {
        // This block's tile, numbered across the cluster and the batch, and its partials: one
        // kBM x kBN fp32 slot per piece, value i of consumer thread ctid at i * kThreadsC + ctid
        // (coalesced). A warp's accumulators are 16 rows of its 64-row WGMMA atom: warps whose
        // rows all lie past M (small M, decode) neither write nor read them.
        constexpr int kThreadsC = 128 * Tr::kConsumers;
        const int64_t tile_id = int64_t(unit.slot_tile) * kCluster + rank;
        float* slots = p.workspace + tile_id * slot_stride * int64_t(kBM * kBN) + ctid;
        // The warp's first row is derived from %tid.x read here: hoisted out of the unit loop, the
        // value was held across it and ptxas spilled it (4 bytes, fp16 kernels: the register peak
        // is the 16-bit bias path's).
        const int tid = fresh_tid_x();
        const bool rows_inside = row0 + (tid / 128 - 1) * Tr::kRowsPerConsumer + (tid % 128) / 32 * 16 < p.m;
        if (rows_inside) {
          float* slot = slots + unit.part * int64_t(kBM * kBN);
          CUTE_UNROLL
          for (int i = 0; i < size(acc); ++i) slot[i * kThreadsC] = acc(i);
        }
        cutlass::arch::NamedBarrier::sync(kThreadsC, kSplitBarrier);
        if (ctid == 0) {
          // Release the block's partial (ordered before this thread by the barrier), count it,
          // and acquire the others' if this was the last slice to arrive.
          __threadfence();
          smem.split_last = atomicAdd(p.flags + tile_id, 1) == unit.parts - 1;
          __threadfence();
        }
        cutlass::arch::NamedBarrier::sync(kThreadsC, kSplitBarrier);
        if (!smem.split_last) continue;  // not last: no epilogue, the last piece stores C
        // The last piece to arrive, whichever it is, sums all pieces in piece order: the same
        // bits every time. Pieces 0 and 1 keep their own values and add the other's (p0 + p1 is
        // p1 + p0 to the bit): one partial fewer through L2, the only read of a two-piece tile.
        if (rows_inside) {
          int s = 2;
          if (unit.part < 2) {
            const float* other = slots + (1 - unit.part) * int64_t(kBM * kBN);
            CUTE_UNROLL
            for (int i = 0; i < size(acc); ++i) acc(i) += __ldcg(other + i * kThreadsC);  // L2: another SM wrote it
          } else {
            CUTE_UNROLL
            for (int i = 0; i < size(acc); ++i) acc(i) = __ldcg(slots + i * kThreadsC);
            s = 1;
          }
          for (; s < unit.parts; ++s) {
            const float* slot = slots + s * int64_t(kBM * kBN);
            CUTE_UNROLL
            for (int i = 0; i < size(acc); ++i) acc(i) += __ldcg(slot + i * kThreadsC);
          }
        }
      }

      // Epilogue, on this warpgroup's slice of rows, one chunk (kChunkN columns: 64, rows 7 and 11's 32,
      // rows 6 and 10's 16) at a time: bias/C term, scaling and activation on the chunk's fp32 accumulators (addmm), then
      // its stores. A compile-time loop: every index and coordinate is a constant, so the values stay in
      // registers (a runtime chunk index would put the accumulators in local memory), and each chunk's
      // registers are free once it is stored.
      // (The activation warps' kernel: everything but the activation, which they apply.)
      const bool math = kOffload ? p.x != nullptr || p.alpha != 1.f : p.epilogue_math();
      // Deferred only when this block has another unit to hide the stores under.
      // (Rows TMA cannot store are written by the consumers themselves: in the epilogue.)
      const bool defer_tile = stage_c && !c_staged && cursor.has_next();
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
          epilogue_chunk<T, !kOffload && !kLean, !kLean>(v, tCcC, row0, ccol0, bias16, bias_pairs[j], p);
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
                if (p.late_c && defer_tile) {
                  // Late pair: written to buffers 0 and 1 and left there; the next unit's main loop
                  // fences and stores them. The buffers are free: the first unit's are fresh, and
                  // every other unit follows a deferring tile, whose last k-tile waited until its
                  // stores had read them (above). The tensor cores idle only for this stmatrix.
                  stage_chunks(Int<0>{}, Int<2>{}, Int<kWriteOnly>{});
                } else {
                  stage_chunks(Int<0>{}, Int<2>{}, Int<kStageAll>{});
                }
              }
            } else {
              store_chunk(jc);
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
      deferred = !defer_tile ? 0 : kPairImmediate && p.late_c ? 2 : 1;
      trace(kTrEpilogueDone, units - 1);
    }
    // (Nothing is pending here: a block's last unit stores its own C.)
    // The TMA store reads shared memory asynchronously: finish before the block exits.
    if (stage_c && leader) tma_store_wait<0>();
    trace(kTrEnd, loads);
  }
  // The peer may still multicast into this block or arrive on its barriers until it is done.
  if constexpr (kCluster > 1) cute::cluster_sync();
#else
  // Built for an arch without WGMMA: the host launches this family only on sm_90 devices and only
  // when the build targeted sm_90a (CUTE_GEMM_HAS_SM90A, set by setup.py).
  __trap();
#endif
}

}  // namespace cute_gemm::sm90

#include "sm90/run.h"

#endif  // another arch's device pass
