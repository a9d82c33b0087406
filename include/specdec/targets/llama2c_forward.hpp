// What Llama2cTarget (one sequence) and Llama2cBatchTarget (many) share: a sequence's KV cache,
// the checks of a tree and of a committed path, and one forward that runs the trees of several
// sequences together, reading each weight matrix, the classifier included, once for all their
// nodes (models/llama_layer.hpp). A node's result does not depend on the other nodes or
// sequences of the call, nor on the thread count; it does on the kernel path (fused or separate
// multiply-adds, docs/targets.md "ISA"), which is one per forward (its HostIsa). Host-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/core/kv_compaction.hpp>
#include <specdec/core/tree.hpp>
#include <specdec/error.hpp>
#include <specdec/models/llama2c_model.hpp>
#include <specdec/models/llama_layer.hpp>
#include <specdec/core/tree_view.hpp>

namespace specdec {

namespace llama {
class TreeForward;
}

/// A forward's output for one tree, per node: the logits row, its argmax and the features. Valid
/// until the target's next forward(), commit(), prefill() (or release()).
class Llama2cOutput {
 public:
  int size() const { return size_; }
  /// The next-token logits after `node` (vocab floats).
  std::span<const float> logits(node_t node) const {
    return {logits_ + static_cast<std::size_t>(node) * vocab_stride_, static_cast<std::size_t>(vocab_)};
  }
  /// The most likely next token after `node` (ties to the lowest id).
  token_t argmax(node_t node) const { return argmax_[node]; }
  /// The last hidden state of `node` after the final RMSNorm — exactly the classifier's input
  /// (dim floats), as the "last hidden state" of Hugging Face's LlamaModel that EAGLE drafts from.
  std::span<const float> features(node_t node) const {
    return {features_ + static_cast<std::size_t>(node) * dim_, static_cast<std::size_t>(dim_)};
  }

 private:
  friend class llama::TreeForward;
  int size_ = 0, vocab_ = 0, dim_ = 0, vocab_stride_ = 0;  // logits rows: vocab_stride_ floats apart
  const float* logits_ = nullptr;
  const float* features_ = nullptr;
  const token_t* argmax_ = nullptr;
};

namespace llama {

/// One sequence's KV cache for every layer, in KvView's layouts: in fp32, K transposed,
/// [layer][kv_dim][slot], V [layer][slot][kv_head][head_size], each slot's row padded to
/// KvView::padded_v_stride; in bf16 (bf16_attention() of the model's weights), K as dimension pairs
/// [layer][kv_dim / 2][slot] and V as slot pairs [layer][slot / 2][kv_dim][2]. Slots [0, cached)
/// hold the committed tokens; a forward writes its tree's nodes after them. It grows as the
/// sequence does.
class SequenceCache {
 public:
  explicit SequenceCache(const LlamaConfig& c, WeightFormat weights = WeightFormat::fp32)
      : config_(&c), bf16_(bf16_attention(weights, c.head_size())) {
    // seq_len comes from the file's header, and a small file can claim a cache of many GB
    // (1024 layers x 2^20 positions): start small.
    reserve(std::min(c.seq_len, 1024) + 64);
  }

  int cached = 0;  ///< committed tokens
  int slots() const { return slots_; }
  std::size_t bytes() const {
    return (k_.size() + v_.size()) * sizeof(float) + kp_.size() * sizeof(std::uint32_t) +
           vp_.size() * sizeof(std::uint16_t);
  }

  KvView layer(int l) {
    const std::size_t ul = static_cast<std::size_t>(l), kv_dim = static_cast<std::size_t>(config_->kv_dim()),
                      slots = static_cast<std::size_t>(slots_);
    if (bf16_)
      return {nullptr, nullptr, slots_, config_->kv_dim(), kp_.data() + ul * kv_dim / 2 * slots,
              vp_.data() + ul * slots * kv_dim};
    return {k_.data() + ul * slots * kv_dim, v_.data() + ul * slots * static_cast<std::size_t>(v_stride_), slots_,
            v_stride_};
  }

