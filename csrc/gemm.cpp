// Host entry of cute_gemm::mm: argument checks, operand layout analysis, the one dispatch site
// from runtime (dtype, major-ness, config) to a compiled kernel, and the launch.
#include "gemm.h"

#include <ATen/ATen.h>
#include <ATen/ExpandUtils.h>
#include <ATen/MemoryOverlap.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <unistd.h>

extern char** environ;  // POSIX: the process environment (KnobSnapshot)

#include "autotune.h"
#include "counters.h"
#include "gemm_params.h"
#include "row_copy.h"
#include "sm80/configs.h"
#include "sm80/launch.h"
#include "sm90/configs.h"
#include "sm90/launch.h"

namespace cute_gemm {
namespace {

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// The kernels count M, N and K in 32-bit ints and round them up to whole tiles (of at most 256),
// so a dimension stops 256 short of 2^31.
constexpr int64_t kMaxDim = std::numeric_limits<int>::max() - 255;

// Numbers in messages are formatted with std::to_string, never through std::ostream: an
// extension built by a toolchain that links its own libstdc++ copy (seen on an H100 machine's
// /opt/gcc) crashes formatting integers with the other copy's locale facets.
std::string num(int64_t v) { return std::to_string(v); }

std::string shape_str(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + num(sizes[i]);
  return s + "]";
}

// One operand seen as a batch of (MN, K) matrices: A itself, or B transposed.
struct Operand {
  at::Tensor storage;  // keeps a padded copy alive for the launch
  const void* ptr = nullptr;
  int64_t ld = 0;
  int64_t batch_stride = 0;
  bool k_major = true;
  bool copied = false;  // a padded copy made by this call (on the stream, before the kernel)
};

// Elements per 16-byte vector: 8 of 16 bits, 4 of 32 (TF32).
int64_t vec_of(const at::Tensor& x) { return 16 / x.element_size(); }

bool vector_ready(const void* ptr, int64_t ld, int64_t extent, int64_t vec, int64_t vec_bytes, bool tma) {
  // cp.async (SM80) reads whole vectors (16 bytes, 4 in the narrow kernels), so the extent must
  // be whole vectors; TMA bounds its boxes by the extent itself, but refuses a zero stride (rows
  // of an operand expanded along M or N): such operands take the copy.
  return reinterpret_cast<uintptr_t>(ptr) % vec_bytes == 0 && ld % vec == 0 && (tma ? ld > 0 : extent % vec == 0);
}

// The kernels read 16-byte vectors (cp.async or TMA boxes) along the contiguous dimension, so an
// operand serves in place when that dimension has stride 1, its base, leading stride and batch
// stride are 16-byte aligned and, for cp.async, its extent is a whole number of vectors (no
// vector straddles the edge into unknown memory; TMA stops at the extent). Anything else (other
// strides, an odd storage offset, rows of K % 8 != 0 elements packed back to back; for TMA also a
// zero leading stride) is copied once into a buffer with a padded, aligned leading dimension: the
// documented slower path (prepare_operand). x: (L, MN, K). k_major_only: the TF32 kernels, whose
// MMAs read K-major tiles only. `narrow`: the same test for the narrow SM80 kernels' 4-byte
// cp.async vectors (16-bit elements: 4-byte base, even strides and extent).
std::optional<Operand> in_place(const at::Tensor& x, bool tma, bool k_major_only, bool narrow) {
  const int64_t batch = x.size(0), mn = x.size(1), k = x.size(2);
  const int64_t kVec = narrow ? 2 : vec_of(x), kVecBytes = narrow ? 4 : 16;
  const void* ptr = x.data_ptr();
  // The stride of a size-1 dimension never multiplies a nonzero index: any aligned value serves.
  const bool k_contig = x.stride(2) == 1 || k == 1;
  const bool mn_contig = x.stride(1) == 1 || mn == 1;
  const int64_t ld_k_major = mn == 1 ? round_up(k, kVec) : x.stride(1);
  const int64_t ld_mn_major = k == 1 ? round_up(mn, kVec) : x.stride(2);
  // A single matrix gets the packed batch stride: TMA wants a nonzero multiple of 16 bytes even
  // for a batch mode of extent 1. A batch stride of 0 (one matrix for every batch) is read in
  // place by both families (the SM90 kernel reads batch 0 through TMA, sm90/kernel.h).
  auto batch_stride = [&](int64_t ld, bool k_major) { return batch == 1 ? ld * (k_major ? mn : k) : x.stride(0); };
  auto batch_ok = [&](int64_t bs) { return bs % kVec == 0; };
  if (k_contig && vector_ready(ptr, ld_k_major, k, kVec, kVecBytes, tma) && batch_ok(batch_stride(ld_k_major, true))) {
    return Operand{x, ptr, ld_k_major, batch_stride(ld_k_major, true), true};
  }
  if (!k_major_only && mn_contig && vector_ready(ptr, ld_mn_major, mn, kVec, kVecBytes, tma) &&
      batch_ok(batch_stride(ld_mn_major, false))) {
    return Operand{x, ptr, ld_mn_major, batch_stride(ld_mn_major, false), false};
  }
  return std::nullopt;
}

// Row copies held back to be launched together (copy_rows16 with several copies): the unaligned
// path's A and B copies, one kernel instead of two. The tensors they read and write outlive the
// launch (the operands, and the padded buffers that the prepared Operands hold).
struct PendingCopies {
  std::vector<RowCopy> copies;
  void launch() {
    if (copies.empty()) return;
    C10_CUDA_CHECK(copy_rows16(copies.data(), int(copies.size()), at::cuda::getCurrentCUDAStream().stream()));
    copies.clear();
  }
};

// dst = src, both (L, R, C) with C contiguous (or of extent 1): the row copy kernel for 16-bit
// elements (row_copy.h) unless `fast` is off (CUTE_GEMM_ROW_COPY=0, benchmarks), torch's copy_
// otherwise. With `pending`, a row-kernel copy is added to it rather than launched.
void copy_rows(const at::Tensor& dst, const at::Tensor& src, bool fast, PendingCopies* pending = nullptr) {
  TORCH_INTERNAL_ASSERT(dst.dim() == 3 && dst.sizes() == src.sizes(), "copy_rows: (L, R, C) views of one shape");
  const bool rows_contiguous = (dst.stride(2) == 1 || dst.size(2) == 1) && (src.stride(2) == 1 || src.size(2) == 1);
  if (!fast || dst.element_size() != 2 || src.scalar_type() != dst.scalar_type() || !rows_contiguous) {
    dst.copy_(src);
    return;
  }
  const RowCopy copy{{dst.data_ptr(), dst.stride(1), dst.stride(0)},
                     {const_cast<void*>(src.data_ptr()), src.stride(1), src.stride(0)},
                     dst.size(0),
                     dst.size(1),
                     dst.size(2)};
  if (pending != nullptr && int(pending->copies.size()) < kMaxRowCopies) {
    pending->copies.push_back(copy);
    return;
  }
  C10_CUDA_CHECK(copy_rows16(&copy, 1, at::cuda::getCurrentCUDAStream().stream()));
}

Operand prepare_operand(const at::Tensor& x, bool tma, bool k_major_only = false, bool narrow = false,
                        bool row_copy = true, PendingCopies* pending = nullptr) {
  // (The narrow kernels read the padded copies' 16-byte rows too: a pinned narrow-only SM80 row
  // runs on operands of any strides.)
  if (std::optional<Operand> op = in_place(x, tma, k_major_only, narrow)) return *op;
  const int64_t batch = x.size(0), mn = x.size(1), k = x.size(2);
  if (batch > 1 && x.stride(0) == 0) {  // one matrix for every batch: copied once, still broadcast
    Operand op = prepare_operand(x.narrow(0, 0, 1), tma, k_major_only, narrow, row_copy, pending);
    op.batch_stride = 0;
    return op;
  }
  const int64_t kVec = vec_of(x);

  // Keep the operand's own orientation so the copy is a plain strided pass. The padding of a
  // K-major buffer is zeroed for the SM80 family: the last cp.async vector of a row straddles K,
  // and that kernel only zero-fills vectors that start past K. TMA (SM90) bounds its boxes by K
  // itself and never reads the padding: no zeroing pass (574^3: one kernel fewer of five).
  const bool k_major = k_major_only || !(x.stride(1) == 1 && x.stride(2) != 1);
  if (k_major) {
    const int64_t ld = round_up(k, kVec);
    at::Tensor buf = at::empty({batch, mn, ld}, x.options());
    if (ld > k && !tma) buf.narrow(2, k, ld - k).zero_();
    copy_rows(buf.narrow(2, 0, k), x, row_copy, pending);
    return {buf, buf.data_ptr(), ld, mn * ld, true, true};
  }
  const int64_t ld = round_up(mn, kVec);
  at::Tensor buf = at::empty({batch, k, ld}, x.options());  // rows past MN feed no stored output
  copy_rows(buf.narrow(2, 0, mn), x.transpose(1, 2), row_copy, pending);
  return {buf, buf.data_ptr(), ld, k * ld, false, true};
}

using Launcher = cudaError_t (*)(const GemmParams&, cudaStream_t);

// One table per kernel family: [dtype][a k-major][b k-major][config], built at compile time from
// the explicit instantiations in csrc/instantiations/.
// `built`: whether generate.py writes that kernel (every layout, unless the family's configs.h
// leaves the row out: sm80::has_plain, sm90::has_kernel).
struct Sm80 {
  static constexpr int kNumConfigs = sm80::kNumConfigs;
  template <bool AK, bool BK, int C>
  static constexpr bool built = sm80::has_plain(C);
  template <DType D, bool AK, bool BK, int C>
  static constexpr Launcher launcher = &sm80::run<D, AK, BK, C>;
};
struct Sm90 {
  static constexpr int kNumConfigs = sm90::kNumConfigs;
  template <bool AK, bool BK, int C>
  static constexpr bool built = sm90::has_kernel(BK, C);
  template <DType D, bool AK, bool BK, int C>
  static constexpr Launcher launcher = &sm90::run<D, AK, BK, C>;
};
// The narrow SM80 kernels (4-byte cp.async): the rows of sm80::kNarrowConfigs, null elsewhere.
template <DType D, bool AK, bool BK, int C>
constexpr Launcher narrow_launcher() {
  if constexpr (sm80::has_narrow(C)) {
    return &sm80::run<D, AK, BK, C, 4>;
  } else {
    return nullptr;
  }
}
struct Sm80Narrow {
  static constexpr int kNumConfigs = sm80::kNumConfigs;
  template <bool AK, bool BK, int C>
  static constexpr bool built = true;
  template <DType D, bool AK, bool BK, int C>
  static constexpr Launcher launcher = narrow_launcher<D, AK, BK, C>();
};
// The SM90 rows' narrow kernels (cp.async producer): the rows of sm90::kNarrowConfigs, null elsewhere
// and in a build without them (setup.py leaves them out unless CUTE_GEMM_SM90_NARROW_BUILD=1).
#if defined(CUTE_GEMM_NO_SM90_NARROW)
constexpr bool kSm90NarrowBuilt = false;
#else
constexpr bool kSm90NarrowBuilt = true;
#endif
template <DType D, bool AK, bool BK, int C>
constexpr Launcher sm90_narrow_launcher() {
  if constexpr (kSm90NarrowBuilt && sm90::has_narrow(C)) {
    return &sm90::run<D, AK, BK, C, true>;
  } else {
    return nullptr;
  }
}
struct Sm90Narrow {
  static constexpr int kNumConfigs = sm90::kNumConfigs;
  template <bool AK, bool BK, int C>
  static constexpr bool built = true;
  template <DType D, bool AK, bool BK, int C>
  static constexpr Launcher launcher = sm90_narrow_launcher<D, AK, BK, C>();
};

// A development build compiles some operand layouts only (gemm_params.h, CUTE_GEMM_LAYOUTS_MASK).
constexpr bool layout_built(bool ak, bool bk) { return CUTE_GEMM_LAYOUT_BUILT(int(ak), int(bk)) != 0; }
// A family's row has a kernel for a layout where its configs.h says so (Family::built, the rule
// csrc/instantiations/generate.py writes the files by) and the build compiles the layout.
template <class Family, DType D, bool AK, bool BK, int C>
constexpr Launcher table_entry() {
  if constexpr (layout_built(AK, BK) && Family::template built<AK, BK, C>) {
    return Family::template launcher<D, AK, BK, C>;
  } else {
    return nullptr;
  }
}

template <class Family, size_t... I>
constexpr auto make_table(std::index_sequence<I...>) {
  constexpr int C = Family::kNumConfigs;  // I enumerates (dtype, ak, bk, cfg), cfg fastest
  return std::array<Launcher, sizeof...(I)>{
      table_entry<Family, DType(I / (4 * C)), bool((I / (2 * C)) % 2), bool((I / C) % 2), int(I % C)>()...};
}

// TF32: one K-major instantiation per family (csrc/instantiations/generate.py's TF32 list).
Launcher tf32_launcher(bool sm90) {
  return sm90 ? &sm90::run<DType::kTF32, true, true, 1> : &sm80::run<DType::kTF32, true, true, sm80::kTf32Config>;
}

template <class Family>
Launcher find_launcher(DType d, bool ak, bool bk, int cfg) {
  static constexpr auto table = make_table<Family>(std::make_index_sequence<8 * Family::kNumConfigs>{});
  return table[((int(d) * 2 + int(ak)) * 2 + int(bk)) * Family::kNumConfigs + cfg];
}

// The config tables the autotune cache's rows refer to, as a short hex fingerprint (FNV-1a of
// every row's name): a cache written for other tables is another file.
const std::string& config_tables_id() {
  static const std::string id = [] {
    uint32_t h = 2166136261u;
    auto mix = [&](const char* s) {
      for (; *s != '\0'; ++s) h = (h ^ uint8_t(*s)) * 16777619u;
      h = (h ^ uint8_t('|')) * 16777619u;
    };
    for (const auto& c : sm80::kConfigs) mix(c.name);
    mix("sm90");
    for (const auto& c : sm90::kConfigs) mix(c.name);
    static const char* kHex = "0123456789abcdef";
    std::string s;
    for (int i = 28; i >= 0; i -= 4) s += kHex[(h >> i) & 15];
    return s;
  }();
  return id;
}

// The CUTE_GEMM_* knobs of one call (gemm_into holds one): a single pass over the environment
// collects them, and each knob is looked up among those few. A getenv per knob scanned the whole
// environment about fifteen times per call (host cost, issue 5's 256^3 target). Outside such a
// scope, or with more knobs set than it holds, get() is getenv.
class KnobSnapshot {
 public:
  KnobSnapshot() : prev_(current_) {
    for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
      if (std::strncmp(*e, "CUTE_GEMM_", 10) != 0) continue;
      if (count_ == kMax) {
        overflow_ = true;
        break;
      }
      entries_[count_++] = *e;
    }
    current_ = this;
  }
  ~KnobSnapshot() { current_ = prev_; }
  KnobSnapshot(const KnobSnapshot&) = delete;
  KnobSnapshot& operator=(const KnobSnapshot&) = delete;

