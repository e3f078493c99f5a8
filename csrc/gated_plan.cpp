// gated_plan: plan_for's choices for gated_mm (Problem::gated), the sm90 gated kernels' own rules.
#include <algorithm>

#include "plan.h"
#include "plan_parts.h"
#include "sm90/configs.h"

namespace cute_gemm {

// gated_mm (Problem::gated): the sm90 gated kernels (sm90/configs.h, kGatedConfigs) where they run the
// call as it is: 16-bit operands that TMA reads in place, K-major, the two weights of one layout, C
// rows that the TMA store writes, one problem (no batches). The row by sm90::choose_gated_config,
// K slices by the row's own rule, no stream-K tail unless CUTE_GEMM_STREAM_K=1 forces one;
// CUTE_GEMM_SM90_CONFIG (a row with a gated kernel) and CUTE_GEMM_SPLITS pin them. Anything else is
// "torch's path" here: gemm.cpp (gated_unfused) makes the two products as calls of their own with
// float32 results, then the product. Of the other development knobs only CUTE_GEMM_FAMILY,
// CUTE_GEMM_PDL, CUTE_GEMM_FAST_HBM, CUTE_GEMM_STREAM_K and CUTE_GEMM_L2_HINT apply.
Plan gated_plan(Plan plan, const Problem& p, const Overrides& o) {
  const int64_t M = p.a.size[1], K = p.a.size[2], N = p.b.size[2];
  auto torch_path = [&](const char* why) {
    plan.route = Plan::Route::kTorch;
    plan.rule = why;
    return plan;
  };
  plan.sm90 = choose_family(plan, p, o);
  if (!plan.error.empty()) return plan;
  if (!plan.sm90) return torch_path("gated: the fused kernel is the sm90 family's; two GEMMs, then the product");
  if (p.fp32 || K == 0 || p.a.size[0] != 1 || !p.device.layout_built(true, true)) {
    return torch_path("gated: float32, K = 0 or a build without K-major kernels; two GEMMs, then the product");
  }
  const InPlace ia = in_place(p.a, true, true, false), ib = in_place(p.b.transposed(), true, true, false),
                ib2 = in_place(p.b2.transposed(), true, true, false);
  const bool same_layout = ib.ld == ib2.ld && ib.batch_stride == ib2.batch_stride;
  if (!ia.ok || !ia.k_major || !ib.ok || !ib.k_major || !ib2.ok || !ib2.k_major || !same_layout) {
    return torch_path("gated: operands TMA cannot read in place K-major (x rows, w_gate and w_up alike); two GEMMs");
  }
  const int64_t vec = 16 / p.c.element_size;
  if (!c_rows_start_aligned16(p.c) || N % vec != 0) {
    return torch_path("gated: C rows the TMA store cannot write (N % 8 != 0); two GEMMs, then the product");
  }
  plan.batch = 1;
  plan.rows = M;
  plan.pdl = o.pdl != 0;
  plan.l2_hint = l2_mode(o);
  plan.stream_k_knob = o.stream_k;
  plan.c_vector_ok = true;
  const int sms = p.device.num_sms;
  plan.hbm_fast = hbm_fast(p, o);
  const bool pinned = o.sm90_config >= 0 && sm90::has_gated(o.sm90_config);
  plan.cfg = pinned ? o.sm90_config : sm90::choose_gated_config(int(M), int(N), sms);
  plan.rule = pinned                         ? "gated: pinned (CUTE_GEMM_SM90_CONFIG)"
              : plan.cfg == sm90::k64x128    ? "gated, M <= 64: 64x128 tiles (64 columns of C)"
              : plan.cfg == sm90::k128x256Pair ? "gated: past one wave of 128x256 tiles, rows in pairs: 2x1 clusters"
              : plan.cfg == sm90::k128x256   ? "gated: 128x256 tiles (128 columns of C) fill the GPU"
                                             : "gated: 128x128 tiles (64 columns of C)";
  // Row 4 stays whole: its K slices lost at decode (docs/tuning.md section 24, the gated kernel at
  // decode); choose_splits' two slices for the plain decode rows were measured on plain GEMMs only.
  if (o.splits > 0) {
    plan.splits = int(std::min<int64_t>(o.splits, k_tiles(p, plan.cfg)));
  } else {
    plan.splits = plan.cfg == sm90::k64x128
                      ? 1
                      : sm90::choose_splits(int(M), int(2 * N), int(K), 1, plan.cfg, sms, plan.hbm_fast);
  }
  if (!runnable(plan, p, plan.cfg, plan.splits)) plan.splits = 1;
  plan.sk_tiles = choose_tail(plan, p, plan.cfg, plan.splits).tiles;
  return plan;
}

}  // namespace cute_gemm
