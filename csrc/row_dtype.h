// The element type of the row kernels that run beside the GEMMs (cross_entropy.h, rms_norm.h), in
// a header free of torch's and CUTLASS's, so that their .cu files build with the toolkit's alone.
#pragma once

namespace cute_gemm {

enum class RowDType : int { kF16 = 0, kBF16 = 1, kF32 = 2 };

}  // namespace cute_gemm
