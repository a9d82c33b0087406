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
#include "model.hpp"
#include "replay.hpp"
#include "rounds.hpp"

namespace specbench {

/// Counters summed over turns.
struct Summary {
  int turns = 0;
  std::int64_t steps = 0;        ///< target calls
  std::int64_t tokens = 0;       ///< answer tokens + the stop token, per turn
  std::int64_t draft_nodes = 0;  ///< non-root tree nodes sent to the target
  double draft_seconds = 0;      ///< drafters, merge and layout (DecodeStats::draft_seconds)
  double cost_seconds = 0;       ///< the target's forwards and commits, from the StepCoster
  double plain_cost_seconds = 0; ///< plain decoding of the same tokens, from the StepCoster
  /// accepted_by_drafter[d][k]: steps whose accepted path's first k draft tokens (and not k + 1)
  /// were all proposed by drafter d.
  std::vector<std::vector<std::int64_t>> accepted_by_drafter;
  /// The automatic budget (DecodeStats): nodes_per_step[k] = steps that sent k draft nodes; over
  /// the sized steps, the tokens and seconds the decoder expected.
  std::vector<std::int64_t> nodes_per_step;
  std::int64_t sized_steps = 0;
  std::int64_t paused_steps = 0;  ///< steps whose drafters were not asked (the automatic budget's pause)
  double expected_tokens = 0, expected_seconds = 0;

