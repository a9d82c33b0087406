// Llama2cTarget: a real Llama-architecture transformer (llama2.c checkpoints) that runs draft
// trees with tree attention on the host — specdec's reference Target.
//
// Each tree node is one token at position tree.position(node). A node attends to every token of
// the KV cache and to its own ancestors in the tree (TreeView::attends), so one forward scores
// every path of the draft at once. Tree node i writes its K/V at cache slot cached() + i; commit()
// moves the accepted path's entries to contiguous positions (core::compact_kv_rows).
//
// Speed: one forward reads each weight matrix, the classifier included, once for all its nodes,
// and each cached K/V row once for all nodes (models/llama_layer.hpp); Options::threads splits
// the work over a pool of persistent threads owned by the target. Nothing is allocated per step
// once the scratch has grown to the largest tree.
//
// Bit-exactness: a node's result does not depend on the rest of the tree, the thread count, the
// prefill's chunking or the machine's ISA. Every sum runs in the order a single-sequence forward
// uses (matrix products over the input index, attention over positions 0, 1, ..., the node
// itself; models/host_kernels.hpp), so a tree forward gives, bit for bit, the logits of each
// node's path run alone, and speculative decoding with the exact verifier reproduces generate().
// Host-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <new>
#include <span>
#include <string>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/core/kv_compaction.hpp>
#include <specdec/core/tree.hpp>
#include <specdec/error.hpp>
#include <specdec/models/llama_layer.hpp>
#include <specdec/models/llama2c_model.hpp>
#include <specdec/core/tree_view.hpp>

namespace specdec {

class Llama2cTarget {
 public:
  /// What forward() returns, per tree node: the logits row, its argmax, and the features.
  /// Valid until the next forward(), commit() or prefill().
  class Output {
   public:
    int size() const { return size_; }
    /// The next-token logits after `node` (vocab_size() floats).
    std::span<const float> logits(node_t node) const {
      return {logits_.data() + static_cast<std::size_t>(node) * vocab_stride_, static_cast<std::size_t>(vocab_)};
    }
    /// The most likely next token after `node` (ties to the lowest id).
    token_t argmax(node_t node) const { return argmax_[static_cast<std::size_t>(node)]; }
    /// The last hidden state of `node` after the final RMSNorm — exactly the classifier's input
    /// (feature_dim() = dim floats), as the "last hidden state" of Hugging Face's LlamaModel that
    /// EAGLE drafts from.
    std::span<const float> features(node_t node) const {
      return {features_.data() + static_cast<std::size_t>(node) * dim_, static_cast<std::size_t>(dim_)};
    }

   private:
    friend class Llama2cTarget;
    int size_ = 0, vocab_ = 0, dim_ = 0, vocab_stride_ = 0;  // logits rows: vocab_stride_ floats apart
    std::vector<float> logits_, features_;
    std::vector<token_t> argmax_;
  };

  struct Options {
    int threads = 1;  ///< threads of the forward, the caller's included: [1, 256]
  };

  /// Shares `model`'s weights (several targets may decode with one model).
  explicit Llama2cTarget(std::shared_ptr<const Llama2cModel> model) : Llama2cTarget(std::move(model), Options()) {}
  Llama2cTarget(std::shared_ptr<const Llama2cModel> model, Options options) : model_(std::move(model)) {
    if (!model_) throw error("Llama2cTarget: no model");
    if (options.threads < 1 || options.threads > llama::ThreadPool::max_threads)
      throw error("Llama2cTarget: threads must be in [1, " + std::to_string(llama::ThreadPool::max_threads) +
                  "], got " + std::to_string(options.threads));
    if (options.threads > 1) pool_ = std::make_shared<llama::ThreadPool>(options.threads);
    const Llama2cConfig& c = model_->config();
    rope_table_ = llama::RopeTable(c.head_size());
    out_.vocab_ = c.vocab_size;
    out_.dim_ = c.dim;
    // The cache grows with the sequence: seq_len comes from the file's header, and a small file
    // can claim a cache of many GB (1024 layers x 2^20 positions).
    reserve_slots(std::min(c.seq_len, 1024) + 64);
  }
  /// Loads a llama2.c checkpoint (see Llama2cModel::load for the errors it throws).
  explicit Llama2cTarget(const std::filesystem::path& checkpoint)
      : Llama2cTarget(std::make_shared<const Llama2cModel>(Llama2cModel::load(checkpoint))) {}
  Llama2cTarget(const std::filesystem::path& checkpoint, Options options)
      : Llama2cTarget(std::make_shared<const Llama2cModel>(Llama2cModel::load(checkpoint)), options) {}

