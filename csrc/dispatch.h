// The one table from (family, dtype, operand major-ness, tile row) to a compiled kernel's
// launcher (csrc/instantiations/), and the fingerprint of the tile tables the autotune cache uses.
#pragma once

#include <cuda_runtime_api.h>

#include <string>

#include "gemm_params.h"

namespace cute_gemm {

using Launcher = cudaError_t (*)(const GemmParams&, cudaStream_t);

// The kernel sets: the SM80 kernels (16-byte cp.async), the SM80 narrow ones (4-byte cp.async),
// the SM90 kernels (TMA), the SM90 rows' narrow ones (a cp.async producer).
enum class Kernels { kSm80, kSm80Narrow, kSm90, kSm90Narrow };

// The launcher of row `cfg` for K-major (or M- / N-major) A and B, or null where the build has
// no such kernel (a row without that layout, a development build's missing layouts).
Launcher find_launcher(Kernels set, DType d, bool ak, bool bk, int cfg);
// TF32: one K-major instantiation per family (csrc/instantiations/generate.py's TF32 list).
Launcher tf32_launcher(bool sm90);
// The sm90 gated kernels (GemmParams::b2): K-major A and B, the rows of sm90::kGatedConfigs; null
// for another row or a development build without the K-major layout.
Launcher gated_launcher(DType d, int cfg);

// A development build compiles some operand layouts only (gemm_params.h, CUTE_GEMM_LAYOUTS_MASK).
constexpr bool layout_built(bool ak, bool bk) { return CUTE_GEMM_LAYOUT_BUILT(int(ak), int(bk)) != 0; }

// The config tables the autotune cache's rows refer to, as a short hex fingerprint.
const std::string& config_tables_id();

}  // namespace cute_gemm