  void add(const TurnResult& turn);
  /// τ: tokens per target call, bonus token included (Spec-Bench's convention).
  double tau() const;
  double draft_nodes_per_step() const;
  double draft_us_per_step() const;
  /// With a StepCoster: tokens per second of the speculative decoding (its forwards, commits and
  /// drafting) and of plain decoding, and their ratio.
  double tokens_per_second() const;
  double plain_tokens_per_second() const;
  double speedup() const;
  /// The automatic budget's expectation: expected_tokens / expected_seconds.
  double expected_tokens_per_second() const;
};

/// The chosen draft sizes of `--budget auto`: the mean and the q-quantile of nodes_per_step.
double mean_nodes(const std::vector<std::int64_t>& nodes_per_step);
int quantile_nodes(const std::vector<std::int64_t>& nodes_per_step, double q);

struct Report {
  std::vector<std::string> drafters;
  int budget = 0;  ///< the fixed budget, or the automatic budget's cap
  /// `--budget auto`: where the cost model comes from ("" for a fixed budget).
  std::string auto_budget;
  bool fixed_by_default = false;  ///< a fixed budget for want of a cost model, not from --budget N
  Calibration calibration;  ///< `--budget auto`: the acceptance model's, at the end of the run
  double seconds = 0;  ///< wall time of the replay
  Summary overall;
  std::vector<std::pair<std::string, Summary>> categories;  ///< in the corpus's order
  /// What the steps' time comes from ("" without a StepCoster: τ only).
  std::string cost_source;
  /// A timed replay (`--timed-model`): each round's overall speed, speculative and plain (none
  /// otherwise); the tables' times are the means over these rounds.
  Rounds rounds;
  std::string combination() const;
};

using ReplayRunner = ReplayRun (*)(const Corpus&, const ReplayOptions&);
/// Runs `runner` on `corpus` in rounds as `rule` asks, each with a fresh decoder (a drafter that
/// learns across turns starts over: every round is the same experiment), and puts each round's
/// overall speed into `rounds`. Returns the first round's run with each turn's times (target,
/// plain, drafting) the mean over the rounds.
ReplayRun replay_in_rounds(ReplayRunner runner, const Corpus& corpus, const ReplayOptions& options,
                           const RoundRule& rule, Rounds& rounds);

Report summarise(const Corpus& corpus, const ReplayRun& run, const ReplayOptions& options);
/// The same from any runner: turn t belongs to category turn_categories[t]; categories are listed
/// in order of first appearance.
Report summarise(std::span<const std::string> turn_categories, std::span<const TurnResult> turns,
                 std::vector<std::string> drafters, int budget, double seconds);
/// "budget 8", or "budget auto (cap 64)".
std::string budget_text(const Report& report);
/// The header line that says which budget ran: fixed (given, or the default for want of a cost
/// model) or automatic, with its cap and cost model; `unit` says what the budget bounds.
std::string budget_line(int budget, const std::string& auto_budget, bool fixed_by_default,
                        const char* unit = "draft nodes per step");
/// "auto", "fixed" or "fixed_by_default": the JSON's budget_kind.
std::string budget_kind(const std::string& auto_budget, bool fixed_by_default);

/// The table per category and overall, then the accepted-length histogram per drafter.
void print_report(std::ostream& out, const Report& report);
/// print_report's table and histogram without its first line.
void print_tables(std::ostream& out, const Report& report);
/// `--budget auto` (nothing otherwise): the cost model, the chosen draft sizes (mean and
/// percentiles), the calibration error, and the expected tokens/s next to the measured (when > 0).
void print_auto_budget(std::ostream& out, const Report& report, double measured_tokens_per_second);
/// The same as JSON (the "automatic_budget" object of docs/specbench.md).
nlohmann::ordered_json auto_budget_json(const Report& report, double measured_tokens_per_second);

/// What `specbench model` measured on top of the report.
struct ModelReport {
  Report report;
  std::string model;     ///< the checkpoint and its shape
  std::string verifier;  ///< the verifier and its options
  std::string dresd_search;  ///< dresd's search backend and parameters ("" without dresd)
  int prompts = 0;
  int threads = 1;       ///< the target's forward threads
  int clamped = 0;       ///< prompts whose max_new_tokens was cut to the model's positions
  std::int64_t speculative_tokens = 0, plain_tokens = 0;  ///< of one round
  Rounds rounds;         ///< per round, each arm's tokens/s, prefills included
  Rounds decode_rounds;  ///< the same without the prefills (as `--batch` reports)
  bool greedy = false;   ///< exact verifier: the output must equal plain greedy decoding
  int equal_to_plain = 0;  ///< prompts whose output equals the plain decode's in every round
  /// Forwards of the draft models of staged drafters (-1: no drafter runs one).
  std::int64_t draft_forwards = -1;
  std::int64_t draft_nodes = 0;  ///< tree nodes those forwards ran
};

ModelReport summarise_model(const ModelBench& bench, const ModelRun& run, const ModelOptions& options);
void print_model_report(std::ostream& out, const ModelReport& report);
nlohmann::ordered_json to_json(const ModelReport& report);
/// One row per report: overall τ, draft nodes/step, drafting µs/step, and τ per category; with
/// costs, also the speedup overall and a second table of speedups per category.
void print_comparison(std::ostream& out, std::span<const Report> reports);
/// τ per combination and category as grouped bars; with costs, a second panel of the speedups.
std::string comparison_svg(std::span<const Report> reports);

/// A measured replay's speedup against what its cost model (the table that sized --budget auto)
/// predicted for the same steps (PredictingCoster).
struct Prediction {
  std::string source;  ///< the table
  double predicted = 0, measured = 0;
  /// predicted / measured (0 when nothing was measured).
  double ratio() const { return measured > 0 ? predicted / measured : 0.0; }
};
/// "the cost model's prediction for these steps: speedup P, measured M (P / M = R), by SOURCE".
std::string prediction_line(const Prediction& p);
/// {"source", "predicted_speedup", "measured_speedup", "ratio"}.
nlohmann::ordered_json to_json(const Prediction& p);

/// `compare --modelled TABLE`: the run's combinations, their steps timed by a cost table measured
/// elsewhere (e.g. a GPU's, `calibrate --device cuda`): the speed they would reach there.
struct ModelledRun {
  std::string source;           ///< "the cost table FILE (what its metadata says)"
  std::vector<Report> reports;  ///< one per combination, costed by the table
};
/// "modelled, not measured in this run: ...", then tau, tok/s and speedup per combination.
void print_modelled(std::ostream& out, const ModelledRun& run);
/// {"source", "combinations": {NAME: {"tau", "tokens_per_second", "speedup"}}}.
nlohmann::ordered_json to_json(const ModelledRun& run);

/// {"drafters", "budget", "overall", "categories", ...}: see docs/specbench.md.
nlohmann::ordered_json to_json(const Report& report);
/// The accepted-length histogram as an SVG bar chart (share of steps per length, one bar per
/// drafter), like Figure 4 of the CASD paper.
std::string histogram_svg(const Report& report);
/// `s` with &, <, > and " escaped, for text in the SVG charts.
std::string xml_escape(const std::string& s);

}  // namespace specbench
