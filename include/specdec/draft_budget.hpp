// The draft size that pays: given the draft nodes ranked by the estimated probability that their
// path is accepted (AcceptanceModel), and what a step costs (a CostModel), choose how many nodes to
// send so that the step's expected tokens per second is highest:
//
//   k* = argmax over k of (1 + P_1 + ... + P_k) / (cost(1 + k nodes, context) + drafting time)
//
// (1 for the bonus token the target always gives; P_i the i-th best path probability). k = 0, the
// root alone, is plain decoding: speculation then costs only the drafting time. In a batch of R
// requests, the R roots take the place of the 1, and the ranking is every request's nodes
// together: one step's nodes are shared out jointly (SpeculativeBatch).
// Host-only.
#pragma once

#include <algorithm>
#include <array>
#include <climits>
#include <cmath>
#include <concepts>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>

#include <specdec/error.hpp>

namespace specdec {

/// What a target step costs. step_seconds(nodes, context): the seconds of one target forward of a
/// tree of `nodes` nodes (root included, >= 1) on top of `context` cached tokens. A measured cost
/// table is one (specbench calibrate); a user's own model of their hardware is another.
template <class C>
concept CostModel = requires(const C& c, int nodes, int context) {
  { c.step_seconds(nodes, context) } -> std::convertible_to<double>;
};

/// Any CostModel behind one indirection, so that DecoderOptions can hold a user's own type. Empty
/// (no model) until one is given.
class AnyCostModel {
 public:
  AnyCostModel() = default;
  template <CostModel C>
    requires(!std::same_as<std::remove_cvref_t<C>, AnyCostModel>)
  AnyCostModel(C model) : model_(std::make_shared<const Held<C>>(std::move(model))) {}

  explicit operator bool() const { return model_ != nullptr; }
  double step_seconds(int nodes, int context) const { return model_->step_seconds(nodes, context); }

 private:
  struct Base {
    virtual ~Base() = default;
    virtual double step_seconds(int nodes, int context) const = 0;
  };
  template <class C>
  struct Held final : Base {
    explicit Held(C m) : model(std::move(m)) {}
    double step_seconds(int nodes, int context) const override { return static_cast<double>(model.step_seconds(nodes, context)); }
    C model;
  };
  std::shared_ptr<const Base> model_;
};

struct DraftSizeChoice {
  int nodes = 0;                ///< non-root draft nodes to send
  double expected_tokens = 1;   ///< expected tokens committed by the step, bonus tokens included
  double seconds = 0;           ///< the step's predicted cost (forward + drafting)
  double tokens_per_second() const { return seconds > 0 ? expected_tokens / seconds : 0.0; }
};

/// The best number of nodes among the first `max_nodes` of `path_probability` (best first, each in
/// [0, 1]). `roots`: the trees' roots that the forward carries anyway (a batch of that many
/// requests: each commits a token whatever is drafted), so a step of k draft nodes costs
/// cost.step_seconds(roots + k, context) and is expected to commit roots + the k probabilities.
/// Throws specdec::error for a probability out of range, a ranking that rises, or a cost that is
/// not finite and positive.
template <CostModel C>
DraftSizeChoice choose_draft_size(std::span<const double> path_probability, const C& cost, int context,
                                  double drafting_seconds = 0.0, int max_nodes = INT_MAX, int roots = 1) {
  if (roots < 1) throw error("choose_draft_size: roots must be >= 1, got " + std::to_string(roots));
  if (!(drafting_seconds >= 0.0) || !std::isfinite(drafting_seconds))
    throw error("choose_draft_size: drafting time must be finite and >= 0, got " + std::to_string(drafting_seconds));
  const int candidates = static_cast<int>(std::min<std::size_t>(path_probability.size(), max_nodes < 0 ? 0 : max_nodes));
  DraftSizeChoice best;
  double expected = roots;
  for (int k = 0; k <= candidates; ++k) {
    if (k > 0) {
      const double p = path_probability[static_cast<std::size_t>(k - 1)];
      if (!(p >= 0.0 && p <= 1.0))
        throw error("choose_draft_size: path probability " + std::to_string(k - 1) + " is " + std::to_string(p) +
                    ", not in [0, 1]");
      if (k > 1 && p > path_probability[static_cast<std::size_t>(k - 2)])
        throw error("choose_draft_size: path probabilities must be ranked best first (entry " + std::to_string(k - 1) +
                    " rises)");
      expected += p;
    }
    const double forward = static_cast<double>(cost.step_seconds(roots + k, context));
    if (!(forward > 0.0) || !std::isfinite(forward))
      throw error("choose_draft_size: the cost model says a forward of " + std::to_string(roots + k) + " nodes costs " +
                  std::to_string(forward) + " s (it must be finite and > 0)");
    const DraftSizeChoice here{k, expected, forward + drafting_seconds};
    if (k == 0 || here.tokens_per_second() > best.tokens_per_second()) best = here;
  }
  return best;
}

/// What a plain step (the root alone) measures against what the cost model says, so that a
/// drafting step's measured time can be weighed against the plain steps it replaces: a cost model
/// times a forward, while a step also pays the decoder's own work and, after drafting, caches the
/// drafters disturbed. Each root-only step tells its measured and modelled seconds; the model is
/// scaled by the lower median of the recent ratios (the last 8), the model's own ratio 1 counting
/// as one of them until 8 were measured. A median because a step that the operating system
/// descheduled measures many plain steps' time: one such step scaled by a mean made drafting look
/// paying for as long as the drafters then kept the root from going alone (a test caught it on a
/// loaded machine); more than half the window has to agree to move the scale.
class MeasuredPlainStep {
 public:
  static constexpr int window = 8;  ///< root-only steps the median is taken over, at most

