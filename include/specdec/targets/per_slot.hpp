// PerSlotTarget<T>: a BatchTarget made of one single-sequence Target per slot — the fallback that
// lets SpeculativeBatch decode a model that only models Target (e.g. Llama2cTarget).
//
// It is correct, not fast: forward(batch) runs each slot's tree with its own target, one forward
// per request, so a weight-bound model reads its weights once per request instead of once per
// step. The targets may share their weights (Llama2cTarget shares a Llama2cModel through a
// shared_ptr), so the memory is that of one model plus one KV cache per slot. A target that runs
// all requests' nodes in one weights-once forward models BatchTarget itself.
#pragma once

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/error.hpp>

namespace specdec {

template <Target T>
class PerSlotTarget {
  using forward_result = decltype(std::declval<T&>().forward(std::declval<const TreeView&>()));
  // A target that returns its output by reference keeps it alive itself; one that returns it by
  // value has it kept here.
  static constexpr bool by_reference = std::is_lvalue_reference_v<forward_result>;
  using stored_output = std::conditional_t<by_reference, const target_output_t<T>*, std::optional<target_output_t<T>>>;

 public:
  using slot_target_type = T;

  /// The batched forward's output: tree(b) is slot batch.slots[b]'s target's output.
  class BatchOutput {
   public:
    const target_output_t<T>& tree(int b) const { return *outputs_[static_cast<std::size_t>(b)]; }

   private:
    friend class PerSlotTarget;
    std::vector<stored_output> outputs_;
  };

  /// One target per slot (all of the same vocabulary).
  explicit PerSlotTarget(std::vector<T> targets) : targets_(std::move(targets)) {
    if (targets_.empty()) throw error("PerSlotTarget: no targets (one per slot is needed)");
    for (std::size_t s = 1; s < targets_.size(); ++s) {
      if (targets_[s].vocab_size() != targets_[0].vocab_size())
        throw error("PerSlotTarget: slot " + std::to_string(s) + "'s target has " +
                    std::to_string(targets_[s].vocab_size()) + " tokens, slot 0's " +
                    std::to_string(targets_[0].vocab_size()));
    }
    out_.outputs_.resize(targets_.size());
  }

  int vocab_size() const { return static_cast<int>(targets_[0].vocab_size()); }
  int slots() const { return static_cast<int>(targets_.size()); }
  /// The positions of every slot (the fewest of its targets').
  int max_positions() const
    requires BoundedTarget<T>
  {
    int fewest = static_cast<int>(targets_[0].max_positions());
    for (const T& t : targets_) fewest = std::min(fewest, static_cast<int>(t.max_positions()));
    return fewest;
  }

  void prefill(int slot, std::span<const token_t> tokens) { at(slot, "prefill").prefill(tokens); }

  /// Each tree with its slot's target: one forward per tree.
  const BatchOutput& forward(const TreeBatchView& batch) {
    if (batch.slots.size() != batch.trees.size())
      throw error("PerSlotTarget::forward: the batch has " + std::to_string(batch.slots.size()) + " slots but " +
                  std::to_string(batch.trees.size()) + " trees");
    for (std::size_t b = 0; b < batch.trees.size(); ++b) {
      T& target = at(batch.slots[b], "forward");
      if constexpr (by_reference) out_.outputs_[b] = &target.forward(batch.trees[b]);
      else out_.outputs_[b].emplace(target.forward(batch.trees[b]));
    }
    return out_;
  }

  void commit(int slot, std::span<const node_t> path) { at(slot, "commit").commit(path); }
  /// Nothing to free: the slot's next prefill starts its target afresh.
  void release(int slot) { at(slot, "release"); }

  T& target(int slot) { return at(slot, "target"); }

 private:
  T& at(int slot, const char* what) {
    if (slot < 0 || slot >= slots())
      throw error(std::string("PerSlotTarget::") + what + ": slot " + std::to_string(slot) + " outside [0, " +
                  std::to_string(slots()) + ")");
    return targets_[static_cast<std::size_t>(slot)];
  }

  std::vector<T> targets_;
  BatchOutput out_;
};

}  // namespace specdec
