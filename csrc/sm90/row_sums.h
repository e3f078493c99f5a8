// The row sums of the SM90 kernel (GemmParams::row_sums): the sums over K of A's rows, written
// beside C. nn.Linear's backward computes the weight's gradient as g^T x, A = g^T, whose row sums
// are the bias's gradient: torch reads g once more for them in a reduction kernel of its own.
// Here the tensor cores sum them as they multiply, in a kernel of its own (sm90/kernel.h, kSums:
// the lean kernel with the sums): on the tiles of tile column 0, each consumer
// warpgroup also issues A_slot x ones (64 x 8 x 16 WGMMAs, B a 8 x kBK tile of ones in shared
// memory), about 3 % of a 256-column tile's WGMMA work, in fp32 and deterministic. (Warps of the
// producer warpgroup summing the slot in CUDA cores held the ring up: the WGMMAs of a 128 x 256 x 64
// k-tile take about 1,000 cycles, the warps' 8,192 loads and adds took several times that.)
// Included by sm90/kernel.h only.
#pragma once

#include <cute/tensor.hpp>

#include "sm90/kernel_parts.h"

namespace cute_gemm::sm90 {

// The rows that have the kernel: Tr::kRowSumsCan (traits.h). It is the lean kernel (no bias or
// activation to compute, as in a weight gradient; in the general kernel the sums' registers
// spilled). The host asks for row sums only on such plans with whole tiles (no K slices, no
// stream-K tail: a partial row sum would need the pieces' sum); run.h refuses the rest.

// Every thread of the block writes its share of the ones before the block's first barrier, and
// makes them visible to the WGMMAs' async proxy.
template <class Tr>
CUTE_DEVICE void fill_ones(typename Tr::SharedStorage& smem) {
  using E = typename Tr::Element;
  for (int i = threadIdx.x; i < int(sizeof(smem.ones) / sizeof(E)); i += Tr::kThreads) smem.ones[i] = E(1.f);
  cutlass::arch::fence_view_async_shared();
}

// A consumer thread's part: the 64 x 8 (per warpgroup) fp32 accumulators, every column the sums
// of the warpgroup's rows, and the descriptors of the ones. `on` for a tile of column 0 when the
// host asked for sums.
template <class Tr, class FragOnes, class Acc, class Coords>
struct RowSums {
  typename Tr::SumMma mma;
  FragOnes ones;  // (MMA,MMA_N,MMA_K): one k-tile's descriptors, the same each slot
  Acc acc;        // (MMA,MMA_M,MMA_N)
  Coords coords;  // (row, col) in the tile's 8 columns of each accumulator
  bool on = false;

  CUTE_DEVICE void begin(bool tile_on) {
    on = tile_on;
    mma.accumulate_ = GMMA::ScaleOut::Zero;
    warpgroup_fence_operand(acc);
  }
  // k-block kb of the slot whose A descriptors are a_kb, in the main WGMMAs' batch (on tiles
  // where `on`: Mainloop::run issues that batch apart).
  template <class FragA>
  CUTE_DEVICE void issue(const FragA& a_kb, int kb) {
    gemm(mma, a_kb, ones(_, _, kb), acc);
    mma.accumulate_ = GMMA::ScaleOut::One;
  }
  CUTE_DEVICE void end() { warpgroup_fence_operand(acc); }
  // Column 0's threads store the tile's rows below M, rounded to A's type.
  CUTE_DEVICE void store(const GemmParams& p, int m0) const {
    if (!on) return;
    using E = typename Tr::Element;
    E* out = static_cast<E*>(p.row_sums);
    CUTE_UNROLL
    for (int i = 0; i < size(acc); ++i) {
      const int m = m0 + get<0>(coords(i));
      if (get<1>(coords(i)) == 0 && m < p.m) out[m] = E(acc(i));
    }
  }
};

// Consumer thread ctid's row sums (the same warpgroup split of the tile's rows as TiledMma's).
template <class Tr>
CUTE_DEVICE auto make_row_sums(typename Tr::SharedStorage& smem, int ctid) {
  Tensor sOnes = make_tensor(make_smem_ptr(smem.ones), typename Tr::SmemLayoutOnes{});  // (8,BK)
  typename Tr::SumMma mma;
  auto thr_mma = mma.get_thread_slice(ctid);
  Tensor ones = thr_mma.make_fragment_B(thr_mma.partition_B(sOnes));
  Tensor acc = partition_fragment_C(mma, make_shape(Int<Tr::kBM>{}, _8{}));
  Tensor coords = thr_mma.partition_C(make_identity_tensor(make_shape(Int<Tr::kBM>{}, _8{})));
  return RowSums<Tr, decltype(ones), decltype(acc), decltype(coords)>{mma, ones, acc, coords};
}

// The kernels without: nothing issued, nothing stored.
struct NoRowSums {
  static constexpr bool on = false;
  CUTE_DEVICE void begin(bool) {}
  template <class FragA>
  CUTE_DEVICE void issue(const FragA&, int) {}
  CUTE_DEVICE void end() {}
  CUTE_DEVICE void store(const GemmParams&, int) const {}
};

}  // namespace cute_gemm::sm90
