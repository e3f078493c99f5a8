// The host launcher of the SM90 kernel (sm90::run, declared in sm90/launch.h): the TMA
// descriptors, the shared-memory opt-in, the register check of the warpgroups' split, the
// persistent grid, and which of the kernel's instantiations serves the call. Included by
// sm90/kernel.h only, after the kernel.
#pragma once

#include <algorithm>
#include <limits>

#include <cuda_runtime.h>

#include "common.h"
#include "pdl.h"
#include "sm90/configs.h"
#include "sm90/kernel_parts.h"

namespace cute_gemm::sm90 {

// 0: the general kernel, 1: the activation warps', 2: the lean one, 3: the lean one with row sums.
template <class Tr, int kKind>
struct KernelTag {};
template <class Tr>
struct RegisterTag {};

// The call's epilogue as choose_epilogue_kernel (sm90/configs.h) reads it; units and resident: the
// launch's (cluster tile, K slice) units and the clusters that run at once.
inline EpilogueForm epilogue_form(const GemmParams& p, long long units, long long resident) {
  EpilogueForm f;
  f.c_vector_ok = p.c_vector_ok;
  f.c_f32 = p.c_f32;
  f.act = p.act != Activation::kNone;
  f.x_bias16 = p.x == nullptr || (p.x_ldm == 0 && p.x_ldn == 1 && !p.x_f32);
  f.whole_tiles = p.splits == 1 && p.sk_tiles == 0;
  f.act_offload = p.act_offload;
  f.units = units;
  f.resident = resident;
  return f;
}

// The instantiations of one row: the general kernel, and the activation warps', the lean one and
// the row sums' where the row has them (sm90/configs.h, traits.h; the general kernel stands in
// where it has not).
template <class Tr, bool kHasActWarps, bool kHasLean>
struct RowKernels {
  using Fn = void (*)(KernelParams<Tr>);
  Fn general = &gemm_kernel<Tr, false>;
  Fn act_warps = [] {
    if constexpr (kHasActWarps) {
      return &gemm_kernel<Tr, true>;
    } else {
      return &gemm_kernel<Tr, false>;
    }
  }();
  Fn lean = [] {
    if constexpr (kHasLean) {
      return &gemm_kernel<Tr, false, true>;
    } else {
      return &gemm_kernel<Tr, false>;
    }
  }();
  Fn row_sums = [] {
    if constexpr (Tr::kRowSumsCan) {
      return &gemm_kernel<Tr, false, true, true>;
    } else {
      return &gemm_kernel<Tr, false>;
    }
  }();

