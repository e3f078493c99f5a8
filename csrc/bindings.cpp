// Operator schema and implementations. The module is a plain CPython extension with no Python
// functions of its own: importing cute_gemm._C runs the static registrations below.
#include <Python.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/autograd.h>
#include <torch/library.h>

#include <tuple>
#include <utility>
#include <vector>

#include "gemm.h"

extern "C" {
PyObject* PyInit__C(void) {
  static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT, "_C", nullptr, -1, nullptr};
  return PyModule_Create(&module_def);
}
}

TORCH_LIBRARY(cute_gemm, m) {
  m.def("mm(Tensor a, Tensor b, *, ScalarType? out_dtype=None) -> Tensor");
  m.def("mm.out(Tensor a, Tensor b, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)");
  m.def(
      "addmm(Tensor input, Tensor a, Tensor b, *, float beta=1, float alpha=1, str? activation=None, "
      "ScalarType? out_dtype=None) -> Tensor");
  m.def(
      "addmm.out(Tensor input, Tensor a, Tensor b, *, float beta=1, float alpha=1, str? activation=None, "
      "ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)");
  m.def("bmm(Tensor a, Tensor b, *, ScalarType? out_dtype=None) -> Tensor");
  m.def("bmm.out(Tensor a, Tensor b, *, ScalarType? out_dtype=None, Tensor(a!) out) -> Tensor(a!)");
  // nn.GatedMLP's gate and up projections: act(x @ w_gate^T) * (x @ w_up^T). Not differentiable
  // (GatedMLP runs its unfused ops where a gradient is needed).
  m.def("gated_mm(Tensor x, Tensor w_gate, Tensor w_up, *, str? activation='silu') -> Tensor");
  // addmm's backward for nn.Linear: (a @ b, the sums over K of a's rows) with a = dY^T, the weight's
  // and the bias's gradients in one call. Not differentiable (a backward that builds a graph of its
  // own, create_graph=True, runs the separate ops).
  m.def("mm_row_sums(Tensor a, Tensor b) -> (Tensor, Tensor)");
  // linear_cross_entropy's (cute_gemm/loss.py) pass over the logits: returns the rows' losses and
  // leaves the loss's gradient, times scale, in the logits' place (csrc/cross_entropy.h, gemm.h).
  m.def("softmax_cross_entropy_(Tensor(a!) logits, Tensor target, int ignore_index, Tensor? scale=None) -> Tensor");
  // cute_gemm.nn.RMSNorm's kernel: torch's rms_norm over the last dimension (round_before_weight:
  // Hugging Face's LlamaRMSNorm's), launched with PDL so that it starts beside the kernels around it
  // (csrc/rms_norm.h; its autograd formula is in cute_gemm/ops.py).
  m.def("rms_norm(Tensor x, Tensor? weight, float eps, bool round_before_weight=False) -> Tensor");
  // The plan a call would run (cute_gemm.explain): reads shapes, strides and the device, runs nothing.
  m.def(
      "explain(Tensor a, Tensor b, Tensor? input=None, *, float beta=1, float alpha=1, str? activation=None, "
      "ScalarType? out_dtype=None, Tensor? out=None) -> str");
}
TORCH_LIBRARY_IMPL(cute_gemm, CompositeImplicitAutograd, m) { m.impl("explain", &cute_gemm::explain); }

// CUDA runs the ops; CPU and sparse tensors reach the same checks, so the error names the
// argument and the rule instead of the dispatcher's "could not run with arguments from the ...
// backend".
#define CUTE_GEMM_IMPLS(KEY)                        \
  TORCH_LIBRARY_IMPL(cute_gemm, KEY, m) {           \
    m.impl("mm", &cute_gemm::mm);                   \
    m.impl("mm.out", &cute_gemm::mm_out);           \
    m.impl("addmm", &cute_gemm::addmm);             \
    m.impl("addmm.out", &cute_gemm::addmm_out);     \
    m.impl("bmm", &cute_gemm::bmm);                 \
    m.impl("bmm.out", &cute_gemm::bmm_out);         \
    m.impl("gated_mm", &cute_gemm::gated_mm);       \
    m.impl("mm_row_sums", &cute_gemm::mm_row_sums); \
  }
