#include "kernels/device_launch.hpp"

#include <algorithm>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <specdec/backend.hpp>

namespace specdec::testing {
namespace {

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

// Device copies of a descriptor's arrays; each is freed with the mirror, after the outputs went
// back to the host.
class Mirror {
 public:
  Mirror() = default;
  Mirror(const Mirror&) = delete;
  Mirror& operator=(const Mirror&) = delete;
  ~Mirror() {
    for (void* p : owned_) cudaFree(p);
  }

  /// A device copy of count elements at host (nullptr stays nullptr); an output is copied back
  /// by finish().
  template <class T>
  T* copy(T* host, long long count, bool output) {
    if (host == nullptr) return nullptr;
    void* device = nullptr;
    const std::size_t bytes = sizeof(T) * static_cast<std::size_t>(count > 0 ? count : 1);
    check(cudaMalloc(&device, bytes), "cudaMalloc");
    owned_.push_back(device);
    if (count > 0) check(cudaMemcpy(device, host, sizeof(T) * count, cudaMemcpyHostToDevice), "cudaMemcpy to device");
    if (output) back_.push_back({const_cast<void*>(static_cast<const void*>(host)), device, sizeof(T) * static_cast<std::size_t>(count)});
    return static_cast<T*>(device);
  }

  void* scratch(std::size_t bytes) {
    void* device = nullptr;
    check(cudaMalloc(&device, bytes ? bytes : 1), "cudaMalloc");
    owned_.push_back(device);
    return device;
  }

  void finish() {
    check(cudaGetLastError(), "kernel launch");
    check(cudaDeviceSynchronize(), "kernel (sync)");
    for (const Back& b : back_)
      if (b.bytes) check(cudaMemcpy(b.host, b.device, b.bytes, cudaMemcpyDeviceToHost), "cudaMemcpy to host");
  }

