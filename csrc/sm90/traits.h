// Every CuTe type of the SM90 warp-specialized kernel, derived from the dtype, the operand
// major-nesses and one row of sm90/configs.h.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "common.h"
#include "sm90/configs.h"

namespace cute_gemm::sm90 {

using namespace cute;

// An output tile of one batch.
struct BatchTile {
  int m, n, l;
};

// CpAsync: the "narrow" kernel of the row, for 16-bit operands whose rows TMA cannot read (a
// leading stride or base not a multiple of 16 bytes, but of 4: an even K or N that is not a
// multiple of 8, as in 574^3 or 2050^3). Its producer warpgroup's 128 threads move the tiles with
// 4-byte cp.async (zero-filled past M, N and K) instead of one thread issuing TMA boxes, and each
// thread's copies of a stage arrive on the stage's full barrier when they land; the consumers are
// the same. Rows without a cluster only (no multicast).
// Gated: the gated kernel (GemmParams::b2): the B tile's first kBN / 2 rows are rows of B (the
// gate's weight), its last kBN / 2 the same rows of B2 (the up projection's), each loaded as a box
// of its own; the epilogue writes act(gate) * up, a C tile of kBN / 2 columns (epilogue_c.h).
template <DType D, bool AKMajor, bool BKMajor, int Cfg, bool CpAsync = false, bool Gated = false>
struct KernelTraits {
  using Element = typename ElementOf<D>::type;
  static constexpr TileConfig kCfg = kConfigs[Cfg];
  static constexpr bool kCpAsync = CpAsync;
  static constexpr bool kGated = Gated;
  static_assert(!CpAsync || (kCfg.cluster_m == 1 && sizeof(Element) == 2), "narrow kernels: 16-bit rows without a cluster");
  static_assert(!Gated || (!CpAsync && BKMajor && sizeof(Element) == 2 && kCfg.bn % 128 == 0),
                "gated kernels: 16-bit, TMA, K-major B, whole 64-column chunks in each half");
  // The table's K tile is for 16-bit elements; TF32 keeps the bytes (one 128-byte swizzle row).
  static constexpr int kBM = kCfg.bm, kBN = kCfg.bn, kBK = kCfg.bk * 2 / int(sizeof(Element)), kStages = kCfg.stages;
  static constexpr int kConsumers = kCfg.consumers;
  static constexpr int kCluster = kCfg.cluster_m;
  static_assert(kCluster == 1 || kCluster == 2, "clusters of 1 or 2 blocks along M");
  // Each consumer warp releases a slot once, to the empty barrier of every block in the cluster
  // (the producers of all of them multicast into this block's slot).
  static constexpr int kEmptyArrivals = 4 * kConsumers * kCluster;
  static constexpr int kThreads = 128 * (1 + kConsumers);  // warpgroup 0 loads, the rest compute
  static constexpr bool kAKMajor = AKMajor, kBKMajor = BKMajor;
  static_assert(kBK * sizeof(Element) == 128, "one 128-byte swizzle row per K-major tile row");
  static_assert(kBM % (64 * kConsumers) == 0, "each consumer warpgroup owns whole 64-row WGMMA atoms");

