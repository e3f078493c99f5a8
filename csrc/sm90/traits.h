// Every CuTe type of the SM90 warp-specialized kernel, derived from the dtype, the operand
// major-nesses and one row of sm90/configs.h.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "common.h"
#include "sm90/configs.h"

namespace cute_gemm::sm90 {

using namespace cute;

template <DType D, bool AKMajor, bool BKMajor, int Cfg>
struct KernelTraits {
  using Element = typename ElementOf<D>::type;
  static constexpr TileConfig kCfg = kConfigs[Cfg];
  static constexpr int kBM = kCfg.bm, kBN = kCfg.bn, kBK = kCfg.bk, kStages = kCfg.stages;
  static constexpr int kConsumers = kCfg.consumers;
  static constexpr int kThreads = 128 * (1 + kConsumers);  // warpgroup 0 loads, the rest compute
  static constexpr bool kAKMajor = AKMajor, kBKMajor = BKMajor;
  static_assert(kBK * sizeof(Element) == 128, "one 128-byte swizzle row per K-major tile row");
  static_assert(kBM % (64 * kConsumers) == 0, "each consumer warpgroup owns whole 64-row WGMMA atoms");

  // WGMMA reads A and B straight from shared memory in the 128-byte-swizzled canonical layouts
  // (K-major or MN-major per operand); TMA writes them in the same swizzle.
  using SmemAtomA = std::conditional_t<AKMajor, GMMA::Layout_K_SW128_Atom<Element>, GMMA::Layout_MN_SW128_Atom<Element>>;
  using SmemAtomB = std::conditional_t<BKMajor, GMMA::Layout_K_SW128_Atom<Element>, GMMA::Layout_MN_SW128_Atom<Element>>;
  using SmemLayoutA = decltype(tile_to_shape(SmemAtomA{}, make_shape(Int<kBM>{}, Int<kBK>{}, Int<kStages>{})));
  using SmemLayoutB = decltype(tile_to_shape(SmemAtomB{}, make_shape(Int<kBN>{}, Int<kBK>{}, Int<kStages>{})));

  static constexpr GMMA::Major kMajorA = AKMajor ? GMMA::Major::K : GMMA::Major::MN;
  static constexpr GMMA::Major kMajorB = BKMajor ? GMMA::Major::K : GMMA::Major::MN;
  // The consumer warpgroups split the tile along M: each issues 64 x kBN x 16 WGMMAs.
  using TiledMma = decltype(make_tiled_mma(
      GMMA::ss_op_selector<Element, Element, float, Shape<Int<kBM / kConsumers>, Int<kBN>, Int<kBK>>, kMajorA,
                           kMajorB>(),
      Layout<Shape<Int<kConsumers>, _1, _1>>{}));

  // TMA descriptors, built on the host from the real pointers and strides (64-bit).
  using GmemLayoutA = Layout<Shape<int, int>, decltype(mn_k_stride<AKMajor>(int64_t{}))>;
  using GmemLayoutB = Layout<Shape<int, int>, decltype(mn_k_stride<BKMajor>(int64_t{}))>;
  using GmemTensorA = decltype(make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), GmemLayoutA{}));
  using GmemTensorB = decltype(make_tensor(make_gmem_ptr(static_cast<Element const*>(nullptr)), GmemLayoutB{}));
  using TmaA = decltype(make_tma_atom(SM90_TMA_LOAD{}, std::declval<GmemTensorA>(), SmemLayoutA{}(_, _, 0),
                                      make_shape(Int<kBM>{}, Int<kBK>{})));
  using TmaB = decltype(make_tma_atom(SM90_TMA_LOAD{}, std::declval<GmemTensorB>(), SmemLayoutB{}(_, _, 0),
                                      make_shape(Int<kBN>{}, Int<kBK>{})));
  static constexpr uint32_t kTmaBytesPerStage = uint32_t((kBM + kBN) * kBK * sizeof(Element));

  // Epilogue. With 16-byte aligned C rows: each consumer writes its 64-row slice in the 128-byte
  // swizzle (conflict-free accumulator-pair stores) and one thread TMA-stores it asynchronously,
  // so the next tile's main loop starts at once; TMA clips rows and columns past M and N.
  // Otherwise: padded rows as in SM80 and predicated element/vector stores by every thread.
  static constexpr int kRowsPerConsumer = kBM / kConsumers;
  using SmemLayoutCSlice = decltype(tile_to_shape(GMMA::Layout_K_SW128_Atom<Element>{},
                                                  make_shape(Int<kRowsPerConsumer>{}, Int<kBN>{})));
  using SmemLayoutCTma = decltype(tile_to_shape(SmemLayoutCSlice{}, make_shape(Int<kBM>{}, Int<kBN>{})));
  using GmemTensorC = decltype(make_tensor(make_gmem_ptr(static_cast<Element*>(nullptr)),
                                           Layout<Shape<int, int>, Stride<int64_t, _1>>{}));
  using TmaC = decltype(make_tma_atom(SM90_TMA_STORE{}, std::declval<GmemTensorC>(), SmemLayoutCSlice{},
                                      make_shape(Int<kRowsPerConsumer>{}, Int<kBN>{})));
  using SmemLayoutC = Layout<Shape<Int<kBM>, Int<kBN>>, Stride<Int<kBN + 8>, _1>>;
  static auto gmem_copy_c() {
    constexpr int kVec = 16 / sizeof(Element);
    constexpr int kThrN = kBN / kVec;
    static_assert(128 % kThrN == 0 && kRowsPerConsumer % (128 / kThrN) == 0, "C copy tiling");
    return make_tiled_copy(Copy_Atom<UniversalCopy<uint128_t>, Element>{},
                           Layout<Shape<Int<128 / kThrN>, Int<kThrN>>, Stride<Int<kThrN>, _1>>{},
                           Layout<Shape<_1, Int<kVec>>>{});
  }
  using GmemCopyC = decltype(gmem_copy_c());
  static constexpr int kSmemCElems = cosize_v<SmemLayoutC> > cosize_v<SmemLayoutCTma> ? cosize_v<SmemLayoutC>
                                                                                       : cosize_v<SmemLayoutCTma>;

  struct SharedStorage {
    alignas(1024) Element a[cosize_v<SmemLayoutA>];  // 128-byte swizzle atoms need 1024-byte alignment
    alignas(1024) Element b[cosize_v<SmemLayoutB>];
    alignas(1024) Element c[kSmemCElems];  // either C layout above; 1024: the swizzled one
    alignas(8) uint64_t full[kStages];   // TMA landed (transaction count) -> consumers may read
    alignas(8) uint64_t empty[kStages];  // every consumer thread done reading -> producer may refill
  };
  // +1 KB: the dynamic shared memory base is only guaranteed 16-byte aligned.
  static constexpr int kSmemBytes = int(sizeof(SharedStorage)) + 1024;

  // Register split: the producer warpgroup needs few, the consumers hold 128 fp32 accumulators.
  static constexpr int kProducerRegs = 40;
  static constexpr int kConsumerRegs = 232;
  static_assert(128 * kProducerRegs + 128 * kConsumers * kConsumerRegs <= 65536, "register file");
};

}  // namespace cute_gemm::sm90
