// Backend dispatch: the batched step operations (tree build, greedy verification, stochastic
// verification, suffix matching, KV compaction) on the host or on a CUDA device, chosen by a tag
// type, with the same semantics:
//
//   specdec::backend::build_trees(specdec::backend::host{}, trees);          // host pointers
//   specdec::backend::build_trees(specdec::backend::cuda{stream}, trees);    // device pointers
//
// Both take the descriptors of core/batch.hpp (and core/stochastic_batch.hpp) and write the same results; the host overloads loop
// over core::*_in_batch, the CUDA overloads launch kernels/*.cuh (asynchronously on the tag's
// stream: results are ready after the stream is synchronised; no launch sequence synchronises).
// The CUDA overloads exist in CUDA translation units (compiled by nvcc), and in C++ files compiled
// by the host compiler that define SPECDEC_CUDA_KERNELS_EXTERN (the kernels compiled elsewhere:
// kernels/launchers.hpp; the CUDA runtime's headers needed). Both check the same limits (kernels'
// compile-time limits apply to the host too, so a program behaves the same on either), and return
// a status instead of throwing.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstring>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <specdec/core/batch.hpp>
#include <specdec/core/stochastic_batch.hpp>
#include <specdec/error.hpp>

// 1 where the CUDA operations below are declared: in CUDA translation units, and in files compiled
// by the host compiler whose kernels are compiled elsewhere (SPECDEC_CUDA_KERNELS_EXTERN). The
// headers that run backend::cuda test it, to say so where they cannot.
#if defined(__CUDACC__) || defined(SPECDEC_CUDA_KERNELS_EXTERN)
#define SPECDEC_CUDA_OPERATIONS 1
#else
#define SPECDEC_CUDA_OPERATIONS 0
#endif

#if defined(SPECDEC_CUDA_KERNELS_EXTERN) && !defined(SPECDEC_CUDA_KERNELS_IMPLEMENTATION)
// The kernels are compiled elsewhere (specdec::cuda_kernels): their declarations only, without
// the kernels' code and CUB (a few seconds of nvcc a file), for nvcc and the host compiler alike.
#include <cuda_runtime_api.h>

#include <specdec/kernels/launchers.hpp>
#elif defined(__CUDACC__)
#include <specdec/kernels/greedy_verify.cuh>
#include <specdec/kernels/kv_compaction.cuh>
#include <specdec/kernels/stochastic_verify.cuh>
#include <specdec/kernels/suffix_match.cuh>
#include <specdec/kernels/tree_build.cuh>
#endif

struct CUstream_st;  // cudaStream_t is CUstream_st*; declared so host-only code can name the tag

