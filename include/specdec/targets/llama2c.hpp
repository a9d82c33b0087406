// Llama2cTarget: a real Llama-architecture transformer (llama2.c checkpoints) that runs draft
// trees with tree attention on the host — specdec's reference Target.
//
// Each tree node is one token at position tree.position(node). A node attends to every token of
// the KV cache and to its own ancestors in the tree (TreeView::attends), so one forward scores
// every path of the draft at once. Tree node i writes its K/V at cache slot cached() + i; commit()
// moves the accepted path's entries to contiguous positions (core::compact_kv_rows).
//
// Speed: one forward reads each weight matrix, the classifier included, once for all its nodes,
// and each cached K/V row once for all nodes (targets/llama2c_forward.hpp, the forward that
// Llama2cBatchTarget runs too); Options::threads splits the work over a pool of persistent
// threads owned by the target. Nothing is allocated per step once the scratch has grown to the
// largest tree.
//
// Bit-exactness: a node's result does not depend on the rest of the tree, the thread count or
// the prefill's chunking. It does depend on the kernel path the target runs (Options::isa: fused
// multiply-adds on AVX2/AVX-512, separate ones on the portable path; docs/targets.md, "ISA").
// Every sum runs in the order a single-sequence forward
// uses (matrix products over the input index, attention over positions 0, 1, ..., the node
// itself; models/host_kernels.hpp), so a tree forward gives, bit for bit, the logits of each
// node's path run alone, and speculative decoding with the exact verifier reproduces generate().
// Host-only.
#pragma once

#include <algorithm>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/core/tree_view.hpp>
#include <specdec/error.hpp>
#include <specdec/models/llama2c_model.hpp>
#include <specdec/targets/llama2c_forward.hpp>

namespace specdec {

class Llama2cTarget {
 public:
  /// What forward() returns, per tree node: the logits row, its argmax, and the features.
  /// Valid until the next forward(), commit() or prefill().
  using Output = Llama2cOutput;

  struct Options {
    int threads = 1;  ///< threads of the forward, the caller's included: [1, 256]
    /// The fp32 kernels' ISA path; `automatic`: SPECDEC_HOST_ISA's, else the CPU's best. One this
    /// CPU lacks is refused (specdec::error).
    llama::HostIsa isa = llama::HostIsa::automatic;
  };

  /// Shares `model`'s weights (several targets may decode with one model).
  explicit Llama2cTarget(std::shared_ptr<const Llama2cModel> model) : Llama2cTarget(std::move(model), Options()) {}
  Llama2cTarget(std::shared_ptr<const Llama2cModel> model, Options options)
      : forward_(std::move(model), options.threads, options.isa), cache_(config(), forward_.model().weights()) {}
  /// Loads a llama2.c checkpoint (see Llama2cModel::load for the errors it throws).
  explicit Llama2cTarget(const std::filesystem::path& checkpoint)
      : Llama2cTarget(std::make_shared<const Llama2cModel>(Llama2cModel::load(checkpoint))) {}
  Llama2cTarget(const std::filesystem::path& checkpoint, Options options)
      : Llama2cTarget(std::make_shared<const Llama2cModel>(Llama2cModel::load(checkpoint)), options) {}

  /// Threads of the forward (Options::threads).
  int threads() const { return forward_.threads(); }
  /// The ISA path of the forward's fp32 kernels: "portable", "avx2" or "avx512" (Options::isa).
  const char* isa() const { return forward_.kernels().name; }

  /// Bytes the KV cache holds now (K and V; it grows as the sequence does).
  std::size_t kv_cache_bytes() const { return cache_.bytes(); }

  int vocab_size() const { return config().vocab_size; }
  int feature_dim() const { return config().dim; }
  /// The model's trained context length: positions 0 .. max_positions() - 1 exist.
  int max_positions() const { return config().seq_len; }
  /// Tokens in the KV cache.
  int cached() const { return cache_.cached; }
  const LlamaConfig& config() const { return model().config(); }
  const Llama2cModel& model() const { return forward_.model(); }

  /// Starts a new sequence whose KV cache holds exactly `tokens`.
  void prefill(std::span<const token_t> tokens) {
    llama::check_prefill("Llama2cTarget::prefill", config(), tokens);
    pending_parent_.clear();
    started_ = true;
    forward_.prefill(cache_, tokens, prefill_features_);
  }

  /// The features of the last prefill's tokens, row i for token i (n * feature_dim() floats, what
  /// a tree forward's features(node) gives at those positions). Valid until the next prefill.
  std::span<const float> prefill_features() const { return prefill_features_; }

  /// Runs every node of `tree` on top of the KV cache (tree.base_position must equal cached()).
  const Output& forward(const TreeView& tree) {
    if (!started_) throw error("Llama2cTarget::forward: call prefill() first");
    llama::check_tree("Llama2cTarget::forward", config(), tree, cache_.cached);
    pending_parent_.assign(tree.parent, tree.parent + tree.size);
    const llama::SequenceRun run{&cache_, tree.token, tree.size, tree.parent};
    forward_.run({&run, 1}, /*with_output=*/true);
    out_ = forward_.output(0, tree.size);
    return out_;
  }

