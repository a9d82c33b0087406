// BackendHashTarget: HashTarget's model as a BackendTarget. Its tree, "KV cache" and logits live
// in a backend's memory (host, or a CUDA device: in a .cu translation unit, or in a C++ file with
// SPECDEC_CUDA_KERNELS_EXTERN and specdec::cuda_kernels), so a decoder drives it
// through the backend step: copy the tree once, forward, verify and compact there, copy the path
// back. A test model for that path, and the smallest example of a device-resident target.
// BackendHashBatchTarget is the same model for several sequences at once (a BackendBatchTarget),
// which SpeculativeBatch steps on the backend (step/backend_step.hpp).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <specdec/backend.hpp>
#include <specdec/step/backend_step.hpp>  // the step of a BackendTarget and a BackendBatchTarget
#include <specdec/concepts.hpp>
#include <specdec/core/kv_compaction.hpp>
#include <specdec/error.hpp>
#include <specdec/testing/hash_target.hpp>
#include <specdec/core/tree_view.hpp>

namespace specdec {

namespace hash_model {
/// Hashes node i of `tree` into its cache row base_position + i, from its parent's row (or, for
/// the root, the row before it; `seed` before position 0). Parents must be hashed first.
SPECDEC_HD inline void hash_tree_node(const TreeView& tree, int i, std::uint64_t* cache, std::uint64_t seed) {
  const int base = tree.base_position;
  const std::uint64_t before = i > 0 ? cache[base + tree.parent[i]] : base > 0 ? cache[base - 1] : seed;
  cache[base + i] = mix(before, tree.token[i], tree.position(i));
}

/// Hashes `tree` (arrays in host memory) into `cache` rows base_position + i and writes its logits
/// rows at `logits`.
inline backend::status forward_tree(backend::host, const TreeView& tree, std::uint64_t* cache, float* logits, int vocab,
                                    std::uint64_t seed, float sharpness) {
  for (int i = 0; i < tree.size; ++i) hash_tree_node(tree, i, cache, seed);
  for (int i = 0; i < tree.size; ++i)
    for (int v = 0; v < vocab; ++v)
      logits[static_cast<long long>(i) * vocab + v] = logit(cache[tree.base_position + i], v, sharpness);
  return backend::status::ok;
}

#if SPECDEC_CUDA_OPERATIONS
/// The same on a CUDA device (arrays in device memory), enqueued on the tag's stream. Its kernels
/// are compiled where the step's are (kernels/launchers.hpp): with SPECDEC_CUDA_KERNELS_EXTERN, in
/// specdec::cuda_kernels, so that a C++ file compiled by the host compiler may run this target.
SPECDEC_CUDA_LAUNCHER backend::status forward_tree(const backend::cuda& tag, const TreeView& tree, std::uint64_t* cache,
                                                   float* logits, int vocab, std::uint64_t seed, float sharpness);
#endif
}  // namespace hash_model

#if defined(__CUDACC__) && SPECDEC_CUDA_KERNELS_DEFINED
namespace kernels {
// Templates, so that the kernels of several .cu files that include this header merge at link time.
// One thread: the nodes in index order, parents before children (a test model, not a fast one).
template <class View>
__global__ void hash_tree_kernel(View tree, std::uint64_t* cache, std::uint64_t seed) {
  for (int i = 0; i < tree.size; ++i) hash_model::hash_tree_node(tree, i, cache, seed);
}
// Grid: vocabulary chunks x nodes.
template <class Hash>
__global__ void hash_logits_kernel(const Hash* node_hash, int vocab, float sharpness, float* logits) {
  const long long row = blockIdx.y;
  for (int v = blockIdx.x * blockDim.x + threadIdx.x; v < vocab; v += gridDim.x * blockDim.x)
    logits[row * vocab + v] = hash_model::logit(node_hash[row], v, sharpness);
}
}  // namespace kernels

SPECDEC_CUDA_LAUNCHER backend::status hash_model::forward_tree(const backend::cuda& tag, const TreeView& tree,
                                                               std::uint64_t* cache, float* logits, int vocab,
                                                               std::uint64_t seed, float sharpness) {
  kernels::hash_tree_kernel<<<1, 1, 0, tag.stream>>>(tree, cache, seed);
  const dim3 grid((vocab + 255) / 256 < 64 ? (vocab + 255) / 256 : 64, tree.size);
  kernels::hash_logits_kernel<<<grid, 256, 0, tag.stream>>>(cache + tree.base_position, vocab, sharpness, logits);
  return backend::detail::from(cudaGetLastError());
}
#endif

/// The sequence's running hashes are its KV cache: one 8-byte row per position (1 layer, 1 head),
/// row p = the hash of the first p + 1 tokens. The logits after a node equal HashTarget's (same
/// vocab, seed, sharpness), so HashTarget::generate is the reference output.
template <class Backend = backend::host>
class BackendHashTarget {
#if !SPECDEC_CUDA_OPERATIONS
  static_assert(std::is_same_v<Backend, backend::host>,
                "BackendHashTarget<backend::cuda> runs kernels: use it in a .cu file compiled by nvcc, or define "
                "SPECDEC_CUDA_KERNELS_EXTERN and link the kernels compiled once (specdec::cuda_kernels).");
#endif