namespace specdec::backend {

/// Run on the calling thread, on host memory.
struct host {};

/// Run on the current CUDA device, on device memory, asynchronously on `stream`. Operations that
/// need scratch memory (greedy_verify, suffix_match, and rejection_verify / conditional_verify for
/// small batches) use `workspace`, at least workspace_bytes(cuda{}, batch) bytes of device memory.
struct cuda {
  CUstream_st* stream = nullptr;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;
};

enum class status : int {
  ok = 0,
  invalid_argument,  ///< a shape outside the limits below, or a missing/too small workspace
  device_error,      ///< a CUDA call (launch, copy, synchronisation) failed; describe() names its error
};

SPECDEC_HD constexpr const char* to_string(status s) {
  switch (s) {
    case status::ok: return "ok";
    case status::invalid_argument: return "invalid argument (shape outside the kernel limits, or workspace too small)";
    case status::device_error: return "a CUDA call failed";
  }
  return "unknown backend status";
}

/// Limits shared by both backends (the CUDA kernels' compile-time limits).
inline constexpr int max_suffix_match = 16;  ///< SuffixMatchBatch::max_match
inline constexpr int max_suffix_k = 8;       ///< SuffixMatchBatch::k
inline constexpr int max_tree_nodes = 12224; ///< TreeBatch node limit (a block's shared copy of the parents)
inline constexpr int max_verify_nodes = 12288;  ///< GreedyVerifyBatch::max_nodes
/// KvCompactionBatch::max_nodes (the kernel stages every moved row's 16-byte words in 32 KB).
inline constexpr int max_compaction_nodes = 2048;
/// Sequences (trees, contexts) per operation: the kernels put them on a grid dimension of at most
/// 65535 blocks, which KV compaction shares between each sequence's K and V.
inline constexpr int max_batch = 32767;
/// KvCacheLayout layers × kv_heads (the compaction grid's other dimension).
inline constexpr long long max_layer_heads = 65535;

/// One step's verification on a backend (step/backend_step.hpp): the same tree, logits and outputs
/// described for greedy and for stochastic verification, all pointers in backend memory. A
/// verifier's verify_on(tag, job) enqueues one operation on it. Both descriptors share path,
/// length and next_token; each has its own status array, initialised to ok.
struct VerifyJob {
  core::GreedyVerifyBatch greedy;
  core::StochasticVerifyBatch stochastic;
};

namespace detail {
inline bool valid(const core::TreeBatch& b) {
  const int limit = core::node_limit(b);
  return b.batch >= 0 && b.batch <= max_batch && b.words >= 1 && limit >= 1 && limit <= max_tree_nodes;
}
inline bool valid(const core::GreedyVerifyBatch& b) {
  return b.batch >= 0 && b.batch <= max_batch && b.max_nodes >= 1 && b.max_nodes <= max_verify_nodes &&
         b.vocab_size >= 1 && b.row_stride >= b.vocab_size;
}
inline bool valid(const core::SuffixMatchBatch& b) {
  return b.batch >= 0 && b.batch <= max_batch && b.max_match <= max_suffix_match && b.k <= max_suffix_k;
}
inline bool valid(const core::StochasticVerifyBatch& b) {
  return b.batch >= 0 && b.batch <= max_batch && b.max_nodes >= 1 && b.vocab_size >= 1 &&
         b.row_stride >= b.vocab_size && b.work != nullptr;
}
inline bool valid(const core::StochasticVerifyBatch& b, const core::SamplingParams& params) {
  return valid(b) && core::valid(params);
}
inline bool valid(const core::StochasticVerifyBatch& b, const core::ConditionalParams& params,
                  const core::SamplingParams& next) {
  return valid(b) && b.accepted != nullptr && core::valid_conditional(params, b.vocab_size) && core::valid(next);
}
inline bool valid(const core::KvCompactionBatch& b) {
  const core::KvCacheLayout& l = b.layout;
  return b.batch >= 0 && b.batch <= max_batch && b.max_nodes >= 1 && b.max_nodes <= max_compaction_nodes &&
         l.layers >= 1 && l.kv_heads >= 1 && static_cast<long long>(l.layers) * l.kv_heads <= max_layer_heads &&
         l.row_bytes >= 1 && b.k_cache != nullptr;
}
}  // namespace detail

// ---- host ---------------------------------------------------------------------------------------

inline status build_trees(host, const core::TreeBatch& b) {
  if (!detail::valid(b)) return status::invalid_argument;
  for (int t = 0; t < b.batch; ++t) core::build_tree_in_batch(b, t);
  return status::ok;
}

inline status greedy_verify(host, const core::GreedyVerifyBatch& b) {
  if (!detail::valid(b)) return status::invalid_argument;
  for (int t = 0; t < b.batch; ++t) core::greedy_verify_in_batch(b, t);
  return status::ok;
}

/// RejectionSampling's verification of every tree (lossless sampling with `params`).
inline status rejection_verify(host, const core::StochasticVerifyBatch& b, const core::SamplingParams& params) {
  if (!detail::valid(b, params)) return status::invalid_argument;
  for (int t = 0; t < b.batch; ++t) core::rejection_verify_in_batch(b, t, params);
  return status::ok;
}

/// ConditionalVerifier's verification of every tree; `next` samples the token after the path.
inline status conditional_verify(host, const core::StochasticVerifyBatch& b, const core::ConditionalParams& params,
                                 const core::SamplingParams& next) {
  if (!detail::valid(b, params, next)) return status::invalid_argument;
  for (int t = 0; t < b.batch; ++t) core::conditional_verify_in_batch(b, t, params, next);
  return status::ok;
}

inline status suffix_match(host, const core::SuffixMatchBatch& b) {
  if (!detail::valid(b)) return status::invalid_argument;
  for (int s = 0; s < b.batch; ++s) core::suffix_match_in_batch(b, s);
  return status::ok;
}

inline status compact_kv(host, const core::KvCompactionBatch& b) {
  if (!detail::valid(b)) return status::invalid_argument;
  for (int s = 0; s < b.batch; ++s) core::compact_kv_in_batch(b, s);
  return status::ok;
}

/// The host backend needs no workspace.
template <class Batch>
constexpr std::size_t workspace_bytes(host, const Batch&) {
  return 0;
}

// ---- memory -------------------------------------------------------------------------------------
// What a step that keeps its data on a backend needs (see step/backend_step.hpp): memory the backend
// computes on, host memory it copies to and from ("staging": pinned for CUDA, so copies are
// asynchronous), stream-ordered copies and one synchronisation. Allocation throws specdec::error;
// copy and synchronize return a status like the operations.

enum class memory {
  backend,  ///< what the operations read and write: host memory (host), device memory (cuda)
  staging,  ///< host memory to copy from and to (pinned for cuda)
};

inline void* allocate(host, memory, std::size_t bytes) { return ::operator new(bytes ? bytes : 1); }
inline void release(host, memory, void* p) noexcept { ::operator delete(p); }
/// Copies `bytes` bytes (in either direction between staging and backend memory).
inline status copy(host, void* destination, const void* source, std::size_t bytes) {
  if (bytes) std::memcpy(destination, source, bytes);
  return status::ok;
}
/// Waits until everything enqueued on the backend is done (the host backend runs eagerly).
inline status synchronize(host) { return status::ok; }
/// A status in words (the CUDA overload adds the CUDA error behind a device_error).
inline std::string describe(host, status s) { return to_string(s); }

// ---- marks --------------------------------------------------------------------------------------
// Points in a backend's order of work, read once it has been waited for: how long the parts of a
// step took there, without a wait in between (CUDA events; on the host, which runs each part as
// it is enqueued, the clock).

/// `count` points in the order of work of Backend: the clock when each is recorded, which is right
/// for a backend that runs each part as it is enqueued (host). A backend that runs behind the
/// host specialises it (cuda, below).
template <class Backend, int count>
class marks {
 public:
  void record(const Backend&, int i) { at_[i] = std::chrono::steady_clock::now(); }
  /// Seconds from point `from` to point `to`, both recorded, the backend waited for since.
  double seconds(const Backend&, int from, int to) const {
    return std::chrono::duration<double>(at_[to] - at_[from]).count();
  }

