// TimedTarget: one Target made of two, one that decides the output and one that pays for it.
//
// A forward runs the tree through both and returns the *decider's* output; prefill, commit and
// rewind go to both, so the two KV caches always hold the same tokens. The decider decides what
// the decoder accepts (e.g. ReplayTarget: the recorded answers of a 7B model); the coster runs
// the same trees and commits the same paths (e.g. Llama2cTarget on a checkpoint of another
// shape), so timing it measures what the decoding would cost on that model, with the decider's
// acceptance. specbench's timed replay (docs/specbench.md) is built on it. Host-only.
#pragma once

#include <algorithm>
#include <span>
#include <string>
#include <type_traits>
#include <utility>

#include <specdec/concepts.hpp>
#include <specdec/core/tree_view.hpp>
#include <specdec/error.hpp>

namespace specdec {

/// What TimedTarget needs of its coster: it takes the same prefill, trees and paths as the
/// decider (its forward's output is not used, so it may return nothing).
template <class C>
concept CostingTarget = requires(C& c, std::span<const token_t> tokens, const TreeView& tree,
                                 std::span<const node_t> path) {
  c.prefill(tokens);
  c.forward(tree);
  c.commit(path);
};

/// `Coster` may be a reference type (`TimedTarget<ReplayTarget, MyCoster&>`) to cost through an
/// object the caller keeps.
template <Target Decider, class Coster>
  requires CostingTarget<std::remove_reference_t<Coster>>
class TimedTarget {
 public:
  /// Throws specdec::error when the coster has a vocabulary smaller than the decider's (it could
  /// not take every token the decider's trees hold).
  TimedTarget(Decider decider, Coster coster) : decider_(std::move(decider)), coster_(std::forward<Coster>(coster)) {
    if constexpr (requires { coster_.vocab_size(); }) {
      if (coster_.vocab_size() < decider_.vocab_size())
        throw error("TimedTarget: the coster's vocabulary (" + std::to_string(coster_.vocab_size()) +
                    " tokens) is smaller than the decider's (" + std::to_string(decider_.vocab_size()) + ")");
    }
  }

  Decider& decider() { return decider_; }
  const Decider& decider() const { return decider_; }
  std::remove_reference_t<Coster>& coster() { return coster_; }
  const std::remove_reference_t<Coster>& coster() const { return coster_; }

  int vocab_size() const { return decider_.vocab_size(); }

  void prefill(std::span<const token_t> tokens) {
    decider_.prefill(tokens);
    coster_.prefill(tokens);
  }

  /// The decider runs first, so a tree it refuses never reaches the coster.
  decltype(auto) forward(const TreeView& tree) {
    decltype(auto) out = decider_.forward(tree);
    coster_.forward(tree);
    return out;
  }

  void commit(std::span<const node_t> path) {
    decider_.commit(path);
    coster_.commit(path);
  }

  void rewind(int tokens)
    requires RewindableTarget<Decider> && requires(std::remove_reference_t<Coster>& c) { c.rewind(tokens); }
  {
    decider_.rewind(tokens);
    coster_.rewind(tokens);
  }

  /// The fewer positions of the two (a tree must fit both caches).
  int max_positions() const
    requires BoundedTarget<Decider> || BoundedTarget<std::remove_reference_t<Coster>>
  {
    if constexpr (BoundedTarget<Decider> && BoundedTarget<std::remove_reference_t<Coster>>)
      return std::min(decider_.max_positions(), coster_.max_positions());
    else if constexpr (BoundedTarget<Decider>) return decider_.max_positions();
    else return coster_.max_positions();
  }

  // The decider's features, when it has them (the output is the decider's, features included).
  int feature_dim() const
    requires FeatureTarget<Decider>
  {
    return decider_.feature_dim();
  }
  std::span<const float> prefill_features() const
    requires FeatureTarget<Decider>
  {
    return decider_.prefill_features();
  }

 private:
  Decider decider_;
  Coster coster_;
};

}  // namespace specdec
