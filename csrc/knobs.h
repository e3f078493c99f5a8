// The CUTE_GEMM_* development knobs (docs/development.md), read once per call into the Overrides
// that plan_for applies last (plan.h), and the device facts it needs.
#pragma once

#include <cuda_runtime_api.h>

#include "plan.h"

namespace cute_gemm {

// The CUTE_GEMM_* knobs of one call (gemm_into holds one): a single pass over the environment
// collects them, and each knob is looked up among those few. A getenv per knob scanned the whole
// environment about fifteen times per call (host cost, issue 5's 256^3 target). Outside such a
// scope, or with more knobs set than it holds, get() is getenv.
class KnobSnapshot {
 public:
  KnobSnapshot();
  ~KnobSnapshot() { current_ = prev_; }
  KnobSnapshot(const KnobSnapshot&) = delete;
  KnobSnapshot& operator=(const KnobSnapshot&) = delete;
  static const char* get(const char* name);

 private:
  static constexpr int kMax = 32;
  static thread_local const KnobSnapshot* current_;
  const char* entries_[kMax];  // "CUTE_GEMM_NAME=value", as the environment holds them
  int count_ = 0;
  bool overflow_ = false;
  const KnobSnapshot* prev_;
};

// An integer knob from the environment (benchmarks and tests pin choices with these), or -1 when
// unset or empty; a ValueError naming the knob outside [lo, hi].
int env_int(const char* name, int lo, int hi);

// The development overrides of a call, every knob parsed and checked: a bad value is an error on
// every call that reaches a kernel's choice (a KnobSnapshot in scope).
Overrides read_overrides();

// The GPU and this build, as plan_for sees them. torch's TF32 switch is read for float32 inputs only
// (see tf32_allowed in knobs.cpp).
Device device_of(const cudaDeviceProp& prop, int index, bool fp32);

}  // namespace cute_gemm
