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

#include "checks.h"
#include "gemm_params.h"
#include "gemv.h"
#include "knobs.h"
#include "launch.h"
#include "operands.h"
#include "plan.h"

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

void gemm_into(const at::Tensor& a3, const at::Tensor& b3, const Epilogue& ep, const at::Tensor& out3);

// gated_mm where the gated kernel cannot run it (gated_plan.cpp): both products as calls of
// their own with float32 results (unrounded; the activation in the gate's epilogue), then the
// product in float32. Those calls follow mm's rules (either family, TF32 where allowed).
at::Tensor gated_unfused(const at::Tensor& a3, const at::Tensor& b3, const Epilogue& ep) {
  at::Tensor gate = at::empty({a3.size(0), a3.size(1), b3.size(2)}, a3.options().dtype(at::kFloat));
  at::Tensor up = at::empty_like(gate);
  Epilogue act;
  act.act = ep.act;
  gemm_into(a3, b3, act, gate);
  gemm_into(a3, ep.b2, {}, up);
  return gate.mul_(up);
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
    p.x = view_of(ep.x);  // (1, M, N)
    p.x_f32 = ep.x.scalar_type() == at::kFloat;
  }
  p.alpha = ep.alpha;
  p.beta = ep.beta;
  p.act = ep.act;
  if (ep.b2.defined()) {
    p.gated = true;
    p.b2 = view_of(ep.b2);
  }
  p.row_sums = ep.row_sums.defined();
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


// addmm's input X (M, N), read in place or copied as the plan says (plan.cpp, choose_x).
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

