// ContextTreeDrafter: a model-free drafter that drafts a tree from the context.
#pragma once

#include <algorithm>
#include <cmath>
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
  int branching = 64;
  float min_probability = 1e-4f;
  int per_level = 32;
  double w[13] = {-2.4852, 0.9926, 0.8651, -0.4921, -0.5056, -0.8967, 0.2118, 0.0498, -0.0300, 0.2967, 0.4427, 0.2430, 1.0849};
  bool history = false;
  double hw[22] = {-3.6863, 1.0537, 0.7434, -0.2938, -0.6019, -0.8221, -0.1073, 0.1813, -0.0003, 0.3103, 0.6250, 0.2908, 1.6184, 1.4247, 0.0926, 0.5448, -0.3036, -0.3265, -0.8055, -0.1264, 0.1781, -1.3476};
};

class ContextTreeDrafter {
 public:
  static constexpr const char* name = "tree";

  ContextTreeDrafter() = default;
  explicit ContextTreeDrafter(ContextTreeOptions options) : options_(options) {}

  void begin(std::span<const token_t> prompt) {
    if (options_.history && index_.size() > prompt_length_) {
      history_.append(-1);
      for (int i = prompt_length_; i < index_.size(); ++i) history_.append(index_.tokens()[i]);
    }
    index_.clear();
    history_match_ = {0, 0};
    prompt_length_ = static_cast<int>(prompt.size());
    for (token_t t : prompt) append(t);
  }
  void observe(std::span<const token_t> committed) {
    for (token_t t : committed) append(t);
  }
  void append(token_t t) {
    index_.append(t);
    if (options_.history) history_match_ = history_.extend(history_match_, t);
  }

  void propose(const DraftContext& ctx, DraftTree& tree) {
    if (index_.size() != static_cast<int>(ctx.tokens.size())) begin(ctx.tokens);
    const int budget = std::min(options_.max_nodes, ctx.budget);
    if (budget <= 0 || ctx.max_depth <= 0) return;
    nodes_.clear();
    nodes_.push_back(Node{index_.suffix_match(), history_match_, 0, 1.0f});
    frontier_ = {};
    push_children(0);
    int added = 0;
    while (added < budget && !frontier_.empty()) {
      const Candidate c = frontier_.top();
      frontier_.pop();
      const node_t node = tree.add(c.parent, c.token, c.probability);
      (void)node;
      nodes_.push_back(Node{index_.extend(nodes_[c.parent].match, c.token),
                            options_.history ? history_.extend(nodes_[c.parent].history_match, c.token) : history_match_,
                            nodes_[c.parent].depth + 1, c.probability});
      ++added;
      if (nodes_.back().depth < ctx.max_depth) push_children(static_cast<int>(nodes_.size()) - 1);
    }
  }

 private:
  struct Node {
    index::ContinuationAutomaton::Match match;
    index::ContinuationAutomaton::Match history_match;
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
    predict(nodes_[node].match, nodes_[node].history_match);
    for (const auto& [token, p] : prediction_) {
      const float path = nodes_[node].probability * p;
      if (path >= options_.min_probability) frontier_.push(Candidate{path, node, token});
    }
  }

