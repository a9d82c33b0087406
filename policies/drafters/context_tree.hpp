// ContextTreeDrafter: a model-free drafter that drafts a tree from the context.
#pragma once

#include <algorithm>
#include <queue>
#include <span>
#include <string>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/error.hpp>
#include <specdec/index/continuation_automaton.hpp>

namespace specdec {

struct ContextTreeOptions {
  int max_nodes = 64;
  int branching = 8;
  float min_probability = 1e-4f;
};

class ContextTreeDrafter {
 public:
  static constexpr const char* name = "tree";

  ContextTreeDrafter() = default;
  explicit ContextTreeDrafter(ContextTreeOptions options) : options_(options) {}

  void begin(std::span<const token_t> prompt) {
    index_.clear();
    for (token_t t : prompt) index_.append(t);
  }
  void observe(std::span<const token_t> committed) {
    for (token_t t : committed) index_.append(t);
  }

  void propose(const DraftContext& ctx, DraftTree& tree) {
    if (index_.size() != static_cast<int>(ctx.tokens.size())) begin(ctx.tokens);
    const int budget = std::min(options_.max_nodes, ctx.budget);
    if (budget <= 0 || ctx.max_depth <= 0) return;
    nodes_.clear();
    nodes_.push_back(Node{index_.suffix_match(), 0, 1.0f});
    frontier_ = {};
    push_children(0);
    int added = 0;
    while (added < budget && !frontier_.empty()) {
      const Candidate c = frontier_.top();
      frontier_.pop();
      const node_t node = tree.add(c.parent, c.token, c.probability);
      (void)node;
      nodes_.push_back(Node{index_.extend(nodes_[c.parent].match, c.token), nodes_[c.parent].depth + 1, c.probability});
      ++added;
      if (nodes_.back().depth < ctx.max_depth) push_children(static_cast<int>(nodes_.size()) - 1);
    }
  }

 private:
  struct Node {
    index::ContinuationAutomaton::Match match;
    int depth;
    float probability;
  };
  struct Candidate {
    float probability;
    node_t parent;
    token_t token;
    bool operator<(const Candidate& o) const {
      return probability != o.probability ? probability < o.probability : parent > o.parent;
    }
  };

  void push_children(int node) {
    predict(nodes_[node].match);
    for (const auto& [token, p] : prediction_) {
      const float path = nodes_[node].probability * p;
      if (path >= options_.min_probability) frontier_.push(Candidate{path, node, token});
    }
  }

  // Witten-Bell blend of the continuation counts of the match and its shorter contexts.
  void predict(index::ContinuationAutomaton::Match match) {
    prediction_.clear();
    double weight = 1.0;
    for (auto m = match; m.state >= 0 && weight > 1e-3; m = index_.shorter(m)) {
      const int total = index_.continued(m.state);
      if (total == 0) continue;
      const auto conts = index_.continuations(m.state);
      const double distinct = static_cast<double>(conts.size());
      const double denom = total + distinct;
      const int k = std::min<int>(options_.branching, static_cast<int>(conts.size()));
      for (int i = 0; i < k; ++i) {
        const double p = weight * conts[i].count / denom;
        auto it = std::find_if(prediction_.begin(), prediction_.end(), [&](auto& e) { return e.first == conts[i].token; });
        if (it == prediction_.end()) prediction_.emplace_back(conts[i].token, static_cast<float>(p));
        else it->second += static_cast<float>(p);
      }
      weight *= distinct / denom;
    }
    std::sort(prediction_.begin(), prediction_.end(), [](auto& a, auto& b) { return a.second > b.second; });
    if (static_cast<int>(prediction_.size()) > options_.branching) prediction_.resize(options_.branching);
  }

  ContextTreeOptions options_;
  index::ContinuationAutomaton index_;
  std::vector<Node> nodes_;
  std::priority_queue<Candidate> frontier_;
  std::vector<std::pair<token_t, float>> prediction_;
};

static_assert(Drafter<ContextTreeDrafter>);

}  // namespace specdec
