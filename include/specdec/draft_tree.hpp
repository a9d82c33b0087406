// DraftTree: what a drafter writes (host side), and the merge of several drafters' trees.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <span>
#include <string>
#include <vector>

#include <specdec/config.hpp>
#include <specdec/core/tree.hpp>
#include <specdec/error.hpp>
#include <specdec/tree_view.hpp>

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
    score_.assign(1, INFINITY);
    source_.assign(1, 0u);
  }

  /// Appends a child of `parent` and returns its index. Throws specdec::error for a parent
  /// that does not exist yet or a NaN score.
  node_t add(node_t parent, token_t token, float score = 1.0f) {
    if (parent < 0 || parent >= size()) {
      throw error("DraftTree::add: parent " + std::to_string(parent) + " does not exist (tree has " +
                  std::to_string(size()) + " nodes)");
    }
    if (std::isnan(score)) throw error("DraftTree::add: score is NaN");
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
  friend class TreeMerger;
  std::vector<node_t> parent_;
  std::vector<token_t> token_;
  std::vector<float> score_;
  std::vector<std::uint32_t> source_;
};

/// Throws specdec::error when `tree` is malformed for a target of `vocab_size` tokens.
/// `who` names the tree's author in the message.
inline void check_tree(const DraftTree& tree, int vocab_size, const std::string& who) {
  int bad = -1;
  const auto status = core::validate_tree(tree.parents().data(), tree.tokens().data(), tree.size(),
                                          vocab_size, tree.size(), &bad);
  if (status == core::tree_status::ok) return;
  std::string msg = who + ": malformed draft tree: " + core::to_string(status);
  if (bad >= 0) {
    msg += " at node " + std::to_string(bad) + " (parent " + std::to_string(tree.parent(bad)) +
           ", token " + std::to_string(tree.token(bad)) + ", vocabulary size " +
           std::to_string(vocab_size) + ")";
  }
  throw error(msg);
}

/// Merges drafters' trees into one and lays it out for the target. Reuses its storage.
///
/// Merge rule: trees are read in order; a node is identified by (merged parent, token), so
/// identical paths proposed by several drafters become one node whose source mask has one bit
/// per proposing drafter (bit i for tree i) and whose score is the highest proposed.
/// Budget rule: a node's priority is the minimum score along its path (so a child never outranks
/// its parent); the `budget` non-root nodes of highest priority are kept, ties broken by first
/// appearance in the merge order. The kept set is therefore always a connected tree, and the
/// result is deterministic. Nodes deeper than `max_depth` are dropped.
class TreeMerger {
 public:
  /// Merges `trees` (all rooted at the same token) and lays the result out.
  /// Throws specdec::error when roots differ or budget/max_depth are negative.
  void merge(std::span<const DraftTree* const> trees, int budget, int max_depth) {
    if (budget < 0) throw error("TreeMerger: node budget must be >= 0, got " + std::to_string(budget));
    if (max_depth < 0) throw error("TreeMerger: max_depth must be >= 0, got " + std::to_string(max_depth));
    if (trees.empty()) throw error("TreeMerger: no trees to merge");
    if (trees.size() > 32)
      throw error("TreeMerger: " + std::to_string(trees.size()) + " trees, but a source mask has 32 bits");
    const token_t root = trees[0]->root_token();
    all_.reset(root);
    first_child_.assign(1, -1);
    next_sibling_.assign(1, -1);
    depth_.assign(1, 0);
    for (std::size_t t = 0; t < trees.size(); ++t) {
      const DraftTree& tree = *trees[t];
      if (tree.root_token() != root) {
        throw error("TreeMerger: tree " + std::to_string(t) + " has root token " +
                    std::to_string(tree.root_token()) + ", tree 0 has " + std::to_string(root));
      }
      const std::uint32_t bit = 1u << t;
      remap_.assign(tree.size(), -1);
      remap_[0] = 0;
      all_.source_[0] |= bit;
      for (int i = 1; i < tree.size(); ++i) {
        const node_t up = remap_[tree.parent(i)];
        if (up < 0) continue;  // below a node dropped for depth
        if (depth_[up] + 1 > max_depth) continue;
        node_t child = first_child_[up];
        node_t last = -1;
        while (child >= 0 && all_.token_[child] != tree.token(i)) {
          last = child;
          child = next_sibling_[child];
        }
        if (child < 0) {
          child = all_.size();
          all_.parent_.push_back(up);
          all_.token_.push_back(tree.token(i));
          all_.score_.push_back(tree.score(i));
          all_.source_.push_back(0u);
          first_child_.push_back(-1);
          next_sibling_.push_back(-1);
          depth_.push_back(depth_[up] + 1);
          (last < 0 ? first_child_[up] : next_sibling_[last]) = child;
        } else {
          all_.score_[child] = std::max(all_.score_[child], tree.score(i));
        }
        all_.source_[child] |= bit;
        remap_[i] = child;
      }
    }
    keep_budget(budget);
    lay_out();
  }