 private:
  struct Back {
    void* host;
    const void* device;
    std::size_t bytes;
  };
  std::vector<void*> owned_;
  std::vector<Back> back_;
};

template <class Batch>
backend::cuda tag_with_workspace(Mirror& m, const Batch& device_batch) {
  backend::cuda tag;
  tag.workspace_bytes = backend::workspace_bytes(tag, device_batch);
  tag.workspace = m.scratch(tag.workspace_bytes);
  return tag;
}

// The launch must have queued everything: only then is the stream synchronised.
backend::status finish(Mirror& m, backend::status s) {
  if (s == backend::status::ok) m.finish();
  return s;
}

}  // namespace

// The mirrors copy every array a batch points to; an array the device cannot read fails only on a
// GPU (KvCompactionBatch::sequence was once left pointing at host memory). These sizes make a new
// field fail the build here, in CI, until its mirror is written.
static_assert(sizeof(core::KvCompactionBatch) == 112, "KvCompactionBatch changed: mirror its new arrays in mirror_caches");
static_assert(sizeof(core::SuffixMatchBatch) == 80, "SuffixMatchBatch changed: mirror its new arrays in run_on_device");
static_assert(sizeof(core::GreedyVerifyBatch) == 112, "GreedyVerifyBatch changed: mirror its new arrays");
static_assert(sizeof(core::TreeBatch) == 112, "TreeBatch changed: mirror its new arrays in mirror_trees");

static core::TreeBatch mirror_trees(Mirror& m, const core::TreeBatch& host) {
  core::TreeBatch d = host;
  const long long nodes = host.batch > 0 ? host.offsets[host.batch] : 0;
  d.offsets = m.copy(host.offsets, host.batch + 1, false);
  d.parent = m.copy(host.parent, nodes, false);
  d.token = m.copy(host.token, nodes, false);
  d.depth = m.copy(host.depth, nodes, true);
  d.mask = m.copy(host.mask, nodes * host.words, true);
  d.first_child = m.copy(host.first_child, nodes, true);
  d.next_sibling = m.copy(host.next_sibling, nodes, true);
  d.max_depth = m.copy(host.max_depth, host.batch, true);
  d.status = m.copy(host.status, host.batch, true);
  d.base_position = m.copy(host.base_position, host.batch, false);
  d.position = m.copy(host.position, nodes, true);
  d.sequence = m.copy(host.sequence, nodes, true);
  return d;
}

backend::status run_on_device(const core::TreeBatch& host) {
  Mirror m;
  return finish(m, backend::build_trees(backend::cuda{}, mirror_trees(m, host)));
}

// The verifier's own arrays; the tree arrays are the caller's business. `nodes` from the host offsets.
static core::GreedyVerifyBatch mirror_verify_outputs(Mirror& m, const core::GreedyVerifyBatch& host, long long nodes) {
  core::GreedyVerifyBatch d = host;
  d.logits = m.copy(host.logits, nodes > 0 ? (nodes - 1) * host.row_stride + host.vocab_size : 0, false);
  d.argmax = m.copy(host.argmax, nodes, true);
  d.path = m.copy(host.path, static_cast<long long>(host.batch) * host.max_nodes, true);
  d.length = m.copy(host.length, host.batch, true);
  d.next_token = m.copy(host.next_token, host.batch, true);
  d.status = m.copy(host.status, host.batch, true);
  return d;
}

backend::status run_on_device(const core::GreedyVerifyBatch& host) {
  Mirror m;
  const long long nodes = host.batch > 0 ? host.offsets[host.batch] : 0;
  core::GreedyVerifyBatch d = mirror_verify_outputs(m, host, nodes);
  d.offsets = m.copy(host.offsets, host.batch + 1, false);
  d.token = m.copy(host.token, nodes, false);
  d.first_child = m.copy(host.first_child, nodes, false);
  d.next_sibling = m.copy(host.next_sibling, nodes, false);
  d.build_status = m.copy(host.build_status, host.batch, false);
  return finish(m, backend::greedy_verify(tag_with_workspace(m, d), d));
}

backend::status run_on_device(const core::SuffixMatchBatch& host) {
  Mirror m;
  core::SuffixMatchBatch d = host;
  const long long tokens = host.batch > 0 ? host.offsets[host.batch] : 0;
  const long long slots = static_cast<long long>(host.batch) * (host.k > 0 ? host.k : 0);
  d.offsets = m.copy(host.offsets, host.batch + 1, false);
  d.context = m.copy(host.context, tokens, false);
  d.search_limit = m.copy(host.search_limit, host.batch, false);
  d.matches = m.copy(host.matches, slots, true);
  d.match_count = m.copy(host.match_count, host.batch, true);
  d.drafts = m.copy(host.drafts, slots * (host.depth > 0 ? host.depth : 0), true);
  d.draft_length = m.copy(host.draft_length, slots, true);
  return finish(m, backend::suffix_match(tag_with_workspace(m, d), d));
}

// The caches, bases, statuses and the entries' sequences; path and length are the caller's business.
static core::KvCompactionBatch mirror_caches(Mirror& m, const core::KvCompactionBatch& host) {
  core::KvCompactionBatch d = host;
  const core::KvCacheLayout& l = host.layout;
  // The caches hold every sequence an entry names (more than `batch` when `sequence` picks some).
  long long sequences = host.batch;
  for (int b = 0; host.sequence && b < host.batch; ++b)
    sequences = std::max<long long>(sequences, host.sequence[b] + 1LL);
  // One past the last byte any (sequence, layer, position, head) row of the layout touches.
  const long long cache_bytes = (sequences - 1) * l.sequence_stride + (l.layers - 1) * l.layer_stride +
                                (l.max_positions - 1) * l.position_stride + (l.kv_heads - 1) * l.head_stride +
                                l.row_bytes;
  d.k_cache = m.copy(host.k_cache, cache_bytes, true);
  d.v_cache = m.copy(host.v_cache, cache_bytes, true);
  d.base = m.copy(host.base, host.batch, false);
  d.status = m.copy(host.status, host.batch, true);
  d.sequence = m.copy(host.sequence, host.batch, false);
  return d;
}

backend::status run_on_device(const core::KvCompactionBatch& host) {
  Mirror m;
  core::KvCompactionBatch d = mirror_caches(m, host);
  d.path = m.copy(host.path, static_cast<long long>(host.batch) * host.max_nodes, false);
  d.length = m.copy(host.length, host.batch, false);
  return finish(m, backend::compact_kv(backend::cuda{}, d));
}

// A device copy of a TreeView: every array it points to, sized from the view itself.
static TreeView mirror_view(Mirror& m, const TreeView& v, int vocab) {
  TreeView d = v;
  const long long n = v.size;
  d.parent = m.copy(v.parent, n, false);
  d.token = m.copy(v.token, n, false);
  d.depth = m.copy(v.depth, n, false);
  d.mask = m.copy(v.mask, n * v.words_per_row, false);
  d.first_child = m.copy(v.first_child, n, false);
  d.next_sibling = m.copy(v.next_sibling, n, false);
  if (v.proposals > 0) {
    const long long draws = v.draw_begin[v.proposals];
    d.first_proposal = m.copy(v.first_proposal, n, false);
    d.next_proposal = m.copy(v.next_proposal, v.proposals, false);
    d.proposal_node = m.copy(v.proposal_node, v.proposals, false);
    d.draw_begin = m.copy(v.draw_begin, v.proposals + 1, false);
    d.draw_token = m.copy(v.draw_token, draws, false);
    d.draw_node = m.copy(v.draw_node, draws, false);
    d.proposal_q = m.copy(v.proposal_q, static_cast<long long>(v.proposals) * vocab, false);
  }
  return d;
}

static core::StochasticVerifyBatch mirror_stochastic(Mirror& m, const core::StochasticVerifyBatch& host) {
  core::StochasticVerifyBatch d = host;
  std::vector<TreeView> views;
  long long rows = 0;
  for (int t = 0; t < host.batch; ++t) {
    views.push_back(mirror_view(m, host.trees[t], host.vocab_size));
    rows = std::max<long long>(rows, host.row_offset[t] + host.trees[t].size);
  }
  d.trees = m.copy(views.data(), static_cast<long long>(views.size()), false);
  d.row_offset = m.copy(host.row_offset, host.batch, false);
  d.logits = m.copy(host.logits, rows > 0 ? (rows - 1) * host.row_stride + host.vocab_size : 0, false);
  d.keys = m.copy(host.keys, host.batch, false);
  d.work = m.copy(host.work, static_cast<long long>(host.batch) * host.vocab_size, false);
  d.accepted = m.copy(host.accepted, static_cast<long long>(host.batch) * host.max_nodes, true);
  d.path = m.copy(host.path, static_cast<long long>(host.batch) * host.max_nodes, true);
  d.length = m.copy(host.length, host.batch, true);
  d.next_token = m.copy(host.next_token, host.batch, true);
  d.status = m.copy(host.status, host.batch, true);
  d.row_status = m.copy(host.row_status, host.batch, true);
  d.bad_node = m.copy(host.bad_node, host.batch, true);
  return d;
}

static kernels::StochasticLaunch launch_of(stochastic_shape shape) {
  return shape == stochastic_shape::per_tree ? kernels::StochasticLaunch::per_tree
                                             : kernels::StochasticLaunch::row_parallel;
}

backend::status run_rejection_on_device(const core::StochasticVerifyBatch& host, const core::SamplingParams& params,
                                        stochastic_shape shape) {
  Mirror m;
  const core::StochasticVerifyBatch d = mirror_stochastic(m, host);
  if (shape == stochastic_shape::automatic)
    return finish(m, backend::rejection_verify(tag_with_workspace(m, d), d, params));
  const kernels::StochasticLaunch launch = launch_of(shape);
  const std::size_t bytes = kernels::stochastic_verify_workspace_bytes(d, launch);
  return finish(m, backend::detail::from(kernels::rejection_verify(d, params, m.scratch(bytes), bytes, nullptr, launch)));
}

backend::status run_conditional_on_device(const core::StochasticVerifyBatch& host, const core::ConditionalParams& params,
                                          const core::SamplingParams& next, stochastic_shape shape) {
  Mirror m;
  const core::StochasticVerifyBatch d = mirror_stochastic(m, host);
  if (shape == stochastic_shape::automatic)
    return finish(m, backend::conditional_verify(tag_with_workspace(m, d), d, params, next));
  const kernels::StochasticLaunch launch = launch_of(shape);
  const std::size_t bytes = kernels::stochastic_verify_workspace_bytes(d, launch);
  return finish(m, backend::detail::from(
                       kernels::conditional_verify(d, params, next, m.scratch(bytes), bytes, nullptr, launch)));
}

backend::status run_step_on_device(const core::TreeBatch& trees, const core::GreedyVerifyBatch& verify,
                                   const core::KvCompactionBatch& kv, bool in_graph) {
  Mirror m;
  const core::TreeBatch t = mirror_trees(m, trees);
  const long long nodes = trees.batch > 0 ? trees.offsets[trees.batch] : 0;
  core::GreedyVerifyBatch v = mirror_verify_outputs(m, verify, nodes);
  v.offsets = t.offsets;
  v.token = t.token;
  v.first_child = t.first_child;
  v.next_sibling = t.next_sibling;
  v.build_status = t.status;
  core::KvCompactionBatch c = mirror_caches(m, kv);
  c.path = v.path;
  c.length = v.length;
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  // The mirror's pageable copies may still be in flight, and a non-blocking stream does not wait
  // for the legacy stream they ran on.
  check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  backend::cuda stream_only{};
  stream_only.stream = stream;
  backend::cuda with_workspace = tag_with_workspace(m, v);
  with_workspace.stream = stream;
  // Global capture mode refuses any call that would synchronise or allocate inside the step.
  if (in_graph) check(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal), "cudaStreamBeginCapture");
  // Three enqueues on one stream, no synchronisation in between.
  backend::status s = backend::build_trees(stream_only, t);
  if (s == backend::status::ok) s = backend::greedy_verify(with_workspace, v);
  if (s == backend::status::ok) s = backend::compact_kv(stream_only, c);
  if (in_graph) {
    cudaGraph_t graph = nullptr;
    check(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture");
    cudaGraphExec_t exec = nullptr;
    check(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate");
    if (s == backend::status::ok) check(cudaGraphLaunch(exec, stream), "cudaGraphLaunch");
    check(cudaGraphExecDestroy(exec), "cudaGraphExecDestroy");
    check(cudaGraphDestroy(graph), "cudaGraphDestroy");
  }
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  check(cudaStreamDestroy(stream), "cudaStreamDestroy");
  return finish(m, s);
}

}  // namespace specdec::testing