 private:
  std::chrono::steady_clock::time_point at_[count]{};
};

// ---- launch graphs -----------------------------------------------------------------------------

/// Sequences of launches recorded once per key and replayed (CUDA graphs: one launch instead of
/// hundreds), for work whose launches are the same each time (the same kernels, parameters and
/// shapes; the data they read may change). On a backend that runs each launch as it is enqueued
/// (host) the sequence simply runs. A backend that runs behind the host specialises it (cuda, below).
template <class Backend>
class launch_graphs {
 public:
  /// Runs `launches(on)` (a function that enqueues launches on the tag `on` and nothing else) as
  /// the sequence of `key`, on `tag`.
  template <class Launches>
  status run(const Backend& tag, int, Launches&& launches) {
    launches(tag);
    return status::ok;
  }
};

// ---- cuda ---------------------------------------------------------------------------------------

#if SPECDEC_CUDA_OPERATIONS
#if SPECDEC_CUDA_KERNELS_DEFINED  // where the kernels' headers are included
static_assert(max_suffix_match == kernels::suffix_max_match && max_suffix_k == kernels::suffix_max_k &&
                  max_tree_nodes == kernels::max_tree_nodes &&
                  max_compaction_nodes * 16 == kernels::detail::compaction_shared_bytes &&
                  max_batch == kernels::max_compaction_batch && max_layer_heads == kernels::max_compaction_layer_heads,
              "backend limits must equal the kernels' compile-time limits");
#endif

namespace detail {
/// The CUDA error behind this thread's last device_error.
inline cudaError_t& last_device_error() {
  thread_local cudaError_t error = cudaSuccess;
  return error;
}
inline status from(cudaError_t e) {
  if (e == cudaSuccess) return status::ok;
  if (e == cudaErrorInvalidValue) return status::invalid_argument;
  last_device_error() = e;
  return status::device_error;
}
}  // namespace detail

/// A status in words; a device_error names the CUDA error behind it (this thread's last), so that
/// an illegal address, a missing kernel image or a sticky error from earlier work can be told apart.
inline std::string describe(const cuda&, status s) {
  std::string text = to_string(s);
  if (s == status::device_error) {
    const cudaError_t e = detail::last_device_error();
    text += std::string(" (") + cudaGetErrorName(e) + ": " + cudaGetErrorString(e) + ")";
  }
  return text;
}

inline status build_trees(const cuda& c, const core::TreeBatch& b) {
  if (!detail::valid(b)) return status::invalid_argument;
  return detail::from(kernels::build_trees(b, c.stream));
}

inline status greedy_verify(const cuda& c, const core::GreedyVerifyBatch& b) {
  if (!detail::valid(b)) return status::invalid_argument;
  return detail::from(kernels::greedy_verify(b, c.workspace, c.workspace_bytes, c.stream));
}

inline status rejection_verify(const cuda& c, const core::StochasticVerifyBatch& b, const core::SamplingParams& params) {
  if (!detail::valid(b, params)) return status::invalid_argument;
  return detail::from(kernels::rejection_verify(b, params, c.workspace, c.workspace_bytes, c.stream));
}

inline status conditional_verify(const cuda& c, const core::StochasticVerifyBatch& b,
                                 const core::ConditionalParams& params, const core::SamplingParams& next) {
  if (!detail::valid(b, params, next)) return status::invalid_argument;
  return detail::from(kernels::conditional_verify(b, params, next, c.workspace, c.workspace_bytes, c.stream));
}

inline status suffix_match(const cuda& c, const core::SuffixMatchBatch& b) {
  if (!detail::valid(b)) return status::invalid_argument;
  return detail::from(kernels::suffix_match(b, c.workspace, c.workspace_bytes, c.stream));
}

inline status compact_kv(const cuda& c, const core::KvCompactionBatch& b) {
  if (!detail::valid(b)) return status::invalid_argument;
  return detail::from(kernels::compact_kv(b, c.stream));
}

inline std::size_t workspace_bytes(const cuda&, const core::GreedyVerifyBatch& b) {
  return kernels::greedy_verify_workspace_bytes(b);
}
inline std::size_t workspace_bytes(const cuda&, const core::SuffixMatchBatch& b) {
  return kernels::suffix_match_workspace_bytes(b);
}
inline std::size_t workspace_bytes(const cuda&, const core::TreeBatch&) { return 0; }
inline std::size_t workspace_bytes(const cuda&, const core::KvCompactionBatch&) { return 0; }
inline std::size_t workspace_bytes(const cuda&, const core::StochasticVerifyBatch& b) {
  return kernels::stochastic_verify_workspace_bytes(b);
}

inline void* allocate(const cuda&, memory kind, std::size_t bytes) {
  void* p = nullptr;
  const cudaError_t e = kind == memory::backend ? cudaMalloc(&p, bytes ? bytes : 1) : cudaMallocHost(&p, bytes ? bytes : 1);
  if (e != cudaSuccess)
    throw error(std::string(kind == memory::backend ? "cudaMalloc" : "cudaMallocHost") + " of " +
                std::to_string(bytes) + " bytes failed: " + cudaGetErrorString(e));
  return p;
}
inline void release(const cuda&, memory kind, void* p) noexcept {
  if (kind == memory::backend) cudaFree(p);
  else cudaFreeHost(p);
}
/// Enqueues the copy on the tag's stream (asynchronous between staging and device memory).
inline status copy(const cuda& c, void* destination, const void* source, std::size_t bytes) {
  if (bytes == 0) return status::ok;
  return detail::from(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, c.stream));
}
inline status synchronize(const cuda& c) { return detail::from(cudaStreamSynchronize(c.stream)); }