  /// The merged tree (after the budget cut).
  const DraftTree& tree() const { return kept_; }
  /// The laid-out view of tree(); valid until the next merge. base_position is left 0.
  TreeView view() const {
    TreeView v;
    v.size = kept_.size();
    v.words_per_row = core::mask_words(v.size);
    v.max_depth = max_depth_;
    v.parent = kept_.parent_.data();
    v.token = kept_.token_.data();
    v.depth = layout_depth_.data();
    v.mask = mask_.data();
    v.first_child = layout_first_child_.data();
    v.next_sibling = layout_next_sibling_.data();
    return v;
  }

 private:
  void keep_budget(int budget) {
    const int n = all_.size();
    priority_.resize(n);
    priority_[0] = INFINITY;
    for (int i = 1; i < n; ++i) priority_[i] = std::min(all_.score_[i], priority_[all_.parent_[i]]);
    order_.resize(n - 1);
    std::iota(order_.begin(), order_.end(), 1);
    const int keep = std::min(budget, n - 1);
    // Parents precede children in this order (priority never rises along a path, and a parent's
    // index is smaller), so any prefix is a connected tree.
    std::partial_sort(order_.begin(), order_.begin() + keep, order_.end(), [&](int a, int b) {
      return priority_[a] != priority_[b] ? priority_[a] > priority_[b] : a < b;
    });
    std::sort(order_.begin(), order_.begin() + keep);
    remap_.assign(n, -1);
    remap_[0] = 0;
    kept_.reset(all_.token_[0]);
    kept_.source_[0] = all_.source_[0];
    for (int k = 0; k < keep; ++k) {
      const int i = order_[k];
      remap_[i] = kept_.size();
      kept_.parent_.push_back(remap_[all_.parent_[i]]);
      kept_.token_.push_back(all_.token_[i]);
      kept_.score_.push_back(all_.score_[i]);
      kept_.source_.push_back(all_.source_[i]);
    }
  }

  void lay_out() {
    const int n = kept_.size();
    const int words = core::mask_words(n);
    layout_depth_.resize(n);
    mask_.resize(static_cast<std::size_t>(n) * words);
    layout_first_child_.resize(n);
    layout_next_sibling_.resize(n);
    max_depth_ = core::build_tree_layout(kept_.parent_.data(), n, words, layout_depth_.data(),
                                         mask_.data(), layout_first_child_.data(),
                                         layout_next_sibling_.data());
  }

  DraftTree all_, kept_;
  std::vector<node_t> first_child_, next_sibling_, remap_;
  std::vector<int> depth_, order_;
  std::vector<float> priority_;
  std::vector<int> layout_depth_;
  std::vector<std::uint32_t> mask_;
  std::vector<node_t> layout_first_child_, layout_next_sibling_;
  int max_depth_ = 0;
};

}  // namespace specdec