// The decode GEMV (gemv.h; gemv_plan.cpp, choose_gemv): its operands, X (px, read in place) and C
// read and written through their strides (b3's column stride is the weight's row stride).
void run_gemv(const at::Tensor& a3, const at::Tensor& b3, const Epilogue& ep, const PlannedX& px,
              const at::Tensor& out3, const Problem& problem) {
  const int64_t M = a3.size(1), K = a3.size(2), N = b3.size(2);
  GemmParams p;
  p.a = a3.data_ptr();
  p.b = b3.data_ptr();
  p.c = out3.data_ptr();
  p.m = int(M);
  p.n = int(ep.b2.defined() ? 2 * N : N);  // the gated kernels' convention (gemm_params.h)
  p.k = int(K);
  p.lda = a3.stride(1);
  p.ldb = b3.stride(2);
  p.ldc = out3.stride(1);
  p.ldc_col = out3.stride(2);
  p.c_f32 = out3.scalar_type() == at::kFloat;
  set_epilogue(p, px, ep);
  if (ep.b2.defined()) p.b2 = ep.b2.data_ptr();
  const DType d = a3.scalar_type() == at::kHalf ? DType::kF16 : DType::kBF16;
  const cudaError_t err = gemv(p, d, problem.device.num_sms, at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "cute_gemm: GEMV launch failed on ", a3.device(), ": ", cudaGetErrorString(err));
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
      problem_of(a3, b3, ep, view_of(out3), out3.scalar_type() == at::kFloat,
                 device_of(prop, a3.device().index(), a3.scalar_type() == at::kFloat));
  const Plan plan = checked_plan(problem, o);
  // Row sums the kernel does not write: torch's sum, after the GEMM (fp32 accumulation).
  const auto torch_row_sums = [&] {
    if (!ep.row_sums.defined() || plan.row_sums) return;
    at::Tensor sums = ep.row_sums;  // (a handle of the same tensor: sum_out writes it)
    at::sum_out(sums, a3[0], {1});
  };
  if (plan.route == Plan::Route::kTorch) {
    out3.copy_(ep.b2.defined() ? gated_unfused(a3, b3, ep) : torch_math(a3, b3, ep));
    torch_row_sums();
    return;
  }
  const PlannedX px = planned_x(plan, ep, M, N);
  if (plan.gemv) {
    run_gemv(a3, b3, ep, px, out3, problem);
    torch_row_sums();
    return;
  }
  at::Tensor a = a3, b = b3, c = out3;
  if (plan.fold) {  // batches of A stacked into rows against one B
    a = a3.as_strided({1, L * M, K}, {0, a3.stride(1), a3.stride(2)});
    b = b3.as_strided({1, K, N}, {0, b3.stride(1), b3.stride(2)});
    c = out3.as_strided({1, L * M, N}, {0, out3.stride(1), out3.stride(2)});
  }
  TORCH_INTERNAL_ASSERT(a.size(0) == plan.batch && a.size(1) == plan.rows, "the plan's problem");
  // The padded copies (one launch for both) and a scratch C's copy-out through the row copy
  // kernel (row_copy.h; docs/tuning.md section 15 against torch's copy_).
  PendingCopies copies;
  const bool tma = plan.sm90 && !plan.sm90_narrow, narrow = plan.narrow || plan.sm90_narrow;
  const Operand A = prepare_operand(a, tma, plan.tf32, narrow, &copies);
  const Operand B = prepare_operand(b.transpose(1, 2), tma, plan.tf32, narrow, &copies);
  TORCH_INTERNAL_ASSERT(A.copied == plan.copy_a && A.k_major == plan.a_kmajor && B.copied == plan.copy_b &&
                            B.k_major == plan.b_kmajor,
                        "the operands as the plan reads them");
  // gated_mm's up weight: read in place, as B (gated_plan.cpp).
  const std::optional<Operand> B2 =
      ep.b2.defined() ? std::optional<Operand>(prepare_operand(ep.b2.transpose(1, 2), tma, false, false, &copies))
                      : std::nullopt;
  TORCH_INTERNAL_ASSERT(!B2 || (!B2->copied && B2->k_major && B2->ld == B.ld && B2->batch_stride == B.batch_stride),
                        "gated_mm's weights as the plan reads them");
  copies.launch();
  const at::Tensor target =
      plan.target == Plan::Target::kInPlace || plan.target == Plan::Target::kStaged ? c
      : plan.target == Plan::Target::kScratch
          ? at::empty({plan.batch, plan.rows, round_up(N, vec_of(a))}, c.options()).narrow(2, 0, N)
          : at::empty(c.sizes(), c.options());
  Launch launch = prepared_launch(plan, problem, o, a.scalar_type(), A, B, target, px, ep);
  if (B2) launch.p.b2 = B2->ptr;
  if (plan.row_sums) launch.p.row_sums = ep.row_sums.data_ptr();
  int cfg = plan.cfg, splits = plan.splits;
  if (plan.autotune) autotuned(launch, prop, cfg, splits);
  const cudaError_t err = launch(cfg, splits);
  TORCH_CHECK(err == cudaSuccess, "cute_gemm: kernel launch failed on ", a.device(), ": ", cudaGetErrorString(err),
              err == cudaErrorNoKernelImageForDevice
                  ? " (cute_gemm was not built for this GPU's arch: reinstall with TORCH_CUDA_ARCH_LIST set to it)"
                  : "");
  if (!target.is_same(c)) copy_rows(c, target, c_in_place(view_of(c)));
  torch_row_sums();
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

std::tuple<at::Tensor, at::Tensor> mm_row_sums(const at::Tensor& a, const at::Tensor& b) {
  const at::ScalarType dtype = check_pair("mm_row_sums", a, b, 2, std::nullopt);
  at::Tensor out = at::empty({a.size(0), b.size(1)}, a.options().dtype(dtype));
  Epilogue ep;
  ep.row_sums = at::empty({a.size(0)}, a.options());
  if (b.size(1) == 0) return {out, at::sum_out(ep.row_sums, a, {1})};  // no GEMM to sum beside
  gemm_into(a.unsqueeze(0), b.unsqueeze(0), ep, out.unsqueeze(0));
  return {out, ep.row_sums};
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
    const at::Tensor* x = ep.x.defined() ? &*input : nullptr;  // read only where beta is not 0, as in addmm
    check_out(op, *out, shape, dtype, a, {{"input", x}, {"a", &a}, {"b", &b}});
    c = view_of(batched ? *out : out->unsqueeze(0));
  }
  if (L == 0 || M == 0 || N == 0) return describe(plan_for(problem_of(a3, b3, ep, c, false, Device{}), {}), {});
  const KnobSnapshot knobs;
  const c10::cuda::CUDAGuard guard(a.device());
  const cudaDeviceProp& prop = checked_device(a);
  const Problem problem = problem_of(a3, b3, ep, c, dtype == at::kFloat,
                                     device_of(prop, a.device().index(), a.scalar_type() == at::kFloat));
  return describe(checked_plan(problem, read_overrides()), problem);
}

at::Tensor gated_mm(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up,
                    std::optional<c10::string_view> activation) {
  const at::ScalarType dtype = check_gated(x, w_gate, w_up);
  Epilogue ep;
  ep.act = parse_activation("gated_mm", activation);
  ep.b2 = w_up.t().unsqueeze(0);
  at::Tensor out = at::empty({x.size(0), w_gate.size(0)}, x.options().dtype(dtype));
  gemm_into(x.unsqueeze(0), w_gate.t().unsqueeze(0), ep, out.unsqueeze(0));
  return out;
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
