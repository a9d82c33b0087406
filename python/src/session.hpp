// specdec::python::Session: one sequence's speculative step with drafters composed at run time,
// the state behind the Python module's Decoder.
//
// SpeculativeDecoder composes its drafters at compile time: one instantiation per combination.
// A module that exposed every combination that way would compile each drafter once per
// combination it appears in. Here each drafter type is compiled once, behind AnyDrafter (one
// virtual call per phase, next to a drafter's microseconds of work), and the session merges their
// trees with the same TreeMerger, in the same order, as detail::SequenceStep does: the tree of a
// step is the one SpeculativeDecoder<Target, Drafters..., Verifier> builds from the same context
// (tests/python/test_drafting.py checks it against the C++ decoder). The target is the caller's
// (a PyTorch model): the session drafts, verifies the caller's logits and commits.
#pragma once

#include <chrono>
#include <cmath>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include <specdec/acceptance_model.hpp>
#include <specdec/concepts.hpp>
#include <specdec/draft_budget.hpp>
#include <specdec/error.hpp>
#include <specdec/stats.hpp>
#include <specdec/step/budget.hpp>
#include <specdec/step/sequence_step.hpp>
#include <specdec/tree_merger.hpp>
#include <specdec/verdict.hpp>

#include "verifiers.hpp"

namespace specdec::python {

/// A drafter behind one virtual call per phase. A drafter that reads the target's features
/// (EAGLE, DReSD) is told them; the others ignore them.
class AnyDrafter {
 public:
  virtual ~AnyDrafter() = default;
  virtual std::string_view name() const = 0;
  virtual bool needs_features() const = 0;
  virtual bool emits_probabilities() const = 0;
  virtual void begin(std::span<const token_t> prompt, const TargetFeatures& features) = 0;
  virtual void propose(const DraftContext& ctx, DraftTree& tree) = 0;
  virtual void observe(std::span<const token_t> committed, const TargetFeatures& features) = 0;
  /// The sequence ended (a drafter with a history adds its output to it).
  virtual void end() = 0;

  /// A drafter holds one sequence's state: it serves one decoder.
  bool claimed = false;
};

template <Drafter D>
class HeldDrafter final : public AnyDrafter {
  static constexpr bool reads_features = drafter_traits<D>::needs_target_features;

 public:
  explicit HeldDrafter(D drafter) : drafter_(std::move(drafter)) {}
  std::string_view name() const override { return drafter_name<D>(); }
  bool needs_features() const override { return reads_features; }
  bool emits_probabilities() const override { return drafter_traits<D>::emits_draft_probabilities; }
  void begin(std::span<const token_t> prompt, const TargetFeatures& features) override {
    if constexpr (reads_features) drafter_.begin(prompt, features);
    else drafter_.begin(prompt);
  }
  void propose(const DraftContext& ctx, DraftTree& tree) override { drafter_.propose(ctx, tree); }
  void observe(std::span<const token_t> committed, const TargetFeatures& features) override {
    if constexpr (reads_features) drafter_.observe(committed, features);
    else drafter_.observe(committed);
  }
  void end() override {
    if constexpr (requires { drafter_.end(); }) drafter_.end();
  }

