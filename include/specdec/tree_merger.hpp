// TreeMerger: the merge of several drafters' trees into the one tree a step sends, ranked by the
// drafters' scores or by calibrated path probability (AcceptanceModel), and laid out for the
// target (TreeView). The step engine's (step/sequence_step.hpp); a drafter needs only DraftTree
// (draft_tree.hpp).
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <specdec/acceptance_model.hpp>
#include <specdec/config.hpp>
#include <specdec/core/tree.hpp>
#include <specdec/core/tree_view.hpp>
#include <specdec/draft_tree.hpp>
#include <specdec/error.hpp>

namespace specdec {

/// Merges drafters' trees into one and lays it out for the target. Reuses its storage.
///
/// Merge rule: trees are read in order; a node is identified by (merged parent, token), so
/// identical paths proposed by several drafters become one node whose source mask has one bit
/// per proposing drafter (bit i for tree i) and whose score is the highest proposed.
/// Budget rule: a node's priority is the minimum score along its path (so a child never outranks
/// its parent); the `budget` non-root nodes of highest priority are kept, ties broken by first
/// appearance in the merge order. The kept set is therefore always a connected tree, and the
/// result is deterministic. Nodes deeper than `max_depth` are dropped.
///
/// Calibrated rule (rank() with an AcceptanceModel): a node's priority is instead the estimated
/// probability that its whole path is accepted (the product along the path of the model's
/// estimate for the node, the highest among the drafters that proposed it), comparable across
/// drafters; it never grows along a path either, and the same ties rule keeps the tree connected.
/// rank() then keep(k) lets the caller choose k from the ranked probabilities (draft_budget.hpp).
class TreeMerger {
 public:
  /// Merges `trees` (all rooted at the same token) and lays the result out.
  /// Throws specdec::error when roots differ or budget/max_depth are negative.
  void merge(std::span<const DraftTree* const> trees, int budget, int max_depth) {
    if (budget < 0) throw error("TreeMerger: node budget must be >= 0, got " + std::to_string(budget));
    rank(trees, budget, max_depth);
    keep(ranked_);
  }