  static const char* get(const char* name) {
    const KnobSnapshot* k = current_;
    if (k == nullptr || k->overflow_) return std::getenv(name);
    const size_t n = std::strlen(name);
    for (int i = 0; i < k->count_; ++i) {
      if (std::strncmp(k->entries_[i], name, n) == 0 && k->entries_[i][n] == '=') return k->entries_[i] + n + 1;
    }
    return nullptr;
  }

 private:
  static constexpr int kMax = 32;
  static thread_local const KnobSnapshot* current_;
  const char* entries_[kMax];  // "CUTE_GEMM_NAME=value", as the environment holds them
  int count_ = 0;
  bool overflow_ = false;
  const KnobSnapshot* prev_;
};
thread_local const KnobSnapshot* KnobSnapshot::current_ = nullptr;

// An integer knob from the environment (benchmarks and tests pin choices with these), or -1 when
// unset or empty. Decimal digits only: no sign, no spaces (" 2" and "+1" are errors, not 2 and 1).
int env_int(const char* name, int lo, int hi) {
  const char* env = KnobSnapshot::get(name);
  if (env == nullptr || *env == '\0') return -1;
  int64_t v = 0;
  bool digits = true;
  for (const char* c = env; *c != '\0' && digits; ++c) {
    digits = *c >= '0' && *c <= '9';
    v = std::min<int64_t>(v * 10 + (*c - '0'), int64_t(hi) + 1);  // (saturates: no overflow)
  }
  TORCH_CHECK_VALUE(digits && v >= lo && v <= hi, name, " must be an integer in [", num(lo), ", ", num(hi), "], got '",
                    env, "'");
  return int(v);
}

// CUTE_GEMM_AUTOTUNE=1 turns the autotune on (autotune.h), 0 or unset leaves it off.
bool autotune_on() { return env_int("CUTE_GEMM_AUTOTUNE", 0, 1) == 1; }

// The GPU's peak HBM bandwidth in GB/s (two transfers a memory clock across the bus: H100 SXM
// 3352, H200 4915), read once per device; 0 where the driver does not say.
int peak_hbm_gbs(int device) {
  static std::array<std::atomic<int>, 64> cache{};  // 0: not read yet, -1: unknown
  if (device < 0 || device >= int(cache.size())) return 0;
  int v = cache[device].load(std::memory_order_relaxed);
  if (v == 0) {
    int khz = 0, bits = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, device) != cudaSuccess ||
        cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, device) != cudaSuccess) {
      khz = bits = 0;  // (not a sticky error: nothing to clear)
    }
    const double gbs = 2.0 * khz * 1e3 * bits / 8 / 1e9;
    v = gbs >= 1 ? int(gbs) : -1;
    cache[device].store(v, std::memory_order_relaxed);
  }
  return v > 0 ? v : 0;
}