  /// A root-only step took `measured_seconds` where the cost model says `modelled_seconds`.
  /// Throws specdec::error unless measured >= 0 and modelled > 0, both finite.
  void observe(double measured_seconds, double modelled_seconds) {
    if (!(measured_seconds >= 0.0) || !std::isfinite(measured_seconds))
      throw error("MeasuredPlainStep: measured time must be finite and >= 0, got " + std::to_string(measured_seconds));
    if (!(modelled_seconds > 0.0) || !std::isfinite(modelled_seconds))
      throw error("MeasuredPlainStep: modelled time must be finite and > 0, got " + std::to_string(modelled_seconds));
    ratios_[static_cast<std::size_t>(observed_ % window)] = measured_seconds / modelled_seconds;
    ++observed_;
    const auto count = static_cast<std::size_t>(std::min<long long>(observed_, window));
    std::array<double, window + 1> sorted{};  // insertion sort: at most 9 values
    std::size_t n = 0;
    const auto insert = [&](double ratio) {
      std::size_t i = n++;
      for (; i > 0 && sorted[i - 1] > ratio; --i) sorted[i] = sorted[i - 1];
      sorted[i] = ratio;
    };
    for (std::size_t i = 0; i < count; ++i) insert(ratios_[i]);
    if (count < window) insert(1.0);  // the model's own word
    scale_ = sorted[(n - 1) / 2];
  }
  /// A plain step's measured seconds where the model says `modelled_seconds` (the model's own
  /// time before any root-only step was measured).
  double seconds(double modelled_seconds) const { return scale_ * modelled_seconds; }