 public:
  using backend_type = Backend;

  BackendHashTarget(int vocab_size, int max_positions, std::uint64_t seed = 1, float sharpness = 4.0f,
                    Backend tag = {})
      : tag_(tag),
        vocab_(vocab_size),
        seed_(seed),
        sharpness_(sharpness),
        layout_(core::kv_layout(1, max_positions, 1, 1, sizeof(std::uint64_t))),
        cache_(tag, backend::memory::backend),
        logits_(tag, backend::memory::backend) {
    if (vocab_size < 2) throw error("BackendHashTarget: vocab_size must be >= 2, got " + std::to_string(vocab_size));
    if (max_positions < 1)
      throw error("BackendHashTarget: max_positions must be >= 1, got " + std::to_string(max_positions));
    cache_.grow(sizeof(std::uint64_t) * static_cast<std::size_t>(max_positions));
  }

  Backend backend() const { return tag_; }
  int vocab_size() const { return vocab_; }
  core::KvCacheView kv_cache() { return {layout_, cache_.data(), nullptr}; }

  void prefill(std::span<const token_t> tokens) {
    if (static_cast<int>(tokens.size()) > layout_.max_positions)
      throw error("BackendHashTarget::prefill: " + std::to_string(tokens.size()) + " tokens do not fit " +
                  std::to_string(layout_.max_positions) + " positions");
    for (token_t t : tokens)
      if (t < 0 || t >= vocab_)
        throw error("BackendHashTarget: token " + std::to_string(t) + " outside the vocabulary [0, " +
                    std::to_string(vocab_) + ")");
    const std::vector<std::uint64_t> hashes = hash_model::running_hashes(tokens, seed_);
    copy_or_throw(cache_.data(), hashes.data(), sizeof(std::uint64_t) * hashes.size());
    check(backend::synchronize(tag_), "prefill");
  }

  /// Hashes the nodes into cache rows base_position + i and fills their logits rows.
  LogitsRows forward(const TreeView& tree) {
    if (tree.base_position < 0 || tree.size < 1 || tree.base_position + tree.size > layout_.max_positions)
      throw error("BackendHashTarget::forward: a tree of " + std::to_string(tree.size) + " nodes at position " +
                  std::to_string(tree.base_position) + " does not fit " + std::to_string(layout_.max_positions) +
                  " positions");
    // Growing waits for the device (a test model may; a real one sizes its buffers up front).
    logits_.grow(sizeof(float) * static_cast<std::size_t>(tree.size) * vocab_);
    auto* cache = reinterpret_cast<std::uint64_t*>(cache_.data());
    auto* logits = reinterpret_cast<float*>(logits_.data());
    check(hash_model::forward_tree(tag_, tree, cache, logits, vocab_, seed_, sharpness_), "forward");
    return {logits, vocab_};
  }

  /// The first `count` rows of the cache, copied to the host (waits for the backend).
  std::vector<std::uint64_t> cached_hashes(int count) const {
    std::vector<std::uint64_t> out(static_cast<std::size_t>(count));
    copy_or_throw(out.data(), cache_.data(), sizeof(std::uint64_t) * out.size());
    check(backend::synchronize(tag_), "cached_hashes");
    return out;
  }

 private:
  void copy_or_throw(void* to, const void* from, std::size_t bytes) const {
    check(backend::copy(tag_, to, from, bytes), "a copy");
  }
  void check(backend::status s, const char* what) const {
    if (s != backend::status::ok)
      throw error(std::string("BackendHashTarget: ") + what + " failed: " + backend::describe(tag_, s));
  }

  Backend tag_;
  int vocab_;
  std::uint64_t seed_;
  float sharpness_;
  core::KvCacheLayout layout_;
  backend::buffer<Backend> cache_;
  backend::buffer<Backend> logits_;
};

static_assert(BackendTarget<BackendHashTarget<>>);

/// BackendHashTarget's model for `slots` sequences at once: slot s's running hashes are sequence s
/// of the cache layout, and a batched forward writes tree after tree's logits rows. A slot's
/// logits equal HashTarget's (same vocab, seed, sharpness), so HashTarget::generate is each
/// request's reference output.
template <class Backend = backend::host>
class BackendHashBatchTarget {
#if !SPECDEC_CUDA_OPERATIONS
  static_assert(std::is_same_v<Backend, backend::host>,
                "BackendHashBatchTarget<backend::cuda> runs kernels: use it in a .cu file compiled by nvcc, or define "
                "SPECDEC_CUDA_KERNELS_EXTERN and link the kernels compiled once (specdec::cuda_kernels).");
#endif

