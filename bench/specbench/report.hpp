// What a replay measured, per category and overall, and how it is printed, plotted and saved.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "corpus.hpp"
#include "replay.hpp"

namespace specbench {

/// Counters summed over turns.
struct Summary {
  int turns = 0;
  std::int64_t steps = 0;        ///< target calls
  std::int64_t tokens = 0;       ///< answer tokens + the stop token, per turn
  std::int64_t draft_nodes = 0;  ///< non-root tree nodes sent to the target
  double draft_seconds = 0;      ///< drafters, merge and layout (DecodeStats::draft_seconds)
  /// accepted_by_drafter[d][k]: steps whose accepted path's first k draft tokens (and not k + 1)
  /// were all proposed by drafter d.
  std::vector<std::vector<std::int64_t>> accepted_by_drafter;

  void add(const TurnResult& turn);
  /// τ: tokens per target call, bonus token included (Spec-Bench's convention).
  double tau() const;
  double draft_nodes_per_step() const;
  double draft_us_per_step() const;
};

struct Report {
  std::vector<std::string> drafters;
  int budget = 0;
  double seconds = 0;  ///< wall time of the replay
  Summary overall;
  std::vector<std::pair<std::string, Summary>> categories;  ///< in the corpus's order
  std::string combination() const;
};

Report summarise(const Corpus& corpus, const ReplayRun& run, const ReplayOptions& options);

/// The table per category and overall, then the accepted-length histogram per drafter.
void print_report(std::ostream& out, const Report& report);
/// One row per report: overall τ, draft nodes/step, drafting µs/step, and τ per category.
void print_comparison(std::ostream& out, std::span<const Report> reports);

/// {"drafters", "budget", "overall", "categories", ...}: see docs/specbench.md.
nlohmann::ordered_json to_json(const Report& report);
/// The accepted-length histogram as an SVG bar chart (share of steps per length, one bar per
/// drafter), like Figure 4 of the CASD paper.
std::string histogram_svg(const Report& report);

}  // namespace specbench