  // WGMMA reads A and B straight from shared memory in the 128-byte-swizzled canonical layouts
  // (K-major or MN-major per operand); TMA writes them in the same swizzle.
  // An MN-major tile narrower than 64 elements (the swapped decode rows' 16 or 32 columns) takes the
  // swizzle of its width (32 or 64 bytes: 16 x 8 or 32 x 8 atoms).
  template <bool KMajor, int MN>
  using SmemAtom = std::conditional_t<
      KMajor, GMMA::Layout_K_SW128_Atom<Element>,
      std::conditional_t<MN % 64 == 0, GMMA::Layout_MN_SW128_Atom<Element>,
                         std::conditional_t<MN % 32 == 0, GMMA::Layout_MN_SW64_Atom<Element>,
                                            GMMA::Layout_MN_SW32_Atom<Element>>>>;
  using SmemAtomA = SmemAtom<AKMajor, kCfg.bm>;
  using SmemAtomB = SmemAtom<BKMajor, kCfg.bn>;
  // An MN-major atom is 64 (MN) x 8 (K) (16 x 8 for the swapped rows' 16-wide B): stack the atoms along K first, so that one TMA box
  // covers 64 x kBK contiguous bytes. Stacked along MN first, the box shrank to 64 x 8 and the
  // producer issued 32 TMA loads per 256 x 64 tile instead of 4 (the consumers starved).
  template <bool KMajor>
  using AtomOrder = std::conditional_t<KMajor, Step<_1, _2, _3>, Step<_2, _1, _3>>;
  using SmemLayoutA = decltype(tile_to_shape(SmemAtomA{}, make_shape(Int<kBM>{}, Int<kBK>{}, Int<kStages>{}),
                                             AtomOrder<AKMajor>{}));
  using SmemLayoutB = decltype(tile_to_shape(SmemAtomB{}, make_shape(Int<kBN>{}, Int<kBK>{}, Int<kStages>{}),
                                             AtomOrder<BKMajor>{}));

