// AcceptanceModel: calibrated node scores. Maps each drafter's score of a draft node to the
// probability that the target accepts the node given that it accepted the node's parent, learned
// online from the verifier's verdicts.
//
// Drafters score nodes on scales of their own (a copy drafter's match-length ratio, a head's
// probability, a datastore's frequency), so one merged tree cannot rank them against each other,
// nor say how many nodes are worth sending. The model keeps, per drafter, per depth (1 .. depths,
// deeper nodes share the last) and per bucket of the drafter's *conditional* score (its score of
// the node over its score of the parent, in [0, 1]; scores are path probabilities, see
// DraftTree), smoothed counts of how often such a node was accepted when its parent was:
//
//   p = (accepted + prior_strength * prior) / (tested + prior_strength)
//
// The prior is the bucket's own score (the drafter's claim), so a new drafter starts by being
// taken at its word and the counts correct it as verdicts arrive. Or the prior is another model's
// estimate (set_prior): a request of a batch keeps its own counts on top of the whole batch's,
// so that it starts from what the batch learned and its own verdicts take over. A node proposed by several
// drafters gets the highest of their estimates. The probability that a node's whole path is
// accepted, the product of the estimates along it, never grows along a path: ranking by it keeps
// a connected tree, and its sum over the kept nodes is the expected number of accepted draft
// tokens of a greedy (exact) verification, whose accepted children are mutually exclusive.
// Host-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <specdec/config.hpp>
#include <specdec/error.hpp>

namespace specdec {

struct AcceptanceModelOptions {
  int buckets = 10;              ///< conditional-score buckets, equal widths over [0, 1]
  int depths = 8;                ///< depths told apart (deeper nodes share the last)
  double prior_strength = 4.0;   ///< pseudo-verdicts of the prior per (drafter, depth, bucket)
};

class AcceptanceModel {
 public:
  AcceptanceModel(int drafters, AcceptanceModelOptions options = {}) : drafters_(drafters), options_(options) {
    if (drafters < 1 || drafters > 32)
      throw error("AcceptanceModel: drafters must be in [1, 32], got " + std::to_string(drafters));
    if (options.buckets < 1 || options.buckets > 1000)
      throw error("AcceptanceModel: buckets must be in [1, 1000], got " + std::to_string(options.buckets));
    if (options.depths < 1 || options.depths > 1000)
      throw error("AcceptanceModel: depths must be in [1, 1000], got " + std::to_string(options.depths));
    if (!(options.prior_strength > 0.0) || !std::isfinite(options.prior_strength))
      throw error("AcceptanceModel: prior_strength must be finite and > 0, got " +
                  std::to_string(options.prior_strength));
    const std::size_t cells = static_cast<std::size_t>(drafters) * options.depths * options.buckets;
    accepted_.assign(cells, 0.0);
    tested_.assign(cells, 0.0);
    predicted_.assign(cells, 0.0);
  }

  int drafters() const { return drafters_; }
  const AcceptanceModelOptions& options() const { return options_; }

  /// The conditional score of a node scored `score` whose parent the same drafter scored
  /// `parent_score` (the root: 1), clamped into [0, 1]; NaN and non-positive parents give 0.
  static double conditional(float score, float parent_score) {
    if (!(parent_score > 0.0f) || !(score > 0.0f)) return 0.0;
    const double r = std::isinf(parent_score) ? static_cast<double>(score) : static_cast<double>(score) / parent_score;
    return std::min(1.0, r);
  }

  int bucket(double conditional_score) const {
    const int b = static_cast<int>(conditional_score * options_.buckets);
    return std::clamp(b, 0, options_.buckets - 1);
  }

  /// Estimated probability that a node of `drafter` at `depth` (>= 1) with this conditional
  /// score is accepted given that its parent is.
  double probability(int drafter, int depth, double conditional_score) const {
    const std::size_t c = cell(drafter, depth, bucket(conditional_score));
    const double prior = prior_ ? prior_->probability(drafter, depth, conditional_score)
                                : (bucket(conditional_score) + 0.5) / options_.buckets;
    return (accepted_[c] + options_.prior_strength * prior) / (tested_[c] + options_.prior_strength);
  }

  /// Takes `prior`'s estimates as this model's prior (null: the buckets' own scores). It must know
  /// at least as many drafters and tell apart the same buckets and depths.
  void set_prior(std::shared_ptr<const AcceptanceModel> prior) {
    if (prior && (prior->drafters_ < drafters_ || prior->options_.buckets != options_.buckets ||
                  prior->options_.depths != options_.depths))
      throw error("AcceptanceModel::set_prior: the prior model has other drafters, buckets or depths");
    prior_ = std::move(prior);
  }

  /// One verdict: a node of `drafter` at `depth` with this conditional score was tested (its
  /// parent was accepted) and was `accepted` or not.
  void record(int drafter, int depth, double conditional_score, bool accepted) {
    const std::size_t c = cell(drafter, depth, bucket(conditional_score));
    predicted_[c] += probability(drafter, depth, conditional_score);  // the estimate before this verdict
    tested_[c] += 1.0;
    if (accepted) accepted_[c] += 1.0;
  }

  /// Verdicts recorded, accepted, and the sum of the estimates they were predicted with, in a cell.
  double tested(int drafter, int depth, int bucket) const { return tested_[cell(drafter, depth, bucket)]; }
  double accepted(int drafter, int depth, int bucket) const { return accepted_[cell(drafter, depth, bucket)]; }
  double predicted(int drafter, int depth, int bucket) const { return predicted_[cell(drafter, depth, bucket)]; }
  double tested() const {
    double n = 0;
    for (double t : tested_) n += t;
    return n;
  }

  /// Calibration error: over every cell, |predicted acceptances - observed acceptances|, summed
  /// and divided by the verdicts recorded (0 for a perfect model; 0 before any verdict).
  double calibration_error() const {
    double gap = 0, n = 0;
    for (std::size_t c = 0; c < tested_.size(); ++c) {
      gap += std::abs(predicted_[c] - accepted_[c]);
      n += tested_[c];
    }
    return n > 0 ? gap / n : 0.0;
  }

 private:
  std::size_t cell(int drafter, int depth, int bucket) const {
    const int d = std::clamp(depth, 1, options_.depths) - 1;
    return (static_cast<std::size_t>(drafter) * options_.depths + d) * options_.buckets + bucket;
  }

  int drafters_;
  AcceptanceModelOptions options_;
  std::vector<double> accepted_, tested_, predicted_;
  std::shared_ptr<const AcceptanceModel> prior_;
};

}  // namespace specdec
