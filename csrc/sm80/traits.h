// Every CuTe type of the SM80 multistage kernel, derived from the dtype, the two operand
// major-nesses and one row of the config table.
#pragma once

#include <cute/tensor.hpp>

#include "common.h"
#include "sm80/configs.h"

namespace cute_gemm::sm80 {

using namespace cute;

// fp32 accumulators: fp16 accumulation loses about 10x in accuracy.
template <DType D>
using MmaOp = std::conditional_t<
    D == DType::kF16, SM80_16x8x16_F32F16F16F32_TN,
    std::conditional_t<D == DType::kBF16, SM80_16x8x16_F32BF16BF16F32_TN, SM80_16x8x8_F32TF32TF32F32_TN>>;

// One operand (A as (M,K) or B as (N,K)) of a BMN x BK tile, loaded in cp.async vectors of
// VecBytes: 16, or 4 for operands whose rows are 4-byte but not 16-byte aligned (the narrow
// kernels: an even leading dimension or extent that is not a multiple of 8, such as 574).
template <class T, int BMN, int BK, int Stages, int Threads, bool KMajor, int VecBytes = 16>
struct OperandTraits {
  static constexpr int kVec = 16 / sizeof(T);  // elements per 16 bytes: the smem swizzle's chunk
  static constexpr int kLoadVec = VecBytes / sizeof(T);  // elements per cp.async
  static_assert(VecBytes == 16 || (VecBytes == 4 && sizeof(T) == 2), "narrow (4-byte) loads of 16-bit elements only");
  static_assert(kVec == 8 || (kVec == 4 && KMajor && BK == 32),
                "16-bit elements, or 32-bit (TF32) ones K-major in 128-byte rows: the transposing "
                "ldmatrix moves 16-bit elements only, so TF32 tiles must be K-major");

  // K-major rows are BK elements; the swizzle spreads the 8 rows that one ldmatrix phase reads
  // over all 32 banks (BK=32: 4 chunks of 16 B per row, XOR'd with row/2; BK=64: 8 chunks, row).
  // MN-major tiles are stored as BK columns of 64 contiguous M (or N) elements, swizzled so the
  // transposing ldmatrix reads eight 16-byte chunks from different banks.
  static auto smem_atom() {
    if constexpr (kVec == 4) {
      // TF32: 128-byte rows of 32 elements, 16-byte chunks of 4 XOR'd with the row.
      return composition(Swizzle<3, 2, 3>{}, Layout<Shape<_8, _32>, Stride<_32, _1>>{});
    } else if constexpr (KMajor) {
      static_assert(BK == 32 || BK == 64, "K-major smem atom is defined for BK = 32 or 64");
      if constexpr (BK == 64) {
        return composition(Swizzle<3, 3, 3>{}, Layout<Shape<_8, _64>, Stride<_64, _1>>{});
      } else {
        return composition(Swizzle<2, 3, 3>{}, Layout<Shape<_8, _32>, Stride<_32, _1>>{});
      }
    } else {
      static_assert(BMN % 64 == 0, "MN-major smem atom spans 64 rows");
      return composition(Swizzle<3, 3, 3>{}, Layout<Shape<_64, _8>, Stride<_1, _64>>{});
    }
  }
  // (BMN,BK,PIPE)
  using SmemLayout =
      decltype(tile_to_shape(smem_atom(), make_shape(Int<BMN>{}, Int<BK>{}, Int<Stages>{})));

  // Global -> shared: each thread moves vectors along the contiguous dimension. The ZFILL forms
  // of cp.async write zeros where the predicate is off, which is how edge tiles and the K residue
  // are made exact (out-of-range products are 0 * 0). 16-byte vectors bypass L1
  // (SM80_CP_ASYNC_CACHEGLOBAL); cp.async.cg takes no other size, so 4-byte ones go through it.
  static auto gmem_copy() {
    using Atom = std::conditional_t<VecBytes == 16, Copy_Atom<SM80_CP_ASYNC_CACHEGLOBAL_ZFILL<uint128_t>, T>,
                                    Copy_Atom<SM80_CP_ASYNC_CACHEALWAYS_ZFILL<uint32_t>, T>>;
    if constexpr (KMajor) {
      constexpr int kThrK = BK / kLoadVec;
      static_assert(Threads % kThrK == 0 && BMN % (Threads / kThrK) == 0, "K-major copy tiling");
      return make_tiled_copy(Atom{},
                             Layout<Shape<Int<Threads / kThrK>, Int<kThrK>>, Stride<Int<kThrK>, _1>>{},
                             Layout<Shape<_1, Int<kLoadVec>>>{});
    } else {
      constexpr int kThrMN = BMN / kLoadVec;
      static_assert(Threads % kThrMN == 0 && BK % (Threads / kThrMN) == 0, "MN-major copy tiling");
      return make_tiled_copy(Atom{},
                             Layout<Shape<Int<kThrMN>, Int<Threads / kThrMN>>, Stride<_1, Int<kThrMN>>>{},
                             Layout<Shape<Int<kLoadVec>, _1>>{});
    }
  }
  using GmemCopy = decltype(gmem_copy());