  // Once per device: the shared-memory opt-in of each kernel, and the check that the warpgroups'
  // setmaxnreg split fits the registers the block launches with (traits.h asserts it against the
  // most the launch bounds allow; this checks what ptxas gave the kernel): otherwise the
  // consumers' increase would wait forever. The fewer of the general and the lean kernel's (the
  // activation warps' kernel's split is its own, 56 + 2 x 224).
  cudaError_t prepare() const {
    constexpr int smem = Tr::kSmemBytes;
    if (cudaError_t e = opt_in_smem<KernelTag<Tr, 0>>(reinterpret_cast<const void*>(general), smem); e != cudaSuccess) {
      return e;
    }
    if constexpr (kHasActWarps) {
      if (cudaError_t e = opt_in_smem<KernelTag<Tr, 1>>(reinterpret_cast<const void*>(act_warps), smem);
          e != cudaSuccess) {
        return e;
      }
    }
    if constexpr (kHasLean) {
      if (cudaError_t e = opt_in_smem<KernelTag<Tr, 2>>(reinterpret_cast<const void*>(lean), smem); e != cudaSuccess) {
        return e;
      }
    }
    if constexpr (Tr::kRowSumsCan) {
      if (cudaError_t e = opt_in_smem<KernelTag<Tr, 3>>(reinterpret_cast<const void*>(row_sums), smem);
          e != cudaSuccess) {
        return e;
      }
    }
    int regs = 0;
    if (cudaError_t e = once_per_device<RegisterTag<Tr>>(&regs, [&](int* r) {
          cudaFuncAttributes attr{}, lean_attr{}, sums_attr{};
          cudaError_t err = cudaFuncGetAttributes(&attr, reinterpret_cast<const void*>(general));
          if (err == cudaSuccess) err = cudaFuncGetAttributes(&lean_attr, reinterpret_cast<const void*>(lean));
          if (err == cudaSuccess) err = cudaFuncGetAttributes(&sums_attr, reinterpret_cast<const void*>(row_sums));
          *r = std::min({attr.numRegs, lean_attr.numRegs, sums_attr.numRegs});
          return err;
        });
        e != cudaSuccess) {
      return e;
    }
    if (regs * Tr::kThreads < 128 * (Tr::kProducerRegs + Tr::kConsumers * Tr::kConsumerRegs)) {
      return cudaErrorInvalidConfiguration;
    }
    return cudaSuccess;
  }
};

// The kernel's parameters: the call's GemmParams and the TMA descriptors of A, B and C over (MN,K,L)
// (the batch is TMA's third dimension, of a stride that TMA wants a nonzero multiple of 16 bytes).
// A broadcast operand (batch stride 0, `w.expand(L, K, N)`: one matrix for every batch, read in
// place) is described as one matrix of a packed batch stride, and the kernel reads its batch 0 for
// every tile. The narrow kernels read A and B with cp.async: no descriptors.
template <class Tr>
KernelParams<Tr> kernel_params(const GemmParams& p) {
  using T = typename Tr::Element;
  constexpr bool AKMajor = Tr::kAKMajor, BKMajor = Tr::kBKMajor;
  auto batches = [&](int64_t stride) { return stride == 0 ? 1 : p.batch; };
  auto tma_stride = [](int64_t stride, int64_t packed) { return stride == 0 ? packed : stride; };
  // The gated kernel's B and B2 are (N / 2, K) each, its C (M, N / 2) (traits.h, Gated).
  const int n_b = Tr::kGated ? p.n / 2 : p.n;
  KernelParams<Tr> params{{}, {}, {}, p, {}};
  if constexpr (!Tr::kCpAsync) {
    Tensor mA = make_tensor(make_gmem_ptr(static_cast<T const*>(p.a)),
                            make_layout(make_shape(p.m, p.k, batches(p.batch_a)),
                                        mn_k_l_stride<AKMajor>(p.lda, tma_stride(p.batch_a, p.lda * (AKMajor ? p.m : p.k)))));
    auto b_tensor = [&](const void* b) {
      return make_tensor(make_gmem_ptr(static_cast<T const*>(b)),
                         make_layout(make_shape(n_b, p.k, batches(p.batch_b)),
                                     mn_k_l_stride<BKMajor>(p.ldb, tma_stride(p.batch_b, p.ldb * (BKMajor ? n_b : p.k)))));
    };
    params.tma_a =
        make_tma_atom(SM90_TMA_LOAD{}, mA, typename Tr::SmemLayoutA{}(_, _, 0), make_shape(Int<Tr::kBM>{}, Int<Tr::kBK>{}));
    params.tma_b = make_tma_atom(typename Tr::TmaLoadB{}, b_tensor(p.b), typename Tr::SmemLayoutBBox{},
                                 make_shape(Int<Tr::kBoxN>{}, Int<Tr::kBK>{}), Int<Tr::kCluster>{});
    if constexpr (Tr::kGated) {
      params.tma_b2 = make_tma_atom(typename Tr::TmaLoadB{}, b_tensor(p.b2), typename Tr::SmemLayoutBBox{},
                                    make_shape(Int<Tr::kBoxN>{}, Int<Tr::kBK>{}), Int<Tr::kCluster>{});
    }
  }
  if (Tr::kStageC && p.c_vector_ok) {  // TMA needs 16-byte aligned rows; otherwise the kernel stores C itself
    Tensor mC = make_tensor(make_gmem_ptr(static_cast<typename Tr::CElement*>(p.c)),
                            make_layout(make_shape(p.m, n_b, p.batch), make_stride(p.ldc, Int<1>{}, p.batch_c)));
    params.tma_c = make_tma_atom(SM90_TMA_STORE{}, mC, typename Tr::SmemLayoutCChunk{},
                                 make_shape(Int<Tr::kRowsPerConsumer>{}, Int<Tr::kChunkN>{}));
  }
  return params;
}

template <DType D, bool AKMajor, bool BKMajor, int Cfg, bool CpAsync, bool Gated>
cudaError_t run(const GemmParams& p, cudaStream_t stream) {
  using Tr = KernelTraits<D, AKMajor, BKMajor, Cfg, CpAsync, Gated>;
  constexpr int kElementBytes = int(sizeof(typename Tr::Element));
  // The gated kernel has one instantiation: its epilogue is its own (epilogue_c.h).
  const RowKernels<Tr, !Gated && has_act_warps_kernel(Cfg, CpAsync, kElementBytes),
                   !Gated && has_lean_kernel(Cfg, CpAsync, kElementBytes)>
      kernels;
  if (cudaError_t e = kernels.prepare(); e != cudaSuccess) return e;
  KernelParams<Tr> params = kernel_params<Tr>(p);

  // Persistent grid: whole clusters, no more than fit on the GPU at once (with clusters the
  // hardware may place fewer blocks than SMs) and no more than there are cluster tiles.
  cudaLaunchConfig_t config = {};
  config.blockDim = dim3(Tr::kThreads);
  config.dynamicSmemBytes = Tr::kSmemBytes;
  config.stream = stream;
  cudaLaunchAttribute attr[2];
  attr[0].id = cudaLaunchAttributeClusterDimension;
  attr[0].val.clusterDim.x = Tr::kCluster;
  attr[0].val.clusterDim.y = 1;
  attr[0].val.clusterDim.z = 1;
  attr[1] = pdl_attribute();  // GemmParams::pdl
  config.attrs = attr;
  config.numAttrs = 1;  // the occupancy query below asks about the cluster alone
  long long resident = p.grid_limit / Tr::kCluster;
  if constexpr (Tr::kCluster > 1) {
    int clusters = 0;
    config.gridDim = dim3(unsigned(resident * Tr::kCluster));
    // Depends only on the kernel and the device: asked once per device.
    if (cudaError_t e = once_per_device<Tr>(&clusters, [&](int* r) {
          const cudaError_t err = cudaOccupancyMaxActiveClusters(r, kernels.general, &config);  // the others alike
          return err == cudaSuccess && *r < 1 ? cudaErrorInvalidConfiguration : err;  // would never run
        });
        e != cudaSuccess) {
      return e;
    }
    resident = std::min<long long>(resident, clusters);
  }
  // The host planned the stream-K tail for one cluster per SM pair (or SM); with fewer resident
  // the segments would not be balanced: launch without it (its counters and partials go unused).
  // (The one rule made here: the resident clusters are known only once the kernel is.)
  if (p.sk_tiles > 0 && resident < p.sk_workers) params.p.sk_tiles = 0;
  // Units: (cluster tile, K slice) pairs; the host keeps their count below 2^31 (32-bit ids).
  const long long units = block_tiles(p.m, p.n, kConfigs[Cfg]) / Tr::kCluster * p.batch * p.splits;
  // (and below 2^31 - grid, so that the blocks' `u += step` cannot overflow either)
  if (units * Tr::kCluster > std::numeric_limits<int>::max() - p.grid_limit) return cudaErrorInvalidValue;
  // The kernel of the call's epilogue (sm90/configs.h, choose_epilogue_kernel; plan.cpp reports it
  // with the resident clusters counted as the SMs over the cluster size).
  const EpilogueKernel which =
      Gated ? EpilogueKernel::kGeneral : choose_epilogue_kernel(Cfg, CpAsync, kElementBytes, epilogue_form(params.p, units, resident));
  auto* kernel = which == EpilogueKernel::kActWarps ? kernels.act_warps
                 : which == EpilogueKernel::kLean   ? kernels.lean
                                                    : kernels.general;
  // Row sums: the lean kernel with them, over whole tiles of one problem only (the plan's promise,
  // plan.cpp row_sums_in_kernel): another kernel would leave them unwritten, a K slice write a
  // partial sum, the tiles of another batch the same sums.
  if (p.row_sums != nullptr) {
    if (which != EpilogueKernel::kLean || !Tr::kRowSumsCan || p.splits > 1 || params.p.sk_tiles > 0 || p.batch != 1) {
      return cudaErrorInvalidValue;
    }
    kernel = kernels.row_sums;
  }
  // Persistent: no more blocks than fit at once.
  config.gridDim = dim3(unsigned(std::max(1ll, std::min(units, resident)) * Tr::kCluster));
  config.numAttrs = p.pdl ? 2 : 1;
  if (cudaError_t e = cudaLaunchKernelEx(&config, kernel, params); e != cudaSuccess) return e;
  return cudaGetLastError();
}

}  // namespace cute_gemm::sm90

#define CUTE_GEMM_SM90_INSTANTIATE(D, AK, BK, CFG) \
  template cudaError_t cute_gemm::sm90::run<D, AK, BK, CFG>(const cute_gemm::GemmParams&, cudaStream_t);
#define CUTE_GEMM_SM90N_INSTANTIATE(D, AK, BK, CFG) \
  template cudaError_t cute_gemm::sm90::run<D, AK, BK, CFG, true>(const cute_gemm::GemmParams&, cudaStream_t);
#define CUTE_GEMM_SM90G_INSTANTIATE(D, AK, BK, CFG) \
  template cudaError_t cute_gemm::sm90::run<D, AK, BK, CFG, false, true>(const cute_gemm::GemmParams&, cudaStream_t);