CUTE_GEMM_IMPLS(CUDA)
TORCH_LIBRARY_IMPL(cute_gemm, CUDA, m) {
  m.impl("softmax_cross_entropy_", &cute_gemm::softmax_cross_entropy_);
  m.impl("rms_norm", &cute_gemm::rms_norm);
}
TORCH_LIBRARY_IMPL(cute_gemm, CPU, m) {
  m.impl("softmax_cross_entropy_", &cute_gemm::softmax_cross_entropy_);
  m.impl("rms_norm", &cute_gemm::rms_norm);
}
CUTE_GEMM_IMPLS(CPU)
CUTE_GEMM_IMPLS(SparseCPU)
CUTE_GEMM_IMPLS(SparseCUDA)
CUTE_GEMM_IMPLS(SparseCsrCPU)
CUTE_GEMM_IMPLS(SparseCsrCUDA)

// Autograd, in C++: a call that needs no gradient goes straight to the kernel. The formulas
// registered from Python (torch.library.register_autograd, until 2026-11-26) put a Python function
// in front of every call: 9-11 us of host time per call at 256^3 on the H100's host.
// mm, bmm: dA = dC B^T, dB = A^T dC on transposed views that the kernels read in place, each only
// where needed, the gradient cast to the inputs' dtype first (an fp32 out_dtype of 16-bit inputs).
// addmm: dZ = dOut act'(z) (relu's from the saved output; gelu, gelu_tanh and silu from z
// recomputed in fp32 by one more addmm rather than kept from forward), then d input = beta dZ
// summed to input's shape, dA = alpha dZ B^T, dB = alpha A^T dZ.
namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;
using GemmOp = at::Tensor(const at::Tensor&, const at::Tensor&, std::optional<at::ScalarType>);
using AddmmOp = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, double, double,
                           std::optional<c10::string_view>, std::optional<at::ScalarType>);

// The ops through the dispatcher (tracing and fake tensors see the ops themselves).
template <bool kBatched>
at::Tensor call_gemm(const at::Tensor& a, const at::Tensor& b, std::optional<at::ScalarType> out_dtype) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow(kBatched ? "cute_gemm::bmm" : "cute_gemm::mm", "")
                             .typed<GemmOp>();
  return op.call(a, b, out_dtype);
}
at::Tensor call_addmm(const at::Tensor& input, const at::Tensor& a, const at::Tensor& b, double beta, double alpha,
                      std::optional<c10::string_view> activation, std::optional<at::ScalarType> out_dtype) {
  static const auto op = c10::Dispatcher::singleton().findSchemaOrThrow("cute_gemm::addmm", "").typed<AddmmOp>();
  return op.call(input, a, b, beta, alpha, activation, out_dtype);
}

// A transposed view of a contiguous matrix (or batch of matrices): nn.Linear's weight.t().
bool column_major(const at::Tensor& x) {
  return !x.is_contiguous() && x.transpose(-2, -1).is_contiguous();
}

// The operands' gradients, each where edge `first` (a) or `first` + 1 (b) needs one: dA = g B^T,
// dB = A^T g, g already in the operands' dtype. A gradient is laid out as its operand is, as
// torch.mm's backward does: for a column-major operand the GEMM computes the gradient's transpose
// (dB^T = g^T A), so the weight.t() of a Linear gets a gradient whose transpose is contiguous and
// weight.grad is the GEMM's output itself. A gradient in another layout than its parameter's
// would cost a copy in AccumulateGrad, and a strided add wherever gradients are summed.
at::Tensor transposed(const at::Tensor& x) { return x.transpose(-2, -1); }
template <bool kBatched>
at::Tensor grad_of_a(const at::Tensor& g, const at::Tensor& a, const at::Tensor& b) {
  return column_major(a) ? transposed(call_gemm<kBatched>(b, transposed(g), std::nullopt))
                         : call_gemm<kBatched>(g, transposed(b), std::nullopt);
}
template <bool kBatched>
at::Tensor grad_of_b(const at::Tensor& g, const at::Tensor& a, const at::Tensor& b) {
  return column_major(b) ? transposed(call_gemm<kBatched>(transposed(g), a, std::nullopt))
                         : call_gemm<kBatched>(transposed(a), g, std::nullopt);
}
template <bool kBatched>
std::pair<at::Tensor, at::Tensor> operand_grads(AutogradContext* ctx, size_t first, const at::Tensor& g,
                                                const at::Tensor& a, const at::Tensor& b) {
  at::Tensor grad_a, grad_b;
  if (ctx->needs_input_grad(first)) grad_a = grad_of_a<kBatched>(g, a, b);
  if (ctx->needs_input_grad(first + 1)) grad_b = grad_of_b<kBatched>(g, a, b);
  return {grad_a, grad_b};
}

