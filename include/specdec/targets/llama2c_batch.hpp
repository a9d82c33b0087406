// Llama2cBatchTarget: Llama2cTarget for many sequences at once — a BatchTarget (concepts.hpp) with
// one KV cache per slot whose forward runs the trees of all slots of a batch in one call, reading
// each weight matrix, the classifier included, once for all their nodes (targets/llama2c_forward.hpp).
// That is what SpeculativeBatch needs from a weight-bound model: a step costs about one read of
// the weights, whatever the number of requests.
//
// Each slot computes exactly what a Llama2cTarget would: a node's logits and features do not
// depend on the other trees of the batch (nor on threads; the kernel path, Options::isa, does
// change bits: docs/targets.md "ISA"), so each request's output equals its own plain greedy
// decoding on the same machine bit for bit. Host-only.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/error.hpp>
#include <specdec/models/llama2c_model.hpp>
#include <specdec/targets/llama2c_forward.hpp>
#include <specdec/core/tree_view.hpp>

namespace specdec {

class Llama2cBatchTarget {
 public:
  struct Options {
    int threads = 1;  ///< threads of the forward, the caller's included: [1, 256]
    /// The fp32 kernels' ISA path, as Llama2cTarget::Options::isa.
    llama::HostIsa isa = llama::HostIsa::automatic;
  };

  /// The batched forward's output: tree(b) is trees[b]'s Llama2cOutput.
  class BatchOutput {
   public:
    const Llama2cOutput& tree(int b) const { return trees_[static_cast<std::size_t>(b)]; }
    int size() const { return static_cast<int>(trees_.size()); }

   private:
    friend class Llama2cBatchTarget;
    std::vector<Llama2cOutput> trees_;
  };

  /// `slots` sequences (>= 1) of `model`, whose weights are shared.
  Llama2cBatchTarget(std::shared_ptr<const Llama2cModel> model, int slots)
      : Llama2cBatchTarget(std::move(model), slots, Options()) {}
  Llama2cBatchTarget(std::shared_ptr<const Llama2cModel> model, int slots, Options options)
      : forward_(std::move(model), options.threads, options.isa) {
    if (slots < 1) throw error("Llama2cBatchTarget: slots must be >= 1, got " + std::to_string(slots));
    slots_.reserve(static_cast<std::size_t>(slots));
    for (int s = 0; s < slots; ++s) slots_.emplace_back(config(), forward_.model().weights());
  }

  int vocab_size() const { return config().vocab_size; }
  int feature_dim() const { return config().dim; }
  int slots() const { return static_cast<int>(slots_.size()); }
  /// The model's trained context length, for every slot.
  int max_positions() const { return config().seq_len; }
  int threads() const { return forward_.threads(); }
  const LlamaConfig& config() const { return forward_.model().config(); }
  const Llama2cModel& model() const { return forward_.model(); }
  /// Tokens in `slot`'s KV cache.
  int cached(int slot) const { return at(slot, "cached").cache.cached; }
  /// Bytes the KV caches of all slots hold now.
  std::size_t kv_cache_bytes() const {
    std::size_t bytes = 0;
    for (const Slot& s : slots_) bytes += s.cache.bytes();
    return bytes;
  }

  /// Starts a new sequence in `slot` whose KV cache holds exactly `tokens`.
  void prefill(int slot, std::span<const token_t> tokens) {
    Slot& s = at(slot, "prefill");
    llama::check_prefill(who(slot, "prefill"), config(), tokens);
    s.pending_parent.clear();
    s.started = true;
    forward_.prefill(s.cache, tokens, s.prefill_features);
  }

  /// The features of `slot`'s last prefill, row i for token i (what a tree forward's
  /// features(node) gives at those positions). Valid until the slot's next prefill.
  std::span<const float> prefill_features(int slot) const { return at(slot, "prefill_features").prefill_features; }

  /// Runs every tree of `batch` on its slot's cache in one forward (trees[b].base_position must
  /// equal cached(slots[b]); a slot at most once). Checks everything before running anything.
  const BatchOutput& forward(const TreeBatchView& batch) {
    if (batch.slots.size() != batch.trees.size())
      throw error("Llama2cBatchTarget::forward: the batch has " + std::to_string(batch.slots.size()) + " slots but " +
                  std::to_string(batch.trees.size()) + " trees");
    runs_.clear();
    ++forward_count_;
    for (std::size_t b = 0; b < batch.trees.size(); ++b) {
      const int slot = batch.slots[b];
      Slot& s = at(slot, "forward");
      if (!s.started) throw error(who(slot, "forward") + ": call prefill() first");
      if (s.last_forward == forward_count_) throw error(who(slot, "forward") + ": the slot has two trees in the batch");
      s.last_forward = forward_count_;
      const TreeView& tree = batch.trees[b];
      llama::check_tree([slot] { return who(slot, "forward"); }, config(), tree, s.cache.cached);
      runs_.push_back({&s.cache, tree.token, tree.size, tree.parent});
    }
    // Each slot's tree is the one a commit is checked against from here on, even if the run
    // throws (non-finite logits): the run writes its K/V over the slot's last tree's.
    for (std::size_t b = 0; b < batch.trees.size(); ++b) {
      const TreeView& tree = batch.trees[b];
      slots_[static_cast<std::size_t>(batch.slots[b])].pending_parent.assign(tree.parent, tree.parent + tree.size);
    }
    forward_.run(runs_, /*with_output=*/true);
    out_.trees_.clear();
    for (int first = 0; const llama::SequenceRun& r : runs_) {
      out_.trees_.push_back(forward_.output(first, r.n));
      first += r.n;
    }
    return out_;
  }

  /// Keeps the K/V of `path` (root first, a chain of `slot`'s tree in the last forward) as the
  /// slot's next committed positions.
  void commit(int slot, std::span<const node_t> path) {
    Slot& s = at(slot, "commit");
    llama::check_path([slot] { return who(slot, "commit"); }, path, s.pending_parent);
    s.cache.commit(path);
    s.pending_parent.clear();
  }

  /// Ends `slot`'s sequence (its cache keeps its memory for the next prefill).
  void release(int slot) {
    Slot& s = at(slot, "release");
    s.started = false;
    s.cache.cached = 0;
    s.pending_parent.clear();
  }

 private:
  struct Slot {
    Slot(const LlamaConfig& c, WeightFormat weights) : cache(c, weights) {}
    llama::SequenceCache cache;
    bool started = false;
    std::vector<node_t> pending_parent;  // the slot's tree in the last forward, until commit
    std::vector<float> prefill_features;
    unsigned long long last_forward = 0;  // the forward_count_ of the last forward with a tree of this slot
  };

  static std::string who(int slot, const char* what) {
    return std::string("Llama2cBatchTarget::") + what + " (slot " + std::to_string(slot) + ")";
  }
  const Slot& at(int slot, const char* what) const {
    if (slot < 0 || slot >= slots())
      throw error(std::string("Llama2cBatchTarget::") + what + ": slot " + std::to_string(slot) + " outside [0, " +
                  std::to_string(slots()) + ")");
    return slots_[static_cast<std::size_t>(slot)];
  }
  Slot& at(int slot, const char* what) { return const_cast<Slot&>(std::as_const(*this).at(slot, what)); }

  llama::TreeForward forward_;
  std::vector<Slot> slots_;
  std::vector<llama::SequenceRun> runs_;
  unsigned long long forward_count_ = 0;
  BatchOutput out_;
};

static_assert(FeatureBatchTarget<Llama2cBatchTarget>, "Llama2cBatchTarget must model specdec::FeatureBatchTarget");

}  // namespace specdec