 private:
  std::array<double, window> ratios_{};  // measured / modelled of the recent root-only steps
  long long observed_ = 0;               // root-only steps observed
  double scale_ = 1.0;                   // the lower median of the ratios (and 1 while few)
};

/// The automatic budget's pause: whether a step asks its drafters at all. Drafting costs its time
/// whether or not a node is then sent, so it must pay over the steps that draft, not only in the
/// steps that send nodes. After each drafting step the decoder reports its gain, the seconds it
/// saved against decoding the same tokens plainly (negative: lost):
///
///   gain = expected tokens x (a plain step's seconds) - the step's seconds
///
/// measured (DecoderOptions::measured_pause): the step's own time from drafting to commit, and a
/// plain step's as MeasuredPlainStep has it; or modelled: the cost model's forward times plus the
/// measured drafting. A probe (probing()) is weighed as modelled even when the rest are measured:
/// after a pause it runs cold (its drafter catches up a pause's tokens, the forward's caches and
/// threads are cold), which the drafting steps after it do not. A step that sends no node gains
/// minus its drafting time. The drafters then pause for 1, 2, 4, ... steps (up to `longest`, or
/// longer: see probe_share) after a step that leaves the mean gain of the recent drafting steps
/// not positive: the mean of the drafting steps since the last pause, the last 8 of them (weight
/// 1/8 each) once there are more; the first drafting step after a pause is a probe, whose gain
/// alone restarts the mean, and each later drafting step that keeps the mean positive halves the
/// next pause. So a drafter that costs little next to a forward goes on drafting through steps
/// where it finds nothing, as long as its finds pay for them, and one lucky probe of a costly
/// drafter buys a few steps, not eight.
///
/// It also says how many nodes to ask the drafters for (ask_nodes): twice the most a recent
/// drafting step sent, at least 4, so that a step that will send one node does not pay for
/// drafting and ranking sixty; a step that sends all it asked for doubles the next ask.
class DraftingPause {
 public:
  static constexpr int longest = 32;  ///< steps, at most, of one pause (but see probe_share)
  /// Past `longest` steps, pauses go on doubling, up to `longest_costly`, while one probe (the
  /// mean drafting time) would cost more than this share of the pause's plain steps: a drafter
  /// that costs a fair part of a cheap target's step probes rarely (one that costs hundreds of
  /// its steps, a dense search next to a tiny model, all but never), one next to a slow target
  /// every 32 steps.
  static constexpr double probe_share = 0.001;
  static constexpr int longest_costly = 1 << 16;
  static constexpr int window = 8;         ///< drafting steps the means average over, at most
  static constexpr int smallest_ask = 4;   ///< nodes, at least, asked of the drafters

  /// Whether this step sends the root alone without asking the drafters (the pause counts down).
  bool skip_step() {
    if (paused_ == 0) return false;
    --paused_;
    return true;
  }
  /// Steps left in this pause.
  int remaining() const { return paused_; }
  /// `steps` steps went by without asking the drafters (a plain run): the pause counts down by
  /// them, as by as many skip_step(). Returns the pause's steps among them.
  int skip_steps(int steps) {
    const int skipped = std::clamp(steps, 0, paused_);
    paused_ -= skipped;
    return skipped;
  }
  /// The nodes to ask the drafters for this step, at most `budget`.
  int ask_nodes(int budget) const { return std::min(budget, std::max(smallest_ask, 2 * largest_)); }

  /// The most tokens a step with up to `budget` draft nodes can commit: the nodes and the bonus
  /// token, saturating (a budget may be INT_MAX).
  static constexpr int most_tokens_at(int budget) { return budget < INT_MAX ? budget + 1 : INT_MAX; }

