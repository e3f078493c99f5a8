#include "knobs.h"

#include <ATen/Context.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>

#include "checks.h"
#include "dispatch.h"
#include "sm80/configs.h"
#include "sm90/configs.h"

extern char** environ;  // POSIX: the process environment (KnobSnapshot)

namespace cute_gemm {

thread_local const KnobSnapshot* KnobSnapshot::current_ = nullptr;

KnobSnapshot::KnobSnapshot() : prev_(current_) {
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

const char* KnobSnapshot::get(const char* name) {
  const KnobSnapshot* k = current_;
  if (k == nullptr || k->overflow_) return std::getenv(name);
  const size_t n = std::strlen(name);
  for (int i = 0; i < k->count_; ++i) {
    if (std::strncmp(k->entries_[i], name, n) == 0 && k->entries_[i][n] == '=') return k->entries_[i] + n + 1;
  }
  return nullptr;
}

// Decimal digits only: no sign, no spaces (" 2" and "+1" are errors, not 2 and 1).
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

namespace {

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

#if defined(CUTE_GEMM_HAS_SM90A)
constexpr bool kBuiltForSm90a = true;
#else
constexpr bool kBuiltForSm90a = false;
#endif

// torch's TF32 switch for matmuls (torch.backends.cuda.matmul.allow_tf32). Where it was set through
// the newer fp32_precision setting in a way the old switch cannot express, torch's getter raises:
// the call then takes torch's own float32 matmul, which follows that setting.
bool tf32_allowed() {
  try {
    return at::globalContext().allowTF32CuBLAS();
  } catch (const c10::Error&) {
    return false;
  }
}

}  // namespace

Overrides read_overrides() {
  Overrides o;
  const char* env = KnobSnapshot::get("CUTE_GEMM_FAMILY");
  const std::string family = env == nullptr ? "" : env;
  TORCH_CHECK_VALUE(family.empty() || family == "auto" || family == "sm80" || family == "sm90",
                    "CUTE_GEMM_FAMILY must be auto, sm80 or sm90, got '", family, "'");
  o.family = family == "sm80"   ? Overrides::Family::kSm80
             : family == "sm90" ? Overrides::Family::kSm90
                                : Overrides::Family::kAuto;
  o.autotune = env_int("CUTE_GEMM_AUTOTUNE", 0, 1) == 1;
  o.sm90_config = env_int("CUTE_GEMM_SM90_CONFIG", 0, sm90::kNumConfigs - 1);
  o.sm80_config = env_int("CUTE_GEMM_SM80_CONFIG", 0, sm80::kNumConfigs - 1);
  o.splits = env_int("CUTE_GEMM_SPLITS", 1, 64);
  o.narrow = env_int("CUTE_GEMM_NARROW", 0, 1);
  o.sm90_narrow = env_int("CUTE_GEMM_SM90_NARROW", 0, 1);
  // CUTE_GEMM_SWAP_CONFIG=<row>: the swapped path's tile, row 6 (128x16), 10 (64x16) or 11 (64x32)
  // of sm90/configs.h (tests, benchmarks); unset: sm90::choose_swap_config.
  o.swap_config = env_int("CUTE_GEMM_SWAP_CONFIG", 0, sm90::kNumConfigs - 1);
  TORCH_CHECK_VALUE(o.swap_config < 0 || sm90::is_swap_config(o.swap_config), "CUTE_GEMM_SWAP_CONFIG must be ",
                    num(sm90::kSwap128x16), ", ", num(sm90::kSwap64x16), " or ", num(sm90::kSwap64x32),
                    " (the swapped decode rows of csrc/sm90/configs.h), got '", num(o.swap_config), "'");
  o.fast_hbm = env_int("CUTE_GEMM_FAST_HBM", 0, 1);
  o.stream_k = env_int("CUTE_GEMM_STREAM_K", 0, 1);
  o.pdl = env_int("CUTE_GEMM_PDL", 0, 1);
  o.group_m = env_int("CUTE_GEMM_GROUP_M", 1, 64);
  o.act_offload = env_int("CUTE_GEMM_ACT_OFFLOAD", 0, 1);
  o.l2_hint = env_int("CUTE_GEMM_L2_HINT", 0, 2);
  o.row_sums = env_int("CUTE_GEMM_ROW_SUMS", 0, 1);
  o.gemv = env_int("CUTE_GEMM_GEMV", 0, 1);
  return o;
}

Device device_of(const cudaDeviceProp& prop, int index, bool fp32) {
  Device d;
  d.major = prop.major;
  d.minor = prop.minor;
  d.num_sms = prop.multiProcessorCount;
  d.smem_per_block_optin = int64_t(prop.sharedMemPerBlockOptin);
  d.peak_hbm_gbs = peak_hbm_gbs(index);
  d.allow_tf32 = fp32 && tf32_allowed();
  d.sm90a_built = kBuiltForSm90a;
  d.layouts_mask = CUTE_GEMM_LAYOUTS_MASK;
  return d;
}

}  // namespace cute_gemm
