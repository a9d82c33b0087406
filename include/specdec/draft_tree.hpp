// DraftTree: what a drafter writes (host side), and its checks. The merge of several drafters'
// trees is TreeMerger (tree_merger.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <specdec/config.hpp>
#include <specdec/core/tree.hpp>
#include <specdec/core/tree_view.hpp>
#include <specdec/error.hpp>

namespace specdec {

/// A draft tree being built: parent array in topological order, a token, a score and a
/// source bit mask per node (set by TreeMerger: bit i = proposed by drafter i). Node 0 is the root. Scores rank nodes when a node budget has to
/// be kept ("higher is more likely to be accepted"); a probability-like score that does not
/// grow along a path is the natural choice. Storage is reused across reset() calls.
class DraftTree {
 public:
  DraftTree() { reset(0); }

  /// Empties the tree down to its root token.
  void reset(token_t root_token) {
    parent_.assign(1, -1);
    token_.assign(1, root_token);
    score_.assign(1, std::numeric_limits<float>::infinity());
    source_.assign(1, 0u);
    dist_parent_.clear();
    dist_draw_begin_.assign(1, 0);
    dist_draws_.clear();
    dist_q_.clear();
  }

  /// Appends a child of `parent` and returns its index. Throws specdec::error for a parent
  /// that does not exist yet or a NaN score.
  node_t add(node_t parent, token_t token, float score = 1.0f) {
    if (parent < 0 || parent >= size()) {
      throw error("DraftTree::add: parent " + std::to_string(parent) + " does not exist (tree has " +
                  std::to_string(size()) + " nodes)");
    }
    if (score != score) throw error("DraftTree::add: score is NaN");
    parent_.push_back(parent);
    token_.push_back(token);
    score_.push_back(score);
    source_.push_back(0u);
    return size() - 1;
  }

  /// Appends a chain of tokens below `parent`, scores decaying by `decay` per level from
  /// `first_score`. Returns the index of the last node (or `parent` for an empty chain).
  node_t add_chain(node_t parent, std::span<const token_t> tokens, float first_score = 1.0f,
                   float decay = 1.0f) {
    float score = first_score;
    for (token_t t : tokens) {
      parent = add(parent, t, score);
      score *= decay;
    }
    return parent;
  }

  /// For drafters that sample (drafter_traits<D>::emits_draft_probabilities): says that `draws`
  /// were drawn below `parent`, in this order and independently *with replacement* (a token may
  /// repeat), from `q` (one probability per vocabulary token, summing to 1). Adds a child for
  /// each distinct draw that is not a child yet (score: the parent's score times q), and keeps
  /// q and the draws, which survive the merge and budget, so that a rejection-sampling verifier
  /// tests each draw against this q. May be called several times for one parent (independent
  /// batches). Throws specdec::error for an empty or malformed q or a draw q gives no mass.
  void add_sampled(node_t parent, std::span<const float> q, std::span<const token_t> draws) {
    if (parent < 0 || parent >= size()) {
      throw error("DraftTree::add_sampled: parent " + std::to_string(parent) + " does not exist (tree has " +
                  std::to_string(size()) + " nodes)");
    }
    if (q.empty()) throw error("DraftTree::add_sampled: q is empty");
    if (!dist_q_.empty() && q.size() != dist_q_.size() / dist_parent_.size())
      throw error("DraftTree::add_sampled: q has " + std::to_string(q.size()) + " entries, earlier rows had " +
                  std::to_string(dist_q_.size() / dist_parent_.size()));
    double total = 0.0;
    for (std::size_t v = 0; v < q.size(); ++v) {
      if (!(q[v] >= 0.0f) || q[v] > std::numeric_limits<float>::max())
        throw error("DraftTree::add_sampled: q[" + std::to_string(v) + "] = " + std::to_string(q[v]) +
                    " is not a probability");
      total += q[v];
    }
    if (!(total >= 1.0 - 1e-3 && total <= 1.0 + 1e-3))
      throw error("DraftTree::add_sampled: q sums to " + std::to_string(total) + ", not 1");
    for (token_t x : draws) {
      if (x < 0 || static_cast<std::size_t>(x) >= q.size() || q[x] <= 0.0f)
        throw error("DraftTree::add_sampled: draw " + std::to_string(x) +
                    " is outside q's support (q has " + std::to_string(q.size()) + " entries)");
      if (find_child(parent, x) < 0) add(parent, x, parent == 0 ? q[x] : score(parent) * q[x]);
    }
    dist_parent_.push_back(parent);
    dist_draws_.insert(dist_draws_.end(), draws.begin(), draws.end());
    dist_draw_begin_.push_back(static_cast<int>(dist_draws_.size()));
    dist_q_.insert(dist_q_.end(), q.begin(), q.end());
  }