/// CUDA events, created at the first record. A failed event call (timing only) makes seconds() 0,
/// and its error is cleared so that no later cudaGetLastError takes it for a launch's.
template <int count>
class marks<cuda, count> {
 public:
  marks() = default;
  marks(marks&& other) noexcept { swap(other); }
  marks& operator=(marks&& other) noexcept {
    swap(other);
    return *this;
  }
  ~marks() {
    for (cudaEvent_t e : events_)
      if (e) cudaEventDestroy(e);
  }
  void record(const cuda& c, int i) {
    if (!events_[i] && cudaEventCreate(&events_[i]) != cudaSuccess) {
      events_[i] = nullptr;
      cudaGetLastError();
    }
    if (events_[i] && cudaEventRecord(events_[i], c.stream) != cudaSuccess) cudaGetLastError();
  }
  double seconds(const cuda&, int from, int to) const {
    float ms = 0;
    if (!events_[from] || !events_[to]) return 0;
    if (cudaEventElapsedTime(&ms, events_[from], events_[to]) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return static_cast<double>(ms) / 1e3;
  }

 private:
  void swap(marks& other) noexcept {
    for (int i = 0; i < count; ++i) std::swap(events_[i], other.events_[i]);
  }
  cudaEvent_t events_[count] = {};
};

/// A CUDA graph per key, recorded at the key's first run from the launches that launches(on)
/// enqueues on `on` (kernels only), then launched as one on the tag's stream. `on` is the tag
/// itself, or, where the tag's stream is the legacy default stream, on which CUDA allows no
/// capture, the same tag with a stream of the graphs' own (recording runs nothing, so the order
/// of work on the tag's stream is kept).
template <>
class launch_graphs<cuda> {
 public:
  launch_graphs() = default;
  launch_graphs(launch_graphs&& other) noexcept
      : execs_(std::exchange(other.execs_, {})), capture_(std::exchange(other.capture_, nullptr)) {}
  launch_graphs& operator=(launch_graphs&& other) noexcept {
    std::swap(execs_, other.execs_);
    std::swap(capture_, other.capture_);
    return *this;
  }
  ~launch_graphs() {
    for (cudaGraphExec_t e : execs_)
      if (e) cudaGraphExecDestroy(e);
    if (capture_) cudaStreamDestroy(capture_);
  }
  template <class Launches>
  status run(const cuda& c, int key, Launches&& launches) {
    if (key < 0) return status::invalid_argument;
    if (static_cast<std::size_t>(key) >= execs_.size()) execs_.resize(static_cast<std::size_t>(key) + 1, nullptr);
    cudaGraphExec_t& exec = execs_[static_cast<std::size_t>(key)];
    if (!exec) {
      cuda on = c;
      if (!c.stream || c.stream == cudaStreamLegacy) {
        if (!capture_)
          if (const cudaError_t e = cudaStreamCreateWithFlags(&capture_, cudaStreamNonBlocking); e != cudaSuccess)
            return failed(e);
        on.stream = capture_;
      }
      if (const cudaError_t e = cudaStreamBeginCapture(on.stream, cudaStreamCaptureModeThreadLocal); e != cudaSuccess)
        return failed(e);
      try {
        launches(on);
      } catch (...) {
        // A launch that throws (a failed launch's check) must not leave the stream capturing: every
        // later operation on it would fail.
        cudaGraph_t partial = nullptr;
        cudaStreamEndCapture(on.stream, &partial);
        if (partial) cudaGraphDestroy(partial);
        cudaGetLastError();
        throw;
      }
      cudaGraph_t graph = nullptr;
      if (const cudaError_t e = cudaStreamEndCapture(on.stream, &graph); e != cudaSuccess) {  // a failed launch invalidates it
        if (graph) cudaGraphDestroy(graph);
        return failed(e);
      }
      const cudaError_t made = cudaGraphInstantiate(&exec, graph, 0);
      cudaGraphDestroy(graph);
      if (made != cudaSuccess) {
        exec = nullptr;
        return failed(made);
      }
    }
    return detail::from(cudaGraphLaunch(exec, c.stream));
  }

