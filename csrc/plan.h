// The one decision site of a call: a Problem (what the call asks, as plain data: shapes, strides,
// alignment, dtypes, epilogue, the GPU and the build) goes through plan_for, with the development
// overrides applied last, to a Plan (which family, kernel row, K slices, stream-K tail, operand
// copies and C target run it, and the rule that chose each). gemm.cpp carries a Plan out;
// cute_gemm.explain() prints one without running anything. No torch, no CUDA: the CPU tests build
// this file with the host compiler (tests/test_plan.py).
#pragma once

#include <cstdint>
#include <string>
#include <utility>

#include "gemm_params.h"

namespace cute_gemm {

inline int64_t round_up(int64_t x, int64_t to) { return (x + to - 1) / to * to; }

// A (L, R, C) view of an operand: sizes, strides in elements, its base address.
struct MatrixView {
  int64_t size[3] = {1, 0, 0};
  int64_t stride[3] = {0, 0, 1};
  uintptr_t addr = 0;
  int element_size = 2;
  // The (L, C, R) view of the same elements.
  MatrixView transposed() const {
    MatrixView t = *this;
    std::swap(t.size[1], t.size[2]);
    std::swap(t.stride[1], t.stride[2]);
    return t;
  }
};

// The development overrides (CUTE_GEMM_* knobs, docs/development.md), parsed once per call by
// knobs.cpp (read_overrides). -1: unset.
struct Overrides {
  enum class Family { kAuto, kSm80, kSm90 } family = Family::kAuto;
  bool autotune = false;
  int sm90_config = -1, sm80_config = -1, splits = -1;
  int narrow = -1, sm90_narrow = -1;
  int swap_config = -1;
  int fast_hbm = -1, stream_k = -1, pdl = -1;
  int group_m = -1, act_offload = -1;
  int l2_hint = -1;
  int row_sums = -1;  // 0: mm_row_sums's sums by torch after the GEMM (compared with the kernel's)
  int gemv = -1;      // the decode GEMV: 0 never, 1 wherever it can run (gemv_plan.cpp, choose_gemv)
};

// What plan_for needs to know of the GPU and of this build.
struct Device {
  int major = 9, minor = 0;
  int num_sms = 132;
  int64_t smem_per_block_optin = 232448;
  int peak_hbm_gbs = 0;  // 0: unknown
  bool allow_tf32 = false;  // torch.backends.cuda.matmul.allow_tf32
  bool sm90a_built = true;   // the build has sm_90a code (TORCH_CUDA_ARCH_LIST had 9.0a)
  int layouts_mask = 15;  // CUTE_GEMM_LAYOUTS_MASK: bit a_kmajor * 2 + b_kmajor
  bool layout_built(bool ak, bool bk) const { return ((layouts_mask >> (int(ak) * 2 + int(bk))) & 1) != 0; }
};

struct Problem {
  MatrixView a;  // (L, M, K)
  MatrixView b;  // (L, K, N)
  MatrixView c;  // (L, M, N): the output, as given (out=) or as the op allocates it
  bool fp32 = false;   // a and b are float32
  bool c_f32 = false;  // C is float32
  bool has_x = false;  // addmm's input, expanded to (M, N), with beta != 0
  MatrixView x;        // (1, M, N)
  bool x_f32 = false;
  double alpha = 1.0, beta = 0.0;
  Activation act = Activation::kNone;
  // gated_mm (gemm.cpp): C = act(A B) * (A B2), B2 (L, K, N) beside B; the sm90 gated kernels
  // (sm90/traits.h, Gated) where they can run it as it is (gated_plan.cpp), else torch's path.
  bool gated = false;
  MatrixView b2;
  // mm_row_sums (gemm.cpp): also the sums over K of A's rows (nn.Linear's bias gradient beside its
  // weight's); in the kernel where the plan can (Plan::row_sums), else torch's sum after it.
  bool row_sums = false;
  Device device;
};

// The most rows of A the decode GEMV takes (gemv.h): its kernels keep a row's sums in registers,
// instantiated for 1, 2, 4 and 8 rows (a call of 3 rows runs the 4-row kernel).
inline constexpr int kGemvMostRows = 8;

struct Plan {
  // Where the call goes. kNothing: an empty result; kTorch: torch's own ops in fp32 (`rule` says why).
  enum class Route { kNothing, kTorch, kKernel } route = Route::kKernel;
  bool sm90 = false;         // the WGMMA family (else SM80's)
  bool tf32 = false;         // float32 operands on the TF32 kernels
  bool narrow = false;       // the SM80 narrow kernels (4-byte cp.async)
  bool sm90_narrow = false;  // the SM90 rows' narrow kernels
  bool swap = false;         // the swapped decode path: C^T = B^T A^T
  bool gemv = false;         // the decode GEMV on the CUDA cores (gemv.h): no tile row, no K slices
  // X: read in place, copied to one aligned row (a strided or misaligned bias), or to rows.
  enum class XCopy { kNone, kRow, kRows } x_copy = XCopy::kNone;
  bool fold = false;  // batches of A stacked into one (L*M, K) problem against a broadcast B
  int64_t batch = 1, rows = 0;  // the problem the kernel sees (after the fold)
  // Operands: copied into a padded buffer (else read in place), and K-major (else M- / N-major).
  bool copy_a = false, a_kmajor = true, copy_b = false, b_kmajor = true;
  // Where C is written: in place, staged rows (the consumers write them), a scratch buffer with
  // padded rows copied out after, or a temporary (C's rows are not contiguous) copied out after.
  enum class Target { kInPlace, kStaged, kScratch, kTemp } target = Target::kInPlace;
  bool pdl = true;       // programmatic dependent launch
  int l2_hint = 0;       // sm90: the L2 policies' mode of the TMA loads (sm90::l2_policies)
  bool hbm_fast = false;
  int stream_k_knob = -1;
  int cfg = 0;     // the row of the family's configs.h table
  int splits = 1;  // K slices
  bool autotune = false;  // the autotune cache may replace cfg / splits (gemm.cpp)
  int sk_tiles = 0;  // the stream-K tail's cluster tiles (0: none; the launch takes choose_tail's)
  // C's rows are 16-byte vectors the kernel stores whole (TMA on sm90, vector stores on sm80):
  // GemmParams::c_vector_ok.
  bool c_vector_ok = false;
  // sm90: the kernel instantiation of the call's epilogue (sm90::choose_epilogue_kernel). sm90/run.h
  // launches the same unless fewer 2x1 clusters fit at once than half the SMs (then its units per
  // cluster, and whether it drops the stream-K tail, can differ) or the autotune cache replaces
  // the row or slices.
  int epilogue = 0;  // sm90::EpilogueKernel
  // Problem::row_sums summed by the kernel (sm90/row_sums.h), else by torch after it.
  bool row_sums = false;
  const char* rule = "";  // the rule that chose cfg (or why the call takes torch's path)
  // A knob combination that cannot run: gemm.cpp raises it (a ValueError unless runtime_error).
  std::string error;
  bool runtime_error = false;
};

Plan plan_for(const Problem& p, const Overrides& o);

// Whether row `cfg` with `splits` K slices can run the plan's problem (the kernels' 32-bit unit
// ids; row 8 whole tiles only; SM80: the shared memory a block may opt into).
bool runnable(const Plan& plan, const Problem& p, int cfg, int splits);
// The stream-K tail of row `cfg` with `splits` slices (none where split, forced off, or not paying):
// the last `tiles` cluster tiles over `workers` clusters, `slots` partials per tile.
struct Tail {
  int tiles = 0, slots = 0, workers = 0;
};
Tail choose_tail(const Plan& plan, const Problem& p, int cfg, int splits);

// Operands read in place by the kernels (in_place.cpp): whether the view serves, and as
// which major-ness. tma: the SM90 kernels; k_major_only: the TF32 kernels; narrow: 4-byte vectors.
struct InPlace {
  bool ok = false;
  bool k_major = true;
  int64_t ld = 0, batch_stride = 0;
};
InPlace in_place(const MatrixView& x, bool tma, bool k_major_only, bool narrow);
// The major-ness of the padded copy of an operand that is not read in place.
bool copy_is_k_major(const MatrixView& x, bool k_major_only);
bool c_in_place(const MatrixView& c);
bool c_rows_start_aligned16(const MatrixView& c);

// The plan as "key=value" lines (cute_gemm.explain's text; the Python side makes the dict).
std::string describe(const Plan& plan, const Problem& p);

}  // namespace cute_gemm