// mm_row_sums through the dispatcher.
std::tuple<at::Tensor, at::Tensor> call_mm_row_sums(const at::Tensor& a, const at::Tensor& b) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("cute_gemm::mm_row_sums", "")
                             .typed<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&)>();
  return op.call(a, b);
}

template <bool kBatched>
struct GemmFunction : torch::autograd::Function<GemmFunction<kBatched>> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& a, const at::Tensor& b,
                            std::optional<at::ScalarType> out_dtype) {
    ctx->save_for_backward({a, b});
    at::AutoDispatchBelowADInplaceOrView below;
    return call_gemm<kBatched>(a, b, out_dtype);
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &a = saved[0], &b = saved[1];
    auto [grad_a, grad_b] = operand_grads<kBatched>(ctx, 0, grads[0].to(a.scalar_type()), a, b);
    return {grad_a, grad_b, at::Tensor()};
  }
};

template <bool kBatched>
at::Tensor gemm_autograd(const at::Tensor& a, const at::Tensor& b, std::optional<at::ScalarType> out_dtype) {
  if (!at::GradMode::is_enabled() || !(a.requires_grad() || b.requires_grad())) {
    at::AutoDispatchBelowADInplaceOrView below;
    return call_gemm<kBatched>(a, b, out_dtype);
  }
  return GemmFunction<kBatched>::apply(a, b, out_dtype);
}