// Whether sm90's chooser takes its rules for fast HBM (sm90/configs.h, kFastHbmMBsPerSm: the
// H200's, 2026-11-28): CUTE_GEMM_FAST_HBM=1 / 0 (tests, benchmarks), unset: from the GPU's peak
// bandwidth per SM.
bool fast_hbm(int device, int num_sms) {
  const int env = env_int("CUTE_GEMM_FAST_HBM", 0, 1);
  return env >= 0 ? env == 1 : num_sms > 0 && 1000LL * peak_hbm_gbs(device) >= 1LL * sm90::kFastHbmMBsPerSm * num_sms;
}

#if defined(CUTE_GEMM_HAS_SM90A)
constexpr bool kBuiltForSm90a = true;
#else
constexpr bool kBuiltForSm90a = false;
#endif

// CUTE_GEMM_FAMILY=auto|sm80|sm90 (tests, benchmarks), "" when unset.
std::string forced_family() {
  const char* env = KnobSnapshot::get("CUTE_GEMM_FAMILY");
  return env == nullptr ? "" : env;
}

// The kernel family: the Hopper one (TMA + WGMMA, sm_90a code) on sm_90 devices of a build that
// targeted sm_90a, else the SM80 one, unless `forced` (forced_family()) names one.
bool use_sm90(const cudaDeviceProp& prop, const std::string& forced) {
  const bool possible = kBuiltForSm90a && prop.major == 9 && prop.minor == 0;
  if (forced.empty() || forced == "auto") return possible;
  if (forced == "sm80") return false;
  TORCH_CHECK_VALUE(forced == "sm90", "CUTE_GEMM_FAMILY must be auto, sm80 or sm90, got '", forced, "'");
  TORCH_CHECK(possible, "CUTE_GEMM_FAMILY=sm90 needs an sm_90 GPU and a build that targets 9.0a; this GPU is ",
              num(prop.major), ".", num(prop.minor), " and the build ",
              kBuiltForSm90a ? "has sm_90a code" : "has no sm_90a code (TORCH_CUDA_ARCH_LIST lacked 9.0a)");
  return true;
}