  /// Makes room for `slots` slots per layer, keeping the committed entries.
  void reserve(int slots) {
    if (slots <= slots_) return;
    const LlamaConfig& c = *config_;
    int new_slots = std::max(slots, slots_ + slots_ / 2);
    if (bf16_) new_slots = (new_slots + 31) / 32 * 32;  // whole chunks for AMX's tiles
    const std::size_t layers = static_cast<std::size_t>(c.n_layers), kv_dim = static_cast<std::size_t>(c.kv_dim()),
                      old_slots = static_cast<std::size_t>(slots_), grown_slots = static_cast<std::size_t>(new_slots),
                      kept = static_cast<std::size_t>(cached);
    // `cache` regrown: each layer's entries sit in `rows` rows of `row(slots)` elements, entries
    // [0, kept) in the first `row(kept)` of each row. Both of a cache's buffers are made before
    // either replaces its old one, so a failure leaves the cache as it was.
    auto regrown = [&](const auto& cache, std::size_t rows, auto row) {
      std::remove_cvref_t<decltype(cache)> grown;
      try {
        grown.resize(layers * rows * row(grown_slots));
      } catch (const std::bad_alloc&) {  // an error naming the sizes, not a bare std::bad_alloc
        const std::size_t per_position =
            bf16_ ? kv_dim * (sizeof(std::uint16_t) + sizeof(std::uint16_t)) : (kv_dim + v_stride_) * sizeof(float);
        throw error("Llama2cTarget: cannot allocate the KV cache for " + std::to_string(new_slots) + " positions (" +
                    std::to_string(layers * grown_slots * per_position) + " bytes: " + std::to_string(c.n_layers) +
                    " layers x " + std::to_string(per_position) + " bytes per position)");
      }
      for (std::size_t r = 0; r < layers * rows; ++r)
        std::copy_n(cache.data() + r * row(old_slots), row(kept), grown.data() + r * row(grown_slots));
      return grown;
    };
    auto slots_of = [](std::size_t n) { return n; };
    if (bf16_) {
      auto k = regrown(kp_, kv_dim / 2, slots_of);
      vp_ = regrown(vp_, 1, [&](std::size_t n) { return (n + 1) / 2 * 2 * kv_dim; });
      kp_ = std::move(k);
    } else {
      auto k = regrown(k_, kv_dim, slots_of);
      v_ = regrown(v_, 1, [&](std::size_t n) { return n * static_cast<std::size_t>(v_stride_); });
      k_ = std::move(k);
    }
    slots_ = new_slots;
  }

  /// Keeps the K/V of `path` (nodes of the tree written after `cached`, checked by the caller) as
  /// the next committed positions.
  void commit(std::span<const node_t> path) {
    const LlamaConfig& c = *config_;
    const int length = static_cast<int>(path.size());
    if (bf16_) {
      // K: one-pair rows, kv_dim / 2 of them per slot, `slots_` pairs apart. V: slot pairs, which
      // no stride describes: moved here, in the order compact_kv_rows moves (see kv_compaction.hpp).
      core::KvCacheLayout k_layout = core::kv_layout(c.n_layers, slots_, c.kv_dim() / 2, 1, sizeof(std::uint32_t));
      k_layout.head_stride = static_cast<long long>(slots_) * sizeof(std::uint32_t);
      k_layout.position_stride = sizeof(std::uint32_t);
      core::compact_kv_rows(reinterpret_cast<unsigned char*>(kp_.data()), k_layout, 0, cached, path.data(), length);
      for (int l = 0; l < c.n_layers; ++l) {
        const KvView kv = layer(l);
        for (int k = 0; k < length; ++k) {
          const int from = cached + path[static_cast<std::size_t>(k)], to = cached + k;
          if (from == to) continue;
          const std::uint16_t* source = kv.values_of(from);
          std::uint16_t* target = kv.values_of(to);
          for (int e = 0; e < c.kv_dim(); ++e) target[2 * e] = source[2 * e];
        }
      }
    } else {
      // V: one sequence's layout, its slots' rows v_stride_ floats apart. K is transposed: one-float
      // rows, kv_dim of them per slot, `slots_` floats apart.
      core::KvCacheLayout v_layout = core::kv_layout(c.n_layers, slots_, c.n_kv_heads, c.head_size(), sizeof(float));
      v_layout.position_stride = static_cast<long long>(v_stride_) * sizeof(float);
      v_layout.layer_stride = v_layout.position_stride * slots_;
      core::KvCacheLayout k_layout = core::kv_layout(c.n_layers, slots_, c.kv_dim(), 1, sizeof(float));
      k_layout.head_stride = static_cast<long long>(slots_) * sizeof(float);
      k_layout.position_stride = sizeof(float);
      core::compact_kv_rows(reinterpret_cast<unsigned char*>(k_.data()), k_layout, 0, cached, path.data(), length);
      core::compact_kv_rows(reinterpret_cast<unsigned char*>(v_.data()), v_layout, 0, cached, path.data(), length);
    }
    cached += length;
  }

