#include "kernels/device_launch.hpp"

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

backend::status run_on_device(const core::TreeBatch& host) {
  Mirror m;
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
  return finish(m, backend::build_trees(backend::cuda{}, d));
}

backend::status run_on_device(const core::GreedyVerifyBatch& host) {
  Mirror m;
  core::GreedyVerifyBatch d = host;
  const long long nodes = host.batch > 0 ? host.offsets[host.batch] : 0;
  d.offsets = m.copy(host.offsets, host.batch + 1, false);
  d.token = m.copy(host.token, nodes, false);
  d.first_child = m.copy(host.first_child, nodes, false);
  d.next_sibling = m.copy(host.next_sibling, nodes, false);
  d.build_status = m.copy(host.build_status, host.batch, false);
  d.logits = m.copy(host.logits, nodes > 0 ? (nodes - 1) * host.row_stride + host.vocab_size : 0, false);
  d.argmax = m.copy(host.argmax, nodes, true);
  d.path = m.copy(host.path, static_cast<long long>(host.batch) * host.max_nodes, true);
  d.length = m.copy(host.length, host.batch, true);
  d.next_token = m.copy(host.next_token, host.batch, true);
  d.status = m.copy(host.status, host.batch, true);
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
  d.drafts = m.copy(host.drafts, slots * (host.continuation > 0 ? host.continuation : 0), true);
  d.draft_length = m.copy(host.draft_length, slots, true);
  return finish(m, backend::suffix_match(tag_with_workspace(m, d), d));
}

backend::status run_on_device(const core::KvCompactionBatch& host) {
  Mirror m;
  core::KvCompactionBatch d = host;
  const core::KvCacheLayout& l = host.layout;
  // One past the last byte any (sequence, layer, position, head) row of the layout touches.
  const long long cache_bytes = (host.batch - 1) * l.sequence_stride + (l.layers - 1) * l.layer_stride +
                                (l.max_positions - 1) * l.position_stride + (l.kv_heads - 1) * l.head_stride +
                                l.row_bytes;
  d.k_cache = m.copy(host.k_cache, cache_bytes, true);
  d.v_cache = m.copy(host.v_cache, cache_bytes, true);
  d.base = m.copy(host.base, host.batch, false);
  d.path = m.copy(host.path, static_cast<long long>(host.batch) * host.max_nodes, false);
  d.length = m.copy(host.length, host.batch, false);
  d.status = m.copy(host.status, host.batch, true);
  return finish(m, backend::compact_kv(backend::cuda{}, d));
}

}  // namespace specdec::testing
