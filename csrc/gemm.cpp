// Host entry of the ops (schemas in bindings.cpp): each checks its arguments (checks.h), and
// gemm_into carries out the plan that plan_for makes for the call (plan.h): the operand copies,
// the GemmParams, the autotune's timing where asked, the launch.
#include "gemm.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autotune.h"
#include "checks.h"
#include "counters.h"
#include "dispatch.h"
#include "gemm_params.h"
#include "knobs.h"
#include "operands.h"
#include "plan.h"
#include "sm80/configs.h"
#include "sm90/configs.h"

namespace cute_gemm {
namespace {

// The whole computation with torch's own ops, in fp32: float32 inputs without a TF32 kernel
// (torch.mm's own precision rules then apply) and K = 0. a3 (L, M, K), b3 (L, K, N).
at::Tensor torch_math(const at::Tensor& a3, const at::Tensor& b3, const Epilogue& ep) {
  // 16-bit inputs are multiplied in fp32 too: the kernels' epilogue sees unrounded products.
  at::Tensor z = a3.size(2) == 0 ? at::zeros({a3.size(0), a3.size(1), b3.size(2)}, a3.options().dtype(at::kFloat))
                                 : at::bmm(a3.to(at::kFloat), b3.to(at::kFloat));
  if (ep.alpha != 1.0) z.mul_(ep.alpha);
  if (ep.x.defined()) z.add_(ep.x.to(at::kFloat), ep.beta);
  switch (ep.act) {
    case Activation::kRelu: z.relu_(); break;
    case Activation::kGelu: z = at::gelu(z); break;
    case Activation::kGeluTanh: z = at::gelu(z, "tanh"); break;
    case Activation::kSilu: z = at::silu(z); break;
    default: break;
  }
  return z;
}

// What a call asks, as plan_for sees it: c is the output's view (out3, or the one an op allocates).
Problem problem_of(const at::Tensor& a3, const at::Tensor& b3, const Epilogue& ep, const MatrixView& c, bool c_f32,
                   const Device& device) {
  Problem p;
  p.a = view_of(a3);
  p.b = view_of(b3);
  p.c = c;
  p.fp32 = a3.scalar_type() == at::kFloat;
  p.c_f32 = c_f32;
  if (ep.x.defined()) {
    p.has_x = true;
    p.x = view_of(ep.x.unsqueeze(0));
    p.x_f32 = ep.x.scalar_type() == at::kFloat;
  }
  p.alpha = ep.alpha;
  p.beta = ep.beta;
  p.act = ep.act;
  p.device = device;
  return p;
}

// The Plan of a call (plan.h), or the error a knob combination makes.
Plan checked_plan(const Problem& problem, const Overrides& o) {
  Plan plan = plan_for(problem, o);
  if (!plan.error.empty()) {
    TORCH_CHECK(!plan.runtime_error, plan.error);
    TORCH_CHECK_VALUE(false, plan.error);
  }
  return plan;
}

const cudaDeviceProp& checked_device(const at::Tensor& a) {
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  TORCH_CHECK(prop->major >= 8, "cute_gemm needs a GPU of compute capability 8.0 or newer; ", a.device(), " is ",
              num(prop->major), ".", num(prop->minor));
  return *prop;
}


// addmm's input X (M, N), read in place or copied as the plan says (plan.cpp, choose_x), with its
// row and column strides as the epilogue reads them.
struct PlannedX {
  at::Tensor x;
  int64_t ldm = 0, ldn = 1;
};

PlannedX planned_x(const Plan& plan, const Epilogue& ep, int64_t M, int64_t N) {
  PlannedX r;
  if (!ep.x.defined()) return r;
  r.x = ep.x;
  r.ldm = M == 1 ? 0 : r.x.stride(0);
  r.ldn = N == 1 ? 1 : r.x.stride(1);
  if (plan.x_copy == Plan::XCopy::kRow) {
    at::Tensor row = at::empty({N}, r.x.options());
    row.copy_(r.x[0]);
    r.x = row.expand({M, N});
    r.ldn = 1;
  } else if (plan.x_copy == Plan::XCopy::kRows) {
    r.x = r.x.contiguous();
    r.ldm = r.x.stride(0);
    r.ldn = 1;
  }
  return r;
}

// A call's kernel launches as the plan and the prepared operands make them: the GemmParams, and
// the launch of a row with K slices (the plan's, or an autotune candidate's).
struct Launch {
  const Plan& plan;
  const Problem& problem;
  GemmParams p;
  DType dtype = DType::kBF16;
  bool a_kmajor = true, b_kmajor = true;  // the kernel's (the swapped path exchanges A and B)
  int64_t batch = 1;
  int64_t elem = 2, c_elem = 2;  // bytes per operand and per C element
  at::TensorOptions float_options;  // the workspace's
  cudaStream_t stream = nullptr;