  static constexpr GMMA::Major kMajorA = AKMajor ? GMMA::Major::K : GMMA::Major::MN;
  static constexpr GMMA::Major kMajorB = BKMajor ? GMMA::Major::K : GMMA::Major::MN;
  // The consumer warpgroups split the tile along M: each issues 64 x kBN x 16 WGMMAs.
  using TiledMma = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<Int<kBM / kConsumers>, Int<kBN>, Int<kBK>>, kMajorA,
                           kMajorB>(),
      Layout<Shape<Int<kConsumers>, _1, _1>>{}));

  // The row sums (sm90/row_sums.h): A x a tile of ones, 64 x 8 x 16 WGMMAs on each consumer's rows,
  // in a lean kernel of their own on the rows that have a lean kernel (configs.h), not gated, with
  // the weight gradient's M-major A (dY^T): one more kernel for half of the layouts.
  static constexpr bool kRowSumsCan = has_lean_kernel(Cfg, CpAsync, int(sizeof(Element))) && !Gated && !AKMajor;
  using SmemLayoutOnes = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{}, make_shape(_8{}, Int<kBK>{})));
  using SumMma = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<Int<kBM / kConsumers>, _8, Int<kBK>>, kMajorA,
                           GMMA::Major::K>(),
      Layout<Shape<Int<kConsumers>, _1, _1>>{}));

  // TMA descriptors, built on the host from the real pointers and strides (64-bit).
  using GmemLayoutA = Layout<Shape<int, int, int>, decltype(mn_k_l_stride<AKMajor>(int64_t{}, int64_t{}))>;
  using GmemLayoutB = Layout<Shape<int, int, int>, decltype(mn_k_l_stride<BKMajor>(int64_t{}, int64_t{}))>;
  using GmemTensorA = decltype(make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), GmemLayoutA{}));
  using GmemTensorB = decltype(make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), GmemLayoutB{}));
  using TmaA = decltype(make_tma_atom(SM90_TMA_LOAD{}, std::declval<GmemTensorA>(), SmemLayoutA{}(_, _, 0),
                                      make_shape(Int<kBM>{}, Int<kBK>{})));
  // B is shared by the blocks of a cluster: each loads 1/kCluster of the tile and multicasts it.
  using TmaLoadB = std::conditional_t<(kCluster > 1), SM90_TMA_LOAD_MULTICAST, SM90_TMA_LOAD>;
  // The box of one B load: the whole tile, or (gated) one half of it.
  static constexpr int kBoxN = Gated ? kBN / 2 : kBN;
  using SmemLayoutBBox =
      std::conditional_t<Gated, decltype(tile_to_shape(SmemAtomB{}, make_shape(Int<kBoxN>{}, Int<kBK>{}), Step<_1, _2>{})),
                         decltype(SmemLayoutB{}(_, _, 0))>;
  using TmaB = decltype(make_tma_atom(TmaLoadB{}, std::declval<GmemTensorB>(), SmemLayoutBBox{},
                                      make_shape(Int<kBoxN>{}, Int<kBK>{}), Int<kCluster>{}));
  static constexpr uint32_t kTmaBytesPerStage = uint32_t((kBM + kBN) * kBK * sizeof(Element));

  // The narrow kernels' producer threads (producer.h's NarrowLoader), each arriving on a stage's
  // full barrier once its copies have landed.
  static constexpr int kCopyThreads = 128;

  // Epilogue. With 16-byte aligned C rows each consumer converts its 64-row slice in kChunkN-column
  // chunks into one of two 128-byte-swizzled staging buffers (conflict-free accumulator-pair
  // stores) and one thread TMA-stores the chunk asynchronously, so the conversion of the next
  // chunk and the next tile's main loop overlap the stores; TMA clips rows and columns past M and
  // N. The staging stays small (2 x kBM x kChunkN) so the operand ring can be deep. Otherwise every
  // thread stores its accumulators to global memory itself, element by element, bounded.
  static constexpr int kRowsPerConsumer = kBM / kConsumers;
  // One 128-byte swizzle row of 16-bit elements (64 columns) where that gives one chunk or an even
  // number (the two staging buffers alternate across tiles); half of one otherwise (192 columns:
  // six chunks; with three, a tile's last chunk and the next tile's first would share a buffer);
  // a narrower tile (the swapped decode rows, 16 or 32 columns) is one chunk of its own width, staged in
  // the swizzle of that width.
  static constexpr int kChunkN = kBN < 64 ? kBN : kBN == 64 || kBN % 128 == 0 ? 64 : 32;
  static_assert(kChunkN == 64 || kChunkN == 32 || kChunkN == 16, "C chunks of 16, 32 or 64 columns");
  static_assert((kBM - 1) * kMaxChunkXRowStride + kBN <= 2147483647,
                "the epilogue's 32-bit offsets into X rows (epilogue.h, add_x_chunk) must reach the whole tile");
  static_assert(kBN == kChunkN || kBN % (2 * kChunkN) == 0,
                "one C chunk per tile, or an even number (two staging buffers)");
  // C's chunks per tile: the gated kernel writes one for each pair of a gate and an up chunk.
  static constexpr int kOutChunks = (Gated ? kBN / 2 : kBN) / kChunkN;
  // fp32 C (TF32, out_dtype=float32) is always stored from registers: no staging.
  static constexpr bool kStageC = sizeof(Element) == 2;
  using CElement = std::conditional_t<kStageC, Element, cutlass::half_t>;  // the staging's type
  using SmemAtomC = std::conditional_t<kChunkN == 64, GMMA::Layout_K_SW128_Atom<CElement>,
                                       std::conditional_t<kChunkN == 32, GMMA::Layout_K_SW64_Atom<CElement>,
                                                          GMMA::Layout_K_SW32_Atom<CElement>>>;
  using SmemLayoutCChunk = decltype(tile_to_shape(SmemAtomC{}, make_shape(Int<kRowsPerConsumer>{}, Int<kChunkN>{})));
  using SmemLayoutC = decltype(tile_to_shape(SmemLayoutCChunk{},
                                             make_shape(Int<kBM>{}, Int<kChunkN>{}, _2{})));  // (BM,CHUNK_N,BUF)
  // The same WGMMA shape with N = 64: its per-thread C partition of one chunk lists the same
  // values in the same order as a 64-column slice of TiledMma's accumulators. stmatrix writes a
  // warp's 8x8 blocks of that partition, 16 bytes per thread per instruction.
  using ChunkMma = decltype(make_tiled_mma(
      GMMA::ss_op_selector<CElement, CElement, float, Shape<Int<kBM / kConsumers>, Int<kChunkN>, _64>,
                           GMMA::Major::K, GMMA::Major::K>(),
      Layout<Shape<Int<kConsumers>, _1, _1>>{}));
  using StoreC = decltype(make_tiled_copy_C(Copy_Atom<SM90_U32x4_STSM_N, CElement>{}, ChunkMma{}));
  using GmemTensorC = decltype(make_tensor(make_gmem_ptr(static_cast<CElement*>(nullptr)),
                                           Layout<Shape<int, int, int>, Stride<int64_t, _1, int64_t>>{}));
  using TmaC = decltype(make_tma_atom(SM90_TMA_STORE{}, std::declval<GmemTensorC>(), SmemLayoutCChunk{},
                                      make_shape(Int<kRowsPerConsumer>{}, Int<kChunkN>{})));

  struct SharedStorage {
    alignas(1024) Element a[cosize_v<SmemLayoutA>];  // 128-byte swizzle atoms need 1024-byte alignment
    alignas(1024) Element b[cosize_v<SmemLayoutB>];
    alignas(1024) CElement c[kStageC ? cosize_v<SmemLayoutC> : 8];  // C staging: two chunk buffers
    alignas(8) uint64_t full[kStages];   // TMA landed (transaction count) -> consumers may read
    alignas(8) uint64_t empty[kStages];  // every consumer thread done reading -> producer may refill
    int split_last;  // split-K: this block's slice was the tile's last to arrive (tells all consumers)
    BatchTile c_tile[kConsumers];  // the tile whose C chunks each consumer's leader thread stores
    // The activation warps (activation_warps.h): staging buffer b holds a chunk of 16-bit pre-activations of
    // tile c_buf_tile[b] (every consumer thread arrives on c_ready[b]), and its store has read it
    // (the storing thread arrives on c_free[b]).
    alignas(8) uint64_t c_ready[2];
    alignas(8) uint64_t c_free[2];
    BatchTile c_buf_tile[2];
    // The row sums' B: ones (1 KB, at the end, where the other kernels' one element fits in the
    // padding). Rows 0-3 and 9 then fill the 227 KB exactly.
    alignas(kRowSumsCan ? 1024 : alignof(Element)) Element ones[kRowSumsCan ? cosize_v<SmemLayoutOnes> : 1];
  };
  // +1 KB: the dynamic shared memory base is only guaranteed 16-byte aligned.
  static constexpr int kSmemBytes = int(sizeof(SharedStorage)) + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "more shared memory than an SM90 block can opt in to: fewer stages");

  // Register split: the producer warpgroup needs few, the consumers hold 128 fp32 accumulators
  // and two deferred C chunks (epilogue_c.h; row 7: 96 and six 32-column chunks). 40 + 2 x 232 = 3 x 168, the pool that 384 threads of
  // __launch_bounds__(384, 1) start with. (40 spilled in the producer with a multicast MN-major
  // B until its k-loop stopped being unrolled.)
  // Three consumer warpgroups (row 8's 192-row tiles, 512 threads): 32 + 3 x 160 = 4 x 128, the
  // pool of __launch_bounds__(512, 1); they hold 96 accumulators and store C in their epilogue,
  // and the producer (no multicast there) fits in 32 (24 spilled once it picked batch 0 for a
  // broadcast operand).
  // The narrow kernels' producer is 128 threads computing addresses and predicates: 40 registers
  // next to two consumers, as the TMA producer (48 hung the kernel: 48 + 2 x 232 is more
  // than the 3 x 168 the block starts with, and setmaxnreg.inc waits for registers that never come),
  // 96 next to one.
  static constexpr int kProducerRegs = kConsumers == 3 ? 32 : kConsumers == 1 && CpAsync ? 96 : 40;
  static constexpr int kConsumerRegs = kConsumers == 3 ? 160 : 232;
  static_assert(!CpAsync || kConsumers <= 2, "narrow kernels: one or two consumer warpgroups");
  // setmaxnreg moves registers within the pool the block launched with (kThreads x the kernel's
  // count, at most 65536 / kThreads rounded down to a multiple of 8): a warpgroup's increase waits
  // until the others' decreases free enough, forever if the sum is larger than the pool.
  static_assert(kProducerRegs + kConsumers * kConsumerRegs <= (1 + kConsumers) * (65536 / kThreads / 8 * 8),
                "register split larger than the block's pool: setmaxnreg.inc would wait forever");
};

}  // namespace cute_gemm::sm90
