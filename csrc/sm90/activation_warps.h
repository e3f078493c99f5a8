// The activation warps of the SM90 kernel's activation-warps instantiation (sm90/configs.h,
// choose_epilogue_kernel). Included by sm90/kernel.h only.
#pragma once

#include <cute/tensor.hpp>
#include <cutlass/arch/barrier.h>

#include "epilogue.h"
#include "sm90/epilogue_c.h"
#include "sm90/kernel_parts.h"

namespace cute_gemm::sm90 {

// The activation warps (warps 1-3, idle in the producer warpgroup otherwise) apply the activation
// to the 16-bit pre-activations the consumers staged and TMA-store them, while the consumers go on
// with the next tile's main loop: in this cooperative kernel the activation's math would otherwise
// run while the tensor cores wait. The consumers compute the pre-activation z = alpha * acc + beta
// * bias in fp32 and round it once, as torch.addmm rounds its result, so the activation warps see
// act's argument to 16 bits: an accumulator past float16's range that alpha scales back, or a bias
// that cancels it, stays exact. Whole tiles only (no split-K, no stream-K), and X at most a 16-bit
// bias (choose_epilogue_kernel, sm90/configs.h). Staging buffer b holds a chunk of tile
// smem.c_buf_tile[b] once smem.c_ready[b] completes; smem.c_free[b] tells the consumers its store
// has read it.
template <class Tr>
CUTE_DEVICE void run_activation_warps(KernelParams<Tr> const& params, typename Tr::SharedStorage& smem,
                                      const TileWalk<Tr>& walk) {
  using T = typename Tr::Element;
  constexpr int kBM = Tr::kBM, kChunks = Tr::kBN / Tr::kChunkN;
  const GemmParams& p = params.p;
  Tensor sC = staging_c<Tr>(smem);
  constexpr int kActThreads = 96;
  const int at = threadIdx.x - 32;
  // 8 columns at a time (one 16-byte swizzle unit): 8 independent activations per thread.
  constexpr int kVec = 8;
  const int grp = at % (64 / kVec);  // columns kVec grp .. kVec grp + kVec - 1 of each chunk
  const int row_first = at / (64 / kVec);  // rows row_first, + 12, ... of the buffer
  uint32_t ready_phase = 0;       // bit b: the parity buffer b's next chunk completes
  WorkCursor cursor = walk.start;
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
      cutlass::arch::NamedBarrier::sync(kActThreads, kActBarrier<Tr>);
      if (at == 0) {
        CUTE_UNROLL
        for (int c = 0; c < Tr::kConsumers; ++c) tma_store_slice(params, smem, t, c, j, buf);
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

}  // namespace cute_gemm::sm90
