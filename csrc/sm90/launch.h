// Declaration of the SM90 launchers, defined by explicit instantiation in
// csrc/instantiations/sm90_*.cu. Light on purpose, like sm80/launch.h.
#pragma once

#include <cuda_runtime.h>

#include "gemm_params.h"

namespace cute_gemm::sm90 {

// Persistent: launches min(tiles, p.grid_limit) thread blocks.
// CpAsync: the row's narrow kernel (4-byte cp.async loads of operands TMA cannot read; sm90/traits.h).
// Gated: the row's gated kernel (GemmParams::b2: C = act(A B) * (A B2); sm90/traits.h).
template <DType D, bool AKMajor, bool BKMajor, int Cfg, bool CpAsync = false, bool Gated = false>
cudaError_t run(const GemmParams& p, cudaStream_t stream);

}  // namespace cute_gemm::sm90
