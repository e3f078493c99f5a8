// The SM90 kernels as a device pass for another arch (compute_80, compute_90 without the "a"
// features) sees them: the kernels of csrc/sm90/kernel.h by the same names, with empty bodies, and
// none of CuTe. Such a pass must still emit every kernel the host pass registers, but none of them
// ever runs there (the host takes the SM90 family on sm_90 devices of an sm_90a build only, and
// the full kernel's body was empty for these arches anyway). Parsing the full header in that pass
// cost about 12 s per instantiation file, a tenth of a two-arch build. Included only by
// csrc/sm90/kernel.h.
#pragma once

#include <cuda_runtime.h>

#include "gemm_params.h"
#include "sm90/launch.h"

namespace cute_gemm::sm90 {

// Names only: a kernel's symbol spells its template arguments, not their members.
template <DType D, bool AKMajor, bool BKMajor, int Cfg, bool CpAsync = false, bool Gated = false>
struct KernelTraits {};

template <class Tr>
struct KernelParams {
  GemmParams p;
};

template <class Tr, bool kOffload, bool kLean = false, bool kSums = false>
__global__ void gemm_kernel(KernelParams<Tr> const) {}

template <DType D, bool AKMajor, bool BKMajor, int Cfg, bool CpAsync, bool Gated>
cudaError_t run(const GemmParams&, cudaStream_t) {
  // The kernels kernel.h's run may take (the offload, the lean and the row sums' one only for some
  // tiles: an extra empty kernel in this pass's code is harmless, a missing one would not be).
  using Tr = KernelTraits<D, AKMajor, BKMajor, Cfg, CpAsync, Gated>;
  const void* kernels[] = {reinterpret_cast<const void*>(&gemm_kernel<Tr, false>),
                           reinterpret_cast<const void*>(&gemm_kernel<Tr, true>),
                           reinterpret_cast<const void*>(&gemm_kernel<Tr, false, true>),
                           reinterpret_cast<const void*>(&gemm_kernel<Tr, false, true, true>)};
  (void)kernels;
  return cudaErrorInvalidDeviceFunction;  // host code comes from the host pass, never from here
}

}  // namespace cute_gemm::sm90

#define CUTE_GEMM_SM90_INSTANTIATE(D, AK, BK, CFG) \
  template cudaError_t cute_gemm::sm90::run<D, AK, BK, CFG>(const cute_gemm::GemmParams&, cudaStream_t);
#define CUTE_GEMM_SM90N_INSTANTIATE(D, AK, BK, CFG) \
  template cudaError_t cute_gemm::sm90::run<D, AK, BK, CFG, true>(const cute_gemm::GemmParams&, cudaStream_t);
#define CUTE_GEMM_SM90G_INSTANTIATE(D, AK, BK, CFG) \
  template cudaError_t cute_gemm::sm90::run<D, AK, BK, CFG, false, true>(const cute_gemm::GemmParams&, cudaStream_t);
