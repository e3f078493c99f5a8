// Declaration of the SM80 launchers, defined by explicit instantiation in
// csrc/instantiations/sm80_*.cu. Light on purpose: the host dispatch includes it without CuTe.
#pragma once

#include <cuda_runtime.h>

#include "gemm_params.h"

namespace cute_gemm::sm80 {

template <DType D, bool AKMajor, bool BKMajor, int Cfg>
cudaError_t run(const GemmParams& p, cudaStream_t stream);

}  // namespace cute_gemm::sm80