 private:
  const LlamaConfig* config_;
  bool bf16_;
  int slots_ = 0;
  int v_stride_ = KvView::padded_v_stride(config_->kv_dim());
  template <class T>
  using Buffer = std::vector<T, PrefaultedAllocator<T>>;
  Buffer<float> k_, v_;
  Buffer<std::uint32_t> kp_;
  Buffer<std::uint16_t> vp_;
};

/// Throws, naming `who` (e.g. "Llama2cTarget::forward"), unless `tree` can run on a cache of
/// `cached` tokens of a model shaped `c`: its root and parents in order, tokens in the vocabulary,
/// positions below seq_len.
template <class Who>
void check_tree(const Who& who, const LlamaConfig& c, const TreeView& tree, int cached) {
  if (tree.size < 1) throw error(subject(who) + ": empty tree (it needs at least its root)");
  if (tree.base_position != cached)
    throw error(subject(who) + ": the tree starts at position " + std::to_string(tree.base_position) + " but the KV cache holds " +
                std::to_string(cached) + " tokens");
  for (int i = 0; i < tree.size; ++i) {
    if (tree.token[i] < 0 || tree.token[i] >= c.vocab_size)
      throw error(subject(who) + ": token of tree node " + std::to_string(i) + " is " + std::to_string(tree.token[i]) +
                  ", outside the vocabulary [0, " + std::to_string(c.vocab_size) + ")");
    if (i > 0 && (tree.parent[i] < 0 || tree.parent[i] >= i))
      throw error(subject(who) + ": tree node " + std::to_string(i) + " has parent " + std::to_string(tree.parent[i]) +
                  " (parents must come before their children)");
    const int position = tree.position(i);
    if (position >= c.seq_len)
      throw error(subject(who) + ": tree node " + std::to_string(i) + " sits at position " + std::to_string(position) +
                  ", past the model's " + std::to_string(c.seq_len) + " positions");
  }
}

/// Throws, naming `who` (e.g. "Llama2cTarget::prefill"), unless `tokens` fit a model shaped `c`:
/// at most seq_len of them, each in the vocabulary.
template <class Who>
void check_prefill(const Who& who, const LlamaConfig& c, std::span<const token_t> tokens) {
  const int n = static_cast<int>(tokens.size());
  if (n > c.seq_len)
    throw error(subject(who) + ": " + std::to_string(n) + " tokens exceed the model's " + std::to_string(c.seq_len) + " positions");
  for (int i = 0; i < n; ++i) {
    const token_t t = tokens[static_cast<std::size_t>(i)];
    if (t < 0 || t >= c.vocab_size)
      throw error(subject(who) + ": token " + std::to_string(i) + " is " + std::to_string(t) + ", outside the vocabulary [0, " +
                  std::to_string(c.vocab_size) + ")");
  }
}

/// Throws, naming `who`, unless `path` is a chain from the root of the last forward's tree (its
/// parents `parent`; empty: no forward since the last commit).
template <class Who>
void check_path(const Who& who, std::span<const node_t> path, std::span<const node_t> parent) {
  const int n = static_cast<int>(parent.size());
  if (n == 0) throw error(subject(who) + ": no forward() since the last commit or prefill");
  if (path.empty() || path[0] != 0) throw error(subject(who) + ": the path must start at the root (node 0)");
  for (std::size_t k = 1; k < path.size(); ++k) {
    if (path[k] <= 0 || path[k] >= n || parent[static_cast<std::size_t>(path[k])] != path[k - 1])
      throw error(subject(who) + ": path entry " + std::to_string(k) + " (node " + std::to_string(path[k]) +
                  ") is not a child of node " + std::to_string(path[k - 1]) + " in the last tree");
  }
}

/// The tokens one sequence sends to a TreeForward call: `n` tokens written after cache->cached.
/// parent: null for a chain (token i at position cached + i sees the tokens before it), else a
/// tree's parent array (topological, the root's ignored).
struct SequenceRun {
  SequenceCache* cache = nullptr;
  const token_t* tokens = nullptr;
  int n = 0;
  const node_t* parent = nullptr;
};

/// The forward of a Llama2cModel over the tokens of one or more sequences at once, with its
/// scratch space (reused: nothing is allocated per call once it has grown to the largest).
class TreeForward {
 public:
  TreeForward(std::shared_ptr<const Llama2cModel> model, int threads, HostIsa isa = HostIsa::automatic)
      : model_(std::move(model)), pool_(checked_threads(threads)), kernels_(&checked_kernels(isa)) {
    if (!model_) throw error("Llama2cTarget: no model");
    rope_table_ = RopeTable(model_->config().head_size());
  }

