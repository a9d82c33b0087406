// detail::StepBudget: the automatic budget of one step over 1..B sequences, the one controller of
// SpeculativeDecoder (one sequence) and SpeculativeBatch (its requests). Each sequence that drafts
// ranks its merged nodes by calibrated path probability; the step sends the best nodes of all
// sequences together, as many as maximise expected tokens per second (choose_draft_size with the
// sequences' roots as the tokens every step commits), and each sequence keeps its nodes among
// them. After the step, each sequence's drafters learn whether their drafting paid
// (DraftingPause), and a step that sent no node measures a plain step (MeasuredPlainStep).
//
// With one sequence this is the single-sequence budget of draft_budget.hpp's formula,
// k* = argmax (1 + P_1 + ... + P_k) / (cost(1 + k) + drafting): the batch's gain of a sequence,
// its tokens' worth of a root's share of a plain step less its nodes' share of the step's growth
// over a plain step and its drafting, is then (1 + P) x plain - the step's seconds.
// Host-only.
#pragma once

#include <algorithm>
#include <climits>
#include <vector>

#include <specdec/acceptance_model.hpp>
#include <specdec/draft_budget.hpp>
#include <specdec/tree_merger.hpp>
#include <specdec/step/sequence_step.hpp>

namespace specdec::detail {

/// One sequence's part of the automatic budget: its drafters' pause and this step's draft.
struct SequenceBudget {
  DraftingPause pause;
  bool asked = false;        ///< this step asked the drafters
  bool ranked = false;       ///< this step ranked its nodes for the joint sizing (it drafted)
  double draft_seconds = 0;  ///< this step's drafting (0 when no drafter was asked)
  int budget = 0;            ///< this step's most draft nodes
  int nodes = 0;             ///< the nodes the sizing kept of its ranking
  double tokens = 0;         ///< their expected accepted tokens (the sum of their path probabilities)
};

class StepBudget {
 public:
  StepBudget(AnyCostModel cost, bool measured_pause) : cost_(std::move(cost)), measured_pause_(measured_pause) {}

  /// A step begins: the sequences join it in their trees' order.
  void begin() {
    joined_.clear();
    candidates_.clear();
    context_ = 0;
    drafting_ = 0;
  }
  /// Sequence `s` sends a tree on `cached` tokens; `ranking` holds its ranked nodes when it drafted
  /// for the joint sizing (s.ranked), null otherwise (its root alone, or a draft of its own size).
  void join(SequenceBudget& s, const TreeMerger* ranking, int cached) {
    const int tree = static_cast<int>(joined_.size());
    joined_.push_back(&s);
    context_ += cached;
    drafting_ += s.draft_seconds;
    s.nodes = 0;
    s.tokens = 0;
    if (!s.ranked) return;
    for (int i = 0; i < ranking->ranked(); ++i) candidates_.push_back({ranking->ranked_priority(i), tree, i});
  }

  /// Chooses the step's nodes: every joined sequence's `nodes` is then the count of its ranking
  /// to keep. Returns the choice (nodes, expected tokens and seconds of the whole step).
  DraftSizeChoice size() {
    // The context of a batch is its sequences' mean: a node attends to its own sequence's cache,
    // so n nodes of a batch cost about what a tree of n nodes after that many tokens costs.
    const int roots = static_cast<int>(joined_.size());
    const int mean_cached = static_cast<int>(context_ / roots);
    const double plain_seconds = cost_.step_seconds(roots, mean_cached);
    if (candidates_.empty()) {  // every sequence sends its root alone: a plain step, nothing to search
      step_ = {0, plain_seconds, plain_seconds};
      return {0, static_cast<double>(roots), plain_seconds + drafting_};
    }
    // Best first; ties go to the earlier tree, then the sequence's own order (a connected prefix).
    std::sort(candidates_.begin(), candidates_.end(), [](const Candidate& a, const Candidate& b) {
      if (a.probability != b.probability) return a.probability > b.probability;
      return a.tree != b.tree ? a.tree < b.tree : a.rank < b.rank;
    });
    ranked_.resize(candidates_.size());
    for (std::size_t j = 0; j < candidates_.size(); ++j) ranked_[j] = candidates_[j].probability;
    const DraftSizeChoice choice = choose_draft_size(ranked_, cost_, mean_cached, drafting_, INT_MAX, roots);
    for (int j = 0; j < choice.nodes; ++j) {
      const Candidate& c = candidates_[static_cast<std::size_t>(j)];
      SequenceBudget& s = *joined_[static_cast<std::size_t>(c.tree)];
      ++s.nodes;
      s.tokens += c.probability;
    }
    step_ = {choice.nodes, choice.seconds - drafting_, plain_seconds};
    return choice;
  }