  // Shared -> registers: ldmatrix.x4, transposing when the tile is MN-major.
  using SmemCopyAtom =
      std::conditional_t<KMajor, Copy_Atom<SM75_U32x4_LDSM_N, T>, Copy_Atom<SM75_U16x8_LDSM_T, T>>;

};

template <DType D, bool AKMajor, bool BKMajor, int Cfg, int VecBytes = 16>
struct KernelTraits {
  static constexpr TileConfig kCfg = kConfigs[Cfg];
  static constexpr int kBM = kCfg.bm, kBN = kCfg.bn, kBK = kCfg.bk, kStages = kCfg.stages;
  static constexpr int kWarpsM = kCfg.warps_m, kWarpsN = kCfg.warps_n;
  static constexpr bool kAKMajor = AKMajor, kBKMajor = BKMajor;
  static constexpr int kThreads = 32 * kWarpsM * kWarpsN;
  static_assert(kStages >= 3, "the mainloop waits with cp_async_wait<kStages-2>: one stage in "
                              "flight while one is read needs at least 3");
  static_assert(kBK % 16 == 0, "BK is a whole number of k16 mma steps");

  using Element = typename ElementOf<D>::type;
  using A = OperandTraits<Element, kBM, kBK, kStages, kThreads, AKMajor, VecBytes>;
  using B = OperandTraits<Element, kBN, kBK, kStages, kThreads, BKMajor, VecBytes>;

  // Each warp covers 16 x 16 per atom step (N permuted to 16 so one ldmatrix.x4 feeds two
  // 16x8 atoms of B); the tiled MMA repeats over the block tile. K per step: 16 (16-bit), 8 (TF32).
  static constexpr int kAtomK = D == DType::kTF32 ? 8 : 16;
  using TiledMma = TiledMMA<MMA_Atom<MmaOp<D>>,
                            Layout<Shape<Int<kWarpsM>, Int<kWarpsN>, _1>>,
                            Tile<Int<16 * kWarpsM>, Int<16 * kWarpsN>, Int<kAtomK>>>;
  static_assert(kBM % (16 * kWarpsM) == 0 && kBN % (16 * kWarpsN) == 0, "warps tile the block");

  // Epilogue staging: row-major with 8 elements of padding, so the 4-byte accumulator-pair
  // stores of a warp (8 rows x 4 columns) land in 32 different banks and rows stay 16-byte aligned.
  using SmemLayoutC = Layout<Shape<Int<kBM>, Int<kBN>>, Stride<Int<kBN + 8>, _1>>;
  static auto gmem_copy_c() {
    constexpr int kThrN = kBN / A::kVec;
    static_assert(kThreads % kThrN == 0 && kBM % (kThreads / kThrN) == 0, "C copy tiling");
    return make_tiled_copy(Copy_Atom<UniversalCopy<uint128_t>, Element>{},
                           Layout<Shape<Int<kThreads / kThrN>, Int<kThrN>>, Stride<Int<kThrN>, _1>>{},
                           Layout<Shape<_1, Int<A::kVec>>>{});
  }
  using GmemCopyC = decltype(gmem_copy_c());

  static constexpr int kSmemAB = int(cosize(typename A::SmemLayout{}) + cosize(typename B::SmemLayout{}));
  static constexpr int kSmemC = int(cosize(SmemLayoutC{}));
  static constexpr int kSmemBytes = int(sizeof(Element)) * (kSmemAB > kSmemC ? kSmemAB : kSmemC);
  static_assert(kSmemBytes == smem_bytes(kCfg, int(sizeof(Element))), "the host rule's smem_bytes() must match the layouts");
};

}  // namespace cute_gemm::sm80