 public:
  using backend_type = Backend;

  BackendHashBatchTarget(int vocab_size, int max_positions, int slots, std::uint64_t seed = 1, float sharpness = 4.0f,
                         Backend tag = {})
      : tag_(tag),
        vocab_(vocab_size),
        slots_(slots),
        seed_(seed),
        sharpness_(sharpness),
        layout_(core::kv_layout(1, max_positions, 1, 1, sizeof(std::uint64_t))),
        cache_(tag, backend::memory::backend),
        logits_(tag, backend::memory::backend) {
    if (vocab_size < 2) throw error("BackendHashBatchTarget: vocab_size must be >= 2, got " + std::to_string(vocab_size));
    if (max_positions < 1)
      throw error("BackendHashBatchTarget: max_positions must be >= 1, got " + std::to_string(max_positions));
    if (slots < 1) throw error("BackendHashBatchTarget: slots must be >= 1, got " + std::to_string(slots));
    cache_.grow(sizeof(std::uint64_t) * static_cast<std::size_t>(max_positions) * static_cast<std::size_t>(slots));
  }

  Backend backend() const { return tag_; }
  int vocab_size() const { return vocab_; }
  int slots() const { return slots_; }
  core::KvCacheView kv_cache() { return {layout_, cache_.data(), nullptr}; }

  void prefill(int slot, std::span<const token_t> tokens) {
    check_slot(slot, "prefill");
    if (static_cast<int>(tokens.size()) > layout_.max_positions)
      throw error("BackendHashBatchTarget::prefill: " + std::to_string(tokens.size()) + " tokens do not fit " +
                  std::to_string(layout_.max_positions) + " positions");
    for (token_t t : tokens)
      if (t < 0 || t >= vocab_)
        throw error("BackendHashBatchTarget: token " + std::to_string(t) + " outside the vocabulary [0, " +
                    std::to_string(vocab_) + ")");
    const std::vector<std::uint64_t> hashes = hash_model::running_hashes(tokens, seed_);
    check(backend::copy(tag_, slot_cache(slot), hashes.data(), sizeof(std::uint64_t) * hashes.size()), "prefill");
    check(backend::synchronize(tag_), "prefill");
  }

  /// Nothing to free: the slot's next prefill overwrites its rows.
  void release(int slot) { check_slot(slot, "release"); }

  /// Hashes tree b's nodes into slot slots[b]'s rows base_position + i and fills its logits rows
  /// after those of the trees before it.
  LogitsRows forward(const TreeBatchView& batch) {
    std::size_t rows = 0;
    for (std::size_t b = 0; b < batch.trees.size(); ++b) {
      const TreeView& tree = batch.trees[b];
      check_slot(batch.slots[b], "forward");
      if (tree.base_position < 0 || tree.size < 1 || tree.base_position + tree.size > layout_.max_positions)
        throw error("BackendHashBatchTarget::forward: a tree of " + std::to_string(tree.size) + " nodes at position " +
                    std::to_string(tree.base_position) + " does not fit " + std::to_string(layout_.max_positions) +
                    " positions");
      rows += static_cast<std::size_t>(tree.size);
    }
    // Growing waits for the device (a test model may; a real one sizes its buffers up front).
    logits_.grow(sizeof(float) * rows * static_cast<std::size_t>(vocab_));
    auto* logits = reinterpret_cast<float*>(logits_.data());
    long long row = 0;
    for (std::size_t b = 0; b < batch.trees.size(); ++b) {
      const TreeView& tree = batch.trees[b];
      check(hash_model::forward_tree(tag_, tree, slot_cache(batch.slots[b]), logits + row * vocab_, vocab_, seed_,
                                     sharpness_),
            "forward");
      row += tree.size;
    }
    return {logits, vocab_};
  }

 private:
  std::uint64_t* slot_cache(int slot) const {
    return reinterpret_cast<std::uint64_t*>(cache_.data() + slot * layout_.sequence_stride);
  }
  void check_slot(int slot, const char* what) const {
    if (slot < 0 || slot >= slots_)
      throw error(std::string("BackendHashBatchTarget::") + what + ": slot " + std::to_string(slot) + " outside [0, " +
                  std::to_string(slots_) + ")");
  }
  void check(backend::status s, const char* what) const {
    if (s != backend::status::ok)
      throw error(std::string("BackendHashBatchTarget: ") + what + " failed: " + backend::describe(tag_, s));
  }

  Backend tag_;
  int vocab_;
  int slots_;
  std::uint64_t seed_;
  float sharpness_;
  core::KvCacheLayout layout_;
  backend::buffer<Backend> cache_;
  backend::buffer<Backend> logits_;
};

static_assert(BackendBatchTarget<BackendHashBatchTarget<>>);

}  // namespace specdec
