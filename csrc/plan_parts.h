// The pieces of plan_for (plan.cpp) that gated_plan (gated_plan.cpp) shares, and gated_plan itself.
#pragma once

#include <cstdint>

#include "plan.h"

namespace cute_gemm {

// The kernel family (true: sm90), or plan.error where CUTE_GEMM_FAMILY names one this GPU or build lacks.
bool choose_family(Plan& plan, const Problem& p, const Overrides& o);
// Whether the sm90 chooser's rules for fast HBM apply (CUTE_GEMM_FAST_HBM, else the GPU's bandwidth per SM).
bool hbm_fast(const Problem& p, const Overrides& o);
// K tiles of row `cfg` of the sm90 table: the most K slices a call can take.
int64_t k_tiles(const Problem& p, int cfg);
// The L2 policies' mode of an sm90 TMA launch (sm90::l2_policies): CUTE_GEMM_L2_HINT, else mode 1.
int l2_mode(const Overrides& o);
// Whether the decode GEMV (gemv.h) runs the call (gemv_plan.cpp): sets plan.gemv, route and rule.
bool choose_gemv(Plan& plan, const Problem& p, const Overrides& o);
// gated_mm's plan (plan_for's for Problem::gated).
Plan gated_plan(Plan plan, const Problem& p, const Overrides& o);

}  // namespace cute_gemm