  /// Threads of the forward (Options::threads).
  int threads() const { return pool_ ? pool_->threads() : 1; }

  /// Bytes the KV cache holds now (K and V; it grows as the sequence does).
  std::size_t kv_cache_bytes() const { return (k_cache_.size() + v_cache_.size()) * sizeof(float); }

  int vocab_size() const { return config().vocab_size; }
  int feature_dim() const { return config().dim; }
  /// The model's trained context length: positions 0 .. max_positions() - 1 exist.
  int max_positions() const { return config().seq_len; }
  /// Tokens in the KV cache.
  int cached() const { return cached_; }
  const Llama2cConfig& config() const { return model_->config(); }
  const Llama2cModel& model() const { return *model_; }

  /// Starts a new sequence whose KV cache holds exactly `tokens`.
  void prefill(std::span<const token_t> tokens) {
    const int n = static_cast<int>(tokens.size());
    if (n > max_positions())
      throw error("Llama2cTarget::prefill: " + std::to_string(n) + " tokens exceed the model's " +
                  std::to_string(max_positions()) + " positions");
    for (int i = 0; i < n; ++i) check_token(tokens[static_cast<std::size_t>(i)], "prefill: token " + std::to_string(i));
    cached_ = 0;
    pending_parent_.clear();
    started_ = true;
    // A chain: token i attends to the tokens before it. No logits are needed.
    prefill_features_.resize(static_cast<std::size_t>(n) * config().dim);
    run(tokens.data(), n, nullptr, /*with_output=*/false);
    for (int i = 0; i < n; ++i) final_norm(i, prefill_features_.data() + static_cast<std::size_t>(i) * config().dim);
    cached_ = n;
  }

  /// The features of the last prefill's tokens, row i for token i (n * feature_dim() floats, what
  /// a tree forward's features(node) gives at those positions). Valid until the next prefill.
  std::span<const float> prefill_features() const { return prefill_features_; }

  /// Runs every node of `tree` on top of the KV cache (tree.base_position must equal cached()).
  const Output& forward(const TreeView& tree) {
    if (!started_) throw error("Llama2cTarget::forward: call prefill() first");
    if (tree.size < 1) throw error("Llama2cTarget::forward: empty tree (it needs at least its root)");
    if (tree.base_position != cached_)
      throw error("Llama2cTarget::forward: the tree starts at position " + std::to_string(tree.base_position) +
                  " but the KV cache holds " + std::to_string(cached_) + " tokens");
    pending_parent_.assign(tree.parent, tree.parent + tree.size);
    for (int i = 0; i < tree.size; ++i) {
      check_token(tree.token[i], "forward: token of tree node " + std::to_string(i));
      if (i > 0 && (tree.parent[i] < 0 || tree.parent[i] >= i))
        throw error("Llama2cTarget::forward: tree node " + std::to_string(i) + " has parent " +
                    std::to_string(tree.parent[i]) + " (parents must come before their children)");
      const int position = tree.position(i);
      if (position >= max_positions())
        throw error("Llama2cTarget::forward: tree node " + std::to_string(i) + " sits at position " +
                    std::to_string(position) + ", past the model's " + std::to_string(max_positions()) +
                    " positions");
    }
    run(tree.token, tree.size, tree.parent, /*with_output=*/true);
    return out_;
  }

  /// Keeps the K/V of `path` (root first, a chain of the last forward's tree) as the next
  /// committed positions.
  void commit(std::span<const node_t> path) {
    const int n = static_cast<int>(pending_parent_.size());
    if (n == 0) throw error("Llama2cTarget::commit: no forward() since the last commit or prefill");
    if (path.empty() || path[0] != 0) throw error("Llama2cTarget::commit: the path must start at the root (node 0)");
    for (std::size_t k = 1; k < path.size(); ++k) {
      if (path[k] <= 0 || path[k] >= n || pending_parent_[static_cast<std::size_t>(path[k])] != path[k - 1])
        throw error("Llama2cTarget::commit: path entry " + std::to_string(k) + " (node " + std::to_string(path[k]) +
                    ") is not a child of node " + std::to_string(path[k - 1]) + " in the last tree");
    }
    // V is [layer][slot][kv_head][head_dim], the packed layout of one sequence; K is transposed,
    // [layer][kv_dim][slot]: one-float rows, kv_dim of them per slot, `slots_` floats apart.
    const Llama2cConfig& c = config();
    const int length = static_cast<int>(path.size());
    const core::KvCacheLayout v_layout = core::kv_layout(c.n_layers, slots_, c.n_kv_heads, c.head_size(), sizeof(float));
    core::KvCacheLayout k_layout = core::kv_layout(c.n_layers, slots_, c.kv_dim(), 1, sizeof(float));
    k_layout.head_stride = static_cast<long long>(slots_) * sizeof(float);
    k_layout.position_stride = sizeof(float);
    core::compact_kv_rows(reinterpret_cast<unsigned char*>(k_cache_.data()), k_layout, 0, cached_, path.data(), length);
    core::compact_kv_rows(reinterpret_cast<unsigned char*>(v_cache_.data()), v_layout, 0, cached_, path.data(), length);
    cached_ += length;
    pending_parent_.clear();
  }

