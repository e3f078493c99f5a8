// Host entry of cute_gemm::mm: argument checks, operand layout analysis, the one dispatch site
// from runtime (dtype, major-ness, config) to a compiled kernel, and the launch.
#include "gemm.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <array>
#include <cstdlib>
#include <limits>
#include <string>
#include <utility>

#include "gemm_params.h"
#include "sm80/configs.h"
#include "sm80/launch.h"
#include "sm90/configs.h"
#include "sm90/launch.h"

namespace cute_gemm {
namespace {

constexpr int64_t kVec = 8;  // 16-bit elements per 16-byte vector

int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// Numbers in messages are formatted with std::to_string, never through std::ostream: an
// extension built by a toolchain that links its own libstdc++ copy (seen on the lent H100's
// /opt/gcc) crashes formatting integers with the other copy's locale facets.
std::string num(int64_t v) { return std::to_string(v); }

std::string shape_str(at::IntArrayRef sizes) {
  std::string s = "[";
  for (size_t i = 0; i < sizes.size(); ++i) s += (i ? ", " : "") + num(sizes[i]);
  return s + "]";
}

// One operand seen as an (MN, K) matrix: A itself, or B transposed.
struct Operand {
  at::Tensor storage;  // keeps a padded copy alive for the launch
  const void* ptr = nullptr;
  int64_t ld = 0;
  bool k_major = true;
};

bool vector_ready(const void* ptr, int64_t ld, int64_t extent, bool tma) {
  // TMA also refuses a zero stride (an expanded operand): such operands take the copy.
  return reinterpret_cast<uintptr_t>(ptr) % 16 == 0 && ld % kVec == 0 && extent % kVec == 0 && (!tma || ld > 0);
}

// The kernels read 16-byte vectors (cp.async or TMA boxes) along the contiguous dimension, so an
// operand serves in place when that dimension has stride 1, its base and leading stride are
// 16-byte aligned and its extent is a whole number of vectors (no vector straddles the edge
// into unknown memory). Anything else (other strides, an odd storage offset, K % 8 != 0 rows)
// is copied once into a buffer with a padded, aligned leading dimension: the documented slower
// path.
Operand prepare_operand(const at::Tensor& x /* (MN, K) */, bool tma) {
  const int64_t mn = x.size(0), k = x.size(1);
  const void* ptr = x.data_ptr();
  // The stride of a size-1 dimension never multiplies a nonzero index: any aligned value serves.
  const bool k_contig = x.stride(1) == 1 || k == 1;
  const bool mn_contig = x.stride(0) == 1 || mn == 1;
  const int64_t ld_k_major = mn == 1 ? round_up(k, kVec) : x.stride(0);
  const int64_t ld_mn_major = k == 1 ? round_up(mn, kVec) : x.stride(1);
  if (k_contig && vector_ready(ptr, ld_k_major, k, tma)) return {x, ptr, ld_k_major, true};
  if (mn_contig && vector_ready(ptr, ld_mn_major, mn, tma)) return {x, ptr, ld_mn_major, false};

  // Keep the operand's own orientation so the copy is a plain strided pass. The padding of a
  // K-major buffer is zeroed: the last vector of a row straddles K, and the kernels only
  // zero-fill vectors that start past K.
  const bool k_major = !(x.stride(0) == 1 && x.stride(1) != 1);
  if (k_major) {
    const int64_t ld = round_up(k, kVec);
    at::Tensor buf = at::empty({mn, ld}, x.options());
    if (ld > k) buf.narrow(1, k, ld - k).zero_();
    buf.narrow(1, 0, k).copy_(x);
    return {buf, buf.data_ptr(), ld, true};
  }
  const int64_t ld = round_up(mn, kVec);
  at::Tensor buf = at::empty({k, ld}, x.options());  // rows past MN feed no stored output
  buf.narrow(1, 0, mn).copy_(x.t());
  return {buf, buf.data_ptr(), ld, false};
}

using Launcher = cudaError_t (*)(const GemmParams&, cudaStream_t);

// One table per kernel family: [dtype][a k-major][b k-major][config], built at compile time from
// the explicit instantiations in csrc/instantiations/.
struct Sm80 {
  static constexpr int kNumConfigs = sm80::kNumConfigs;
  template <DType D, bool AK, bool BK, int C>
  static constexpr Launcher launcher = &sm80::run<D, AK, BK, C>;
};
struct Sm90 {
  static constexpr int kNumConfigs = sm90::kNumConfigs;
  template <DType D, bool AK, bool BK, int C>
  static constexpr Launcher launcher = &sm90::run<D, AK, BK, C>;
};

template <class Family, size_t... I>
constexpr auto make_table(std::index_sequence<I...>) {
  constexpr int C = Family::kNumConfigs;  // I enumerates (dtype, ak, bk, cfg), cfg fastest
  return std::array<Launcher, sizeof...(I)>{
      Family::template launcher<DType(I / (4 * C)), bool((I / (2 * C)) % 2), bool((I / C) % 2), int(I % C)>...};
}

template <class Family>
Launcher find_launcher(DType d, bool ak, bool bk, int cfg) {
  static constexpr auto table = make_table<Family>(std::make_index_sequence<8 * Family::kNumConfigs>{});
  return table[((int(d) * 2 + int(ak)) * 2 + int(bk)) * Family::kNumConfigs + cfg];
}

// An integer knob from the environment (benchmarks and tests pin choices with these), or -1.
int env_int(const char* name, int lo, int hi) {
  const char* env = std::getenv(name);
  if (env == nullptr || *env == '\0') return -1;
  char* end = nullptr;
  const long v = std::strtol(env, &end, 10);
  TORCH_CHECK_VALUE(*end == '\0' && v >= lo && v <= hi, name, " must be an integer in [", num(lo), ", ", num(hi), "], got '",
                    env, "'");
  return int(v);
}

#if defined(CUTE_GEMM_HAS_SM90A)
constexpr bool kBuiltForSm90a = true;
#else
constexpr bool kBuiltForSm90a = false;
#endif

// The kernel family: the Hopper one (TMA + WGMMA, sm_90a code) on sm_90 devices of a build that
// targeted sm_90a, else the SM80 one. CUTE_GEMM_FAMILY=sm80|sm90 forces one (tests, benchmarks).
bool use_sm90(const cudaDeviceProp& prop) {
  const bool possible = kBuiltForSm90a && prop.major == 9 && prop.minor == 0;
  const char* env = std::getenv("CUTE_GEMM_FAMILY");
  const std::string forced = env == nullptr ? "" : env;
  if (forced.empty() || forced == "auto") return possible;
  if (forced == "sm80") return false;
  TORCH_CHECK_VALUE(forced == "sm90", "CUTE_GEMM_FAMILY must be auto, sm80 or sm90, got '", forced, "'");
  TORCH_CHECK(possible, "CUTE_GEMM_FAMILY=sm90 needs an sm_90 GPU and a build that targets 9.0a; this GPU is ",
              num(prop.major), ".", num(prop.minor), " and the build ",
              kBuiltForSm90a ? "has sm_90a code" : "has no sm_90a code (TORCH_CUDA_ARCH_LIST lacked 9.0a)");
  return true;
}

void check_operand(const at::Tensor& x, const char* name, const char* shape) {
  TORCH_CHECK_VALUE(x.layout() == at::kStrided, "mm: ", name, " must be a dense (strided) tensor, got layout ",
                    x.layout());
  TORCH_CHECK_VALUE(x.is_cuda(), "mm: ", name, " must be a CUDA tensor, got device ", x.device());
  TORCH_CHECK_VALUE(x.dim() == 2, "mm: ", name, " must be 2-D ", shape, ", got shape ", shape_str(x.sizes()));
  TORCH_CHECK_TYPE(x.scalar_type() == at::kHalf || x.scalar_type() == at::kBFloat16, "mm: ", name,
                   " must be float16 or bfloat16, got ", x.scalar_type());
  for (int d = 0; d < 2; ++d) {
    TORCH_CHECK_VALUE(x.size(d) <= std::numeric_limits<int>::max(), "mm: ", name, " dimension ", num(d),
                      " must be below 2^31, got ", num(x.size(d)));
  }
}

}  // namespace

at::Tensor mm(const at::Tensor& a, const at::Tensor& b) {
  check_operand(a, "a", "(M, K)");
  check_operand(b, "b", "(K, N)");
  TORCH_CHECK_VALUE(a.device() == b.device(), "mm: a and b must be on the same device, got a on ", a.device(),
                    " and b on ", b.device());
  TORCH_CHECK_TYPE(a.scalar_type() == b.scalar_type(), "mm: a and b must have the same dtype, got a ",
                   a.scalar_type(), " and b ", b.scalar_type());
  TORCH_CHECK_VALUE(a.size(1) == b.size(0), "mm: a's columns (K) must equal b's rows, got a ", shape_str(a.sizes()),
                    " and b ", shape_str(b.sizes()));

  const c10::cuda::CUDAGuard guard(a.device());
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  at::Tensor c = at::empty({M, N}, a.options());
  if (M == 0 || N == 0) return c;
  if (K == 0) return c.zero_();  // an empty sum, as torch.mm

  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  TORCH_CHECK(prop->major >= 8, "mm: cute_gemm needs a GPU of compute capability 8.0 or newer; ", a.device(),
              " is ", num(prop->major), ".", num(prop->minor));

  const bool sm90 = use_sm90(*prop);
  const Operand A = prepare_operand(a, sm90);
  const Operand B = prepare_operand(b.t(), sm90);

  GemmParams p;
  p.a = A.ptr;
  p.b = B.ptr;
  p.c = c.data_ptr();
  p.m = int(M);
  p.n = int(N);
  p.k = int(K);
  p.lda = A.ld;
  p.ldb = B.ld;
  p.ldc = N;
  p.c_vector_ok = N % kVec == 0;  // c is freshly allocated, so its base is aligned
  p.grid_limit = prop->multiProcessorCount;
  // CUTE_GEMM_GROUP_M=<tile rows per group>; CUTE_GEMM_SM80_CONFIG / CUTE_GEMM_SM90_CONFIG=<row of
  // that family's configs.h> pin the tile (benchmarks, tests).
  const int group = env_int("CUTE_GEMM_GROUP_M", 1, 64);
  p.group_m = group > 0 ? group : 8;

  const DType dtype = a.scalar_type() == at::kHalf ? DType::kF16 : DType::kBF16;
  Launcher launch = nullptr;
  if (sm90) {
    const int forced = env_int("CUTE_GEMM_SM90_CONFIG", 0, sm90::kNumConfigs - 1);
    const int cfg = forced >= 0 ? forced : sm90::choose_config(p.m, p.n, prop->multiProcessorCount);
    launch = find_launcher<Sm90>(dtype, A.k_major, B.k_major, cfg);
  } else {
    const int forced = env_int("CUTE_GEMM_SM80_CONFIG", 0, sm80::kNumConfigs - 1);
    const int cfg = forced >= 0 ? forced
                                : sm80::choose_config(p.m, p.n, prop->multiProcessorCount,
                                                      int(prop->sharedMemPerBlockOptin));
    launch = find_launcher<Sm80>(dtype, A.k_major, B.k_major, cfg);
  }
  const cudaError_t err = launch(p, at::cuda::getCurrentCUDAStream().stream());
  TORCH_CHECK(err == cudaSuccess, "mm: kernel launch failed on ", a.device(), ": ", cudaGetErrorString(err),
              err == cudaErrorNoKernelImageForDevice
                  ? " (cute_gemm was not built for this GPU's arch: reinstall with TORCH_CUDA_ARCH_LIST set to it)"
                  : "");
  return c;
}

}  // namespace cute_gemm
