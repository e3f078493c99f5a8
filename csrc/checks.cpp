#include "checks.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>

#include <algorithm>
#include <vector>

namespace cute_gemm {

std::string shape_str(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + num(sizes[i]);
  return s + "]";
}

namespace {

const char* dims_of(int dims) { return dims == 2 ? "2-D" : "3-D"; }

void check_operand(const char* op, const at::Tensor& x, const char* name, int dims, const char* shape) {
  TORCH_CHECK_VALUE(x.layout() == at::kStrided, op, ": ", name, " must be a dense (strided) tensor, got layout ",
                    x.layout());
  TORCH_CHECK_VALUE(x.is_cuda(), op, ": ", name, " must be a CUDA tensor, got device ", x.device());
  TORCH_CHECK_VALUE(x.dim() == dims, op, ": ", name, " must be ", dims_of(dims), " ", shape, ", got shape ",
                    shape_str(x.sizes()));
  TORCH_CHECK_TYPE(x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16 || x.scalar_type() == at::kFloat,
                   op, ": ", name, " must be float16, bfloat16 or float32, got ", x.scalar_type());
  for (int d = 0; d < dims; ++d) {
    TORCH_CHECK_VALUE(x.size(d) <= kMaxDim, op, ": ", name, " dimension ", num(d), " must be at most ",
                      num(kMaxDim), " (2^31 - 256), got ", num(x.size(d)));
  }
}

}  // namespace

at::ScalarType check_pair(const char* op, const at::Tensor& a, const at::Tensor& b, int dims,
                          std::optional<at::ScalarType> out_dtype) {
  check_operand(op, a, "a", dims, dims == 2 ? "(M, K)" : "(B, M, K)");
  check_operand(op, b, "b", dims, dims == 2 ? "(K, N)" : "(B, K, N)");
  TORCH_CHECK_VALUE(a.device() == b.device(), op, ": a and b must be on the same device, got a on ", a.device(),
                    " and b on ", b.device());
  TORCH_CHECK_TYPE(a.scalar_type() == b.scalar_type(), op, ": a and b must have the same dtype, got a ",
                   a.scalar_type(), " and b ", b.scalar_type());
  TORCH_CHECK_VALUE(a.size(-1) == b.size(-2), op, ": a's columns (K) must equal b's rows, got a ",
                    shape_str(a.sizes()), " and b ", shape_str(b.sizes()));
  if (dims == 3) {
    TORCH_CHECK_VALUE(a.size(0) == b.size(0), op, ": a and b must have the same batch size, got a ",
                      shape_str(a.sizes()), " and b ", shape_str(b.sizes()));
  }
  const at::ScalarType in = a.scalar_type();
  if (!out_dtype.has_value()) return in;
  if (in == at::kFloat) {
    TORCH_CHECK_TYPE(*out_dtype == at::kFloat, op, ": out_dtype must be None or Float (float32) for float32 "
                     "inputs, got ", *out_dtype);
  } else {
    TORCH_CHECK_TYPE(*out_dtype == in || *out_dtype == at::kFloat, op, ": out_dtype must be None, ", in,
                     " (the inputs' dtype) or Float (float32), got ", *out_dtype);
  }
  return *out_dtype;
}

namespace {

// Whether views a and b of one storage with the same element size and strides share an element:
// an element offset d = b's offset - a's is sum_i t_i s_i with t_i in (-size_b(i), size_a(i)).
// Exact for views whose smallest stride is 1 (the rows or columns of one buffer, e.g. a = buf[:, :K]
// and out = buf[:, K:]): the stride-1 dimension and the next one in closed form, the rest
// enumerated. nullopt where that is not so or would take long (the caller is conservative then).
std::optional<bool> same_strides_overlap(const at::Tensor& a, const at::Tensor& b) {
  if (a.element_size() != b.element_size() || a.dim() != b.dim() || a.strides() != b.strides()) return std::nullopt;
  struct Dim {
    int64_t stride, lo, hi;  // t in [lo, hi]
  };
  std::vector<Dim> dims;
  for (int64_t i = 0; i < a.dim(); ++i) {
    if (a.stride(i) == 0 || (a.size(i) == 1 && b.size(i) == 1)) continue;  // t_i contributes nothing
    dims.push_back({a.stride(i), -(b.size(i) - 1), a.size(i) - 1});
  }
  std::sort(dims.begin(), dims.end(), [](const Dim& x, const Dim& y) { return x.stride < y.stride; });
  int64_t outer = 1;  // combinations of the dimensions past the first two
  for (size_t i = 2; i < dims.size(); ++i) {
    outer *= dims[i].hi - dims[i].lo + 1;
    if (outer > (int64_t(1) << 20)) return std::nullopt;
  }
  if (!dims.empty() && dims[0].stride != 1) return std::nullopt;
  const int64_t d = b.storage_offset() - a.storage_offset();
  // Whether r = t_0 + t_1 s_1 has a solution within the first two dimensions' ranges.
  auto inner = [&](int64_t r) {
    if (dims.empty()) return r == 0;
    const Dim& d0 = dims[0];
    if (dims.size() == 1) return d0.lo <= r && r <= d0.hi;
    const Dim& d1 = dims[1];
    auto floor_div = [](int64_t x, int64_t y) { return x / y - (x % y != 0 && (x < 0) != (y < 0)); };
    // t_0 = r - t_1 s_1 in [lo_0, hi_0]  <=>  t_1 in [ceil((r - hi_0) / s_1), floor((r - lo_0) / s_1)].
    const int64_t t1_lo = std::max(d1.lo, -floor_div(-(r - d0.hi), d1.stride));
    const int64_t t1_hi = std::min(d1.hi, floor_div(r - d0.lo, d1.stride));
    return t1_lo <= t1_hi;
  };
  for (int64_t c = 0; c < outer; ++c) {
    int64_t r = d, rest = c;
    for (size_t i = 2; i < dims.size(); ++i) {
      const int64_t span = dims[i].hi - dims[i].lo + 1;
      r -= (dims[i].lo + rest % span) * dims[i].stride;
      rest /= span;
    }
    if (inner(r)) return true;
  }
  return false;
}

// Whether two tensors may share memory: torch's test for dense views, the exact one above for
// views of one buffer with the same strides, else whether the byte ranges they span intersect.
bool may_overlap(const at::Tensor& a, const at::Tensor& b) {
  const at::MemOverlapStatus s = at::get_overlap_status(a, b);
  if (s != at::MemOverlapStatus::TooHard) return s != at::MemOverlapStatus::No;
  if (a.numel() == 0 || b.numel() == 0 || !a.has_storage() || !b.has_storage()) return false;
  if (a.storage().data() != b.storage().data()) return false;
  if (const std::optional<bool> exact = same_strides_overlap(a, b)) return *exact;
  auto span = [](const at::Tensor& t) {
    int64_t first = t.storage_offset(), last = first;
    for (int64_t d = 0; d < t.dim(); ++d) last += (t.size(d) - 1) * t.stride(d);
    return std::pair<int64_t, int64_t>{first * t.element_size(), (last + 1) * t.element_size()};
  };
  const auto [a0, a1] = span(a);
  const auto [b0, b1] = span(b);
  return a0 < b1 && b0 < a1;
}

}  // namespace

void check_out(const char* op, const at::Tensor& out, at::IntArrayRef shape, at::ScalarType dtype,
               const at::Tensor& a, std::initializer_list<std::pair<const char*, const at::Tensor*>> inputs) {
  TORCH_CHECK_VALUE(out.layout() == at::kStrided, op, ": out must be a dense (strided) tensor, got layout ",
                    out.layout());
  TORCH_CHECK_VALUE(out.device() == a.device(), op, ": out must be on the inputs' device ", a.device(), ", got ",
                    out.device());
  TORCH_CHECK_TYPE(out.scalar_type() == dtype, op, ": out must have the result dtype ", dtype, ", got ",
                   out.scalar_type());
  TORCH_CHECK_VALUE(out.sizes() == shape, op, ": out must have shape ", shape_str(shape), ", got ",
                    shape_str(out.sizes()));
  TORCH_CHECK_VALUE(at::has_internal_overlap(out) != at::MemOverlap::Yes, op,
                    ": out must not have overlapping elements (an expanded tensor), got strides ",
                    shape_str(out.strides()));
  for (const auto& [name, t] : inputs) {
    if (t == nullptr || !t->defined()) continue;
    TORCH_CHECK_VALUE(!may_overlap(out, *t), op, ": out must not overlap ", name,
                      " (the kernel reads the inputs while it writes out)");
  }
}

Activation parse_activation(const char* op, std::optional<c10::string_view> name) {
  if (!name.has_value()) return Activation::kNone;
  const std::string s(name->data(), name->size());
  if (s == "relu") return Activation::kRelu;
  if (s == "gelu") return Activation::kGelu;
  if (s == "gelu_tanh") return Activation::kGeluTanh;
  if (s == "silu") return Activation::kSilu;
  TORCH_CHECK_VALUE(false, op, ": activation must be one of None, 'relu', 'gelu', 'gelu_tanh', 'silu', got '", s,
                    "'");
  return Activation::kNone;
}

at::ScalarType check_gated(const at::Tensor& x, const at::Tensor& w_gate, const at::Tensor& w_up) {
  const char* op = "gated_mm";
  check_operand(op, x, "x", 2, "(M, K)");
  check_operand(op, w_gate, "w_gate", 2, "(F, K)");
  check_operand(op, w_up, "w_up", 2, "(F, K)");
  for (const auto& [name, w] : {std::pair<const char*, const at::Tensor*>{"w_gate", &w_gate}, {"w_up", &w_up}}) {
    TORCH_CHECK_VALUE(w->device() == x.device(), op, ": x and ", name, " must be on the same device, got x on ",
                      x.device(), " and ", name, " on ", w->device());
    TORCH_CHECK_TYPE(w->scalar_type() == x.scalar_type(), op, ": x and ", name, " must have the same dtype, got x ",
                     x.scalar_type(), " and ", name, " ", w->scalar_type());
  }
  TORCH_CHECK_VALUE(w_gate.size(1) == x.size(1), op, ": w_gate's columns (K) must equal x's, got x ",
                    shape_str(x.sizes()), " and w_gate ", shape_str(w_gate.sizes()));
  TORCH_CHECK_VALUE(w_up.sizes() == w_gate.sizes(), op, ": w_up must have w_gate's shape ", shape_str(w_gate.sizes()),
                    ", got ", shape_str(w_up.sizes()));
  // The kernel computes gate and up side by side: 2 F columns.
  TORCH_CHECK_VALUE(2 * w_gate.size(0) <= kMaxDim, op, ": w_gate's rows (F) must be at most ", num(kMaxDim / 2),
                    ", got ", num(w_gate.size(0)));
  return x.scalar_type();
}

Epilogue addmm_epilogue(const at::Tensor& input, const at::Tensor& a, const at::Tensor& b, double beta,
                        double alpha, std::optional<c10::string_view> activation, at::ScalarType dtype) {
  const int64_t M = a.size(0), N = b.size(1);
  TORCH_CHECK_VALUE(input.layout() == at::kStrided, "addmm: input must be a dense (strided) tensor, got layout ",
                    input.layout());
  TORCH_CHECK_VALUE(input.device() == a.device(), "addmm: input must be on a's device ", a.device(), ", got ",
                    input.device());
  TORCH_CHECK_TYPE(input.scalar_type() == a.scalar_type() || (input.scalar_type() == at::kFloat && dtype == at::kFloat),
                   "addmm: input must have a's dtype ", a.scalar_type(),
                   dtype == at::kFloat ? " or Float (float32)" : "", ", got ", input.scalar_type());
  TORCH_CHECK_VALUE(input.dim() <= 2 && at::is_expandable_to(input.sizes(), {M, N}),
                    "addmm: input must broadcast to the result's shape (M, N) = ", shape_str({M, N}),
                    " (a bias of N elements, (1, N), (M, 1) or (M, N)), got shape ", shape_str(input.sizes()));
  Epilogue ep;
  // alpha and beta are floats in the schema: torch refuses a complex value before this runs. (As
  // Scalars, a complex value crashed the process under torch 2.11 before any check of ours could
  // raise: 2026-11-23.)
  ep.alpha = alpha;
  ep.beta = beta;
  ep.act = parse_activation("addmm", activation);
  // beta = 0: input ignored, NaN in it too (torch.addmm). Decided on the float the kernels use: a
  // beta that rounds to 0 (1e-50) ignores input too, as torch's cuBLAS call does.
  if (float(ep.beta) != 0.f) ep.x = input.expand({M, N});
  return ep;
}

}  // namespace cute_gemm