  /// Keeps the first `tokens` entries of the KV cache (a later forward overwrites the rest) and
  /// drops an uncommitted forward.
  void rewind(int tokens) {
    if (!started_) throw error("Llama2cTarget::rewind: call prefill() first");
    if (tokens < 0 || tokens > cached_)
      throw error("Llama2cTarget::rewind: cannot keep " + std::to_string(tokens) + " tokens, the KV cache holds " +
                  std::to_string(cached_));
    cached_ = tokens;
    pending_parent_.clear();
  }

  /// Plain autoregressive greedy decoding: `n` new tokens after `prompt`, one forward per token
  /// (stops after a token of `stop`, included). Starts a new sequence.
  std::vector<token_t> generate(std::span<const token_t> prompt, int n, std::span<const token_t> stop = {}) {
    if (prompt.empty()) throw error("Llama2cTarget::generate: the prompt is empty");
    if (n < 0) throw error("Llama2cTarget::generate: n must be >= 0, got " + std::to_string(n));
    if (static_cast<long>(prompt.size()) + n - 1 > max_positions())
      throw error("Llama2cTarget::generate: " + std::to_string(prompt.size()) + " prompt tokens + " +
                  std::to_string(n) + " new tokens exceed the model's " + std::to_string(max_positions()) +
                  " positions");
    prefill(prompt.first(prompt.size() - 1));
    check_token(prompt.back(), "generate: the last prompt token");
    std::vector<token_t> out;
    token_t last = prompt.back();
    const node_t root = -1;
    for (int i = 0; i < n; ++i) {
      run(&last, 1, &root, /*with_output=*/true);
      ++cached_;
      last = out_.argmax(0);
      out.push_back(last);
      if (std::find(stop.begin(), stop.end(), last) != stop.end()) break;
    }
    return out;
  }

 private:
  void check_token(token_t t, const std::string& what) const {
    if (t < 0 || t >= vocab_size())
      throw error("Llama2cTarget::" + what + " is " + std::to_string(t) + ", outside the vocabulary [0, " +
                  std::to_string(vocab_size()) + ")");
  }

  // Makes room for `slots` cache slots per layer, keeping the committed entries.
  void reserve_slots(int slots) {
    if (slots <= slots_) return;
    const Llama2cConfig& c = config();
    const int new_slots = std::max(slots, slots_ + slots_ / 2);
    const std::size_t row = static_cast<std::size_t>(c.kv_dim());
    const std::size_t floats = static_cast<std::size_t>(c.n_layers) * static_cast<std::size_t>(new_slots) * row;
    for (std::vector<float>* cache : {&k_cache_, &v_cache_}) {
      std::vector<float> grown;
      try {
        grown.resize(floats);
      } catch (const std::bad_alloc&) {  // an error naming the sizes, not a bare std::bad_alloc
        throw error("Llama2cTarget: cannot allocate the KV cache for " + std::to_string(new_slots) + " positions (" +
                    std::to_string(2 * floats * sizeof(float)) + " bytes: 2 x " + std::to_string(c.n_layers) +
                    " layers x " + std::to_string(row) + " floats per position)");
      }
      if (cache == &v_cache_) {
        for (int l = 0; l < c.n_layers; ++l)
          std::copy_n(cache->data() + static_cast<std::size_t>(l) * slots_ * row,
                      static_cast<std::size_t>(cached_) * row, grown.data() + static_cast<std::size_t>(l) * new_slots * row);
      } else {  // K: [layer][kv_dim][slot]
        for (std::size_t r = 0; r < static_cast<std::size_t>(c.n_layers) * row; ++r)
          std::copy_n(cache->data() + r * slots_, cached_, grown.data() + r * new_slots);
      }
      *cache = std::move(grown);
    }
    slots_ = new_slots;
  }

  // The features of the last run's token i: its residual stream after the final RMSNorm.
  void final_norm(int i, float* features) const {
    const int dim = config().dim;
    llama::rmsnorm(features, x_.data() + static_cast<std::size_t>(i) * dim, model_->rms_final().data(), dim);
  }

