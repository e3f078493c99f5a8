// choose_gemv: plan_for's choice of the decode GEMV (gemv.h) over the tile kernels (plan_parts.h).
#include "plan.h"
#include "plan_parts.h"

namespace cute_gemm {
namespace {

// The decode GEMV (gemv.h) instead of the tile kernels: for a few rows of A against a large weight
// B that the call reads once (a decode step's projections, `x @ w.t()`; gated_mm's gate and up
// alike), 16-bit, one problem, A's rows and B's columns read in place as K-contiguous, 16-byte
// aligned rows. Such a call streams the weight and little else: on the H100 the swapped tile
// path read a decode weight at 2.2-2.6 TB/s, the GEMV, whose warp-wide loads each read 512
// contiguous bytes of a row, at 2.5-3.0 with 1 or 2 rows and 2.2-2.6 with 4 (within 3 % or faster),
// and slower from 8, where its CUDA cores' arithmetic grows with the rows (docs/tuning.md section
// 25). The rule: up to kGemvRuleRows rows on sm_90 (measured there only), any weight: a weight of
// few long rows has up to 8 warps on each row (gemv.cu), and the swapped tile path was slower there.
// CUTE_GEMM_GEMV=1 takes it wherever it can run, 0 never.
constexpr int kGemvRuleRows = 4;

}  // namespace

bool choose_gemv(Plan& plan, const Problem& p, const Overrides& o) {
  // A knob that pins a family, row, swapped row or slice count asks for the tile kernels.
  const bool pinned = o.family != Overrides::Family::kAuto || o.sm90_config >= 0 || o.sm80_config >= 0 ||
                      o.swap_config >= 0 || o.splits >= 0;
  if (o.gemv == 0 || (pinned && o.gemv != 1) || p.fp32) return false;
  const MatrixView& a = p.a;
  const MatrixView bt = p.b.transposed();  // (L, N, K): the weight's rows
  const int64_t L = a.size[0], M = a.size[1], K = a.size[2], N = bt.size[1];
  // Rows of K contiguous elements that start on 16-byte boundaries (one row needs no stride), for
  // its 16-byte loads; rows shorter than a load are read element by element.
  auto rows_ok = [&](const MatrixView& v, int64_t rows) {
    return (K == 1 || v.stride[2] == 1) &&
           (K < 8 || (v.addr % 16 == 0 && (rows == 1 || v.stride[1] * v.element_size % 16 == 0)));
  };
  const bool can = L == 1 && M <= kGemvMostRows && K > 0 && rows_ok(a, M) && rows_ok(bt, N) &&
                   (!p.gated || (rows_ok(p.b2.transposed(), N) && p.b2.transposed().stride[1] == bt.stride[1]));
  const bool rule = p.device.major == 9 && M <= kGemvRuleRows;
  if (!can || !(o.gemv == 1 || rule)) return false;
  plan.route = Plan::Route::kKernel;
  plan.gemv = true;
  plan.batch = 1;
  plan.rows = M;
  plan.rule = o.gemv == 1 ? "the decode GEMV wherever it can run (CUTE_GEMM_GEMV=1)"
                          : "decode rows against a weight read once: the GEMV (gemv_plan.cpp, choose_gemv)";
  return true;
}

}  // namespace cute_gemm