  // Candidates: the most frequent continuations of the match and of each shorter context; each
  // scored by a logistic model of its evidence.
  void predict(index::ContinuationAutomaton::Match match, index::ContinuationAutomaton::Match hmatch) {
    prediction_.clear();
    features_.clear();
    ++stamp_;
    const int L0 = match.length;
    const double n = std::max(1, index_.size());
    const int nf = options_.history ? 20 : 12;
    int level = 0;
    for (auto m = match; m.state >= 0; m = index_.shorter(m), ++level) {
      const int N = index_.continued(m.state);
      if (N == 0) continue;
      const auto cs = index_.continuations(m.state);
      const int rp = index_.recent_continuation(m.state);
      const token_t rt = rp >= 0 ? index_.tokens()[rp] : -1;
      int k = 0;
      for (std::size_t i = 0; i < cs.size() && k < options_.per_level; ++i) {
        const token_t t = cs[i].token;
        if (static_cast<std::size_t>(t) >= seen_.size()) seen_.resize(t + 1, 0), slot_.resize(t + 1, 0);
        if (seen_[t] == stamp_) continue;
        seen_[t] = stamp_;
        slot_[t] = static_cast<int>(prediction_.size());
        ++k;
        const double L = m.length;
        const int uni = index_.count(0, t);
        const auto tm = index_.extend({0, 0}, t);
        const int re = index_.recent_continuation(tm.state);
        const double dist = re >= 0 ? n - re + 1 : n;
        const double f[12] = {std::log1p(L), std::log(double(cs[i].count)), std::log(double(N)), std::log(double(cs.size())),
                              std::log1p(L0 - L), std::log1p(double(uni)), std::log(n), std::log1p(dist),
                              double(i == 0), double(t == rt), double(level == 0), double(L == 0)};
        prediction_.emplace_back(t, 0.0f);
        features_.insert(features_.end(), f, f + 12);
        features_.resize(features_.size() + (nf - 12), 0.0);
      }
    }
    if (options_.history && history_.size() > 0) {
      ++stamp_;
      for (auto m = hmatch; m.state >= 0; m = history_.shorter(m)) {
        const int N = history_.continued(m.state);
        if (N == 0) continue;
        const auto cs = history_.continuations(m.state);
        int k = 0;
        for (std::size_t i = 0; i < cs.size() && k < options_.per_level; ++i) {
          const token_t t = cs[i].token;
          if (t < 0) continue;
          if (static_cast<std::size_t>(t) >= seen_.size()) seen_.resize(t + 1, 0), slot_.resize(t + 1, 0);
          if (seen_[t] == stamp_) continue;
          const bool in_context = seen_[t] == stamp_ - 1;
          seen_[t] = stamp_;
          ++k;
          if (!in_context) {
            slot_[t] = static_cast<int>(prediction_.size());
            prediction_.emplace_back(t, 0.0f);
            features_.resize(features_.size() + nf, 0.0);
          }
          double* f = features_.data() + static_cast<std::size_t>(slot_[t]) * nf + 12;
          const double L = m.length;
          f[0] = 1; f[1] = std::log1p(L); f[2] = std::log(double(cs[i].count)); f[3] = std::log(double(N));
          f[4] = std::log(double(cs.size())); f[5] = std::log1p(hmatch.length - L); f[6] = i == 0;
          f[7] = std::log1p(double(history_.count(0, t)));
        }
      }
    }
    const double* w = options_.history ? options_.hw : options_.w;
    for (std::size_t c = 0; c < prediction_.size(); ++c) {
      const double* f = features_.data() + c * nf;
      double z = w[0];
      for (int j = 0; j < nf; ++j) z += w[j + 1] * f[j];
      if (options_.history && f[0] == 0 && f[5] == 0 && f[6] == 0) z += options_.hw[21];
      prediction_[c].second = static_cast<float>(1.0 / (1.0 + std::exp(-z)));
    }
    std::sort(prediction_.begin(), prediction_.end(), [](auto& a, auto& b) { return a.second > b.second; });
    if (static_cast<int>(prediction_.size()) > options_.branching) prediction_.resize(options_.branching);
    double sum = 0;
    for (auto& p : prediction_) sum += p.second;
    if (sum > 1.0) for (auto& p : prediction_) p.second = static_cast<float>(p.second / sum);
  }

  ContextTreeOptions options_;
  index::ContinuationAutomaton index_;
  std::vector<Node> nodes_;
  std::priority_queue<Candidate> frontier_;
  std::vector<std::pair<token_t, float>> prediction_;
  std::vector<int> seen_, slot_;
  std::vector<double> features_;
  index::ContinuationAutomaton history_;
  index::ContinuationAutomaton::Match history_match_;
  int prompt_length_ = 0;
  int stamp_ = 0;
};

static_assert(Drafter<ContextTreeDrafter>);

}  // namespace specdec
