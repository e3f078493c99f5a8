// plan_for: every choice of a call, in the order they depend on each other (plan.h).
#include "plan.h"

#include <algorithm>
#include <limits>

#include "plan_parts.h"
#include "sm80/configs.h"
#include "sm90/configs.h"

namespace cute_gemm {
namespace {

std::string num(int64_t v) { return std::to_string(v); }

// Whether this build's sm_90a code runs on the device: an sm_90 GPU and a build that targeted sm_90a.
bool sm90a_code_runs(const Device& d) { return d.sm90a_built && d.major == 9 && d.minor == 0; }

}  // namespace

// Mode 1 (an operand that the launch reads once evict-first; which operand depends on the row's
// tiles) took 3-8 % off the decode and few-tile GEMMs, 3.7-6.1 us a call after another kernel, and
// moved no other shape (docs/tuning.md section 24); mode 2 measured within 2 % of it.
int l2_mode(const Overrides& o) { return o.l2_hint >= 0 ? o.l2_hint : 1; }

// sm90's rules for fast HBM (sm90/configs.h, kFastHbmMBsPerSm: the H200's, 2026-11-28):
// CUTE_GEMM_FAST_HBM=1 / 0, unset: from the GPU's peak bandwidth per SM.
bool hbm_fast(const Problem& p, const Overrides& o) {
  const int sms = p.device.num_sms;
  return o.fast_hbm >= 0 ? o.fast_hbm == 1
                         : sms > 0 && 1000LL * p.device.peak_hbm_gbs >= 1LL * sm90::kFastHbmMBsPerSm * sms;
}

int64_t k_tiles(const Problem& p, int cfg) {  // most slices
  return (p.a.size[2] + sm90::kConfigs[cfg].bk - 1) / sm90::kConfigs[cfg].bk;
}

// The family: the Hopper one (TMA + WGMMA, sm_90a code) where sm90a_code_runs, else the SM80 one,
// unless CUTE_GEMM_FAMILY names one.
bool choose_family(Plan& plan, const Problem& p, const Overrides& o) {
  const Device& d = p.device;
  const bool possible = sm90a_code_runs(d);
  if (o.family == Overrides::Family::kAuto) return possible;
  if (o.family == Overrides::Family::kSm80) return false;
  if (!possible) {
    plan.error = "CUTE_GEMM_FAMILY=sm90 needs an sm_90 GPU and a build that targets 9.0a; this GPU is " +
                 num(d.major) + "." + num(d.minor) + " and the build " +
                 (d.sm90a_built ? "has sm_90a code" : "has no sm_90a code (TORCH_CUDA_ARCH_LIST lacked 9.0a)");
    plan.runtime_error = true;
  }
  return true;
}

namespace {

// The kernel's view of the problem: the swapped path computes C^T (N x rows).
int kernel_m(const Plan& plan, const Problem& p) { return int(plan.swap ? p.b.size[2] : plan.rows); }
// (The gated kernel computes gate and up side by side: 2 N columns.)
int kernel_n(const Plan& plan, const Problem& p) {
  return int(plan.swap ? plan.rows : (p.gated ? 2 : 1) * p.b.size[2]);
}

// Row 8's three-consumer kernel runs whole tiles only: it was measured and tested so (2026-11-26),
// its K slices and stream-K tail never ran on a GPU. A forced K slice count or stream-K tail
// leaves it whole; runnable() refuses it split (the autotune cache neither times nor takes it).
bool whole_tiles_only(const Plan& plan, int cfg) {
  return plan.sm90 && !plan.tf32 && sm90::kConfigs[cfg].consumers > 2;
}

int64_t sm90_units(const Plan& plan, const Problem& p, int cfg, int splits) {
  return sm90::block_tiles(kernel_m(plan, p), kernel_n(plan, p), sm90::kConfigs[cfg]) * plan.batch * splits;
}

// addmm's X (M, N). A stride of a dimension of size 1 does not matter. The SM90 epilogue reads X
// as rows (x_ldn == 1) of a bounded stride, and a 16-bit bias row in 4-byte pairs (epilogue.h): a
// bias row is copied once to a fresh (aligned) buffer if it is strided or misaligned; any other X
// that does not fit (an (M, 1) column, a column-major C) is copied to rows first, and rows too long
// for the epilogue (N >= 2^23 with M > 1) take torch's path. False: torch's path.
bool choose_x(Plan& plan, const Problem& p) {
  if (!p.has_x || !plan.sm90) return true;
  const int64_t m = p.x.size[1], n = p.x.size[2];
  const int64_t x_ldm = m == 1 ? 0 : p.x.stride[1], x_ldn = n == 1 ? 1 : p.x.stride[2];
  if (x_ldm == 0 && (x_ldn != 1 || p.x.addr % 4 != 0)) {
    plan.x_copy = Plan::XCopy::kRow;
  } else if (x_ldn != 1 || x_ldm >= kMaxChunkXRowStride) {
    plan.x_copy = Plan::XCopy::kRows;  // rows of N elements
    if (n >= kMaxChunkXRowStride) return false;
  }
  return true;
}

// The narrow kernels (sm80/configs.h): where the family would copy a 16-bit operand into a padded
// buffer because its rows are not 16-byte vectors (neither TMA nor 16-byte cp.async reads it in
// place; a stride-0 operand that only TMA refuses is not one) and both operands can be read in
// 4-byte vectors, the SM80 kernels with 4-byte cp.async can read them in place instead: taken
// where sm80::narrow_pays expects them to win (CUTE_GEMM_NARROW unset), wherever they can run
// (=1), or never (=0). Not under CUTE_GEMM_FAMILY=sm90, nor under a pinned CUTE_GEMM_SM80_CONFIG
// row without a narrow kernel unless CUTE_GEMM_NARROW=1 asks for them (an error in choose_row).
// The SM90 rows' narrow kernels (sm90/traits.h CpAsync: the producer warpgroup reads the tiles
// with 4-byte cp.async) serve such operands where the family is chosen (not forced to sm90 by
// CUTE_GEMM_FAMILY, which keeps the copies) and is sm90, where that rule takes the narrow
// kernels (H200, 2026-12-05, bf16, nn / nt / tn, us: 574^3 9.0 / 9.0 / 10.4 -> 7.7 / 7.6 / 8.0,
// 16x4100x4096 29.1 / - / 38.9 -> 23.2 / - / 23.5, 66x4098x4098 32.9 / 31.7 / 40.9 -> 28.0 /
// 29.0 / 26.6; docs/tuning.md section 15), and wherever they can run under
// CUTE_GEMM_SM90_NARROW=1; CUTE_GEMM_SM90_NARROW=0, CUTE_GEMM_NARROW=1 or a pinned
// CUTE_GEMM_SM80_CONFIG row keeps the SM80 ones.
void choose_narrow(Plan& plan, const Problem& p, const Overrides& o, const MatrixView& a, const MatrixView& bt) {
  const bool family_sm90 = o.family == Overrides::Family::kSm90;
  auto unaligned_rows = [&](const MatrixView& x) {
    return !in_place(x, plan.sm90, false, false).ok && !in_place(x, false, false, false).ok;
  };
  const bool fp32 = p.fp32;
  const bool narrow_able = !fp32 && ((plan.sm90 && o.sm90_narrow == 1) || (o.narrow != 0 && !family_sm90)) &&
                           (unaligned_rows(a) || unaligned_rows(bt)) && in_place(a, false, false, true).ok &&
                           in_place(bt, false, false, true).ok;
  plan.sm90_narrow = plan.sm90 && o.sm90_narrow == 1 && narrow_able;
  const int pinned_sm90 = plan.sm90 && !plan.tf32 ? o.sm90_config : -1;
  if (o.narrow != 0 && !fp32 && !family_sm90 && !plan.sm90_narrow) {
    // The operands the default family would copy (the narrow kernels read both in place).
    const bool copy_a = !in_place(a, plan.sm90, false, false).ok, copy_b = !in_place(bt, plan.sm90, false, false).ok;
    // The rule leaves a pinned tile alone: an SM80 row without a narrow kernel, or (behind the SM90
    // family) a pinned SM90 row or K slice count, keeps the default family's kernel and the copies.
    const int pinned = o.sm80_config;
    const bool sm90_pinned = plan.sm90 && (pinned_sm90 >= 0 || o.splits >= 0);
    plan.narrow = narrow_able && (o.narrow == 1 || ((pinned < 0 || sm80::has_narrow(pinned)) && !sm90_pinned &&
                                                    sm80::narrow_pays(double(a.size[1]), double(bt.size[1]),
                                                                      double(a.size[2]), double(a.size[0]), copy_a,
                                                                      copy_b, plan.sm90)));
  }
  if (plan.narrow && plan.sm90 && o.narrow != 1 && o.sm90_narrow != 0 && o.sm80_config < 0) {
    plan.narrow = false;
    plan.sm90_narrow = true;
  }
  // A pinned SM80 row built as a narrow kernel only (sm80::has_plain) runs that kernel.
  if (!plan.sm90 && !fp32 && !plan.narrow) plan.narrow = o.sm80_config >= 0 && !sm80::has_plain(o.sm80_config);
  if (plan.narrow) plan.sm90 = false;
}

// Where C is written. A 16-bit C whose rows the SM90 TMA store cannot write (N or the row stride
// not a multiple of 8, a misaligned base; e.g. any contiguous result with N % 8 != 0): the
// consumers stage its chunks in shared memory as for the TMA store and write the rows themselves
// (GemmParams::c_staged), rather than computing C into a scratch buffer with padded rows and
// copying it out (one extra pass over C), which stays for C with an activation (its aligned rows
// let the activation warps apply it under the next main loop) and a C not written in place. Either
// is cheaper than element stores from the accumulators (2026-11-23, docs/tuning.md section 16,
// unaligned C rows).
void choose_target(Plan& plan, const Problem& p, const MatrixView& c) {
  const int64_t kVec = 16 / p.a.element_size;
  const bool rows_aligned = c_rows_start_aligned16(c) && p.b.size[2] % kVec == 0;
  const bool c_unaligned16 = plan.sm90 && !plan.swap && !p.c_f32 && !plan.tf32 && !rows_aligned;
  const bool staged = c_unaligned16 && c_in_place(c) && p.act == Activation::kNone;
  const bool scratch = c_unaligned16 && !staged;
  plan.target = staged                       ? Plan::Target::kStaged
                : c_in_place(c) && !scratch ? Plan::Target::kInPlace
                : scratch                    ? Plan::Target::kScratch
                                             : Plan::Target::kTemp;
}

// The row and K slices: the family's host rules (configs.h), unless a knob pins them (tests,
// benchmarks: CUTE_GEMM_SM90_CONFIG / CUTE_GEMM_SM80_CONFIG=<row>, CUTE_GEMM_SPLITS=<n>).
// b_lined: B's rows as the kernel reads them start on 128-byte lines (sm90::choose_config).
void choose_row(Plan& plan, const Problem& p, const Overrides& o, bool b_lined) {
  const int m = kernel_m(plan, p), n = kernel_n(plan, p), k = int(p.a.size[2]);
  const int sms = p.device.num_sms;
  const int forced = plan.tf32 ? -1 : plan.sm90 ? o.sm90_config : o.sm80_config;
  if (plan.tf32) {
    plan.cfg = plan.sm90 ? int(sm90::k128x128) : sm80::kTf32Config;
    plan.rule = "float32 inputs with TF32 allowed: the TF32 kernel's one row";
  } else if (plan.narrow) {
    plan.cfg = forced >= 0 ? forced : sm80::choose_narrow_config(m, n, plan.batch, sms);
    plan.rule = forced >= 0 ? "pinned (CUTE_GEMM_SM80_CONFIG)"
                            : "unaligned rows, the narrow kernels (sm80::choose_narrow_config)";
    if (!sm80::has_narrow(plan.cfg)) {
      plan.error = "cute_gemm: CUTE_GEMM_SM80_CONFIG=" + num(plan.cfg) +
                   " has no narrow kernel, and CUTE_GEMM_NARROW=1 takes one for these unaligned operands; rows with "
                   "one are listed in csrc/sm80/configs.h (kNarrowConfigs)";
      return;
    }
  } else if (forced >= 0) {
    plan.cfg = forced;
    plan.rule = plan.sm90 ? "pinned (CUTE_GEMM_SM90_CONFIG)" : "pinned (CUTE_GEMM_SM80_CONFIG)";
    if (plan.sm90_narrow && !sm90::has_narrow(plan.cfg)) {
      plan.error = "cute_gemm: CUTE_GEMM_SM90_CONFIG=" + num(plan.cfg) + " has no narrow kernel (sm90::kNarrowConfigs)";
      return;
    }
  } else if (plan.sm90_narrow) {
    plan.cfg = sm90::choose_narrow_config(m, n, k, plan.batch, sms, plan.hbm_fast);
    plan.rule = "unaligned rows, the sm90 narrow kernels (sm90::choose_narrow_config)";
  } else if (plan.swap) {
    plan.cfg = o.swap_config >= 0 ? o.swap_config : sm90::choose_swap_config(m, sms, plan.hbm_fast, n);
    plan.rule = o.swap_config >= 0 ? "pinned (CUTE_GEMM_SWAP_CONFIG)"
                                   : "decode rows, swapped (sm90::choose_swap_config)";
  } else if (plan.sm90) {
    plan.cfg = sm90::choose_config(m, n, k, plan.batch, sms, plan.hbm_fast, b_lined, &plan.rule);
  } else {
    plan.cfg = sm80::choose_config(m, n, sms, int(p.device.smem_per_block_optin));
    plan.rule = plan.cfg == sm80::k128x256 ? "the 128x256 tiles fill the GPU (sm80::choose_config)"
                              : "few tiles, or the large tile's shared memory does not fit (sm80::choose_config)";
  }
  if (!plan.sm90) return;
  plan.splits = whole_tiles_only(plan, plan.cfg) ? 1
                : o.splits > 0 ? int(std::min<int64_t>(o.splits, k_tiles(p, plan.cfg)))
                               : sm90::choose_splits(m, n, k, plan.batch, plan.cfg, sms, plan.hbm_fast);
  if (!runnable(plan, p, plan.cfg, plan.splits)) {
    plan.error = "cute_gemm: CUTE_GEMM_SPLITS=" + num(plan.splits) + " makes more than 2^31 units of work for " +
                 num(plan.batch) + " batches of " + num(sm90::block_tiles(m, n, sm90::kConfigs[plan.cfg])) +
                 " tiles; use fewer splits";
  }
}

// Whether C's rows are 16-byte vectors the kernel stores whole: 16-bit C whose target (in place,
// a padded scratch C, a contiguous temporary) starts 16-byte aligned with row and batch strides of
// whole vectors; for the SM90 family also N a whole number of vectors (on the H100 the TMA store of
// a row's last partial unit wrote past N, 2026-11-22), except into the scratch C, whose padded rows
// take it. Never on the swapped path (C^T's rows are C's columns). The strides are those that
// launch.cpp gives the kernel (one row: a padded stride; one batch: rows x ldc).
bool c_vectors(const Plan& plan, const Problem& p, const MatrixView& c) {
  const int64_t vec = 16 / p.a.element_size, n = p.b.size[2], padded = round_up(n, vec);
  uintptr_t addr = 0;  // the scratch C and the temporary are fresh, aligned allocations
  int64_t ldc = n, batch_c = plan.rows * n;
  if (plan.target == Plan::Target::kInPlace || plan.target == Plan::Target::kStaged) {
    addr = c.addr;
    ldc = c.stride[1];
    batch_c = c.stride[0];
  } else if (plan.target == Plan::Target::kScratch) {
    ldc = padded;
    batch_c = plan.rows * padded;
  }
  if (plan.rows == 1) ldc = padded;
  if (plan.batch == 1) batch_c = ldc * plan.rows;
  return !plan.swap && !p.c_f32 && addr % 16 == 0 && ldc % vec == 0 &&
         (!plan.sm90 || n % vec == 0 || plan.target == Plan::Target::kScratch) && batch_c % vec == 0 && batch_c > 0;
}

// X as the kernel reads it is a bias row (gemm.cpp, planned_x: no row stride, unit column stride):
// read in place as one, or copied to one aligned row.
bool x_is_bias_row(const Plan& plan, const Problem& p) {
  if (plan.x_copy != Plan::XCopy::kNone) return plan.x_copy == Plan::XCopy::kRow;
  return (p.x.size[1] == 1 || p.x.stride[1] == 0) && (p.x.size[2] == 1 || p.x.stride[2] == 1);
}

// The SM90 kernel instantiation of the call's epilogue (sm90::choose_epilogue_kernel), with the
// clusters that run at once counted as the SMs over the cluster size (sm90/run.h asks the GPU).
int epilogue_kernel(const Plan& plan, const Problem& p, const Overrides& o) {
  const sm90::TileConfig& tc = sm90::kConfigs[plan.cfg];
  sm90::EpilogueForm f;
  f.c_vector_ok = plan.c_vector_ok;
  f.c_f32 = p.c_f32;
  f.act = p.act != Activation::kNone;
  f.x_bias16 = !p.has_x || (!p.x_f32 && x_is_bias_row(plan, p));
  f.whole_tiles = plan.splits == 1 && plan.sk_tiles == 0;
  f.act_offload = o.act_offload != 0;
  f.units = sm90::block_tiles(kernel_m(plan, p), kernel_n(plan, p), tc) / tc.cluster_m * plan.batch * plan.splits;
  f.resident = p.device.num_sms / tc.cluster_m;
  return int(sm90::choose_epilogue_kernel(plan.cfg, plan.sm90_narrow, p.a.element_size, f));
}

// Where the kernel can sum A's rows (sm90/row_sums.h, traits.h kRowSumsCan): where the sm90 family
// runs the lean kernel of a 16-bit TMA row (configs.h, choose_epilogue_kernel: no activation or
// 32-bit term, which a weight gradient never has) on an M-major A read in place (the weight
// gradient's dY^T), one problem, whole tiles (a K slice or a stream-K piece would hold a partial
// sum). Elsewhere torch's sum runs after the GEMM (gemm.cpp). (plan_for then leaves the row to this
// plan, not to the autotune cache.)
bool row_sums_in_kernel(const Plan& plan) {
  return plan.route == Plan::Route::kKernel && plan.sm90 && !plan.tf32 && !plan.sm90_narrow && !plan.swap &&
         !plan.copy_a && !plan.a_kmajor && !plan.fold && plan.batch == 1 && plan.splits == 1 && plan.sk_tiles == 0 &&
         plan.epilogue == int(sm90::EpilogueKernel::kLean);
}

}  // namespace

bool runnable(const Plan& plan, const Problem& p, int cfg, int splits) {
  if (!plan.sm90) return splits == 1 && sm80::smem_bytes(sm80::kConfigs[cfg]) <= p.device.smem_per_block_optin;
  return splits == 1 || (!whole_tiles_only(plan, cfg) && splits <= k_tiles(p, cfg) &&
                         sm90_units(plan, p, cfg, splits) <= std::numeric_limits<int>::max() - p.device.num_sms);
}

// Stream-K tail over the clusters the GPU holds (one launch: the tiles fit in 32 bits, the workers
// in 16 (mul_div_small); not TF32, whose kernel has its own K tile). sm90::run drops it if fewer
// clusters are resident. CUTE_GEMM_STREAM_K unset: where sm90::choose_stream_k expects a gain; 1:
// wherever it can run (tests, benchmarks); 0: never.
Tail choose_tail(const Plan& plan, const Problem& p, int cfg, int splits) {
  // (gated_mm: only where CUTE_GEMM_STREAM_K=1 forces it; its decode tail is unmeasured.)
  if (!plan.sm90 || plan.tf32 || splits > 1 || plan.stream_k_knob == 0 || whole_tiles_only(plan, cfg) ||
      (p.gated && plan.stream_k_knob != 1)) {
    return {};
  }
  const sm90::TileConfig& tc = sm90::kConfigs[cfg];
  const int num_sms = p.device.num_sms;
  const int64_t tiles = sm90::block_tiles(kernel_m(plan, p), kernel_n(plan, p), tc);
  if (tiles * plan.batch > std::numeric_limits<int>::max() - num_sms || num_sms >= (1 << 16)) return {};
  const int workers = num_sms / tc.cluster_m;
  const sm90::StreamK sk = sm90::choose_stream_k(tiles / tc.cluster_m * plan.batch, int(k_tiles(p, cfg)), workers,
                                                  tc, plan.stream_k_knob == 1);
  if (sk.tiles == 0) return {};
  return {sk.tiles, sk.slots, workers};
}

Plan plan_for(const Problem& p, const Overrides& o) {
  Plan plan;
  const int64_t L = p.a.size[0], M = p.a.size[1], K = p.a.size[2], N = p.b.size[2];
  if (L == 0 || M == 0 || N == 0) {
    plan.route = Plan::Route::kNothing;
    plan.rule = "an empty result";
    return plan;
  }
  if (choose_gemv(plan, p, o)) return plan;
  if (p.gated) return gated_plan(plan, p, o);
  plan.sm90 = choose_family(plan, p, o);
  if (!plan.error.empty()) return plan;
  // float32 inputs run the TF32 kernels where torch allows TF32 for matmuls, else torch's own fp32
  // matmul. The SM80 TF32 tile takes 128 KB of shared memory: more than sm_86/sm_89 give a block.
  const bool tf32_fits = plan.sm90 || sm80::smem_bytes(sm80::kConfigs[sm80::kTf32Config], 4) <=
                                          p.device.smem_per_block_optin;
  plan.tf32 = p.fp32 && p.device.allow_tf32 && tf32_fits;
  if (K == 0 || (p.fp32 && !plan.tf32)) {
    plan.route = Plan::Route::kTorch;
    plan.rule = K == 0 ? "K = 0: an empty sum (torch's ops)" : "float32 without TF32: torch's own float32 matmul";
    return plan;
  }
  if (!choose_x(plan, p)) {
    plan.route = Plan::Route::kTorch;
    plan.rule = "X rows too long for the epilogue (N >= 2^23): torch's ops";
    return plan;
  }
  // One weight for every batch (b's batch stride 0) and batches of A stacked row after row (and C
  // likewise): one (L*M, K) @ (K, N) problem, which also spares TMA a zero stride.
  MatrixView a = p.a, b = p.b, c = p.c;
  plan.fold = L > 1 && L * M <= std::numeric_limits<int>::max() - 255 && p.b.stride[0] == 0 &&
              p.a.stride[0] == M * p.a.stride[1] && p.c.stride[0] == M * p.c.stride[1];
  if (plan.fold) {
    a.size[0] = b.size[0] = c.size[0] = 1;
    a.size[1] = c.size[1] = L * M;
    a.stride[0] = b.stride[0] = c.stride[0] = 0;
  }
  const MatrixView bt = b.transposed();
  choose_narrow(plan, p, o, a, bt);
  if (!plan.error.empty()) return plan;
  plan.batch = a.size[0];
  plan.rows = a.size[1];
  // The operands, read in place or copied (operands.cpp, prepare_operand: the narrow kernels read the
  // padded copies' 16-byte rows too).
  const bool tma = plan.sm90 && !plan.sm90_narrow, narrow_vectors = plan.narrow || plan.sm90_narrow;
  const int pinned_sm90 = plan.sm90 && !plan.tf32 ? o.sm90_config : -1;
  const InPlace ia = in_place(a, tma, plan.tf32, narrow_vectors);
  const InPlace ib = in_place(bt, tma, plan.tf32, narrow_vectors);
  plan.copy_a = !ia.ok;
  plan.a_kmajor = ia.ok ? ia.k_major : copy_is_k_major(a, plan.tf32);
  plan.copy_b = !ib.ok;
  plan.b_kmajor = ib.ok ? ib.k_major : copy_is_k_major(bt, plan.tf32);
  // The swapped decode path (sm90 rows 6, 10 and 11; 2026-11-26 to 2026-11-29): for M <= 32 rows
  // without an X term the SM90 kernel computes C^T = B^T A^T, so that N fills its 128- or 64-row
  // tiles and the few rows of A are WGMMA's N dimension, and stores C^T's rows into C's columns
  // element by element (C is at most 32 rows). Needs one problem; A is read in place in either
  // layout (an M-major A, x.t() @ w, is the kernel's N-major B: its 16- or 32-column boxes in
  // 32- or 64-byte swizzle atoms); copied K-major for this path it ran slower on the H100
  // (16x4096x14336 55.2 against 50.3 us unswapped, 2026-12-05). A pinned CUTE_GEMM_SM90_CONFIG
  // row runs unswapped (tests and benchmarks compare the two that way). (A development build
  // without the swapped layout's kernels runs such calls unswapped.)
  plan.swap = tma && !plan.tf32 && plan.batch == 1 && plan.rows <= sm90::kSwapMaxM && !p.has_x &&
              pinned_sm90 < 0 && p.device.layout_built(plan.b_kmajor, plan.a_kmajor);
  choose_target(plan, p, c);
  // PDL where the kernel follows the previous call's work, or this call's padded operand copies
  // (the row copy kernel lets it set up while the copies finish; its wait still waits for them):
  // not after a copy of X (a bias row, a C input), nor before a scratch C's copy-out (2026-11-25:
  // 574^3, copies on both sides, ran 3 % slower with it). Only where the sm_90a code runs (the
  // counter zeroing's wait is compiled for sm_90 and later: code of an older arch, JIT-compiled for
  // a newer GPU, would launch early and not wait).
  plan.pdl = o.pdl != 0 && sm90a_code_runs(p.device) && plan.x_copy == Plan::XCopy::kNone &&
             (plan.target == Plan::Target::kInPlace || plan.target == Plan::Target::kStaged);
  plan.hbm_fast = plan.sm90 && hbm_fast(p, o);
  plan.l2_hint = plan.sm90 && !plan.sm90_narrow ? l2_mode(o) : 0;  // the narrow kernels read with cp.async
  plan.stream_k_knob = o.stream_k;
  // Whether B, read in place, starts each row on the L2's 128-byte lines: its base, and its pitch
  // and batch stride where it has more than one row or batch. A padded copy (operands.cpp, rows of
  // 16-byte vectors) keeps the default rows: the rule was measured on operands read in place.
  const int64_t eb = p.b.element_size, b_rows = ib.k_major ? bt.size[1] : bt.size[2];
  const bool b_lined = !ib.ok || (bt.addr % 128 == 0 && (b_rows == 1 || ib.ld * eb % 128 == 0) &&
                                  (bt.size[0] == 1 || ib.batch_stride * eb % 128 == 0));
  choose_row(plan, p, o, b_lined);
  if (!plan.error.empty()) return plan;
  plan.sk_tiles = choose_tail(plan, p, plan.cfg, plan.splits).tiles;
  plan.c_vector_ok = c_vectors(plan, p, c);
  if (plan.sm90) plan.epilogue = epilogue_kernel(plan, p, o);
  plan.row_sums = p.row_sums && o.row_sums != 0 && row_sums_in_kernel(plan);
  // The autotune cache (CUTE_GEMM_AUTOTUNE=1) may replace the row and slices (gemm.cpp) where no knob
  // pins them, and the kernel does not sum rows (its sums need this row, whole tiles).
  const int pinned = plan.sm90 ? o.sm90_config : o.sm80_config;
  plan.autotune = !plan.tf32 && !plan.narrow && !plan.sm90_narrow && !plan.swap && pinned < 0 && o.splits < 0 &&
                  o.autotune && !plan.row_sums;
  return plan;
}

}  // namespace cute_gemm