  const Llama2cModel& model() const { return *model_; }
  const std::shared_ptr<const Llama2cModel>& shared_model() const { return model_; }
  int threads() const { return pool_.threads(); }
  /// The fp32 kernels this forward runs (its ISA path: kernels().name).
  const detail::Kernels& kernels() const { return *kernels_; }

  /// Runs every sequence's tokens (the caches grow to hold them; their `cached` is unchanged).
  /// With `with_output`, output(first, n) then holds the logits, argmaxes and features of the
  /// call's rows [first, first + n), the runs' tokens in order.
  SPECDEC_HOST_MODEL_INLINE void run(std::span<const SequenceRun> runs, bool with_output);

  /// Starts `cache`'s sequence afresh with exactly `tokens` (checked by the caller: check_prefill),
  /// run as a chain without logits; `features` gets each token's features, row i for token i.
  void prefill(SequenceCache& cache, std::span<const token_t> tokens, std::vector<float>& features) {
    const int n = static_cast<int>(tokens.size()), dim = model_->config().dim;
    cache.cached = 0;
    const SequenceRun chain{&cache, tokens.data(), n, nullptr};
    run({&chain, 1}, /*with_output=*/false);
    features.resize(static_cast<std::size_t>(n) * dim);
    for (int i = 0; i < n; ++i) final_norm(i, features.data() + static_cast<std::size_t>(i) * dim);
    cache.cached = n;
  }

  /// The output of the last run's rows [first, first + n) (a run with output).
  Llama2cOutput output(int first, int n) const {
    const LlamaConfig& c = model_->config();
    Llama2cOutput out;
    out.size_ = n;
    out.vocab_ = c.vocab_size;
    out.dim_ = c.dim;
    out.vocab_stride_ = model_->classifier().stride;
    out.logits_ = logits_.data() + static_cast<std::size_t>(first) * out.vocab_stride_;
    out.features_ = features_.data() + static_cast<std::size_t>(first) * c.dim;
    out.argmax_ = argmax_.data() + first;
    return out;
  }

  /// The features of the last run's row i: its residual stream after the final RMSNorm.
  void final_norm(int i, float* features) const {
    const int dim = model_->config().dim;
    rmsnorm(features, x_.data() + static_cast<std::size_t>(i) * dim, model_->rms_final().data(), dim);
  }

 private:
  static int checked_threads(int threads) {
    if (threads < 1 || threads > ThreadPool::max_threads)
      throw error("Llama2cTarget: threads must be in [1, " + std::to_string(ThreadPool::max_threads) + "], got " +
                  std::to_string(threads));
    return threads;
  }
  static const detail::Kernels& checked_kernels(HostIsa isa) {
    try {
      return llama::kernels(isa);
    } catch (const error& e) {
      throw error(std::string("Llama2cTarget: ") + e.what());
    }
  }

  template <class V>
  static void grow(V& v, std::size_t size) {
    if (v.size() < size) v.resize(size);
  }