  /// A drafting step sent `nodes` draft nodes and gained `gain_seconds`; drafting took
  /// `drafting_seconds`, where a plain step takes `plain_seconds` (0: unknown; pauses then stop at
  /// `longest`). `most_tokens`: the most tokens a step can commit (most_tokens_at(budget); 0:
  /// unknown): where the mean drafting time is more than that many plain steps, drafting cannot
  /// pay however good its drafts, and the pause is at once the longest (a dense search of
  /// milliseconds next to a forward of microseconds is asked once, not once per doubling). So is
  /// it after a losing probe that alone cost more than `longest` plain steps (a drafter whose
  /// model catches up a pause's tokens): probing 1, 2, 4 ... steps apart would cost more than
  /// the steps paused.
  /// Throws specdec::error for negative nodes or most_tokens, a gain that is not finite, or a
  /// drafting or plain time that is not finite and >= 0.
  void drafted(int nodes, double gain_seconds, double drafting_seconds, double plain_seconds = 0.0, int most_tokens = 0) {
    if (nodes < 0) throw error("DraftingPause: nodes must be >= 0, got " + std::to_string(nodes));
    if (!std::isfinite(gain_seconds)) throw error("DraftingPause: the gain must be finite, got " + std::to_string(gain_seconds));
    if (!(drafting_seconds >= 0.0) || !std::isfinite(drafting_seconds))
      throw error("DraftingPause: drafting time must be finite and >= 0, got " + std::to_string(drafting_seconds));
    if (!(plain_seconds >= 0.0) || !std::isfinite(plain_seconds))
      throw error("DraftingPause: plain step time must be finite and >= 0, got " + std::to_string(plain_seconds));
    if (most_tokens < 0) throw error("DraftingPause: most_tokens must be >= 0, got " + std::to_string(most_tokens));
    if (plain_seconds > 0) plain_ = plain_seconds;
    drafting_steps_ = std::min(drafting_steps_ + 1, window);
    drafting_ += (drafting_seconds - drafting_) / drafting_steps_;
    largest_ = std::max(nodes, largest_ - (largest_ + window - 1) / window);  // forgets a high by 1/8 a step
    const bool probe = since_pause_ == 0;
    if (probe) probe_ = drafting_seconds;
    since_pause_ = std::min(since_pause_ + 1, window);
    gain_ += (gain_seconds - gain_) / since_pause_;
    const bool hopeless = most_tokens > 0 && plain_seconds > 0 && drafting_ > most_tokens * plain_seconds;
    const bool dear_probe = probe && !(gain_seconds > 0) && plain_seconds > 0 && drafting_seconds > longest * plain_seconds;
    if (hopeless || dear_probe) {
      paused_ = next_pause_ = longest_pause(plain_seconds);
      since_pause_ = 0;
    } else if (!(gain_ > 0)) {
      paused_ = next_pause_;
      next_pause_ = std::min(2 * next_pause_, longest_pause(plain_seconds));
      since_pause_ = 0;
    } else if (!probe) {  // one probe is too little evidence to shorten the pauses
      next_pause_ = std::max(1, next_pause_ / 2);
    }
  }
  /// The next drafting step is a probe: the first after a pause or a restart.
  bool probing() const { return since_pause_ == 0; }
  /// The mean drafting time of the recent drafting steps (0 before the first).
  double drafting_seconds() const { return drafting_; }
  /// The longest pause where a plain step takes `plain_seconds` (0: unknown): `longest`, or
  /// longer while a probe costs more than probe_share of the pause, up to `longest_costly`.
  int longest_pause(double plain_seconds) const {
    int most = longest;
    while (plain_seconds > 0 && most < longest_costly && drafting_ > probe_share * most * plain_seconds) most *= 2;
    return most;
  }
  /// A new sequence: its first step drafts, a probe; the next pause's length and the drafting
  /// time are kept (a drafter that did not pay on the last sequence is not asked 1, 2, 4 ... steps
  /// apart all over again). Unless the last probe cost more than `longest` plain steps (against
  /// the last plain step drafted() was told): then the pause under way goes on, since a probe at
  /// every sequence would cost more than the sequences' plain steps can make up for.
  void restart() {
    if (plain_ > 0 && probe_ > longest * plain_) return;
    paused_ = 0;
    since_pause_ = 0;
  }

 private:
  int paused_ = 0;      // steps left in this pause
  int next_pause_ = 1;  // the next pause's length
  int since_pause_ = 0;  // drafting steps since the last pause (or restart), at most window
  double gain_ = 0;
  double drafting_ = 0;
  double plain_ = 0;         // the last plain step's seconds drafted() was told (0: unknown)
  double probe_ = 0;         // the last probe's drafting seconds
  int drafting_steps_ = 0;  // drafting steps so far, at most window
  int largest_ = 32;  // the most a recent step sent, decaying (at first: ask for 64)
};

}  // namespace specdec
