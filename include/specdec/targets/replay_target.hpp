// ReplayTarget: a Target that replays one recorded greedy answer, without a model.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/core/tree_view.hpp>
#include <specdec/error.hpp>

namespace specdec {

/// Greedy decoding is deterministic, so a model's recorded greedy answer says what the model
/// outputs after every prefix of it. ReplayTarget holds one such reference sequence (the prompt,
/// the recorded answer, the stop token) and answers a tree forward from it:
///  - node i *agrees* when its parent agrees and its token is the reference token at its
///    position (the root: the reference token at base_position);
///  - argmax(i) is the next reference token when node i agrees, and a token that differs from it
///    otherwise (the model's answer after a context it was never recorded on is unknown; any
///    other token keeps the exact verifier from accepting past the disagreement).
/// The exact verifier therefore accepts exactly the draft tokens the recorded model would have
/// accepted, and the decoder's output is the recorded answer token for token. Past the end of the
/// reference the model is taken to repeat the stop token.
///
/// Its output has argmax(node) only: no row of the vocabulary is ever materialised, and a
/// verifier that needs logits (sampling) is refused at compile time.
class ReplayTarget {
 public:
  /// What forward() returns: the target's argmax after each node of the last tree.
  class Output {
   public:
    token_t argmax(node_t node) const { return argmax_[static_cast<std::size_t>(node)]; }

   private:
    friend class ReplayTarget;
    std::vector<token_t> argmax_;
  };

  /// `reference`: prompt tokens, then the recorded answer, then `stop_token` (normally EOS).
  /// Throws specdec::error for an empty reference, a vocabulary of fewer than 2 tokens, or a
  /// token outside [0, vocab_size).
  ReplayTarget(std::vector<token_t> reference, int vocab_size, token_t stop_token)
      : reference_(std::move(reference)), vocab_(vocab_size), stop_(stop_token) {
    if (vocab_size < 2)
      throw error("ReplayTarget: vocab_size must be >= 2, got " + std::to_string(vocab_size));
    if (reference_.empty()) throw error("ReplayTarget: the reference sequence is empty");
    if (!in_vocabulary(stop_token)) out_of_vocabulary(stop_token, "the stop token");
    for (std::size_t p = 0; p < reference_.size(); ++p)
      if (!in_vocabulary(reference_[p])) out_of_vocabulary(reference_[p], "reference token " + std::to_string(p));
  }

  int vocab_size() const { return vocab_; }
  token_t stop_token() const { return stop_; }
  std::span<const token_t> reference() const { return reference_; }
  /// Tokens in the "KV cache" (prefilled and committed); -1 before prefill().
  int cached() const { return cached_; }

  /// Starts the replay with `tokens` in the cache. Throws specdec::error unless `tokens` is a
  /// prefix of the reference.
  void prefill(std::span<const token_t> tokens) {
    if (tokens.size() > reference_.size())
      throw error("ReplayTarget::prefill: the prompt has " + std::to_string(tokens.size()) +
                  " tokens, the reference only " + std::to_string(reference_.size()));
    for (std::size_t p = 0; p < tokens.size(); ++p) {
      if (tokens[p] != reference_[p])
        throw error("ReplayTarget::prefill: prompt token " + std::to_string(p) + " is " +
                    std::to_string(tokens[p]) + ", the reference has " + std::to_string(reference_[p]) +
                    " (the prompt must be a prefix of the reference)");
    }
    cached_ = static_cast<int>(tokens.size());
    parent_.clear();
    agrees_.clear();
  }

  const Output& forward(const TreeView& tree) {
    if (cached_ < 0) throw error("ReplayTarget::forward: call prefill() first");
    if (tree.base_position != cached_)
      throw error("ReplayTarget::forward: tree starts at position " + std::to_string(tree.base_position) +
                  " but the cache holds " + std::to_string(cached_) + " tokens");
    if (tree.size < 1) throw error("ReplayTarget::forward: the tree has no root");
    const auto n = static_cast<std::size_t>(tree.size);
    parent_.assign(tree.parent, tree.parent + n);
    agrees_.resize(n);
    out_.argmax_.resize(n);
    for (std::size_t i = 0; i < n; ++i) {
      const token_t token = tree.token[i];
      if (!in_vocabulary(token)) out_of_vocabulary(token, "ReplayTarget::forward: token of node " + std::to_string(i));
      const auto position = static_cast<std::size_t>(tree.position(static_cast<int>(i)));
      const bool parent_agrees = i == 0 || agrees_[static_cast<std::size_t>(parent_[i])];
      agrees_[i] = parent_agrees && token == at(position);
      const token_t recorded = at(position + 1);
      out_.argmax_[i] = agrees_[i] ? recorded : static_cast<token_t>((recorded + 1) % vocab_);
    }
    return out_;
  }

  /// Appends the path's tokens to the cache. Throws specdec::error when the path is not a chain
  /// from the root of the last tree or leaves the reference: a verifier that accepts a token the
  /// recorded model did not produce is caught here.
  void commit(std::span<const node_t> path) {
    if (agrees_.empty()) throw error("ReplayTarget::commit: no tree was forwarded since prefill()");
    if (path.empty() || path[0] != 0) throw error("ReplayTarget::commit: the path must start at the root (node 0)");
    for (std::size_t k = 0; k < path.size(); ++k) {
      const node_t node = path[k];
      if (node < 0 || static_cast<std::size_t>(node) >= agrees_.size() || (k > 0 && parent_[node] != path[k - 1]))
        throw error("ReplayTarget::commit: path entry " + std::to_string(k) + " (node " + std::to_string(node) +
                    ") is not a child of the previous entry in the last tree");
      if (!agrees_[static_cast<std::size_t>(node)])
        throw error("ReplayTarget::commit: node " + std::to_string(node) + " at position " +
                    std::to_string(cached_ + static_cast<int>(k)) +
                    " is not on the recorded sequence (expected token " +
                    std::to_string(at(static_cast<std::size_t>(cached_) + k)) + ")");
    }
    cached_ += static_cast<int>(path.size());
    agrees_.clear();
  }

 private:
  token_t at(std::size_t position) const { return position < reference_.size() ? reference_[position] : stop_; }

  bool in_vocabulary(token_t t) const { return t >= 0 && t < vocab_; }
  // Separate from the test so that the message is only built for a bad token (forward() tests
  // every node of every tree).
  [[noreturn]] void out_of_vocabulary(token_t t, const std::string& what) const {
    throw error(what + " is " + std::to_string(t) + ", outside the vocabulary [0, " + std::to_string(vocab_) + ")");
  }

  std::vector<token_t> reference_;
  int vocab_;
  token_t stop_;
  int cached_ = -1;
  std::vector<node_t> parent_;  // of the last forwarded tree
  std::vector<char> agrees_;    // per node of the last forwarded tree; empty once committed
  Output out_;
};

static_assert(Target<ReplayTarget>);

}  // namespace specdec
