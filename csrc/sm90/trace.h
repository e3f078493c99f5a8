// Phase trace of the SM90 kernel, compiled in only with -DCUTE_GEMM_TRACE (setup.py with
// CUTE_GEMM_TRACE=1); scripts/trace_phases.py reads it. Three recorders per block: the producer
// thread (role 0) and each consumer warpgroup's first thread (roles 1, 2). Each writes up to
// kTraceCap events of three 64-bit words into its own part of GemmParams::trace:
// (clock64, %globaltimer, tag << 32 | arg). Without the macro every call compiles to nothing.
#pragma once

#include <cstdint>

namespace cute_gemm::sm90 {

enum TraceTag : uint32_t {
  kTrStart = 0,         // a role begins (after the barrier inits)
  kTrEmptyWait = 1,     // producer: before waiting for a free slot (arg: load number)
  kTrIssued = 2,        // producer: the slot's TMA loads issued
  kTrFullWait = 3,      // consumer: before waiting for a full slot (arg: load number)
  kTrFull = 4,          // consumer: the slot is full
  kTrRetired = 5,       // consumer: warpgroup_wait<1> returned
  kTrMainDone = 6,      // consumer: warpgroup_wait<0> after a unit's main loop (arg: unit number)
  kTrEpilogueDone = 7,  // consumer: the unit's epilogue done (arg: unit number)
  kTrStoreBegin = 8,    // consumer: staging chunk arg begins (chunks 0 and 1 of a 128x256 tile: one pair, 0 ... 1)
  kTrStoreEnd = 9,      // consumer: chunk arg's TMA store issued
  kTrEnd = 10,          // a role ends
};

#if defined(CUTE_GEMM_TRACE)
inline constexpr int kTraceCap = 4096;

struct Tracer {
  unsigned long long* out = nullptr;
  int n = 0;
  __device__ Tracer(unsigned long long* buf, int role, bool on) {
    if (buf != nullptr && on) out = buf + (int64_t(blockIdx.x) * 3 + role) * kTraceCap * 3;
  }
  __device__ __forceinline__ void operator()(uint32_t tag, uint32_t arg = 0) {
    if (out == nullptr || n >= kTraceCap) return;
    unsigned long long g;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(g));
    out[3 * n] = clock64();
    out[3 * n + 1] = g;
    out[3 * n + 2] = (static_cast<unsigned long long>(tag) << 32) | arg;
    ++n;
  }
};
#else
struct Tracer {
  __device__ Tracer(unsigned long long*, int, bool) {}
  __device__ __forceinline__ void operator()(uint32_t, uint32_t = 0) {}
};
#endif

}  // namespace cute_gemm::sm90