  cudaError_t operator()(int cfg, int splits) const;
};

Launch prepared_launch(const Plan& plan, const Problem& problem, const Overrides& o, at::ScalarType in_dtype,
                       const Operand& A, const Operand& B, const at::Tensor& target, const PlannedX& px,
                       const Epilogue& ep) {
  const int64_t batch = plan.batch, rows = plan.rows, N = problem.b.size[2], K = problem.a.size[2];
  const int64_t kVec = 16 / problem.a.element_size;
  GemmParams p;
  p.a = A.ptr;
  p.b = B.ptr;
  p.c = target.data_ptr();
  p.m = int(rows);
  p.n = int(N);
  p.k = int(K);
  p.lda = A.ld;
  p.ldb = B.ld;
  p.ldc = rows == 1 ? round_up(N, kVec) : target.stride(1);
  p.batch = int(batch);
  p.batch_a = A.batch_stride;
  p.batch_b = B.batch_stride;
  p.batch_c = batch == 1 ? p.ldc * rows : target.stride(0);
  // 16-byte rows for TMA stores / vector stores (16-bit C only: fp32 C is stored from registers),
  // and for the SM90 family's TMA store rows of whole 16-byte units: on the H100 the TMA store of
  // a row's last partial unit also wrote the unit's elements past N (an out= view with padded
  // rows, 2026-11-22). The SM80 family's vector stores bound the last unit per element.
  p.c_vector_ok = !problem.c_f32 && reinterpret_cast<uintptr_t>(p.c) % 16 == 0 && p.ldc % kVec == 0 &&
                  (!plan.sm90 || N % kVec == 0 || plan.target == Plan::Target::kScratch) && p.batch_c % kVec == 0 &&
                  p.batch_c > 0;
  p.c_f32 = problem.c_f32;
  p.c_staged = plan.target == Plan::Target::kStaged;
  if (px.x.defined()) {
    p.x = px.x.data_ptr();
    p.x_ldm = px.ldm;
    p.x_ldn = px.ldn;
    p.x_f32 = px.x.scalar_type() == at::kFloat;
    p.beta = float(ep.beta);
  }
  p.alpha = float(ep.alpha);
  p.act = ep.act;
  if (plan.swap) {
    // The kernel's A is B^T (N x K), its B is A (M x K), its C(i, j) is C(j, i).
    std::swap(p.a, p.b);
    std::swap(p.m, p.n);
    std::swap(p.lda, p.ldb);
    std::swap(p.batch_a, p.batch_b);
    p.ldc_col = p.ldc;
    p.ldc = N == 1 ? 1 : target.stride(2);
    p.c_vector_ok = false;
  }
  p.grid_limit = problem.device.num_sms;
  p.act_offload = o.act_offload != 0;
  p.late_c = o.late_c != 0;
  p.lean_epilogue = o.lean_epilogue != 0;
  p.pdl = plan.pdl;
  p.group_m = o.group_m > 0 ? o.group_m : 8;  // CUTE_GEMM_GROUP_M=<tile rows per group>
#if defined(CUTE_GEMM_TRACE)
  // A trace build (scripts/trace_phases.py): the device address of the buffer the SM90 kernel
  // records its phases into (sm90/trace.h), or unset.
  if (const char* buf = KnobSnapshot::get("CUTE_GEMM_TRACE_BUF"); buf != nullptr && *buf != '\0') {
    p.trace = reinterpret_cast<unsigned long long*>(std::strtoull(buf, nullptr, 10));
  }
#endif
  Launch l{plan, problem, p};
  l.dtype = in_dtype == at::kHalf ? DType::kF16 : DType::kBF16;  // (TF32: tf32_launcher's own)
  l.a_kmajor = plan.swap ? B.k_major : A.k_major;
  l.b_kmajor = plan.swap ? A.k_major : B.k_major;
  l.batch = batch;
  l.elem = problem.a.element_size;
  l.c_elem = target.element_size();
  l.float_options = target.options().dtype(at::kFloat);
  l.stream = at::cuda::getCurrentCUDAStream().stream();
  return l;
}

// Launch row `cfg` (of the SM90 or SM80 table) with `splits` K slices (SM90 only). Split-K: fp32
// partials of every slice of every tile and one arrival counter per tile, zeroed here, all from
// torch's caching allocator on this stream. The SM90 family makes one launch (per_launch == batch
// below), so the counters serve one launch only.
cudaError_t Launch::operator()(int cfg, int splits) const {
  const bool sm90 = plan.sm90, tf32 = plan.tf32;
  Launcher launch = nullptr;
  int bm = 0, bn = 0;
  if (tf32) {
    launch = tf32_launcher(sm90);
    bm = sm80::kConfigs[sm80::kTf32Config].bm;  // the grid slicing below is SM80's
    bn = sm80::kConfigs[sm80::kTf32Config].bn;
  } else if (sm90) {
    launch = find_launcher(plan.sm90_narrow ? Kernels::kSm90Narrow : Kernels::kSm90, dtype, a_kmajor, b_kmajor, cfg);
    TORCH_INTERNAL_ASSERT(launch != nullptr || !layout_built(a_kmajor, b_kmajor), "no sm90 ",
                          plan.sm90_narrow ? "narrow " : "", "kernel for row ", num(cfg));
  } else {
    launch = find_launcher(plan.narrow ? Kernels::kSm80Narrow : Kernels::kSm80, dtype, a_kmajor, b_kmajor, cfg);
    TORCH_INTERNAL_ASSERT(launch != nullptr || !layout_built(a_kmajor, b_kmajor), "no sm80 kernel for row ", num(cfg),
                          plan.narrow ? " (narrow)" : "");
    bm = sm80::kConfigs[cfg].bm;
    bn = sm80::kConfigs[cfg].bn;
  }
  GemmParams r = p;
  r.splits = splits;
  at::Tensor workspace;
  int64_t sm90_tiles = 0;  // SM90: block tiles of one batch
  if (sm90) {
    const sm90::TileConfig& tc = sm90::kConfigs[cfg];
    sm90_tiles = sm90::block_tiles(p.m, p.n, tc);
    // Tiles whose pieces sum through the workspace (one counter and `parts` fp32 kBM x kBN
    // partials each): every tile with split-K, the tail's with stream-K.
    int64_t shared_tiles = 0, parts = 0;
    if (splits > 1) {
      shared_tiles = sm90_tiles * batch;
      parts = splits;
    } else if (const Tail tail = choose_tail(plan, problem, cfg, splits); tail.tiles > 0) {
      shared_tiles = int64_t(tail.tiles) * tc.cluster_m;  // block tiles
      parts = tail.slots;
      r.sk_tiles = tail.tiles;
      r.sk_workers = tail.workers;
      r.sk_slots = tail.slots;
    }
    if (shared_tiles > 0) {
      const int64_t partials = shared_tiles * parts * tc.bm * tc.bn;
      workspace = at::empty({partials + shared_tiles}, float_options);
      r.workspace = workspace.data_ptr<float>();
      r.flags = reinterpret_cast<int*>(r.workspace + partials);
      if (cudaError_t e = zero_counters(r.flags, shared_tiles, p.pdl, stream); e != cudaSuccess) return e;
    }
  }
  TORCH_CHECK(launch != nullptr, "cute_gemm: this development build (CUTE_GEMM_LAYOUTS) has no kernel for operands ",
              a_kmajor ? "K" : "M", "-major / ", b_kmajor ? "K" : "N", "-major");
  // The SM80 grid is one block per (batch, tile) and gridDim.x stops at 2^31 - 1, and the SM90
  // kernel numbers its units (tile, K slice) in 32 bits: launch the batches in slices that fit
  // (a split problem never needs it: its tiles fit on the GPU, or runnable() refused it).
  const int64_t per_launch =
      sm90 ? (splits > 1 || r.sk_tiles > 0 ? batch
                                           : std::max<int64_t>(1, (std::numeric_limits<int>::max() - p.grid_limit) / sm90_tiles))
           : std::max<int64_t>(1, std::numeric_limits<int>::max() / tile_count(p.m, p.n, bm, bn));
  TORCH_INTERNAL_ASSERT((splits == 1 && r.sk_tiles == 0) || per_launch == batch,
                        "split-K and stream-K counters serve one launch");
  for (int64_t l0 = 0; l0 < batch; l0 += per_launch) {
    GemmParams q = r;
    q.batch = int(std::min(per_launch, batch - l0));
    q.a = static_cast<const char*>(p.a) + l0 * p.batch_a * elem;
    q.b = static_cast<const char*>(p.b) + l0 * p.batch_b * elem;
    q.c = static_cast<char*>(p.c) + l0 * p.batch_c * c_elem;
    if (const cudaError_t err = launch(q, stream); err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// The autotune (CUTE_GEMM_AUTOTUNE=1): the cached choice for this problem, or, on first sight of
// it (its family, dtype, layouts, shape, output and epilogue kind), every runnable row with 1, 2
// or 4 slices timed and the fastest kept (autotune.h); a cached choice this build or problem
// cannot run is ignored and tuned again. Not while the stream captures a CUDA graph: the plan's
// pick then, until a plain call tunes.
void autotuned(const Launch& launch, const cudaDeviceProp& prop, int& cfg, int& splits) {
  const Plan& plan = launch.plan;
  const GemmParams& p = launch.p;
  const bool sm90 = plan.sm90;
  const int num_sms = prop.multiProcessorCount;
  const std::string path = autotune::cache_path(prop.name, config_tables_id());
  const int sk = plan.stream_k_knob;
  const std::string key = std::string(sm90 ? "sm90" : "sm80") + " " + (launch.dtype == DType::kF16 ? "f16" : "bf16") +
                          " " + (launch.a_kmajor ? "k" : "m") + (launch.b_kmajor ? "k" : "n") + " " + num(p.m) + "x" +
                          num(p.n) + "x" + num(p.k) + " l" + num(launch.batch) + " c" + (p.c_f32 ? "f32" : "16") +
                          (p.c_vector_ok ? "v" : p.c_staged ? "s" : "e") + " x" +
                          (p.x != nullptr ? (p.x_ldm == 0 ? "bias" : "c") : "none") + " act" + num(int(p.act)) +
                          (sk == 1 ? " sk" : sk == 0 ? " nosk" : " skrule");
  const std::optional<autotune::Choice> hit = autotune::find(path, key);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(launch.stream, &capture));
  // Rows and slice counts the timing below may pick (s in {1, 2, 4}; slices only where the tiles
  // leave SMs idle, the chooser's own limit: the workspace then stays below one kBM x kBN fp32
  // tile per SM): a cached entry outside them (another build's, a hand-edited or foreign file's)
  // is not trusted. Rows without a kernel for this layout (sm80::has_plain, sm90::has_kernel; a
  // development build's missing layouts) are not candidates either.
  const int rows = sm90 ? sm90::kNumConfigs : sm80::kNumConfigs;
  auto tunable = [&](int c, int s) {
    return c >= 0 && c < rows && (s == 1 || s == 2 || s == 4) &&
           find_launcher(sm90 ? Kernels::kSm90 : Kernels::kSm80, launch.dtype, launch.a_kmajor, launch.b_kmajor, c) !=
               nullptr &&
           runnable(plan, launch.problem, c, s) &&
           (s == 1 || (sm90 && sm90::block_tiles(p.m, p.n, sm90::kConfigs[c]) * launch.batch * s <= num_sms));
  };
  if (hit && tunable(hit->cfg, hit->splits)) {
    cfg = hit->cfg;
    splits = hit->splits;
    return;
  }
  if (capture != cudaStreamCaptureStatusNone) return;
  autotune::Choice best{cfg, splits, std::numeric_limits<double>::infinity()};
  struct Event {  // a plain CUDA event, destroyed with the scope
    cudaEvent_t e = nullptr;
    Event() { C10_CUDA_CHECK(cudaEventCreate(&e)); }
    ~Event() { cudaEventDestroy(e); }
  } start, end;
  // The timing waits on events: in relaxed capture mode, so that a graph another thread is
  // capturing (torch's default, global mode) is not invalidated by it.
  struct RelaxedCapture {
    cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
    RelaxedCapture() { C10_CUDA_CHECK(cudaThreadExchangeStreamCaptureMode(&mode)); }
    ~RelaxedCapture() { cudaThreadExchangeStreamCaptureMode(&mode); }
  } relaxed;
  for (int c = 0; c < rows; ++c) {
    for (int s : {1, 2, 4}) {
      if (!tunable(c, s)) continue;
      try {
        if (launch(c, s) != cudaSuccess) {  // warm-up; a row this GPU cannot launch is skipped
          (void)cudaGetLastError();
          continue;
        }
        // One timed call sizes the measurement: about half a millisecond of calls, 3 to 50.
        auto time_us = [&](int reps) {
          C10_CUDA_CHECK(cudaEventRecord(start.e, launch.stream));
          for (int i = 0; i < reps; ++i) C10_CUDA_CHECK(launch(c, s));
          C10_CUDA_CHECK(cudaEventRecord(end.e, launch.stream));
          C10_CUDA_CHECK(cudaEventSynchronize(end.e));
          float ms = 0.f;
          C10_CUDA_CHECK(cudaEventElapsedTime(&ms, start.e, end.e));
          return 1e3 * ms / reps;
        };
        const double once = time_us(1);
        const double us = time_us(int(std::clamp(500.0 / std::max(once, 1.0), 3.0, 50.0)));
        if (us < best.us) best = {c, s, us};
      } catch (const c10::Error&) {  // e.g. no memory for a candidate's workspace: skip it
        (void)cudaGetLastError();
      }
    }
  }
  if (best.us < std::numeric_limits<double>::infinity() && !autotune::remember(path, key, best)) {
    TORCH_WARN_ONCE("cute_gemm: could not write the autotune cache ", path,
                    " (its folder must be this user's, writable by nobody else; set CUTE_GEMM_CACHE_DIR to "
                    "such a folder); tuned choices stay in memory only");
  }
  cfg = best.cfg;
  splits = best.splits;
}

// The one launch site: out3 (L, M, N) = epilogue(a3 (L, M, K) @ b3 (L, K, N)), all checked; it
// carries out what plan_for decided.
void gemm_into(const at::Tensor& a3, const at::Tensor& b3, const Epilogue& ep, const at::Tensor& out3) {
  const int64_t L = a3.size(0), M = a3.size(1), K = a3.size(2), N = b3.size(2);
  if (L == 0 || M == 0 || N == 0) return;
  const KnobSnapshot knobs;
  const c10::cuda::CUDAGuard guard(a3.device());
  const cudaDeviceProp& prop = checked_device(a3);
  const Overrides o = read_overrides();
  const Problem problem =
      problem_of(a3, b3, ep, view_of(out3), out3.scalar_type() == at::kFloat, device_of(prop, a3.device().index()));
  const Plan plan = checked_plan(problem, o);
  if (plan.route == Plan::Route::kTorch) {
    out3.copy_(torch_math(a3, b3, ep));
    return;
  }
  const PlannedX px = planned_x(plan, ep, M, N);
  at::Tensor a = a3, b = b3, c = out3;
  if (plan.fold) {  // batches of A stacked into rows against one B
    a = a3.as_strided({1, L * M, K}, {0, a3.stride(1), a3.stride(2)});
    b = b3.as_strided({1, K, N}, {0, b3.stride(1), b3.stride(2)});
    c = out3.as_strided({1, L * M, N}, {0, out3.stride(1), out3.stride(2)});
  }
  TORCH_INTERNAL_ASSERT(a.size(0) == plan.batch && a.size(1) == plan.rows, "the plan's problem");
  // The padded copies (one launch for both) and a scratch C's copy-out through the row copy
  // kernel (row_copy.h); CUTE_GEMM_ROW_COPY=0: torch's copy_ (benchmarks compare the two).
  PendingCopies copies;
  const bool tma = plan.sm90 && !plan.sm90_narrow, narrow = plan.narrow || plan.sm90_narrow;
  const Operand A = prepare_operand(a, tma, plan.tf32, narrow, plan.row_copy, &copies);
  const Operand B = prepare_operand(b.transpose(1, 2), tma, plan.b_kmajor_only, narrow, plan.row_copy, &copies);
  TORCH_INTERNAL_ASSERT(A.copied == plan.copy_a && A.k_major == plan.a_kmajor && B.copied == plan.copy_b &&
                            B.k_major == plan.b_kmajor,
                        "the operands as the plan reads them");
  copies.launch();
  const at::Tensor target =
      plan.target == Plan::Target::kInPlace || plan.target == Plan::Target::kStaged ? c
      : plan.target == Plan::Target::kScratch
          ? at::empty({plan.batch, plan.rows, round_up(N, vec_of(a))}, c.options()).narrow(2, 0, N)
          : at::empty(c.sizes(), c.options());
  const Launch launch = prepared_launch(plan, problem, o, a.scalar_type(), A, B, target, px, ep);
  int cfg = plan.cfg, splits = plan.splits;
  if (plan.autotune) autotuned(launch, prop, cfg, splits);
  const cudaError_t err = launch(cfg, splits);
  TORCH_CHECK(err == cudaSuccess, "cute_gemm: kernel launch failed on ", a.device(), ": ", cudaGetErrorString(err),
              err == cudaErrorNoKernelImageForDevice
                  ? " (cute_gemm was not built for this GPU's arch: reinstall with TORCH_CUDA_ARCH_LIST set to it)"
                  : "");
  if (!target.is_same(c)) copy_rows(c, target, plan.row_copy && c_in_place(view_of(c)));
}

}  // namespace

// ---------------------------------------------------------------- the ops (schemas in bindings.cpp)

at::Tensor mm(const at::Tensor& a, const at::Tensor& b, std::optional<at::ScalarType> out_dtype) {
  const at::ScalarType dtype = check_pair("mm", a, b, 2, out_dtype);
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options().dtype(dtype));
  gemm_into(a.unsqueeze(0), b.unsqueeze(0), {}, out.unsqueeze(0));
  return out;
}

at::Tensor& mm_out(const at::Tensor& a, const at::Tensor& b, std::optional<at::ScalarType> out_dtype, at::Tensor& out) {
  check_pair("mm", a, b, 2, out_dtype);
  check_out("mm", out, {a.size(0), b.size(1)}, out_dtype.value_or(a.scalar_type()), a, {{"a", &a}, {"b", &b}});
  gemm_into(a.unsqueeze(0), b.unsqueeze(0), {}, out.unsqueeze(0));
  return out;
}


at::Tensor addmm(const at::Tensor& input, const at::Tensor& a, const at::Tensor& b, double beta,
                 double alpha, std::optional<c10::string_view> activation,
                 std::optional<at::ScalarType> out_dtype) {
  const at::ScalarType dtype = check_pair("addmm", a, b, 2, out_dtype);
  const Epilogue ep = addmm_epilogue(input, a, b, beta, alpha, activation, dtype);
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options().dtype(dtype));
  gemm_into(a.unsqueeze(0), b.unsqueeze(0), ep, out.unsqueeze(0));
  return out;
}

at::Tensor& addmm_out(const at::Tensor& input, const at::Tensor& a, const at::Tensor& b, double beta,
                      double alpha, std::optional<c10::string_view> activation,
                      std::optional<at::ScalarType> out_dtype, at::Tensor& out) {
  const at::ScalarType dtype = check_pair("addmm", a, b, 2, out_dtype);
  const Epilogue ep = addmm_epilogue(input, a, b, beta, alpha, activation, dtype);
  // input is read only where beta is not 0 (addmm_epilogue): out may be input otherwise, as in torch.
  check_out("addmm", out, {a.size(0), b.size(1)}, dtype, a,
            {{"input", ep.x.defined() ? &input : nullptr}, {"a", &a}, {"b", &b}});
  gemm_into(a.unsqueeze(0), b.unsqueeze(0), ep, out.unsqueeze(0));
  return out;
}

std::string explain(const at::Tensor& a, const at::Tensor& b, const std::optional<at::Tensor>& input, double beta,
                    double alpha, std::optional<c10::string_view> activation, std::optional<at::ScalarType> out_dtype,
                    const std::optional<at::Tensor>& out) {
  const bool batched = a.dim() == 3;
  const char* op = batched ? "bmm" : input.has_value() ? "addmm" : "mm";
  TORCH_CHECK_VALUE(a.dim() == 2 || a.dim() == 3, "explain: a must be 2-D (mm, addmm) or 3-D (bmm), got shape ",
                    shape_str(a.sizes()));
  TORCH_CHECK_VALUE(!batched || !input.has_value(), "explain: input (addmm) needs 2-D a and b");
  TORCH_CHECK_VALUE(input.has_value() || (beta == 1.0 && alpha == 1.0 && !activation.has_value()),
                    "explain: beta, alpha and activation are addmm's: pass input too");
  const int dims = int(a.dim());
  const at::ScalarType dtype = check_pair(op, a, b, dims, out_dtype);
  const at::Tensor a3 = batched ? a : a.unsqueeze(0), b3 = batched ? b : b.unsqueeze(0);
  const Epilogue ep = input.has_value() ? addmm_epilogue(*input, a, b, beta, alpha, activation, dtype) : Epilogue{};
  const int64_t L = a3.size(0), M = a3.size(1), N = b3.size(2);
  MatrixView c;  // the result an op allocates: contiguous, aligned
  c.size[0] = L;
  c.size[1] = M;
  c.size[2] = N;
  c.stride[0] = M * N;
  c.stride[1] = N;
  c.element_size = int(c10::elementSize(dtype));
  if (out.has_value()) {
    const std::vector<int64_t> shape = batched ? std::vector<int64_t>{L, M, N} : std::vector<int64_t>{M, N};
    check_out(op, *out, shape, dtype, a, {{"a", &a}, {"b", &b}});
    c = view_of(batched ? *out : out->unsqueeze(0));
  }
  if (L == 0 || M == 0 || N == 0) return describe(plan_for(problem_of(a3, b3, ep, c, false, Device{}), {}), {});
  const KnobSnapshot knobs;
  const c10::cuda::CUDAGuard guard(a.device());
  const cudaDeviceProp& prop = checked_device(a);
  const Problem problem = problem_of(a3, b3, ep, c, dtype == at::kFloat, device_of(prop, a.device().index()));
  return describe(checked_plan(problem, read_overrides()), problem);
}

at::Tensor bmm(const at::Tensor& a, const at::Tensor& b, std::optional<at::ScalarType> out_dtype) {
  const at::ScalarType dtype = check_pair("bmm", a, b, 3, out_dtype);
  at::Tensor out = at::empty({a.size(0), a.size(1), b.size(2)}, a.options().dtype(dtype));
  gemm_into(a, b, {}, out);
  return out;
}

at::Tensor& bmm_out(const at::Tensor& a, const at::Tensor& b, std::optional<at::ScalarType> out_dtype,
                    at::Tensor& out) {
  check_pair("bmm", a, b, 3, out_dtype);
  check_out("bmm", out, {a.size(0), a.size(1), b.size(2)}, out_dtype.value_or(a.scalar_type()), a,
            {{"a", &a}, {"b", &b}});
  gemm_into(a, b, {}, out);
  return out;
}

}  // namespace cute_gemm