struct AddmmFunction : torch::autograd::Function<AddmmFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& input, const at::Tensor& a, const at::Tensor& b,
                            double beta, double alpha, std::optional<c10::string_view> activation,
                            std::optional<at::ScalarType> out_dtype) {
    const std::string act = activation.has_value() ? std::string(activation->data(), activation->size()) : "";
    ctx->saved_data["beta"] = beta;
    ctx->saved_data["alpha"] = alpha;
    ctx->saved_data["activation"] = act;
    ctx->saved_data["input_shape"] = input.sym_sizes().vec();  // symbolic under torch.compile: no recompile per M
    ctx->saved_data["input_dtype"] = input.scalar_type();
    at::Tensor out;
    {
      at::AutoDispatchBelowADInplaceOrView below;
      out = call_addmm(input, a, b, beta, alpha, activation, out_dtype);
    }
    const bool recompute = !act.empty() && act != "relu";
    ctx->save_for_backward({recompute ? input : at::Tensor(), a, b, act == "relu" ? out : at::Tensor()});
    return out;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const at::Tensor &input = saved[0], &a = saved[1], &b = saved[2], &out = saved[3];
    const double beta = ctx->saved_data["beta"].toDouble(), alpha = ctx->saved_data["alpha"].toDouble();
    const std::string act = ctx->saved_data["activation"].toStringRef();
    const at::Tensor& grad = grads[0];
    at::Tensor grad_z;
    if (act.empty()) {
      grad_z = grad;
    } else if (act == "relu") {
      grad_z = at::threshold_backward(grad, out, 0);
    } else {
      // z in float32 straight from the accumulators, the derivative in float32.
      const at::Tensor z = call_addmm(input, a, b, beta, alpha, std::nullopt, at::kFloat);
      grad_z = act == "silu" ? at::silu_backward(grad.to(at::kFloat), z)
                             : at::gelu_backward(grad.to(at::kFloat), z, act == "gelu_tanh" ? "tanh" : "none");
    }
    at::Tensor grad_input, grad_a, grad_b;
    // nn.Linear's bias (a row of N, its gradient dZ summed over M) beside its weight (the
    // column-major b, weight.t(), whose gradient's transpose is dZ^T a): one call, whose kernel sums
    // dZ^T's rows as it loads them (mm_row_sums) instead of a reduction of dZ after it. Where beta and
    // alpha are 1, without an activation, all in one 16-bit dtype (the sm90 kernels'), and not under
    // create_graph.
    const std::vector<c10::SymInt> input_shape = ctx->saved_data["input_shape"].toSymIntVector();
    if (ctx->needs_input_grad(0) && ctx->needs_input_grad(2) && act.empty() && beta == 1 && alpha == 1 &&
        input_shape.size() == 1 && input_shape[0] == b.sym_size(1) && column_major(b) &&
        (a.scalar_type() == at::kHalf || a.scalar_type() == at::kBFloat16) && grad.scalar_type() == a.scalar_type() &&
        ctx->saved_data["input_dtype"].toScalarType() == a.scalar_type() && !at::GradMode::is_enabled()) {
      auto [weight_t_grad, row_sums] = call_mm_row_sums(transposed(grad), a);
      grad_b = transposed(weight_t_grad);
      if (ctx->needs_input_grad(1)) grad_a = grad_of_a<false>(grad, a, b);
      return {row_sums, grad_a, grad_b, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    }
    if (ctx->needs_input_grad(0)) {
      // A broadcast input gets the sum over the dimensions it was broadcast along.
      grad_input = grad_z.sum_to_size_symint(input_shape);
      if (beta != 1) grad_input = grad_input.mul(beta);
      grad_input = grad_input.to(ctx->saved_data["input_dtype"].toScalarType());
    }
    if (ctx->needs_input_grad(1) || ctx->needs_input_grad(2)) {
      std::tie(grad_a, grad_b) =
          operand_grads<false>(ctx, 1, (alpha == 1 ? grad_z : grad_z.mul(alpha)).to(a.scalar_type()), a, b);
    }
    return {grad_input, grad_a, grad_b, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

at::Tensor addmm_autograd(const at::Tensor& input, const at::Tensor& a, const at::Tensor& b, double beta,
                          double alpha, std::optional<c10::string_view> activation,
                          std::optional<at::ScalarType> out_dtype) {
  if (!at::GradMode::is_enabled() || !(input.requires_grad() || a.requires_grad() || b.requires_grad())) {
    at::AutoDispatchBelowADInplaceOrView below;
    return call_addmm(input, a, b, beta, alpha, activation, out_dtype);
  }
  return AddmmFunction::apply(input, a, b, beta, alpha, activation, out_dtype);
}

// Autocast, as torch.mm / addmm / bmm take part in it (their lower_precision_fp policy): inside
// torch.autocast("cuda") every floating-point CUDA input (double excepted) is cast to the autocast
// dtype, through torch's cast cache (a Parameter cast once per autocast region), and the op runs on
// the casts with autocast off, so the result has the autocast dtype (or out_dtype). The out=
// overloads are left alone, as torch's are: out fixes the result's dtype.
at::Tensor cast(const at::Tensor& x) {
  return at::autocast::cached_cast(at::autocast::get_autocast_dtype(at::kCUDA), x, c10::DeviceType::CUDA);
}
template <bool kBatched>
at::Tensor gemm_autocast(const at::Tensor& a, const at::Tensor& b, std::optional<at::ScalarType> out_dtype) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
  return call_gemm<kBatched>(cast(a), cast(b), out_dtype);
}
at::Tensor addmm_autocast(const at::Tensor& input, const at::Tensor& a, const at::Tensor& b, double beta,
                          double alpha, std::optional<c10::string_view> activation,
                          std::optional<at::ScalarType> out_dtype) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
  return call_addmm(cast(input), cast(a), cast(b), beta, alpha, activation, out_dtype);
}

// gated_mm through the dispatcher (tracing and fake tensors see the op itself).
at::Tensor call_gated(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up,
                      std::optional<c10::string_view> activation) {
  static const auto op = c10::Dispatcher::singleton()
                             .findSchemaOrThrow("cute_gemm::gated_mm", "")
                             .typed<at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                               std::optional<c10::string_view>)>();
  return op.call(x, w_gate, w_up, activation);
}
at::Tensor gated_mm_autocast(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up,
                             std::optional<c10::string_view> activation) {
  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCUDA);
  return call_gated(cast(x), cast(w_gate), cast(w_up), activation);
}

