#include "launch.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>

#include <algorithm>
#include <cstdlib>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "autotune.h"
#include "counters.h"
#include "dispatch.h"
#include "knobs.h"
#include "sm80/configs.h"
#include "sm90/configs.h"

namespace cute_gemm {
namespace {

// The split-K and stream-K arrival counters of an eager call on the device's default stream: one
// buffer per device, which every split launch leaves as it found it, zeroed (the last piece of a
// tile resets the tile's counter, sm90/split_k.h), so that such a call runs no zeroing kernel of
// its own. Zeroed once, when made or grown; the calls of that stream run in order, so one buffer
// serves them all. Other streams (torch's pool, external ones, whose handles a library may
// destroy and reuse) take counters of their own per call, zeroed by a kernel before the GEMM; a
// call captured into a CUDA graph takes a slice of its graph's (graph_counters). Returns the
// buffer, which the caller holds until its launch is queued (a grow by another thread then frees
// the old one only after it, in stream order), or an undefined tensor where the call takes others.
at::Tensor default_stream_counters(int64_t n, bool pdl, cudaStream_t stream, cudaError_t& error) {
  const int device = at::cuda::current_device();
  if (stream != at::cuda::getDefaultCUDAStream(device).stream() || stream == cudaStreamPerThread) return {};
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  error = cudaStreamIsCapturing(stream, &capture);
  if (error != cudaSuccess || capture != cudaStreamCaptureStatusNone) return {};
  static std::mutex mutex;
  static auto* buffers = new std::map<int, at::Tensor>();  // never freed: no teardown after the CUDA context's
  const std::lock_guard<std::mutex> lock(mutex);
  at::Tensor& buffer = (*buffers)[device];
  if (!buffer.defined() || buffer.numel() < n) {
    const auto options = at::TensorOptions().dtype(at::kInt).device(at::kCUDA, device);
    at::Tensor grown = at::empty({std::max<int64_t>(n, 4096)}, options);
    error = zero_counters(grown.data_ptr<int>(), grown.numel(), pdl, stream);
    if (error != cudaSuccess) return {};
    buffer = grown;  // only once zeroed: a failed zeroing leaves no unzeroed buffer behind
  }
  return buffer;
}

// The counters of split calls captured into CUDA graphs. Each captured call takes a slice of its
// own for as long as its graph lives, zeroed when handed out; the kernel leaves it zeroed after
// every replay, so the graph has no zeroing kernel before the GEMM (a node fewer per split call;
// in a decode step, one per layer). The graph holds a CUDA user object whose destructor, run by
// CUDA once the graph and its executable are destroyed and their launches done, puts the slice
// back on a free list. One slice serves the graph because CUDA runs the launches of an executable
// graph one at a time; copies of the captured graph that run at once (another instantiation, a
// clone, a child-graph node twice) would share its counters, as they share its workspace. Slices
// come in sizes of 64 << c counters, cut from chunks that are never freed: they grow with the
// split calls captured into graphs alive at once, and a destroyed graph's slices serve the next
// captures. Where a slice can't be had the call zeroes counters of its own, as on a side stream.
struct GraphCounterSlice {
  int device;
  int size_class;
  int* counters;
};

struct GraphCounterPool {
  std::vector<std::vector<int*>> free;  // by size class
  int* chunk = nullptr;                 // the unused end of the newest chunk
  int64_t chunk_left = 0;
};

// The free lists' lock, which the destructors take on CUDA's thread: held for no CUDA call.
std::mutex graph_counter_mutex;
auto* graph_counter_pools = new std::map<int, GraphCounterPool>();  // never freed, as above

// The slice's destructor (on CUDA's thread: no CUDA calls), also called where a capture fails.
void return_graph_counters(void* data) {
  auto* slice = static_cast<GraphCounterSlice*>(data);
  {
    const std::lock_guard<std::mutex> lock(graph_counter_mutex);
    (*graph_counter_pools)[slice->device].free[slice->size_class].push_back(slice->counters);
  }
  delete slice;
}

// Zero n counters (a new chunk's, or a slice back from a destroyed graph's) before returning,
// while the calling thread's stream may be capturing: on a stream of the library's own, under the
// relaxed capture mode (as torch's caching allocator mallocs during a capture), so that the first
// replay finds them zeroed. With `malloc`, first cudaMalloc them into *counters.
cudaError_t zeroed_now(int** counters, int64_t n, bool malloc) {
  static auto* zeroing = new std::map<int, cudaStream_t>();  // under graph_counters' take lock
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  cudaError_t error = cudaThreadExchangeStreamCaptureMode(&mode);
  if (error != cudaSuccess) return error;
  cudaStream_t& stream = (*zeroing)[at::cuda::current_device()];
  if (stream == nullptr) error = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (error == cudaSuccess && malloc) error = cudaMalloc(counters, n * sizeof(int));
  if (error == cudaSuccess) error = cudaMemsetAsync(*counters, 0, n * sizeof(int), stream);
  if (error == cudaSuccess) error = cudaStreamSynchronize(stream);
  if (error != cudaSuccess && malloc && *counters != nullptr) {
    cudaFree(*counters);
    *counters = nullptr;
  }
  const cudaError_t restored = cudaThreadExchangeStreamCaptureMode(&mode);
  return error != cudaSuccess ? error : restored;
}

// A zeroed slice of n counters that the graph `stream` captures owns; nullptr where `stream` is
// not capturing or no slice could be had (the error cleared: the call then zeroes its own).
int* graph_counters(int64_t n, cudaStream_t stream) {
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  cudaGraph_t graph = nullptr;
  if (cudaStreamGetCaptureInfo(stream, &capture, nullptr, &graph) != cudaSuccess) {
    cudaGetLastError();  // this call's error only: the launch that follows reports its own
    return nullptr;
  }
  if (capture != cudaStreamCaptureStatusActive || graph == nullptr) return nullptr;
  static std::mutex take;  // one capture at a time takes or makes slices
  const std::lock_guard<std::mutex> take_lock(take);
  int size_class = 0;
  while ((int64_t(64) << size_class) < n) ++size_class;
  const int64_t size = int64_t(64) << size_class;
  const int device = at::cuda::current_device();
  int* counters = nullptr;
  bool reused = false;  // back from a destroyed graph (else cut from a chunk zeroed when made)
  {
    const std::lock_guard<std::mutex> lock(graph_counter_mutex);
    GraphCounterPool& pool = (*graph_counter_pools)[device];
    if (int(pool.free.size()) <= size_class) pool.free.resize(size_class + 1);
    if (!pool.free[size_class].empty()) {
      counters = pool.free[size_class].back();
      pool.free[size_class].pop_back();
      reused = true;
    } else if (pool.chunk_left >= size) {
      counters = pool.chunk;
      pool.chunk += size;
      pool.chunk_left -= size;
    }
  }
  cudaError_t error = cudaSuccess;
  if (counters == nullptr) {  // a new chunk (the rest of the last one, if any, goes unused)
    const int64_t chunk_size = std::max<int64_t>(size, int64_t(1) << 16);
    int* chunk = nullptr;
    error = zeroed_now(&chunk, chunk_size, true);
    if (error == cudaSuccess) {
      const std::lock_guard<std::mutex> lock(graph_counter_mutex);
      GraphCounterPool& pool = (*graph_counter_pools)[device];
      pool.chunk = chunk + size;
      pool.chunk_left = chunk_size - size;
      counters = chunk;
    }
  } else if (reused) {
    // A slice back from a destroyed graph is zero if every launch ran to its end; zeroed again
    // here, at capture time, so that no launch cut short leaves a later graph a nonzero counter.
    error = zeroed_now(&counters, size, false);
  }
  auto* slice = counters != nullptr ? new GraphCounterSlice{device, size_class, counters} : nullptr;
  cudaUserObject_t owner = nullptr;
  if (error == cudaSuccess) {
    error = cudaUserObjectCreate(&owner, slice, return_graph_counters, 1, cudaUserObjectNoDestructorSync);
    if (error != cudaSuccess) return_graph_counters(slice);
  } else if (slice != nullptr) {
    return_graph_counters(slice);
  }
  // The graph holds the only reference from here: it may destroy the slice, not the counters.
  if (error == cudaSuccess) error = cudaGraphRetainUserObject(graph, owner, 1, cudaGraphUserObjectMove);
  if (error != cudaSuccess && owner != nullptr) cudaUserObjectRelease(owner, 1);  // returns the slice
  if (error != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return counters;
}

}  // namespace

void set_epilogue(GemmParams& p, const PlannedX& px, const Epilogue& ep) {
  if (px.x.defined()) {
    p.x = px.x.data_ptr();
    p.x_ldm = px.ldm;
    p.x_ldn = px.ldn;
    p.x_f32 = px.x.scalar_type() == at::kFloat;
    p.beta = float(ep.beta);
  }
  p.alpha = float(ep.alpha);
  p.act = ep.act;
}

Launch prepared_launch(const Plan& plan, const Problem& problem, const Overrides& o, at::ScalarType in_dtype,
                       const Operand& A, const Operand& B, const at::Tensor& target, const PlannedX& px,
                       const Epilogue& ep) {
  const int64_t batch = plan.batch, rows = plan.rows, N = problem.b.size[2], K = problem.a.size[2];
  const int64_t kVec = 16 / problem.a.element_size;
  GemmParams p;
  p.a = A.ptr;
  p.b = B.ptr;
  p.c = target.data_ptr();
  p.m = int(rows);
  p.n = int(problem.gated ? 2 * N : N);  // the gated kernel computes gate and up side by side
  p.k = int(K);
  p.lda = A.ld;
  p.ldb = B.ld;
  p.ldc = rows == 1 ? round_up(N, kVec) : target.stride(1);
  p.batch = int(batch);
  p.batch_a = A.batch_stride;
  p.batch_b = B.batch_stride;
  p.batch_c = batch == 1 ? p.ldc * rows : target.stride(0);
  // 16-byte rows for TMA stores / vector stores: the plan's rule (plan.cpp, c_vectors), which
  // reads the same strides off the target's view; its base too must be 16-byte aligned.
  p.c_vector_ok = plan.c_vector_ok;
  TORCH_INTERNAL_ASSERT(!p.c_vector_ok || (reinterpret_cast<uintptr_t>(p.c) % 16 == 0 && p.ldc % kVec == 0 &&
                                           p.batch_c % kVec == 0 && p.batch_c > 0),
                        "the plan's C rows are not the target's");
  p.c_f32 = problem.c_f32;
  p.c_staged = plan.target == Plan::Target::kStaged;
  set_epilogue(p, px, ep);
  if (plan.swap) {
    // The kernel's A is B^T (N x K), its B is A (M x K), its C(i, j) is C(j, i).
    std::swap(p.a, p.b);
    std::swap(p.m, p.n);
    std::swap(p.lda, p.ldb);
    std::swap(p.batch_a, p.batch_b);
    p.ldc_col = p.ldc;
    p.ldc = N == 1 ? 1 : target.stride(2);
  }
  p.grid_limit = problem.device.num_sms;
  p.act_offload = o.act_offload != 0;
  p.pdl = plan.pdl;
  p.group_m = o.group_m > 0 ? o.group_m : 8;  // CUTE_GEMM_GROUP_M=<tile rows per group>
#if defined(CUTE_GEMM_TRACE)
  // A trace build (scripts/trace_phases.py): the device address of the buffer the SM90 kernel
  // records its phases into (sm90/trace.h), or unset.
  if (const char* buf = KnobSnapshot::get("CUTE_GEMM_TRACE_BUF"); buf != nullptr && *buf != '\0') {
    p.trace = reinterpret_cast<unsigned long long*>(std::strtoull(buf, nullptr, 10));
  }
#endif
  Launch l{plan, problem, p};
  l.dtype = in_dtype == at::kHalf ? DType::kF16 : DType::kBF16;  // (TF32: tf32_launcher's own)
  l.a_kmajor = plan.swap ? B.k_major : A.k_major;
  l.b_kmajor = plan.swap ? A.k_major : B.k_major;
  l.batch = batch;
  l.elem = problem.a.element_size;
  l.c_elem = target.element_size();
  l.float_options = target.options().dtype(at::kFloat);
  l.stream = at::cuda::getCurrentCUDAStream().stream();
  return l;
}

// Launch row `cfg` (of the SM90 or SM80 table) with `splits` K slices (SM90 only). Split-K: fp32
// partials of every slice of every tile from torch's caching allocator on this stream, and one
// arrival counter per tile: on the default stream its buffer's (default_stream_counters); while a
// stream captures a CUDA graph, the graph's (graph_counters); on another stream the call's own,
// after the partials, zeroed by a small kernel before the GEMM. The SM90 family makes one launch
// (per_launch == batch below), so a counter serves one launch at a time.
cudaError_t Launch::operator()(int cfg, int splits) const {
  const bool sm90 = plan.sm90, tf32 = plan.tf32;
  Launcher launch = nullptr;
  int bm = 0, bn = 0;
  if (tf32) {
    launch = tf32_launcher(sm90);
    bm = sm80::kConfigs[sm80::kTf32Config].bm;  // the grid slicing below is SM80's
    bn = sm80::kConfigs[sm80::kTf32Config].bn;
  } else if (sm90) {
    launch = problem.gated ? gated_launcher(dtype, cfg)
                           : find_launcher(plan.sm90_narrow ? Kernels::kSm90Narrow : Kernels::kSm90, dtype, a_kmajor,
                                           b_kmajor, cfg);
    TORCH_INTERNAL_ASSERT(launch != nullptr || !layout_built(a_kmajor, b_kmajor), "no sm90 ",
                          plan.sm90_narrow ? "narrow " : "", "kernel for row ", num(cfg));
  } else {
    launch = find_launcher(plan.narrow ? Kernels::kSm80Narrow : Kernels::kSm80, dtype, a_kmajor, b_kmajor, cfg);
    TORCH_INTERNAL_ASSERT(launch != nullptr || !layout_built(a_kmajor, b_kmajor), "no sm80 kernel for row ", num(cfg),
                          plan.narrow ? " (narrow)" : "");
    bm = sm80::kConfigs[cfg].bm;
    bn = sm80::kConfigs[cfg].bn;
  }
  GemmParams r = p;
  r.splits = splits;
  at::Tensor workspace, counters;
  int64_t sm90_tiles = 0;  // SM90: block tiles of one batch
  if (sm90) {
    const sm90::TileConfig& tc = sm90::kConfigs[cfg];
    sm90_tiles = sm90::block_tiles(p.m, p.n, tc);
    const sm90::L2Policies pol = sm90::l2_policies(p, tc, plan.l2_hint);
    r.l2_policy_a = pol.a;
    r.l2_policy_b = pol.b;
    // Tiles whose pieces sum through the workspace (one counter and `parts` fp32 kBM x kBN
    // partials each): every tile with split-K, the tail's with stream-K.
    int64_t shared_tiles = 0, parts = 0;
    if (splits > 1) {
      shared_tiles = sm90_tiles * batch;
      parts = splits;
    } else if (const Tail tail = choose_tail(plan, problem, cfg, splits); tail.tiles > 0) {
      shared_tiles = int64_t(tail.tiles) * tc.cluster_m;  // block tiles
      parts = tail.slots;
      r.sk_tiles = tail.tiles;
      r.sk_workers = tail.workers;
      r.sk_slots = tail.slots;
    }
    if (shared_tiles > 0) {
      const int64_t partials = shared_tiles * parts * tc.bm * tc.bn;
      cudaError_t error = cudaSuccess;
      counters = default_stream_counters(shared_tiles, p.pdl, stream, error);
      if (error != cudaSuccess) return error;
      int* kept = counters.defined() ? counters.data_ptr<int>() : graph_counters(shared_tiles, stream);
      workspace = at::empty({partials + (kept != nullptr ? 0 : shared_tiles)}, float_options);
      r.workspace = workspace.data_ptr<float>();
      if (kept != nullptr) {
        r.flags = kept;
      } else {
        r.flags = reinterpret_cast<int*>(r.workspace + partials);
        if (cudaError_t e = zero_counters(r.flags, shared_tiles, p.pdl, stream); e != cudaSuccess) return e;
      }
    }
  }
  TORCH_CHECK(launch != nullptr, "cute_gemm: this development build (CUTE_GEMM_LAYOUTS) has no kernel for operands ",
              a_kmajor ? "K" : "M", "-major / ", b_kmajor ? "K" : "N", "-major");
  // The SM80 grid is one block per (batch, tile) and gridDim.x stops at 2^31 - 1, and the SM90
  // kernel numbers its units (tile, K slice) in 32 bits: launch the batches in slices that fit
  // (a split problem never needs it: its tiles fit on the GPU, or runnable() refused it).
  const int64_t most = std::numeric_limits<int>::max();
  const int64_t per_launch = !sm90                          ? std::max<int64_t>(1, most / tile_count(p.m, p.n, bm, bn))
                             : splits > 1 || r.sk_tiles > 0 ? batch
                                                            : std::max<int64_t>(1, (most - p.grid_limit) / sm90_tiles);
  TORCH_INTERNAL_ASSERT((splits == 1 && r.sk_tiles == 0) || per_launch == batch,
                        "split-K and stream-K counters serve one launch");
  for (int64_t l0 = 0; l0 < batch; l0 += per_launch) {
    GemmParams q = r;
    q.batch = int(std::min(per_launch, batch - l0));
    q.a = static_cast<const char*>(p.a) + l0 * p.batch_a * elem;
    q.b = static_cast<const char*>(p.b) + l0 * p.batch_b * elem;
    q.c = static_cast<char*>(p.c) + l0 * p.batch_c * c_elem;
    if (const cudaError_t err = launch(q, stream); err != cudaSuccess) return err;
  }
  return cudaSuccess;
}

// The autotune (CUTE_GEMM_AUTOTUNE=1): the cached choice for this problem, or, on first sight of
// it (its family, dtype, layouts, shape, output and epilogue kind), every runnable row with 1, 2
// or 4 slices timed and the fastest kept (autotune.h); a cached choice this build or problem
// cannot run is ignored and tuned again. Not while the stream captures a CUDA graph: the plan's
// pick then, until a plain call tunes.
void autotuned(const Launch& launch, const cudaDeviceProp& prop, int& cfg, int& splits) {
  const Plan& plan = launch.plan;
  const GemmParams& p = launch.p;
  const bool sm90 = plan.sm90;
  const int num_sms = prop.multiProcessorCount;
  const std::string path = autotune::cache_path(prop.name, config_tables_id());
  const int sk = plan.stream_k_knob;
  const std::string key = std::string(sm90 ? "sm90" : "sm80") + " " + (launch.dtype == DType::kF16 ? "f16" : "bf16") +
                          " " + (launch.a_kmajor ? "k" : "m") + (launch.b_kmajor ? "k" : "n") + " " + num(p.m) + "x" +
                          num(p.n) + "x" + num(p.k) + " l" + num(launch.batch) + " c" + (p.c_f32 ? "f32" : "16") +
                          (p.c_vector_ok ? "v" : p.c_staged ? "s" : "e") + " x" +
                          (p.x != nullptr ? (p.x_ldm == 0 ? "bias" : "c") : "none") + " act" + num(int(p.act)) +
                          (sk == 1 ? " sk" : sk == 0 ? " nosk" : " skrule") +
                          (plan.l2_hint != 0 ? " l2h" + num(plan.l2_hint) : "");
  const std::optional<autotune::Choice> hit = autotune::find(path, key);
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  C10_CUDA_CHECK(cudaStreamIsCapturing(launch.stream, &capture));
  // Rows and slice counts the timing below may pick (s in {1, 2, 4}; slices only where the tiles
  // leave SMs idle, the chooser's own limit: the workspace then stays below one kBM x kBN fp32
  // tile per SM): a cached entry outside them (another build's, a hand-edited or foreign file's)
  // is not trusted. Rows without a kernel for this layout (sm80::has_plain; a development build's
  // missing layouts) are not candidates either.
  const int rows = sm90 ? sm90::kNumConfigs : sm80::kNumConfigs;
  auto tunable = [&](int c, int s) {
    return c >= 0 && c < rows && (s == 1 || s == 2 || s == 4) &&
           find_launcher(sm90 ? Kernels::kSm90 : Kernels::kSm80, launch.dtype, launch.a_kmajor, launch.b_kmajor, c) !=
               nullptr &&
           runnable(plan, launch.problem, c, s) &&
           (s == 1 || (sm90 && sm90::block_tiles(p.m, p.n, sm90::kConfigs[c]) * launch.batch * s <= num_sms));
  };
  if (hit && tunable(hit->cfg, hit->splits)) {
    cfg = hit->cfg;
    splits = hit->splits;
    return;
  }
  if (capture != cudaStreamCaptureStatusNone) return;
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
  for (int c = 0; c < rows; ++c) {
    for (int s : {1, 2, 4}) {
      if (!tunable(c, s)) continue;
      try {
        if (launch(c, s) != cudaSuccess) {  // warm-up; a row this GPU cannot launch is skipped
          (void)cudaGetLastError();
          continue;
        }
        // One timed call sizes the measurement: about half a millisecond of calls, 3 to 50.
        auto time_us = [&](int reps) {
          C10_CUDA_CHECK(cudaEventRecord(start.e, launch.stream));
          for (int i = 0; i < reps; ++i) C10_CUDA_CHECK(launch(c, s));
          C10_CUDA_CHECK(cudaEventRecord(end.e, launch.stream));
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

}  // namespace cute_gemm