  /// After the step, `step_seconds` measured from its first drafting to its last observe: each
  /// ranked sequence's drafters learn their gain (DraftingPause). A sequence's gain: its expected
  /// accepted tokens, each worth a root's share of a plain step, less its nodes' share of the
  /// step's growth over a plain step and its drafting (one that sent no node: minus its
  /// drafting). Measured (measured_pause): the growth is the step's time less the drafting and a
  /// plain step as the steps that sent no node measure it; modelled: the cost model's. A
  /// sequence's probe is weighed as modelled: after a pause it runs cold. A step that sent no
  /// node measures a plain step.
  void weigh(double step_seconds) {
    const int roots = static_cast<int>(joined_.size());
    const double forward_seconds = step_seconds - drafting_;
    if (measured_pause_ && step_.nodes == 0) plain_step_.observe(std::max(0.0, forward_seconds), step_.plain_seconds);
    const double plain = measured_pause_ ? plain_step_.seconds(step_.plain_seconds) : step_.plain_seconds;
    const double growth = (measured_pause_ ? forward_seconds : step_.forward_seconds) - plain;
    const double modelled_growth = step_.forward_seconds - step_.plain_seconds;
    for (SequenceBudget* s : joined_) {
      if (!s->ranked) continue;
      const bool measured = measured_pause_ && !s->pause.probing();
      const double sequence_plain = measured ? plain : step_.plain_seconds;
      const double sequence_growth = measured ? growth : modelled_growth;
      const double gain = s->nodes == 0 ? -s->draft_seconds
                                        : s->tokens * sequence_plain / roots -
                                              sequence_growth * s->nodes / step_.nodes - s->draft_seconds;
      s->pause.drafted(s->nodes, gain, s->draft_seconds, sequence_plain / roots, DraftingPause::most_tokens_at(s->budget));
    }
  }

  /// Plain steps run outside the step (SpeculativeDecoder's plain runs) took `measured_seconds`
  /// each, where the cost model says `modelled_seconds`.
  void observe_plain(double measured_seconds, double modelled_seconds) {
    if (measured_pause_) plain_step_.observe(measured_seconds, modelled_seconds);
  }

  const AnyCostModel& cost() const { return cost_; }

 private:
  struct Candidate {
    double probability;
    int tree, rank;
  };
  AnyCostModel cost_;
  bool measured_pause_;
  std::vector<SequenceBudget*> joined_;  // this step's sequences, in tree order
  std::vector<Candidate> candidates_;    // their ranked nodes
  std::vector<double> ranked_;           // the candidates' probabilities, best first
  long long context_ = 0;                // the sequences' cached tokens, summed
  double drafting_ = 0;                  // their drafting, summed
  struct {
    int nodes = 0;               // the step's draft nodes,
    double forward_seconds = 0;  // the cost model's forward of the step,
    double plain_seconds = 0;    // and of a plain step of as many roots
  } step_;
  MeasuredPlainStep plain_step_;  // a plain step, measured (measured_pause)
};

}  // namespace specdec::detail