  std::shared_ptr<const Llama2cModel> model_;
  OwnedPool pool_;  // a copy of the target gets threads of its own
  const detail::Kernels* kernels_;
  RopeTable rope_table_;
  std::vector<float> x_, rope_;
  std::vector<int> up_, depth_;
  std::vector<LayerBatch> batches_;
  std::vector<KvView> caches_;
  LayerScratch scratch_;
  std::vector<float> features_, logits_;
  std::vector<token_t> argmax_;
};

// Compiled here, or once elsewhere (SPECDEC_HOST_MODEL_DEFINED, models/kernels/isa.hpp).
#if SPECDEC_HOST_MODEL_DEFINED
SPECDEC_HOST_MODEL_INLINE void TreeForward::run(std::span<const SequenceRun> runs, bool with_output) {
  const LlamaConfig& c = model_->config();
  const int dim = c.dim, hs = c.head_size();
  int total = 0, seq_needed = 0, max_depth = 1;
  for (const SequenceRun& r : runs) total += r.n;
  const std::size_t un = static_cast<std::size_t>(total);
  grow(x_, un * dim);
  grow(rope_, un * hs);
  grow(up_, un);
  grow(depth_, un);
  batches_.clear();
  caches_.clear();
  for (int row = 0; const SequenceRun& r : runs) {
    SequenceCache& cache = *r.cache;
    const int cached = cache.cached;
    cache.reserve(cached + r.n);
    int* up = up_.data() + row;
    int* depths = depth_.data() + row;
    int run_depth = 1;
    for (int i = 0; i < r.n; ++i, ++row) {
      const float* e = model_->embedding().data() + static_cast<std::size_t>(r.tokens[i]) * dim;
      std::copy_n(e, dim, x_.data() + static_cast<std::size_t>(row) * dim);
      int depth = i;  // a chain's
      if (r.parent) {
        const node_t p = i == 0 ? -1 : r.parent[i];
        depth = p < 0 ? 0 : depths[p] + 1;
        depths[i] = depth;
        up[i] = p < 0 ? -1 : cached + p;
        run_depth = std::max(run_depth, depth + 1);
      }
      rope_table_.angles(cached + depth, rope_.data() + static_cast<std::size_t>(row) * hs);
    }
    const std::size_t first = static_cast<std::size_t>(row - r.n);
    batches_.push_back(LayerBatch{r.n, cached, cached, x_.data() + first * dim, rope_.data() + first * hs,
                                  r.parent == nullptr, up, run_depth});
    seq_needed = std::max(seq_needed, cached + r.n);  // a tree's scores span every slot of the call
    max_depth = std::max(max_depth, run_depth);
  }
  scratch_.reserve(c, model_->layer(0).wqkv, model_->layer(0).w13, total, seq_needed, max_depth, pool_.get());
  for (int l = 0; l < c.n_layers; ++l) {
    caches_.clear();
    for (const SequenceRun& r : runs) caches_.push_back(r.cache->layer(l));
    decoder_layer(model_->layer(l), c, batches_, caches_, scratch_, pool_.get(), *kernels_);
  }
  if (!with_output) return;

  const Matrix& cls = model_->classifier();
  grow(features_, un * dim);
  grow(logits_, un * cls.stride);
  grow(argmax_, un);
  for (int i = 0; i < total; ++i) final_norm(i, features_.data() + static_cast<std::size_t>(i) * dim);
  detail::matmul(pool_.get(), cls, features_.data(), dim, total, logits_.data(), cls.stride, *kernels_);
  for (int i = 0; const SequenceRun& r : runs) {
    for (int node = 0; node < r.n; ++node, ++i) {
      const float* row = logits_.data() + static_cast<std::size_t>(i) * cls.stride;
      // -1 for NaN and +-inf alike: an infinite logit makes the softmax and the verifiers' ratios NaN.
      const int best = kernels_->argmax(row, c.vocab_size);
      if (best < 0)
        throw error("Llama2cTarget: a logit of tree node " + std::to_string(node) + " is not finite (NaN or +-inf)");
      argmax_[static_cast<std::size_t>(i)] = best;
    }
  }
}
#endif

}  // namespace llama
}  // namespace specdec
