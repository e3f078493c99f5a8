// Declaration of the SM80 launchers, defined by explicit instantiation in
// csrc/instantiations/sm80_*.cu. Light on purpose: the host dispatch includes it without CuTe.
#pragma once

#include <cuda_runtime.h>

#include "gemm_params.h"

namespace cute_gemm::sm80 {

// VecBytes: the cp.async width of both operands, 16, or 4 (the narrow kernels, for operands whose
// rows are 4-byte but not 16-byte aligned; instantiated for kNarrowConfigs' rows only).
template <DType D, bool AKMajor, bool BKMajor, int Cfg, int VecBytes = 16>
cudaError_t run(const GemmParams& p, cudaStream_t stream);

}  // namespace cute_gemm::sm80
