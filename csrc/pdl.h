// Programmatic dependent launch (PDL), shared by the kernels launched with it (the SM90 GEMM, the
// RMSNorm and the split-K counter zeroing): the launch attribute, and what such a kernel does
// first; and the trigger alone, for kernels launched without it that such a kernel follows (the
// row copy kernel before a GEMM, the decode GEMV before an RMSNorm).
#pragma once

#include <cuda_runtime.h>

namespace cute_gemm {

// The launch attribute that lets a kernel start while the previous kernel in the stream runs.
inline cudaLaunchAttribute pdl_attribute() {
  cudaLaunchAttribute attr = {};
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  return attr;
}

// Called by every thread after the kernel's prologue and before its first global memory access.
// First, the next kernel in the stream may be scheduled, onto SMs this grid leaves idle or frees,
// and run its own prologue; every block triggers, so it starts only once all of this grid is
// resident (it cannot take an SM this grid still needs). Then the thread waits until the previous
// grid has completed and its writes are visible: it may have written this kernel's inputs, or
// still be reading what this kernel overwrites. Without PDL both are no-ops.
__device__ __forceinline__ void pdl_launch_dependents_then_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// For a kernel launched without PDL whose successor may be (the row copy kernel before the GEMM
// that reads its copies, the decode GEMV before an RMSNorm): let that successor's blocks be
// scheduled and run their prologue as soon as all of this grid is resident; the successor's own
// wait above still waits for this grid to complete. Without a PDL successor a no-op.
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace cute_gemm
