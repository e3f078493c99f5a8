// A Plan as cute_gemm.explain() prints it (plan.h, describe).
#include <string>

#include "plan.h"
#include "sm80/configs.h"
#include "sm90/configs.h"

namespace cute_gemm {
namespace {

std::string num(int64_t v) { return std::to_string(v); }

}  // namespace

std::string describe(const Plan& plan, const Problem& p) {
  std::string s;
  auto line = [&](const char* key, const std::string& value) { s += std::string(key) + "=" + value + "\n"; };
  const char* routes[] = {"nothing", "torch", "kernel"};
  line("route", routes[int(plan.route)]);
  line("rule", plan.rule);
  // mm_row_sums: who sums A's rows, the GEMM's kernel or torch after it.
  if (p.row_sums) line("row_sums", plan.row_sums ? "kernel" : "torch");
  if (plan.route != Plan::Route::kKernel) return s;
  if (plan.gemv) {  // the decode GEMV (gemv.h): no tiles, slices or TMA; operands and C in place
    line("family", "gemv");
    line("rows", num(plan.rows));
    return s;
  }
  line("family", plan.sm90 ? (plan.sm90_narrow ? "sm90 narrow" : "sm90") : (plan.narrow ? "sm80 narrow" : "sm80"));
  line("tf32", plan.tf32 ? "true" : "false");
  line("row", num(plan.cfg));
  line("tile", plan.sm90 ? sm90::kConfigs[plan.cfg].name : sm80::kConfigs[plan.cfg].name);
  line("splits", num(plan.splits));
  line("stream_k_tiles", num(plan.sk_tiles));
  line("swapped", plan.swap ? "true" : "false");
  line("batch", num(plan.batch));
  line("rows", num(plan.rows));
  line("folded_batches", plan.fold ? "true" : "false");
  line("a", std::string(plan.a_kmajor ? "K-major" : "M-major") + (plan.copy_a ? ", copied" : ", in place"));
  line("b", std::string(plan.b_kmajor ? "K-major" : "N-major") + (plan.copy_b ? ", copied" : ", in place"));
  const char* targets[] = {"in place", "staged rows", "scratch, copied out", "temporary, copied out"};
  line("c", targets[int(plan.target)]);
  const char* xs[] = {"in place", "copied to one row", "copied to rows"};
  line("x", p.has_x ? xs[int(plan.x_copy)] : "none");
  const char* epilogues[] = {"general", "lean", "activation warps"};
  line("epilogue", epilogues[plan.epilogue]);
  line("pdl", plan.pdl ? "true" : "false");
  line("l2_hint", num(plan.l2_hint));
  line("fast_hbm", plan.hbm_fast ? "true" : "false");
  line("autotune", plan.autotune ? "true" : "false");
  return s;
}

}  // namespace cute_gemm