  /// Keeps the K/V of `path` (root first, a chain of the last forward's tree) as the next
  /// committed positions.
  void commit(std::span<const node_t> path) {
    llama::check_path("Llama2cTarget::commit", path, pending_parent_);
    cache_.commit(path);
    pending_parent_.clear();
  }

  /// Keeps the first `tokens` entries of the KV cache (a later forward overwrites the rest) and
  /// drops an uncommitted forward.
  void rewind(int tokens) {
    if (!started_) throw error("Llama2cTarget::rewind: call prefill() first");
    if (tokens < 0 || tokens > cache_.cached)
      throw error("Llama2cTarget::rewind: cannot keep " + std::to_string(tokens) + " tokens, the KV cache holds " +
                  std::to_string(cache_.cached));
    cache_.cached = tokens;
    pending_parent_.clear();
  }

  /// Plain autoregressive greedy decoding: `n` new tokens after `prompt`, one forward per token
  /// (stops after a token of `stop`, included). Starts a new sequence: prefill() of all but the
  /// prompt's last token, then decode() from it.
  std::vector<token_t> generate(std::span<const token_t> prompt, int n, std::span<const token_t> stop = {}) {
    if (prompt.empty()) throw error("Llama2cTarget::generate: the prompt is empty");
    if (n < 0) throw error("Llama2cTarget::generate: n must be >= 0, got " + std::to_string(n));
    if (static_cast<long>(prompt.size()) + n - 1 > max_positions())
      throw error("Llama2cTarget::generate: " + std::to_string(prompt.size()) + " prompt tokens + " +
                  std::to_string(n) + " new tokens exceed the model's " + std::to_string(max_positions()) +
                  " positions");
    check_token(prompt.back(), "generate: the last prompt token");
    prefill(prompt.first(prompt.size() - 1));
    return decode(prompt.back(), n, stop);
  }

  /// Plain greedy decoding on the sequence in the cache: `n` new tokens after `last`, the token
  /// that follows the cached ones (one forward per token; stops after a token of `stop`, included).
  std::vector<token_t> decode(token_t last, int n, std::span<const token_t> stop = {}) {
    return decode_into(last, n, stop, nullptr);
  }

  /// decode(), also setting `features` to each step's features: row i (feature_dim() floats) for
  /// the token fed at step i, what forward()'s features(0) gives at its position.
  std::vector<token_t> decode(token_t last, int n, std::span<const token_t> stop, std::vector<float>& features) {
    features.clear();
    return decode_into(last, n, stop, &features);
  }

 private:
  std::vector<token_t> decode_into(token_t last, int n, std::span<const token_t> stop, std::vector<float>* features) {
    if (!started_) throw error("Llama2cTarget::decode: call prefill() first");
    if (n < 0) throw error("Llama2cTarget::decode: n must be >= 0, got " + std::to_string(n));
    if (static_cast<long>(cache_.cached) + n > max_positions())
      throw error("Llama2cTarget::decode: " + std::to_string(cache_.cached) + " cached tokens + " + std::to_string(n) +
                  " new tokens exceed the model's " + std::to_string(max_positions()) + " positions");
    check_token(last, "decode: the last token");
    pending_parent_.clear();
    std::vector<token_t> out;
    const node_t root = -1;
    for (int i = 0; i < n; ++i) {
      const llama::SequenceRun run{&cache_, &last, 1, &root};
      forward_.run({&run, 1}, /*with_output=*/true);
      ++cache_.cached;
      const auto output = forward_.output(0, 1);
      if (features) {
        const std::span<const float> row = output.features(0);
        features->insert(features->end(), row.begin(), row.end());
      }
      last = output.argmax(0);
      out.push_back(last);
      if (std::find(stop.begin(), stop.end(), last) != stop.end()) break;
    }
    return out;
  }

  // `what` is a literal: decode() checks its token on every call (each of a decoder's plain runs),
  // and a std::string parameter would be built for it every time.
  void check_token(token_t t, const char* what) const {
    if (t < 0 || t >= vocab_size())
      throw error(std::string("Llama2cTarget::") + what + " is " + std::to_string(t) + ", outside the vocabulary [0, " +
                  std::to_string(vocab_size()) + ")");
  }

  llama::TreeForward forward_;
  llama::SequenceCache cache_;
  bool started_ = false;
  std::vector<node_t> pending_parent_;  // the last forward's tree, until commit
  std::vector<float> prefill_features_;
  Output out_;
};

static_assert(FeatureTarget<Llama2cTarget>, "Llama2cTarget must model specdec::FeatureTarget");
static_assert(PlainDecodingFeatureTarget<Llama2cTarget>, "Llama2cTarget must model specdec::PlainDecodingFeatureTarget");
static_assert(BoundedTarget<Llama2cTarget>, "Llama2cTarget must expose max_positions()");
static_assert(RewindableTarget<Llama2cTarget>, "Llama2cTarget must be rewindable (StagedDrafter's draft model)");

}  // namespace specdec