// The epilogue of an op, as the host sees it: X (expanded to (M, N)) is used when defined.
struct Epilogue {
  at::Tensor x;
  double alpha = 1.0, beta = 0.0;
  Activation act = Activation::kNone;
};

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

// a (…, M, K) and b (…, K, N): the rules every op shares. Returns the result dtype.
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

// out= of an op: exactly the result's shape, dtype and device, no overlap with any input.
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

// C is written in place when its rows are contiguous; the kernels' row-major C.
bool c_in_place(const at::Tensor& c3) {
  const int64_t m = c3.size(1), n = c3.size(2);
  return (c3.stride(2) == 1 || n == 1) && (c3.stride(1) >= n || m == 1) && c3.stride(1) >= 0 && c3.stride(0) >= 0;
}

// C (L, M, N) is written in place and every row starts 16-byte aligned: its base, and its row
// and batch strides where there are several rows or batches.
bool c_rows_start_aligned16(const at::Tensor& c3) {
  const int64_t elems = 16 / c3.element_size();
  return c_in_place(c3) && reinterpret_cast<uintptr_t>(c3.data_ptr()) % 16 == 0 &&
         (c3.size(1) == 1 || c3.stride(1) % elems == 0) && (c3.size(0) == 1 || c3.stride(0) % elems == 0);
}