  /// Number of add_sampled() batches, and each batch's parent, q and draws.
  int distributions() const { return static_cast<int>(dist_parent_.size()); }
  node_t distribution_parent(int k) const { return dist_parent_[k]; }
  std::span<const float> distribution_q(int k) const {
    const std::size_t row = dist_q_.size() / dist_parent_.size();
    return {dist_q_.data() + k * row, row};
  }
  std::span<const token_t> distribution_draws(int k) const {
    return {dist_draws_.data() + dist_draw_begin_[k],
            static_cast<std::size_t>(dist_draw_begin_[k + 1] - dist_draw_begin_[k])};
  }

  /// The child of `parent` carrying `token`, or -1.
  node_t find_child(node_t parent, token_t token) const {
    for (int i = parent + 1; i < size(); ++i)
      if (parent_[i] == parent && token_[i] == token) return i;
    return -1;
  }

  int size() const { return static_cast<int>(parent_.size()); }
  token_t root_token() const { return token_[0]; }
  node_t parent(int i) const { return parent_[i]; }
  token_t token(int i) const { return token_[i]; }
  float score(int i) const { return score_[i]; }
  std::uint32_t source(int i) const { return source_[i]; }
  std::span<const node_t> parents() const { return parent_; }
  std::span<const token_t> tokens() const { return token_; }
  std::span<const float> scores() const { return score_; }
  std::span<const std::uint32_t> sources() const { return source_; }

 private:
  friend class TreeMerger;  // tree_merger.hpp
  std::vector<node_t> parent_;
  std::vector<token_t> token_;
  std::vector<float> score_;
  std::vector<std::uint32_t> source_;
  std::vector<node_t> dist_parent_;
  std::vector<int> dist_draw_begin_;
  std::vector<token_t> dist_draws_;
  std::vector<float> dist_q_;
};

/// Throws specdec::error when `tree` is malformed for a target of `vocab_size` tokens.
/// `who` names the tree's author in the message (a string, or a callable that builds one).
template <class Who>
void check_tree(const DraftTree& tree, int vocab_size, const Who& who) {
  int bad = -1;
  const auto status = core::validate_tree(tree.parents().data(), tree.tokens().data(), tree.size(),
                                          vocab_size, tree.size(), &bad);
  if (status == core::tree_status::ok) return;
  std::string msg = subject(who) + ": malformed draft tree: " + core::to_string(status);
  if (bad >= 0) {
    msg += " at node " + std::to_string(bad) + " (parent " + std::to_string(tree.parent(bad)) +
           ", token " + std::to_string(tree.token(bad)) + ", vocabulary size " +
           std::to_string(vocab_size) + ")";
  }
  throw error(msg);
}

/// Throws specdec::error when a draft distribution of `tree` (add_sampled) does not have one
/// entry per token of the target's vocabulary.
template <class Who>
void check_distributions(const DraftTree& tree, int vocab_size, const Who& who) {
  if (tree.distributions() > 0 && tree.distribution_q(0).size() != static_cast<std::size_t>(vocab_size)) {
    throw error(subject(who) + ": draft distribution rows have " + std::to_string(tree.distribution_q(0).size()) +
                " entries, the target's vocabulary has " + std::to_string(vocab_size));
  }
}

}  // namespace specdec
