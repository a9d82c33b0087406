// FixedTreeDrafter: proposes the same tree every step (tests, shape experiments).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/error.hpp>

namespace specdec {

/// Proposes the same non-root nodes every step: node k + 1 of the draft has parent parents[k]
/// (0 = the root) and token tokens[k]; scores fall with k so a budget keeps the first nodes.
class FixedTreeDrafter {
 public:
  static constexpr const char* name = "fixed";

  FixedTreeDrafter(std::vector<node_t> parents, std::vector<token_t> tokens)
      : parents_(std::move(parents)), tokens_(std::move(tokens)) {
    if (parents_.size() != tokens_.size())
      throw error("FixedTreeDrafter: " + std::to_string(parents_.size()) + " parents but " +
                  std::to_string(tokens_.size()) + " tokens");
    for (std::size_t k = 0; k < parents_.size(); ++k)
      if (parents_[k] < 0 || parents_[k] > static_cast<node_t>(k))
        throw error("FixedTreeDrafter: node " + std::to_string(k + 1) + " has parent " +
                    std::to_string(parents_[k]) + "; parents must come before their children");
  }

  void begin(std::span<const token_t>) {}
  /// Nodes whose token lies outside the target's vocabulary are left out, with their subtrees
  /// (a fixed list of token ids may have been written for a larger vocabulary).
  void propose(const DraftContext& ctx, DraftTree& tree) {
    placed_.assign(parents_.size() + 1, -1);
    placed_[0] = 0;
    for (std::size_t k = 0; k < parents_.size(); ++k) {
      const node_t parent = placed_[static_cast<std::size_t>(parents_[k])];
      if (parent < 0 || tokens_[k] < 0 || tokens_[k] >= ctx.vocab_size) continue;
      placed_[k + 1] = tree.add(parent, tokens_[k], 1.0f / static_cast<float>(k + 1));
    }
  }
  void observe(std::span<const token_t>) {}

 private:
  std::vector<node_t> parents_;
  std::vector<token_t> tokens_;
  std::vector<node_t> placed_;  // node k's id in the proposed tree, -1 when left out
};

static_assert(Drafter<FixedTreeDrafter>);

}  // namespace specdec