  /// Merges `trees` and ranks the merged nodes, the best `most` of them in order: by score as
  /// merge() does, or by calibrated path probability when `model` is given (its drafter i is
  /// tree i). Then keep(k) for k <= most keeps the first k. Throws as merge() does, and when
  /// `model` knows fewer drafters than there are trees.
  void rank(std::span<const DraftTree* const> trees, int most, int max_depth, const AcceptanceModel* model = nullptr) {
    if (most < 0) throw error("TreeMerger: node budget must be >= 0, got " + std::to_string(most));
    if (max_depth < 0) throw error("TreeMerger: max_depth must be >= 0, got " + std::to_string(max_depth));
    if (trees.empty()) throw error("TreeMerger: no trees to merge");
    if (trees.size() > 32)
      throw error("TreeMerger: " + std::to_string(trees.size()) + " trees, but a source mask has 32 bits");
    if (model && model->drafters() < static_cast<int>(trees.size()))
      throw error("TreeMerger: the acceptance model knows " + std::to_string(model->drafters()) + " drafters, but " +
                  std::to_string(trees.size()) + " trees were given");
    trees_ = static_cast<int>(trees.size());
    const token_t root = trees[0]->root_token();
    all_.reset(root);
    tree_score_.assign(static_cast<std::size_t>(trees_), 0.0f);  // the root's row, set below
    first_child_.assign(1, -1);
    next_sibling_.assign(1, -1);
    depth_.assign(1, 0);
    proposal_node_.clear();
    draw_begin_.assign(1, 0);
    draw_token_.clear();
    proposal_q_.clear();
    for (std::size_t t = 0; t < trees.size(); ++t) {
      const DraftTree& tree = *trees[t];
      tree_score_[t] = std::numeric_limits<float>::infinity();  // the root, as DraftTree scores it
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
          tree_score_.resize(tree_score_.size() + static_cast<std::size_t>(trees_), 0.0f);
          (last < 0 ? first_child_[up] : next_sibling_[last]) = child;
        } else {
          all_.score_[child] = std::max(all_.score_[child], tree.score(i));
        }
        float& own = tree_score_[static_cast<std::size_t>(child) * trees_ + t];
        own = std::max(own, tree.score(i));
        all_.source_[child] |= bit;
        remap_[i] = child;
      }
      for (int k = 0; k < tree.distributions(); ++k) {
        const node_t up = remap_[tree.distribution_parent(k)];
        if (up < 0) continue;
        const auto q = tree.distribution_q(k);
        const auto draws = tree.distribution_draws(k);
        q_vocab_ = static_cast<int>(q.size());
        proposal_node_.push_back(up);
        draw_token_.insert(draw_token_.end(), draws.begin(), draws.end());
        draw_begin_.push_back(static_cast<int>(draw_token_.size()));
        proposal_q_.insert(proposal_q_.end(), q.begin(), q.end());
      }
    }
    rank_nodes(most, model);
  }

  /// Nodes rank() ranked (at most its `most`), and the priority of the i-th best: its path
  /// probability after a calibrated rank(), else the minimum score along its path.
  int ranked() const { return ranked_; }
  double ranked_priority(int i) const { return priority_[static_cast<std::size_t>(order_[static_cast<std::size_t>(i)])]; }

  /// Keeps the best `k` ranked nodes and lays the tree out. Throws for k outside [0, ranked()]
  /// (rank() ranks at most the nodes there are).
  void keep(int k) {
    if (k < 0 || k > ranked_)
      throw error("TreeMerger::keep: " + std::to_string(k) + " nodes, but " + std::to_string(ranked_) + " were ranked");
    keep_nodes(k);
    lay_out();
  }

  /// Lays out the root alone, as keep(0) after a merge would, without merging anything: the tree
  /// of a step that asks no drafter. ranked() is then 0.
  void root_only(token_t root) {
    ranked_ = 0;
    kept_.reset(root);
    kept_all_.assign(1, 0);
    proposal_node_.clear();
    draw_begin_.assign(1, 0);
    draw_token_.clear();
    proposal_q_.clear();
    lay_out();
  }

  /// Tells `model` the verdict on the kept tree: `accepted` is the accepted path (root first).
  /// Every kept node whose parent was accepted was tested, and counts for each drafter that
  /// proposed it (with that drafter's conditional score and the probability it was ranked by).
  void record_verdict(AcceptanceModel& model, std::span<const node_t> accepted) const {
    if (model.drafters() < trees_)
      throw error("TreeMerger::record_verdict: the acceptance model knows " + std::to_string(model.drafters()) +
                  " drafters, but the tree merged " + std::to_string(trees_));
    on_path_.assign(static_cast<std::size_t>(kept_.size()), 0);
    for (node_t n : accepted) on_path_[static_cast<std::size_t>(n)] = 1;
    for (int i = 1; i < kept_.size(); ++i) {
      const node_t parent = kept_.parent_[i];
      if (!on_path_[static_cast<std::size_t>(parent)]) continue;
      const node_t node = kept_all_[static_cast<std::size_t>(i)], up = kept_all_[static_cast<std::size_t>(parent)];
      for (int t = 0; t < trees_; ++t) {
        const float own = tree_score(node, t);
        if (!(own > 0.0f)) continue;
        model.record(t, depth_[node], AcceptanceModel::conditional(own, tree_score(up, t)), on_path_[static_cast<std::size_t>(i)] != 0);
      }
    }
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
    if (!proposal_node_.empty()) {
      v.proposals = static_cast<int>(proposal_node_.size());
      v.first_proposal = first_proposal_.data();
      v.next_proposal = next_proposal_.data();
      v.proposal_node = proposal_node_.data();
      v.draw_begin = draw_begin_.data();
      v.draw_token = draw_token_.data();
      v.draw_node = draw_node_.data();
      v.proposal_q = proposal_q_.data();
    }
    return v;
  }

 private:
  // Node `node`'s score from tree t (0 when t did not propose it).
  float tree_score(node_t node, int t) const { return tree_score_[static_cast<std::size_t>(node) * trees_ + t]; }

  void rank_nodes(int most, const AcceptanceModel* model) {
    const int n = all_.size();
    priority_.resize(n);
    priority_[0] = std::numeric_limits<double>::infinity();
    for (int i = 1; i < n; ++i) {
      const node_t up = all_.parent_[i];
      if (!model) {
        priority_[i] = std::min<double>(all_.score_[i], priority_[up]);
        continue;
      }
      double p = 0.0;
      for (int t = 0; t < trees_; ++t) {
        const float own = tree_score(i, t);
        if (own > 0.0f) p = std::max(p, model->probability(t, depth_[i], AcceptanceModel::conditional(own, tree_score(up, t))));
      }
      priority_[i] = up == 0 ? p : p * priority_[up];
    }
    order_.resize(n - 1);
    for (std::size_t k = 0; k < order_.size(); ++k) order_[k] = static_cast<int>(k) + 1;
    ranked_ = std::min(most, n - 1);
    // Parents precede children in this order (priority never rises along a path, and a parent's
    // index is smaller), so any prefix is a connected tree.
    std::partial_sort(order_.begin(), order_.begin() + ranked_, order_.end(), [&](int a, int b) {
      return priority_[a] != priority_[b] ? priority_[a] > priority_[b] : a < b;
    });
  }

  void keep_nodes(int keep) {
    const int n = all_.size();
    kept_order_.assign(order_.begin(), order_.begin() + keep);
    std::sort(kept_order_.begin(), kept_order_.end());
    remap_.assign(n, -1);
    remap_[0] = 0;
    kept_.reset(all_.token_[0]);
    kept_.source_[0] = all_.source_[0];
    kept_all_.assign(1, 0);
    for (int k = 0; k < keep; ++k) {
      const int i = kept_order_[k];
      kept_all_.push_back(i);
      remap_[i] = kept_.size();
      kept_.parent_.push_back(remap_[all_.parent_[i]]);
      kept_.token_.push_back(all_.token_[i]);
      kept_.score_.push_back(all_.score_[i]);
      kept_.source_.push_back(all_.source_[i]);
    }
    keep_proposals();
  }

  // Proposals below a kept node follow it (renumbered); the others go, compacted in order.
  void keep_proposals() {
    const std::size_t row = static_cast<std::size_t>(q_vocab_);
    std::size_t kept = 0;
    int draws_kept = 0;
    for (std::size_t k = 0; k < proposal_node_.size(); ++k) {
      const node_t node = remap_[proposal_node_[k]];
      if (node < 0) continue;
      const int begin = draw_begin_[k], end = draw_begin_[k + 1];
      proposal_node_[kept] = node;
      std::copy(draw_token_.begin() + begin, draw_token_.begin() + end, draw_token_.begin() + draws_kept);
      draw_begin_[kept] = draws_kept;  // entry k is no longer needed: it was read above
      draws_kept += end - begin;
      if (kept != k)
        std::copy_n(proposal_q_.begin() + k * row, row, proposal_q_.begin() + kept * row);
      ++kept;
    }
    proposal_node_.resize(kept);
    draw_begin_.resize(kept + 1);
    draw_begin_[kept] = draws_kept;
    draw_token_.resize(static_cast<std::size_t>(draws_kept));
    proposal_q_.resize(kept * row);
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
    const int proposals = static_cast<int>(proposal_node_.size());
    if (proposals == 0) return;
    first_proposal_.assign(n, -1);
    next_proposal_.resize(proposals);
    for (int k = proposals - 1; k >= 0; --k) {  // pushing to the front keeps merge order
      next_proposal_[k] = first_proposal_[proposal_node_[k]];
      first_proposal_[proposal_node_[k]] = k;
    }
    draw_node_.resize(draw_token_.size());
    for (int k = 0; k < proposals; ++k) {
      for (int d = draw_begin_[k]; d < draw_begin_[k + 1]; ++d) {
        node_t child = layout_first_child_[proposal_node_[k]];
        while (child >= 0 && kept_.token_[child] != draw_token_[d]) child = layout_next_sibling_[child];
        draw_node_[d] = child;
      }
    }
  }

  DraftTree all_, kept_;
  std::vector<node_t> first_child_, next_sibling_, remap_;
  std::vector<int> depth_, order_, kept_order_;
  std::vector<double> priority_;
  int trees_ = 0, ranked_ = 0;
  std::vector<float> tree_score_;       // [merged node][tree]: each tree's score of the node, 0 if absent
  std::vector<node_t> kept_all_;        // kept node -> merged node
  mutable std::vector<char> on_path_;   // record_verdict's scratch
  std::vector<int> layout_depth_;
  std::vector<std::uint32_t> mask_;
  std::vector<node_t> layout_first_child_, layout_next_sibling_;
  int max_depth_ = 0;
  // Draft distributions of the merged tree (see TreeView).
  int q_vocab_ = 0;
  std::vector<node_t> proposal_node_, first_proposal_, draw_node_;
  std::vector<int> next_proposal_, draw_begin_;
  std::vector<token_t> draw_token_;
  std::vector<float> proposal_q_;
};

}  // namespace specdec
