#include "dispatch.h"

#include <array>
#include <cstdint>
#include <utility>

#include "sm80/configs.h"
#include "sm80/launch.h"
#include "sm90/configs.h"
#include "sm90/launch.h"

namespace cute_gemm {
namespace {

// One table per kernel family: [dtype][a k-major][b k-major][config], built at compile time from
// the explicit instantiations in csrc/instantiations/.
// `built`: whether generate.py writes that kernel (every layout, unless sm80/configs.h leaves the
// row out: sm80::has_plain; every sm90 row is built in every layout).
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
  static constexpr bool built = true;
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
// The SM90 rows' narrow kernels (cp.async producer): the rows of sm90::kNarrowConfigs, null elsewhere.
template <DType D, bool AK, bool BK, int C>
constexpr Launcher sm90_narrow_launcher() {
  if constexpr (sm90::has_narrow(C)) {
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

template <class Family>
Launcher table_launcher(DType d, bool ak, bool bk, int cfg) {
  static constexpr auto table = make_table<Family>(std::make_index_sequence<8 * Family::kNumConfigs>{});
  return table[((int(d) * 2 + int(ak)) * 2 + int(bk)) * Family::kNumConfigs + cfg];
}

}  // namespace

Launcher find_launcher(Kernels set, DType d, bool ak, bool bk, int cfg) {
  switch (set) {
    case Kernels::kSm80: return table_launcher<Sm80>(d, ak, bk, cfg);
    case Kernels::kSm80Narrow: return table_launcher<Sm80Narrow>(d, ak, bk, cfg);
    case Kernels::kSm90: return table_launcher<Sm90>(d, ak, bk, cfg);
    case Kernels::kSm90Narrow: return table_launcher<Sm90Narrow>(d, ak, bk, cfg);
  }
  return nullptr;
}

// TF32: one K-major instantiation per family (csrc/instantiations/generate.py's TF32 list).
Launcher tf32_launcher(bool sm90) {
  return sm90 ? &sm90::run<DType::kTF32, true, true, sm90::k128x128>
              : &sm80::run<DType::kTF32, true, true, sm80::kTf32Config>;
}

// The sm90 gated kernels: generate.py's sm90g_* files, one per 16-bit dtype and kGatedConfigs row.
Launcher gated_launcher(DType d, int cfg) {
  if (!layout_built(true, true)) return nullptr;
  if (d == DType::kBF16) {
    if (cfg == sm90::k128x256) return &sm90::run<DType::kBF16, true, true, sm90::k128x256, false, true>;
    if (cfg == sm90::k128x256Pair) return &sm90::run<DType::kBF16, true, true, sm90::k128x256Pair, false, true>;
    if (cfg == sm90::k128x128) return &sm90::run<DType::kBF16, true, true, sm90::k128x128, false, true>;
    if (cfg == sm90::k64x128) return &sm90::run<DType::kBF16, true, true, sm90::k64x128, false, true>;
  } else if (d == DType::kF16) {
    if (cfg == sm90::k128x256) return &sm90::run<DType::kF16, true, true, sm90::k128x256, false, true>;
    if (cfg == sm90::k128x256Pair) return &sm90::run<DType::kF16, true, true, sm90::k128x256Pair, false, true>;
    if (cfg == sm90::k128x128) return &sm90::run<DType::kF16, true, true, sm90::k128x128, false, true>;
    if (cfg == sm90::k64x128) return &sm90::run<DType::kF16, true, true, sm90::k64x128, false, true>;
  }
  return nullptr;
}
static_assert(sm90::has_gated(sm90::k128x256) && sm90::has_gated(sm90::k128x256Pair) && sm90::has_gated(sm90::k128x128) &&
                  sm90::has_gated(sm90::k64x128) && sizeof(sm90::kGatedConfigs) == 4 * sizeof(int),
              "gated_launcher's rows are kGatedConfigs");

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

}  // namespace cute_gemm