  // Runs `n` tokens on top of the cache; token i writes its K/V at slot cached_ + i. parent:
  // null for a chain (token i at position cached_ + i sees the tokens before it), else a tree's
  // parent array (topological, -1 for the root).
  void run(const token_t* tokens, int n, const node_t* parent, bool with_output) {
    const Llama2cConfig& c = config();
    const int dim = c.dim, hs = c.head_size();
    reserve_slots(cached_ + n);
    const std::size_t un = static_cast<std::size_t>(n);
    auto grow = [](auto& v, std::size_t size) {
      if (v.size() < size) v.resize(size);
    };
    grow(x_, un * dim);
    grow(rope_, un * hs);
    grow(up_, un);
    grow(depth_, un);
    int max_depth = 1;
    for (int i = 0; i < n; ++i) {
      const float* e = model_->embedding().data() + static_cast<std::size_t>(tokens[i]) * dim;
      std::copy_n(e, dim, x_.data() + static_cast<std::size_t>(i) * dim);
      int depth = i;  // a chain's
      if (parent) {
        const node_t p = i == 0 ? -1 : parent[i];
        depth = p < 0 ? 0 : depth_[static_cast<std::size_t>(p)] + 1;
        depth_[static_cast<std::size_t>(i)] = depth;
        up_[static_cast<std::size_t>(i)] = p < 0 ? -1 : cached_ + p;
        max_depth = std::max(max_depth, depth + 1);
      }
      rope_table_.angles(cached_ + depth, rope_.data() + static_cast<std::size_t>(i) * hs);
    }
    scratch_.reserve(c, model_->layer(0).wqkv, model_->layer(0).w13, n, cached_ + (parent ? max_depth : n), max_depth);
    const llama::LayerBatch batch{n, cached_, cached_, x_.data(), rope_.data(), parent == nullptr, up_.data(), max_depth};
    const std::size_t layer_floats = static_cast<std::size_t>(slots_) * c.kv_dim();
    for (int l = 0; l < c.n_layers; ++l) {
      const llama::KvView kv{k_cache_.data() + l * layer_floats, v_cache_.data() + l * layer_floats, slots_};
      llama::decoder_layer(model_->layer(l), c, batch, kv, scratch_, pool_.get());
    }
    if (!with_output) return;

    const llama::Matrix& cls = model_->classifier();
    out_.size_ = n;
    grow(out_.features_, un * dim);
    grow(out_.logits_, un * cls.stride);
    grow(out_.argmax_, un);
    out_.vocab_stride_ = cls.stride;
    for (int i = 0; i < n; ++i) final_norm(i, out_.features_.data() + static_cast<std::size_t>(i) * dim);
    llama::detail::matmul(pool_.get(), cls, out_.features_.data(), dim, n, out_.logits_.data(), cls.stride);
    for (int i = 0; i < n; ++i) {
      const float* row = out_.logits_.data() + static_cast<std::size_t>(i) * cls.stride;
      const int best = core::argmax_row(row, c.vocab_size);
      // NaN and +-inf alike: an infinite logit makes the softmax and the verifiers' ratios NaN.
      if (best < 0 || !std::all_of(row, row + c.vocab_size, [](float x) { return std::isfinite(x); }))
        throw error("Llama2cTarget: a logit of tree node " + std::to_string(i) + " is not finite (NaN or +-inf)");
      out_.argmax_[static_cast<std::size_t>(i)] = best;
    }
  }

  std::shared_ptr<const Llama2cModel> model_;
  bool started_ = false;
  int cached_ = 0;
  int slots_ = 0;                        // cache slots per layer (committed + tree scratch)
  std::shared_ptr<llama::ThreadPool> pool_;  // null: one thread
  llama::RopeTable rope_table_;
  std::vector<float> k_cache_;            // [layer][kv_dim][slot] (see llama::KvView)
  std::vector<float> v_cache_;            // [layer][slot][kv_head][head_size]
  std::vector<node_t> pending_parent_;    // the last forward's tree, until commit
  std::vector<float> x_, rope_;
  std::vector<int> up_, depth_;
  llama::LayerScratch scratch_;
  std::vector<float> prefill_features_;
  Output out_;
};

static_assert(FeatureTarget<Llama2cTarget>, "Llama2cTarget must model specdec::FeatureTarget");
static_assert(BoundedTarget<Llama2cTarget>, "Llama2cTarget must expose max_positions()");
static_assert(RewindableTarget<Llama2cTarget>, "Llama2cTarget must be rewindable (StagedDrafter's draft model)");

}  // namespace specdec