 private:
  D drafter_;
};

/// Rows of features in the caller's memory (row_stride floats apart), checked by the caller.
struct FeatureRows {
  const float* data = nullptr;
  std::int64_t row_stride = 0;
  int rows = 0;
  int dim = 0;
};

/// What a forward of n tree nodes costs, from a table: seconds[n - 1] (context-independent).
struct CostTable {
  std::span<const double> seconds;
  double step_seconds(int nodes, int /*context*/) const { return seconds[static_cast<std::size_t>(nodes - 1)]; }
};

/// Seconds on some clock: the session times its phases with it (steady_clock's by default; a test
/// gives one it advances itself, as DecoderOptions::clock).
using SecondsClock = std::function<double()>;

struct SessionOptions {
  int budget = 64;        ///< draft nodes per step at most
  int max_positions = 0;  ///< the target's positions (0: unbounded); no node is drafted past them
  /// The automatic budget (empty: off): seconds of a forward of 1, 2, ... budget + 1 nodes.
  std::vector<double> cost;
  /// How the automatic budget's pause weighs a drafting step (DecoderOptions::measured_pause): by
  /// the step's measured seconds, from draft() to the end of commit() (the caller's forward
  /// included, or the seconds commit() is told), against those of the steps that send the root
  /// alone; or (false) by the cost table's forward times plus the measured drafting.
  bool measured_pause = true;
  SecondsClock clock;  ///< empty: steady_clock
};

class Session {
 public:
  /// Throws specdec::error for a vocabulary below 1, a budget below 0, more than 32 drafters, a
  /// drafter another session holds, or a cost table that is too short or not positive.
  Session(int vocab, std::vector<std::shared_ptr<AnyDrafter>> drafters, AnyVerifier verifier, SessionOptions options)
      : vocab_(vocab), drafters_(std::move(drafters)), verifier_(std::move(verifier)), options_(std::move(options)) {
    if (vocab < 1) throw error("Decoder: vocab_size must be >= 1, got " + std::to_string(vocab));
    if (options_.budget < 0) throw error("Decoder: budget must be >= 0, got " + std::to_string(options_.budget));
    if (options_.max_positions < 0)
      throw error("Decoder: max_positions must be >= 0 (0: unbounded), got " + std::to_string(options_.max_positions));
    if (drafters_.size() > 32)
      throw error("Decoder: " + std::to_string(drafters_.size()) + " drafters, but a source mask has 32 bits");
    for (std::size_t i = 0; i < drafters_.size(); ++i) {
      if (!drafters_[i]) throw error("Decoder: drafter " + std::to_string(i) + " is None");
      if (drafters_[i]->claimed)
        throw error("Decoder: drafter " + std::to_string(i) + " (" + std::string(drafters_[i]->name()) +
                    ") already serves another decoder (a drafter holds one sequence's state: make one per decoder)");
    }
    if (!options_.cost.empty()) {
      if (options_.cost.size() < static_cast<std::size_t>(options_.budget) + 1)
        throw error("Decoder: the cost table has " + std::to_string(options_.cost.size()) +
                    " entries, the budget needs budget + 1 = " + std::to_string(options_.budget + 1));
      for (std::size_t n = 0; n < options_.cost.size(); ++n)
        if (!(options_.cost[n] > 0.0) || !std::isfinite(options_.cost[n]))
          throw error("Decoder: cost[" + std::to_string(n) + "] is " + std::to_string(options_.cost[n]) +
                      " s, it must be finite and > 0");
      acceptance_.emplace(static_cast<int>(std::max<std::size_t>(drafters_.size(), 1)));
      budget_.emplace(CostTable{options_.cost}, options_.measured_pause);
    }
    for (auto& d : drafters_) d->claimed = true;
    trees_.resize(std::max<std::size_t>(drafters_.size(), 1));
    for (const DraftTree& t : trees_) tree_pointers_.push_back(&t);
  }
  ~Session() {
    for (auto& d : drafters_) d->claimed = false;
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Whether a drafter reads the target's features (begin, verify and accept then take them).
  bool needs_features() const {
    for (const auto& d : drafters_)
      if (d->needs_features()) return true;
    return false;
  }

  /// A new sequence: every drafter begins on `prompt` and the statistics restart. A feature
  /// drafter is told `features`: one row per prompt token but the last (the first root).
  void begin(std::span<const token_t> prompt, const FeatureRows& features = {}) {
    context_.clear();  // a drafter that throws leaves no sequence to step
    feature_dim_ = 0;
    if (prompt.empty()) throw error("Decoder.begin: the prompt is empty (it needs at least the first root token)");
    for (std::size_t i = 0; i < prompt.size(); ++i)
      detail::check_token(prompt[i], vocab_, [&] { return "Decoder.begin: prompt token " + std::to_string(i); });
    if (options_.max_positions > 0 && prompt.size() > static_cast<std::size_t>(options_.max_positions))
      throw error("Decoder.begin: the prompt has " + std::to_string(prompt.size()) + " tokens, more than max_positions " +
                  std::to_string(options_.max_positions));
    if (needs_features()) {
      require_features(features, static_cast<int>(prompt.size()) - 1, "begin", "one per prompt token but the last");
      feature_dim_ = features.dim;
    }
    if (needs_features()) gather(features, static_cast<int>(prompt.size()) - 1, nullptr);
    for (auto& d : drafters_) d->begin(prompt, TargetFeatures{0, static_cast<int>(prompt.size()) - 1, feature_dim_, features_.data()});
    context_.assign(prompt.begin(), prompt.end());
    prompt_length_ = static_cast<int>(prompt.size());
    stats_ = DecodeStats{};
    stats_.accepted_by_drafter.assign(drafters_.size(), {});
    for (auto& d : drafters_) stats_.drafter_names.emplace_back(d->name());
    pending_ = false;
    drafted_ = false;
    lane_.pause.restart();  // a new sequence: draft from its first step
  }

  /// draft + merge + layout: the tree to run (base_position = tokens in the target's cache). Under
  /// the automatic budget a step in the pause (DraftingPause) sends the root alone without asking
  /// the drafters.
  TreeView draft() {
    require_started("draft");
    if (pending_) throw error("Decoder.draft: the last verdict was not committed yet (call commit())");
    const double t0 = now();
    step_start_ = t0;
    const int cached = this->cached();
    int max_depth = options_.budget;
    if (options_.max_positions > 0) {
      const int room = options_.max_positions - cached - 1;
      if (room < 0)
        throw error("Decoder.draft: the target is full (" + std::to_string(options_.max_positions) + " positions)");
      max_depth = std::min(max_depth, room);
    }
    // As detail::StepDriver::draft: the pause is consulted where the drafters could be asked.
    lane_.ranked = options_.budget > 0 && max_depth > 0 && acceptance_;
    if (lane_.ranked && lane_.pause.skip_step()) {
      ++stats_.paused_steps;
      lane_.ranked = false;
      max_depth = 0;
    }
    lane_.asked = options_.budget > 0 && max_depth > 0;
    lane_.draft_seconds = 0;
    if (!lane_.asked) {
      merger_.root_only(context_.back());
    } else {
      const int most = lane_.ranked ? lane_.pause.ask_nodes(options_.budget) : options_.budget;
      const DraftContext ctx{context_, prompt_length_, most, max_depth, vocab_};
      if (drafters_.empty()) trees_[0].reset(context_.back());
      for (std::size_t i = 0; i < drafters_.size(); ++i) propose_one(i, ctx);
      merger_.rank(std::span<const DraftTree* const>(tree_pointers_), most, max_depth,
                   lane_.ranked ? &*acceptance_ : nullptr);
      if (!lane_.ranked) merger_.keep(merger_.ranked());
      lane_.draft_seconds = now() - t0;
    }
    if (budget_) {  // this step's size, from its drafting time and ranking, as the decoder's
      lane_.budget = options_.budget;
      budget_->begin();
      budget_->join(lane_, &merger_, cached);
      const DraftSizeChoice choice = budget_->size();
      record_sizing(choice.expected_tokens, choice.seconds);
      if (lane_.ranked) merger_.keep(lane_.nodes);
    }
    view_ = merger_.view();
    view_.base_position = cached;
    drafted_ = true;
    step_draft_seconds_ = now() - t0;
    return view_;
  }

  /// verify: the accepted path and the next token, from one row of logits per tree node (and,
  /// for a feature drafter, one row of features per node), verified on the host.
  const Verdict& verify(const RowMajorLogits& logits, const FeatureRows& features = {}) {
    return verify_by([&](AnyVerifier& v, const TreeView& tree, Verdict& out) { verify_tree(v, tree, logits, out); },
                     features);
  }

  /// verify where the logits are: `run(verifier, tree, verdict)` verifies the drafted tree (on
  /// the host, or on a device: DeviceVerifier); the verdict is then checked as the decoder does.
  template <class Run>
  const Verdict& verify_by(Run&& run, const FeatureRows& features = {}) {
    require_drafted("verify");
    if (needs_features()) require_features(features, view_.size, "verify", "one per tree node");
    const double t0 = now();
    run(verifier_, view_, verdict_);
    check_verdict();
    gather_path(features);
    stats_.verify_seconds += now() - t0;
    pending_ = true;
    return verdict_;
  }

  /// A verdict reached elsewhere (e.g. a serving engine's rejection sampler) on the drafted tree:
  /// checked as the verifier's is, then commit() as after verify().
  const Verdict& accept(std::span<const node_t> path, token_t next_token, const FeatureRows& features = {}) {
    require_drafted("accept");
    if (needs_features()) require_features(features, view_.size, "accept", "one per tree node");
    verdict_.path.assign(path.begin(), path.end());
    verdict_.next_token = next_token;
    check_verdict();
    gather_path(features);
    pending_ = true;
    return verdict_;
  }

  /// commit: the verdict's tokens join the context, the drafters observe them, the step is
  /// counted. Returns the committed tokens (accepted drafts, then the next token). `step_seconds`:
  /// what the step took from draft() to here, as the caller measured it, for the automatic
  /// budget's measured pause; not given, the session's clock says.
  std::span<const token_t> commit(std::optional<double> step_seconds = std::nullopt) {
    require_started("commit");
    if (!pending_) throw error("Decoder.commit: no verdict to commit (call verify() or accept() after draft())");
    if (step_seconds && !(*step_seconds >= 0.0 && std::isfinite(*step_seconds)))
      throw error("Decoder.commit: step_seconds must be finite and >= 0, got " + std::to_string(*step_seconds));
    const double t0 = now();
    committed_.clear();
    for (std::size_t k = 1; k < verdict_.path.size(); ++k) committed_.push_back(view_.token[verdict_.path[k]]);
    committed_.push_back(verdict_.next_token);
    context_.insert(context_.end(), committed_.begin(), committed_.end());
    if (acceptance_ && view_.size > 1) merger_.record_verdict(*acceptance_, verdict_.path);
    // Row k: the feature at the root's position + k (the root, then each accepted node).
    const TargetFeatures rows{cached() - static_cast<int>(committed_.size()), static_cast<int>(verdict_.path.size()),
                              feature_dim_, features_.data()};
    for (auto& d : drafters_) d->observe(committed_, rows);
    const double t1 = now();
    if (budget_) budget_->weigh(step_seconds ? *step_seconds : t1 - step_start_);
    record(t1 - t0);
    pending_ = false;
    drafted_ = false;
    return committed_;
  }

  /// end: the sequence is over (drafters with a history keep its output).
  void end() {
    require_started("end");
    for (auto& d : drafters_) d->end();
    context_.clear();
    pending_ = drafted_ = false;
  }

  /// Throws unless a tree was drafted and not verified yet (before the caller reads its logits).
  void require_drafted(const char* what) const {
    require_started(what);
    if (pending_) throw error(std::string("Decoder.") + what + ": the last verdict was not committed yet (call commit())");
    if (!drafted_) throw error(std::string("Decoder.") + what + ": no tree to verify (call draft() first)");
  }

  bool started() const { return !context_.empty(); }
  std::span<const token_t> context() const { return context_; }
  int cached() const { return static_cast<int>(context_.size()) - 1; }
  int vocab() const { return vocab_; }
  int drafters() const { return static_cast<int>(drafters_.size()); }
  const DecodeStats& stats() const { return stats_; }
  const TreeView& view() const { return view_; }
  const DraftTree& tree() const { return merger_.tree(); }
  const Verdict& verdict() const { return verdict_; }
  const SessionOptions& options() const { return options_; }

 private:
  double now() const {
    if (options_.clock) return options_.clock();
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
  }

  void record_sizing(double expected_tokens, double expected_seconds) {
    stats_.sized_steps += 1;
    stats_.expected_tokens += expected_tokens;
    stats_.expected_seconds += expected_seconds;
  }

  void require_started(const char* what) const {
    if (!started()) throw error(std::string("Decoder.") + what + ": no sequence (call begin(prompt) first)");
  }

  void propose_one(std::size_t i, const DraftContext& ctx) {
    DraftTree& tree = trees_[i];
    tree.reset(context_.back());
    drafters_[i]->propose(ctx, tree);
    const auto who = [&] { return "drafter " + std::to_string(i) + " (" + std::string(drafters_[i]->name()) + ")"; };
    if (tree.root_token() != context_.back()) throw error(who() + ": changed the root token of its draft tree");
    check_tree(tree, vocab_, who);
    if (tree.distributions() > 0) {
      if (!drafters_[i]->emits_probabilities())
        throw error(who() + ": attached draft distributions but does not declare emits_draft_probabilities");
      check_distributions(tree, vocab_, who);
    }
  }

  void require_features(const FeatureRows& f, int rows, const char* call, const char* what) const {
    std::string reader;
    for (const auto& d : drafters_)
      if (d->needs_features()) reader = std::string(d->name());
    if (!f.data && rows > 0)
      throw error("Decoder." + std::string(call) + ": drafter " + reader + " reads the target's features: pass features (" +
                  what + ")");
    if (f.data && f.rows != rows)
      throw error("Decoder." + std::string(call) + ": features have " + std::to_string(f.rows) + " rows, need " +
                  std::to_string(rows) + " (" + what + ")");
    if (f.data && feature_dim_ > 0 && f.dim != feature_dim_)
      throw error("Decoder." + std::string(call) + ": features have " + std::to_string(f.dim) +
                  " columns, begin() had " + std::to_string(feature_dim_));
  }

  // Copies `rows` rows of `f` (those of `nodes` when given) into features_: the caller's memory
  // may change before commit().
  void gather(const FeatureRows& f, int rows, const node_t* nodes) {
    features_.clear();
    if (!f.data) return;
    for (int k = 0; k < rows; ++k) {
      const float* row = f.data + static_cast<std::int64_t>(nodes ? nodes[k] : k) * f.row_stride;
      features_.insert(features_.end(), row, row + f.dim);
    }
  }
  void gather_path(const FeatureRows& f) {
    if (needs_features()) gather(f, static_cast<int>(verdict_.path.size()), verdict_.path.data());
  }

  // The decoder's check (a wrong path would corrupt the caller's cache) and counting.
  void check_verdict() const { detail::check_verdict(verdict_, view_, vocab_); }
  void record(double commit_seconds) {
    detail::count_step(stats_, view_, merger_.tree(), verdict_.path, committed_.size());
    stats_.draft_seconds += step_draft_seconds_ + commit_seconds;
  }

  int vocab_;
  std::vector<std::shared_ptr<AnyDrafter>> drafters_;
  AnyVerifier verifier_;
  SessionOptions options_;
  // The automatic budget (a cost table given): the calibration, SpeculativeDecoder's controller
  // (step/budget.hpp) and this sequence's part in it (the drafters' pause).
  std::optional<AcceptanceModel> acceptance_;
  std::optional<detail::StepBudget> budget_;
  detail::SequenceBudget lane_;
  double step_start_ = 0;        // the clock at draft()
  double step_draft_seconds_ = 0;
  std::vector<token_t> context_;
  int prompt_length_ = 0;
  std::vector<DraftTree> trees_;                   // one per drafter (one for none)
  std::vector<const DraftTree*> tree_pointers_;  // to trees_, as TreeMerger takes them
  TreeMerger merger_;
  TreeView view_{};
  Verdict verdict_;
  std::vector<token_t> committed_;
  DecodeStats stats_;
  bool drafted_ = false, pending_ = false;
  int feature_dim_ = 0;
  std::vector<float> features_;  // the rows a feature drafter is told next (begin, then each commit)
};

}  // namespace specdec::python