// gated_mm has no backward: with grad mode on and an input that requires grad it refuses to run
// (rather than return a result that backward would silently treat as a constant).
at::Tensor gated_mm_autograd(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up,
                             std::optional<c10::string_view> activation) {
  TORCH_CHECK(!(at::GradMode::is_enabled() && (x.requires_grad() || w_gate.requires_grad() || w_up.requires_grad())),
              "gated_mm: not differentiable; run it under torch.no_grad() or on tensors that do not require grad "
              "(nn.GatedMLP runs its unfused ops where a gradient is needed)");
  at::AutoDispatchBelowADInplaceOrView below;
  return call_gated(x, w_gate, w_up, activation);
}

// mm_row_sums only serves addmm's backward; with grad mode on and an input that requires grad it
// refuses, as gated_mm does.
std::tuple<at::Tensor, at::Tensor> mm_row_sums_autograd(const at::Tensor& a, const at::Tensor& b) {
  TORCH_CHECK(!(at::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad())),
              "mm_row_sums: not differentiable; run it under torch.no_grad() or on tensors that do not require grad");
  at::AutoDispatchBelowADInplaceOrView below;
  return call_mm_row_sums(a, b);
}

// The out= overloads write a tensor in place: as torch's own out= ops do, they refuse an inference
// tensor outside inference mode (before anything is written) and bump out's version counter, so
// that autograd refuses a backward that would read a saved tensor they overwrote.
template <const char* kName, class Sig>
struct OutOp;
template <const char* kName, class... Args>
struct OutOp<kName, at::Tensor&(Args...)> {
  static at::Tensor& call(Args... args) {
    at::Tensor& out = std::get<sizeof...(Args) - 1>(std::forward_as_tuple(args...));
    TORCH_CHECK(!out.is_inference() || c10::InferenceMode::is_enabled(), kName,
                ".out: out is an inference tensor, and an in-place update to an inference tensor outside "
                "InferenceMode is not allowed (as in torch); pass a clone, or call it under torch.inference_mode()");
    static const auto op =
        c10::Dispatcher::singleton().findSchemaOrThrow(kName, "out").typed<at::Tensor&(Args...)>();
    {
      at::AutoDispatchBelowADInplaceOrView below;
      op.call(args...);
    }
    torch::autograd::impl::bump_version(out);
    return out;
  }
};
constexpr char kMm[] = "cute_gemm::mm", kAddmm[] = "cute_gemm::addmm", kBmm[] = "cute_gemm::bmm";

}  // namespace

TORCH_LIBRARY_IMPL(cute_gemm, Autograd, m) {
  m.impl("mm", &gemm_autograd<false>);
  m.impl("bmm", &gemm_autograd<true>);
  m.impl("addmm", &addmm_autograd);
  m.impl("gated_mm", &gated_mm_autograd);
  m.impl("mm_row_sums", &mm_row_sums_autograd);
}

TORCH_LIBRARY_IMPL(cute_gemm, AutocastCUDA, m) {
  m.impl("mm", &gemm_autocast<false>);
  m.impl("bmm", &gemm_autocast<true>);
  m.impl("addmm", &addmm_autocast);
  m.impl("gated_mm", &gated_mm_autocast);
}

TORCH_LIBRARY_IMPL(cute_gemm, ADInplaceOrView, m) {
  m.impl("mm.out", &OutOp<kMm, decltype(cute_gemm::mm_out)>::call);
  m.impl("addmm.out", &OutOp<kAddmm, decltype(cute_gemm::addmm_out)>::call);
  m.impl("bmm.out", &OutOp<kBmm, decltype(cute_gemm::bmm_out)>::call);
}