// The one launch site: out3 (L, M, N) = epilogue(a3 (L, M, K) @ b3 (L, K, N)), all checked.
void gemm_into(const at::Tensor& a3, const at::Tensor& b3, const Epilogue& ep, const at::Tensor& out3) {
  const int64_t L = a3.size(0), M = a3.size(1), K = a3.size(2), N = b3.size(2);
  if (L == 0 || M == 0 || N == 0) return;
  const KnobSnapshot knobs;
  const c10::cuda::CUDAGuard guard(a3.device());
  // float32 inputs run the TF32 kernels where torch allows TF32 for matmuls
  // (torch.backends.cuda.matmul.allow_tf32), else torch's own fp32 matmul; K = 0: an empty sum.
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  TORCH_CHECK(prop->major >= 8, "cute_gemm needs a GPU of compute capability 8.0 or newer; ", a3.device(), " is ",
              num(prop->major), ".", num(prop->minor));
  const std::string family = forced_family();
  const bool autotune = autotune_on();  // read on every call: a bad value is an error
  bool sm90 = use_sm90(*prop, family);
  const bool fp32 = a3.scalar_type() == at::kFloat;
  // The SM80 TF32 tile takes 128 KB of shared memory: more than sm_86/sm_89 give a block.
  const bool tf32_fits = sm90 || sm80::smem_bytes(sm80::kConfigs[sm80::kTf32Config], 4) <=
                                     int64_t(prop->sharedMemPerBlockOptin);
  const bool tf32 = fp32 && at::globalContext().allowTF32CuBLAS() && tf32_fits;
  if (K == 0 || (fp32 && !tf32)) {
    out3.copy_(torch_math(a3, b3, ep));
    return;
  }

  // addmm's input X (M, N). A stride of a dimension of size 1 does not matter. The SM90 epilogue
  // reads X as rows (x_ldn == 1) of a bounded stride, and a 16-bit bias row in 4-byte pairs
  // (epilogue.h): a bias row is copied once to a fresh (aligned) buffer if it is strided or
  // misaligned; any other X that does not fit (an (M, 1) column, a column-major C) is copied to
  // rows first, and rows too long for the epilogue (N >= 2^24 with M > 1) take torch's path.
  at::Tensor x;
  int64_t x_ldm = 0, x_ldn = 1;
  if (ep.x.defined()) {
    x = ep.x;
    x_ldm = M == 1 ? 0 : x.stride(0);
    x_ldn = N == 1 ? 1 : x.stride(1);
    if (sm90 && x_ldm == 0 && (x_ldn != 1 || reinterpret_cast<uintptr_t>(x.data_ptr()) % 4 != 0)) {
      at::Tensor row = at::empty({N}, x.options());
      row.copy_(x[0]);
      x = row.expand({M, N});
      x_ldn = 1;
    } else if (sm90 && (x_ldn != 1 || x_ldm >= kMaxChunkXRowStride)) {
      x = x.contiguous();
      x_ldm = x.stride(0);
      x_ldn = 1;
      if (x_ldm >= kMaxChunkXRowStride) {
        out3.copy_(torch_math(a3, b3, ep));
        return;
      }
    }
  }

  // One weight for every batch (b's batch stride 0) and batches of A stacked row after row (and
  // C likewise): one (L*M, K) @ (K, N) problem, which also spares TMA a zero stride.
  at::Tensor a = a3, b = b3, c = out3;
  if (L > 1 && L * M <= kMaxDim && b3.stride(0) == 0 && a3.stride(0) == M * a3.stride(1) &&
      out3.stride(0) == M * out3.stride(1)) {
    a = a3.as_strided({1, L * M, K}, {0, a3.stride(1), a3.stride(2)});
    b = b3.as_strided({1, K, N}, {0, b3.stride(1), b3.stride(2)});
    c = out3.as_strided({1, L * M, N}, {0, out3.stride(1), out3.stride(2)});
  }
  // Tile knobs (tests, benchmarks), read once: a pinned row of the SM90 table, a K slice count.
  const int pinned_sm90_cfg = sm90 && !tf32 ? env_int("CUTE_GEMM_SM90_CONFIG", 0, sm90::kNumConfigs - 1) : -1;
  const int forced_splits = env_int("CUTE_GEMM_SPLITS", 1, 64);
  // The narrow kernels (sm80/configs.h): where the family picked above would copy a 16-bit operand
  // into a padded buffer because its rows are not 16-byte vectors (neither TMA nor 16-byte cp.async
  // reads it in place; a stride-0 operand that only TMA refuses is not one) and both operands can
  // be read in 4-byte vectors, the SM80 kernels with 4-byte cp.async can read them in place
  // instead: taken where sm80::narrow_pays expects them to win (CUTE_GEMM_NARROW unset), wherever
  // they can run (=1), or never (=0). Not under CUTE_GEMM_FAMILY=sm90, nor under a pinned
  // CUTE_GEMM_SM80_CONFIG row without a narrow kernel unless CUTE_GEMM_NARROW=1 asks for them (an
  // error below). (The SM90 handling of X above suits the SM80 epilogue too: it only copies X into
  // rows, or takes torch's path for rows too long for the SM90 epilogue.)
  const int narrow_env = env_int("CUTE_GEMM_NARROW", 0, 1);
  auto unaligned_rows = [&](const at::Tensor& x) {
    return !in_place(x, sm90, false, false) && !in_place(x, false, false, false);
  };
  const int sm90_narrow_env = env_int("CUTE_GEMM_SM90_NARROW", 0, 1);  // read on every call: a bad value is an error
  TORCH_CHECK_VALUE(sm90_narrow_env != 1 || !sm90 || kSm90NarrowBuilt,
                    "CUTE_GEMM_SM90_NARROW=1 needs the sm90 narrow kernels, which this build leaves out: reinstall "
                    "with CUTE_GEMM_SM90_NARROW_BUILD=1");
  // Operands one of which neither TMA nor 16-byte cp.async reads in place while both can be read
  // in 4-byte vectors: what either family's narrow kernels serve (asked only where one may run).
  const bool narrow_able = !fp32 && ((sm90 && sm90_narrow_env == 1) || (narrow_env != 0 && family != "sm90")) &&
                           (unaligned_rows(a) || unaligned_rows(b.transpose(1, 2))) && in_place(a, false, false, true) &&
                           in_place(b.transpose(1, 2), false, false, true);
  bool narrow = false;
  // The SM90 rows' narrow kernels (sm90/traits.h CpAsync: the producer warpgroup reads the tiles with
  // 4-byte cp.async, the consumers are the same WGMMA warpgroups) for such operands, in place of the
  // padded copies and of the SM80 narrow kernels: opt-in (CUTE_GEMM_SM90_NARROW=1) while only the
  // nn layout has run on a GPU (2026-11-29, docs/tuning.md).
  const bool sm90_narrow = sm90 && sm90_narrow_env == 1 && narrow_able;
  if (narrow_env != 0 && !fp32 && family != "sm90" && !sm90_narrow) {
    // The operands the default family would copy (the narrow kernels read both in place).
    const bool copy_a = !in_place(a, sm90, false, false), copy_b = !in_place(b.transpose(1, 2), sm90, false, false);
    // The rule leaves a pinned tile alone: an SM80 row without a narrow kernel, or (behind the SM90
    // family) a pinned SM90 row or K slice count, keeps the default family's kernel and the copies.
    const int pinned = env_int("CUTE_GEMM_SM80_CONFIG", 0, sm80::kNumConfigs - 1);
    const bool sm90_pinned = sm90 && (pinned_sm90_cfg >= 0 || forced_splits >= 0);
    narrow = narrow_able &&
             (narrow_env == 1 ||
              ((pinned < 0 || sm80::has_narrow(pinned)) && !sm90_pinned &&
               sm80::narrow_pays(double(a.size(1)), double(N), double(K), double(a.size(0)), copy_a, copy_b, sm90)));
  }
  // A pinned SM80 row built as a narrow kernel only (sm80::has_plain) runs that kernel.
  if (!sm90 && !fp32 && !narrow) {
    const int pinned = env_int("CUTE_GEMM_SM80_CONFIG", 0, sm80::kNumConfigs - 1);
    narrow = pinned >= 0 && !sm80::has_plain(pinned);
  }
  if (narrow) sm90 = false;
  const int64_t batch = a.size(0), rows = a.size(1);

  const bool c_f32 = out3.scalar_type() == at::kFloat;
  // The padded copies and a scratch C's copy-out through the row copy kernel (row_copy.h);
  // CUTE_GEMM_ROW_COPY=0: torch's copy_ (benchmarks compare the two).
  const bool row_copy = env_int("CUTE_GEMM_ROW_COPY", 0, 1) != 0;
  PendingCopies copies;  // A's and B's padded copies (if any): one launch
  const Operand A = prepare_operand(a, sm90 && !sm90_narrow, tf32, narrow || sm90_narrow, row_copy, &copies);
  // A pinned swapped decode row runs unswapped here, on B read K-major (copied where it is not): the
  // only layouts it is built for (sm90::has_kernel).
  const bool b_kmajor_only =
      tf32 || (sm90 && !sm90_narrow && pinned_sm90_cfg >= 0 && !sm90::has_kernel(false, pinned_sm90_cfg));
  const Operand B =
      prepare_operand(b.transpose(1, 2), sm90 && !sm90_narrow, b_kmajor_only, narrow || sm90_narrow, row_copy, &copies);
  copies.launch();
  const int64_t kVec = vec_of(a);
  // The swapped decode path (sm90 rows 6, 10 and 11; 2026-11-26 to 2026-11-29): for M <= 32 rows
  // without an X term the SM90 kernel computes C^T = B^T A^T, so that N fills its 128- or 64-row
  // tiles and the few rows of A are WGMMA's N dimension, and stores C^T's rows into C's columns
  // element by element (C is at most 32 rows). Needs A read K-major (its rows become 16- or 32-row
  // K-major boxes) and one problem. CUTE_GEMM_DECODE_SWAP=0 turns it off; a pinned
  // CUTE_GEMM_SM90_CONFIG row runs unswapped.
  const int swap_env = env_int("CUTE_GEMM_DECODE_SWAP", 0, 1);
  // CUTE_GEMM_SWAP_CONFIG=<row>: the swapped path's tile, row 6 (128x16), 10 (64x16) or 11 (64x32)
  // of sm90/configs.h (tests, benchmarks); unset: sm90::choose_swap_config.
  const int swap_cfg_env = env_int("CUTE_GEMM_SWAP_CONFIG", 0, sm90::kNumConfigs - 1);
  TORCH_CHECK_VALUE(swap_cfg_env < 0 || sm90::is_swap_config(swap_cfg_env),
                    "CUTE_GEMM_SWAP_CONFIG must be ", num(sm90::kSwapConfig), ", ", num(sm90::kSwap64Config), " or ",
                    num(sm90::kSwap32Config), " (the swapped decode rows of csrc/sm90/configs.h), got '",
                    num(swap_cfg_env), "'");
  // (A development build without the swapped layout's kernels runs such calls unswapped.)
  const bool swap = sm90 && !tf32 && !sm90_narrow && batch == 1 && rows <= sm90::kSwapMaxM &&
                    !x.defined() && A.k_major && swap_env != 0 && pinned_sm90_cfg < 0 &&
                    layout_built(B.k_major, A.k_major);
  // A 16-bit C whose rows the SM90 TMA store cannot write (N or the row stride not a multiple of
  // 8, a misaligned base; e.g. any contiguous result with N % 8 != 0). The consumers stage its
  // chunks in shared memory as for the TMA store and write the rows themselves
  // (GemmParams::c_staged, sm90/kernel.h's write_staged_rows), rather than computing C into a
  // scratch buffer with padded rows and copying it out (one extra pass over C), which stays for C
  // with an activation (below), a C not written in place, and under CUTE_GEMM_C_STAGED=0. Either
  // is cheaper than element stores from the accumulators (2026-11-23;
  // CUTE_GEMM_C_SCRATCH=0 takes those).
  // H100, bf16 mm, staged / scratch, us: 2026-11-26 2050^3 54.0 / 57.4, 1030^3 19.4 /
  // 21.1, 4096x4100x4096 248.9 / 264.7; 2026-11-27, rows of odd ldc (every other row 2
  // bytes past 4-byte alignment, written in 4-byte pairs across the staged words): 1031^3 18.8 /
  // 20.1, 4096x4095x4096 220.2 / 225.7, 4097x4095x4103 280.5 / 281.6, 2050x2051x2048 45.2 / 45.1
  // (a variant with 2-byte stores at every unit's ends: 47.3 / 43.6, and 1031^3 18.7 / 21.1).
  const bool rows_aligned = c_rows_start_aligned16(c) && N % kVec == 0;
  const bool c_unaligned16 = sm90 && !swap && !c_f32 && !tf32 && !rows_aligned;
  // Not with an activation: the scratch C's aligned rows let the activation warps (128x256 tiles)
  // apply it under the next main loop, which the staged rows cannot (unmeasured against each other).
  const bool staged = c_unaligned16 && c_in_place(c) && ep.act == Activation::kNone &&
                      env_int("CUTE_GEMM_C_STAGED", 0, 1) != 0;
  const bool scratch = c_unaligned16 && !staged && env_int("CUTE_GEMM_C_SCRATCH", 0, 1) != 0;
  at::Tensor target = c_in_place(c) && !scratch ? c
                      : scratch ? at::empty({batch, rows, round_up(N, kVec)}, c.options()).narrow(2, 0, N)
                                : at::empty(c.sizes(), c.options());

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
  // rows, 2026-11-22. The SM80 family's vector stores bound the last unit per
  // element.
  p.c_vector_ok = !c_f32 && reinterpret_cast<uintptr_t>(p.c) % 16 == 0 && p.ldc % kVec == 0 &&
                  (!sm90 || N % kVec == 0 || scratch) && p.batch_c % kVec == 0 && p.batch_c > 0;
  p.c_f32 = c_f32;
  p.c_staged = staged;
  if (x.defined()) {
    p.x = x.data_ptr();
    p.x_ldm = x_ldm;
    p.x_ldn = x_ldn;
    p.x_f32 = x.scalar_type() == at::kFloat;
    p.beta = float(ep.beta);
  }
  p.alpha = float(ep.alpha);
  p.act = ep.act;
  if (swap) {
    // The kernel's A is B^T (N x K), its B is A (M x K), its C(i, j) is C(j, i).
    std::swap(p.a, p.b);
    std::swap(p.m, p.n);
    std::swap(p.lda, p.ldb);
    std::swap(p.batch_a, p.batch_b);
    p.ldc_col = p.ldc;
    p.ldc = N == 1 ? 1 : target.stride(2);
    p.c_vector_ok = false;
  }
  // The kernel's operand major-nesses (the swapped path exchanges A and B).
  const bool a_kmajor = swap ? B.k_major : A.k_major, b_kmajor = swap ? A.k_major : B.k_major;
  p.grid_limit = prop->multiProcessorCount;
  p.act_offload = env_int("CUTE_GEMM_ACT_OFFLOAD", 0, 1) != 0;
  p.late_c = env_int("CUTE_GEMM_LATE_C", 0, 1) != 0;
  p.lean_epilogue = env_int("CUTE_GEMM_LEAN_EPILOGUE", 0, 1) != 0;
  // PDL where the kernel follows the previous call's work, or this call's padded operand copies
  // (the row copy kernel lets it set up while the copies finish; its wait still waits for them):
  // not after a copy of X (a bias row, a C input), nor before a scratch C's copy-out (2026-11-25:
  // 574^3, copies on both sides, ran 3 % slower with it).
  p.pdl = env_int("CUTE_GEMM_PDL", 0, 1) != 0 && (!x.defined() || x.is_same(ep.x)) && target.is_same(c);
  // CUTE_GEMM_GROUP_M=<tile rows per group>; CUTE_GEMM_SM80_CONFIG / CUTE_GEMM_SM90_CONFIG=<row of
  // that family's configs.h> pin the tile (benchmarks, tests).
  const int group = env_int("CUTE_GEMM_GROUP_M", 1, 64);
  p.group_m = group > 0 ? group : 8;
#if defined(CUTE_GEMM_TRACE)
  // A trace build (scripts/trace_phases.py): the device address of the buffer the SM90 kernel
  // records its phases into (sm90/trace.h), or unset.
  if (const char* buf = KnobSnapshot::get("CUTE_GEMM_TRACE_BUF"); buf != nullptr && *buf != '\0') {
    p.trace = reinterpret_cast<unsigned long long*>(std::strtoull(buf, nullptr, 10));
  }
#endif

  const DType dtype = a.scalar_type() == at::kHalf ? DType::kF16 : DType::kBF16;
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream().stream();
  const int num_sms = prop->multiProcessorCount;
  const bool hbm_fast = fast_hbm(a3.device().index(), num_sms) && sm90;  // the knob checked on every call
  // The stream-K tail (sm90::choose_stream_k): unset, where its rule expects a gain; 1: wherever it
  // can run (tests, benchmarks); 0: never.
  const int stream_k_env = env_int("CUTE_GEMM_STREAM_K", 0, 1);

  // Row 8's three-consumer kernel runs whole tiles only: it was measured and tested so (2026-11-26),
  // its K slices and stream-K tail never ran on a GPU. A forced K slice count or stream-K
  // tail leaves it whole; runnable() refuses it split (the autotune cache neither times nor takes it).
  auto whole_tiles_only = [&](int cfg) { return sm90 && !tf32 && sm90::kConfigs[cfg].consumers > 2; };
  // Whether row `cfg` of the family's table with `splits` K slices can run this problem (TF32:
  // its fixed row). The kernels' 32-bit unit ids must stay below 2^31 - grid (run() refuses more).
  auto sm90_units = [&](int cfg, int splits) { return sm90::block_tiles(p.m, p.n, sm90::kConfigs[cfg]) * batch * splits; };
  auto k_tiles = [&](int cfg) { return (K + sm90::kConfigs[cfg].bk - 1) / sm90::kConfigs[cfg].bk; };  // most slices
  auto runnable = [&](int cfg, int splits) {
    if (!sm90) return splits == 1 && sm80::smem_bytes(sm80::kConfigs[cfg]) <= int64_t(prop->sharedMemPerBlockOptin);
    return splits == 1 || (!whole_tiles_only(cfg) && splits <= k_tiles(cfg) &&
                           sm90_units(cfg, splits) <= std::numeric_limits<int>::max() - p.grid_limit);
  };
  // Launch row `cfg` (of the SM90 or SM80 table) with `splits` K slices (SM90 only). Split-K:
  // fp32 partials of every slice of every tile and one arrival counter per tile, zeroed here, all
  // from torch's caching allocator on this stream. The SM90 family makes one launch (per_launch ==
  // batch below), so the counters serve one launch only.
  auto launch_with = [&](int cfg, int splits) -> cudaError_t {
    Launcher launch = nullptr;
    int bm = 0, bn = 0;
    if (tf32) {
      launch = tf32_launcher(sm90);
      bm = sm80::kConfigs[sm80::kTf32Config].bm;  // the grid slicing below is SM80's
      bn = sm80::kConfigs[sm80::kTf32Config].bn;
    } else if (sm90) {
      launch = sm90_narrow ? find_launcher<Sm90Narrow>(dtype, a_kmajor, b_kmajor, cfg)
                           : find_launcher<Sm90>(dtype, a_kmajor, b_kmajor, cfg);
      TORCH_INTERNAL_ASSERT(launch != nullptr || !layout_built(a_kmajor, b_kmajor), "no sm90 ",
                            sm90_narrow ? "narrow " : "", "kernel for row ", num(cfg));
    } else {
      launch = narrow ? find_launcher<Sm80Narrow>(dtype, A.k_major, B.k_major, cfg)
                      : find_launcher<Sm80>(dtype, A.k_major, B.k_major, cfg);
      TORCH_INTERNAL_ASSERT(launch != nullptr || !layout_built(A.k_major, B.k_major), "no sm80 kernel for row ",
                            num(cfg), narrow ? " (narrow)" : "");
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
      } else if (stream_k_env != 0 && !tf32 && !whole_tiles_only(cfg) &&
                 sm90_tiles * batch <= std::numeric_limits<int>::max() - p.grid_limit &&
                 num_sms < (1 << 16)) {
        // Stream-K tail over the clusters the GPU holds (one launch: the tiles fit in 32 bits, the
        // workers in 16 (mul_div_small); not TF32, whose kernel has its own K tile). sm90::run
        // drops it if fewer clusters are resident.
        const int workers = num_sms / tc.cluster_m;
        const sm90::StreamK sk =
            sm90::choose_stream_k(sm90_tiles / tc.cluster_m * batch, int(k_tiles(cfg)), workers, tc, stream_k_env == 1);
        if (sk.tiles > 0) {
          shared_tiles = int64_t(sk.tiles) * tc.cluster_m;  // block tiles
          parts = sk.slots;
          r.sk_tiles = sk.tiles;
          r.sk_workers = workers;
          r.sk_slots = sk.slots;
        }
      }
      if (shared_tiles > 0) {
        const int64_t partials = shared_tiles * parts * tc.bm * tc.bn;
        workspace = at::empty({partials + shared_tiles}, a.options().dtype(at::kFloat));
        r.workspace = workspace.data_ptr<float>();
        r.flags = reinterpret_cast<int*>(r.workspace + partials);
        if (cudaError_t e = zero_counters(r.flags, shared_tiles, p.pdl, stream); e != cudaSuccess) return e;
      }
    }
    TORCH_CHECK(launch != nullptr, "cute_gemm: this development build (CUTE_GEMM_LAYOUTS) has no kernel for operands ",
                (sm90 && !tf32 ? a_kmajor : A.k_major) ? "K" : "M", "-major / ",
                (sm90 && !tf32 ? b_kmajor : B.k_major) ? "K" : "N", "-major");
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
      q.a = static_cast<const char*>(p.a) + l0 * p.batch_a * a.element_size();
      q.b = static_cast<const char*>(p.b) + l0 * p.batch_b * a.element_size();
      q.c = static_cast<char*>(p.c) + l0 * p.batch_c * target.element_size();
      if (const cudaError_t err = launch(q, stream); err != cudaSuccess) return err;
    }
    return cudaSuccess;
  };

  // The choice: the family's host rules (configs.h), unless a knob pins it (tests, benchmarks:
  // CUTE_GEMM_SM90_CONFIG / CUTE_GEMM_SM80_CONFIG=<row>, CUTE_GEMM_SPLITS=<n>) or the autotune
  // cache (CUTE_GEMM_AUTOTUNE=1) has timed this problem.
  const int forced_cfg = tf32   ? -1
                         : sm90 ? pinned_sm90_cfg
                                : env_int("CUTE_GEMM_SM80_CONFIG", 0, sm80::kNumConfigs - 1);
  int cfg = 0;
  if (tf32) {
    cfg = sm90 ? 1 : sm80::kTf32Config;  // tf32_launcher's rows
  } else if (narrow) {
    cfg = forced_cfg >= 0 ? forced_cfg : sm80::choose_narrow_config(p.m, p.n, batch, num_sms);
    TORCH_CHECK_VALUE(sm80::has_narrow(cfg), "cute_gemm: CUTE_GEMM_SM80_CONFIG=", num(cfg),
                      " has no narrow kernel, and CUTE_GEMM_NARROW=1 takes one for these unaligned operands; "
                      "rows with one are listed in csrc/sm80/configs.h (kNarrowConfigs)");
  } else if (forced_cfg >= 0) {
    cfg = forced_cfg;
    TORCH_CHECK_VALUE(!sm90_narrow || sm90::has_narrow(cfg), "cute_gemm: CUTE_GEMM_SM90_CONFIG=", num(cfg),
                      " has no narrow kernel (sm90::kNarrowConfigs)");
  } else if (sm90_narrow) {
    cfg = sm90::choose_narrow_config(p.m, p.n, p.k, batch, num_sms, hbm_fast);
  } else if (swap) {
    cfg = swap_cfg_env >= 0 ? swap_cfg_env : sm90::choose_swap_config(p.m, num_sms, hbm_fast, p.n);
  } else {
    cfg = sm90 ? sm90::choose_config(p.m, p.n, p.k, batch, num_sms, hbm_fast)
               : sm80::choose_config(p.m, p.n, num_sms, int(prop->sharedMemPerBlockOptin));
  }
  int splits = 1;
  if (sm90) {
    splits = whole_tiles_only(cfg) ? 1
             : forced_splits > 0    ? int(std::min<int64_t>(forced_splits, k_tiles(cfg)))
                                    : sm90::choose_splits(p.m, p.n, p.k, batch, cfg, num_sms, hbm_fast);
    TORCH_CHECK_VALUE(runnable(cfg, splits), "cute_gemm: CUTE_GEMM_SPLITS=", num(splits),
                      " makes more than 2^31 units of work for ", num(batch), " batches of ",
                      num(sm90::block_tiles(p.m, p.n, sm90::kConfigs[cfg])), " tiles; use fewer splits");
  }
  if (!tf32 && !narrow && !sm90_narrow && !swap && forced_cfg < 0 && forced_splits < 0 && autotune) {
    // Timed on first sight of the problem (its family, dtype, layouts, shape, output and epilogue
    // kind), every runnable row with 1, 2 or 4 slices, and the fastest kept (autotune.h); a
    // cached choice this build or problem cannot run is ignored and tuned again. Not
    // while the stream captures a CUDA graph: the chooser's pick then, until a plain call tunes.
    const std::string path = autotune::cache_path(prop->name, config_tables_id());
    const std::string key = std::string(sm90 ? "sm90" : "sm80") + " " + (dtype == DType::kF16 ? "f16" : "bf16") + " " +
                            (A.k_major ? "k" : "m") + (B.k_major ? "k" : "n") + " " + num(p.m) + "x" + num(p.n) + "x" +
                            num(p.k) + " l" + num(batch) + " c" + (c_f32 ? "f32" : "16") + (p.c_vector_ok ? "v" : p.c_staged ? "s" : "e") +
                            " x" + (x.defined() ? (p.x_ldm == 0 ? "bias" : "c") : "none") + " act" +
                            num(int(p.act)) + (stream_k_env == 1 ? " sk" : stream_k_env == 0 ? " nosk" : " skrule");
    const std::optional<autotune::Choice> hit = autotune::find(path, key);
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    C10_CUDA_CHECK(cudaStreamIsCapturing(stream, &capture));
    // Rows and slice counts the timing below may pick (s in {1, 2, 4}; slices only where the tiles
    // leave SMs idle, the chooser's own limit: the workspace then stays below one kBM x kBN fp32
    // tile per SM): a cached entry outside them (another build's, a hand-edited or foreign file's)
    // is not trusted.
    // Rows without a kernel for this layout (sm80::has_plain, sm90::has_kernel; a development
    // build's missing layouts) are not candidates either.
    auto has_kernel = [&](int c) {
      return sm90 ? find_launcher<Sm90>(dtype, a_kmajor, b_kmajor, c) != nullptr
                  : find_launcher<Sm80>(dtype, A.k_major, B.k_major, c) != nullptr;
    };
    auto tunable = [&](int c, int s) {
      return c >= 0 && c < (sm90 ? sm90::kNumConfigs : sm80::kNumConfigs) && (s == 1 || s == 2 || s == 4) &&
             has_kernel(c) && runnable(c, s) && (s == 1 || (sm90 && sm90_units(c, s) <= num_sms));
    };
    if (hit && tunable(hit->cfg, hit->splits)) {
      cfg = hit->cfg;
      splits = hit->splits;
    } else if (capture == cudaStreamCaptureStatusNone) {
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
      for (int c = 0; c < (sm90 ? sm90::kNumConfigs : sm80::kNumConfigs); ++c) {
        for (int s : {1, 2, 4}) {
          if (!tunable(c, s)) continue;
          try {
            if (launch_with(c, s) != cudaSuccess) {  // warm-up; a row this GPU cannot launch is skipped
              (void)cudaGetLastError();
              continue;
            }
            // One timed call sizes the measurement: about half a millisecond of calls, 3 to 50.
            auto time_us = [&](int reps) {
              C10_CUDA_CHECK(cudaEventRecord(start.e, stream));
              for (int i = 0; i < reps; ++i) C10_CUDA_CHECK(launch_with(c, s));
              C10_CUDA_CHECK(cudaEventRecord(end.e, stream));
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
  }
  const cudaError_t err = launch_with(cfg, splits);
  TORCH_CHECK(err == cudaSuccess, "cute_gemm: kernel launch failed on ", a.device(), ": ", cudaGetErrorString(err),
              err == cudaErrorNoKernelImageForDevice
                  ? " (cute_gemm was not built for this GPU's arch: reinstall with TORCH_CUDA_ARCH_LIST set to it)"
                  : "");
  if (!target.is_same(c)) copy_rows(c, target, row_copy && c_in_place(c));
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

namespace {

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

}  // namespace

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