 private:
  // A failed capture call's status (describe() names `e`), its error taken off the thread's last
  // error so that the next launch's check does not report it again.
  static status failed(cudaError_t e) {
    cudaGetLastError();
    return detail::from(e);
  }

  std::vector<cudaGraphExec_t> execs_;
  cudaStream_t capture_ = nullptr;
};
#endif

/// `bytes` bytes of one kind of a backend's memory, released with the buffer (move-only).
/// grow() reallocates (contents lost) when more is needed; on CUDA that waits for the device, so
/// callers size buffers before a step (BackendStep::prepare) wherever they can.
template <class Backend>
class buffer {
 public:
  buffer() = default;
  buffer(const Backend& tag, memory kind) : tag_(tag), kind_(kind) {}
  buffer(buffer&& other) noexcept { swap(other); }
  buffer& operator=(buffer&& other) noexcept {
    swap(other);
    return *this;
  }
  ~buffer() {
    if (data_) release(tag_, kind_, data_);
  }

  /// Makes room for at least `bytes` bytes.
  void grow(std::size_t bytes) {
    if (bytes <= size_) return;
    if (data_) release(tag_, kind_, data_);
    data_ = nullptr;  // empty, not dangling, if allocate throws
    size_ = 0;
    data_ = static_cast<unsigned char*>(allocate(tag_, kind_, bytes));
    size_ = bytes;
  }
  unsigned char* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  void swap(buffer& other) noexcept {
    std::swap(tag_, other.tag_);
    std::swap(kind_, other.kind_);
    std::swap(data_, other.data_);
    std::swap(size_, other.size_);
  }
  Backend tag_{};
  memory kind_ = memory::backend;
  unsigned char* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace specdec::backend
