// The replay runner: every turn of a corpus decoded by SpeculativeDecoder<TimedTarget<ReplayTarget,
// StepCoster&>, Drafters..., ExactVerifier>: the replay decides, a StepCoster (a cost table, a real
// model, or nothing) says what each step would cost. Defined here, instantiated once per
// combination in registry.cpp.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <specdec/batch_decoder.hpp>
#include <specdec/decoder.hpp>
#include <specdec/index/token_datastore.hpp>
#include <specdec/index/dense_datastore.hpp>
#include <specdec/policies/drafters/dresd.hpp>
#include <specdec/policies/drafters/ngram.hpp>
#include <specdec/policies/drafters/rest.hpp>
#include <specdec/policies/drafters/staged.hpp>
#include <specdec/models/llama2c_model.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/stats.hpp>
#include <specdec/targets/replay_target.hpp>
#include <specdec/targets/timed_target.hpp>

#include "common/dense_search_choice.hpp"
#include "corpus.hpp"

namespace specbench {

/// What a drafter built from DrafterResources is told about the target.
struct TargetInfo {
  int vocab_size = 0;
  std::shared_ptr<const specdec::Llama2cModel> model;  ///< `model` runs; null in a replay
};

/// Files some drafters read, given on the command line, each opened once and shared by every
/// decoder of the run. A drafter constructible from `(const DrafterResources&, const TargetInfo&)`
/// is built from them; any other is default-constructed. The accessors throw input_error naming
/// the option when a file was not given, cannot be opened or does not fit the target.
class DrafterResources {
 public:
  DrafterResources() = default;
  /// Only rest's datastore (tests).
  explicit DrafterResources(std::filesystem::path token_datastore) : datastore(std::move(token_datastore)) {}

  std::filesystem::path datastore;        ///< rest: --datastore
  specdec::RestOptions rest;              ///< rest: --rest-occurrences
  std::filesystem::path dense_datastore;  ///< dresd: --dense-datastore
  specdec::DresdOptions dresd;            ///< dresd: --dresd-drafts, --dresd-depth, --dresd-neighbours
  specdec::tools::DenseSearchChoice dresd_search;  ///< dresd: --dresd-search and its FAISS parameters
  std::filesystem::path eagle_head;       ///< eagle: --eagle-head
  std::filesystem::path draft_model;      ///< staged, draft_model: --draft-model
  specdec::StagedOptions staged;          ///< staged, draft_model: --staged-depth, -top-k, -budget, -inner-budget
  std::filesystem::path ngram;            ///< ngram, staged: --ngram
  specdec::NgramOptions ngram_options;    ///< ngram and staged's second stage: --ngram-budget, -depth, -top-k

  std::shared_ptr<const specdec::TokenDatastore> token_datastore(const TargetInfo& target) const;
  std::shared_ptr<const specdec::DenseDatastore> dense(const TargetInfo& target) const;
  /// The draft model (a llama2.c checkpoint with the target's vocabulary).
  std::shared_ptr<const specdec::Llama2cModel> draft(const TargetInfo& target) const;
  std::shared_ptr<const specdec::NgramModel> ngram_model(const TargetInfo& target) const;
  /// dresd's search over dense(target), built once (an index build for FAISS, an upload for gpu-flat).
  std::shared_ptr<const specdec::DenseSearch> dense_search(const TargetInfo& target) const;
  /// The search dresd ran with (describe(dresd_search)); "" when no dresd drafter was built.
  std::string dense_search_used() const;

 private:
  mutable std::shared_ptr<const specdec::TokenDatastore> token_datastore_;
  mutable std::shared_ptr<const specdec::DenseDatastore> dense_;
  mutable std::shared_ptr<const specdec::Llama2cModel> draft_;
  mutable std::shared_ptr<const specdec::NgramModel> ngram_;
  mutable std::shared_ptr<const specdec::DenseSearch> dense_search_;
};

template <class Drafter>
Drafter make_drafter(const DrafterResources& resources, const TargetInfo& target) {
  if constexpr (std::is_constructible_v<Drafter, const DrafterResources&, const TargetInfo&>)
    return Drafter(resources, target);
  else return Drafter{};
}

/// What the replay's steps would cost on a given model and machine: it runs beside the
/// ReplayTarget (specdec::TimedTarget), sees every prefill, tree and committed path, and sums
/// the seconds of the forwards and commits since the last prefill (cost.hpp: a cost table, or
/// the real forward of a model).
class StepCoster {
 public:
  virtual ~StepCoster() = default;
  virtual void prefill(std::span<const token_t> tokens) = 0;
  virtual void forward(const specdec::TreeView& tree) = 0;
  virtual void commit(std::span<const specdec::node_t> path) = 0;
  /// At the end of a turn that produced `tokens` new tokens: {seconds of the forwards and commits
  /// since the last prefill, seconds plain decoding of the same tokens costs (one single-token
  /// forward and commit each, from the same first position)}.
  virtual std::pair<double, double> turn_seconds(std::int64_t tokens) = 0;
};

/// A replay that costs nothing (τ only).
class NoCost final : public StepCoster {
 public:
  void prefill(std::span<const token_t>) override {}
  void forward(const specdec::TreeView&) override {}
  void commit(std::span<const specdec::node_t>) override {}
  std::pair<double, double> turn_seconds(std::int64_t) override { return {0.0, 0.0}; }
};

struct ReplayOptions {
  int budget = 64;  ///< most draft nodes per target call, after merging all drafters (auto: the cap)
  DrafterResources resources;
  StepCoster* coster = nullptr;  ///< null: NoCost
  /// The coster runs a real forward (`--timed-model`): the automatic budget's pause weighs steps
  /// by their measured time (DecoderOptions::measured_pause); otherwise by the cost model's.
  bool timed = false;
  /// `--budget auto`: the decoder's cost model (DecoderOptions::cost); empty: a fixed budget.
  specdec::AnyCostModel cost{};
};

/// One replayed turn.
struct TurnResult {
  specdec::DecodeStats stats;
  /// New tokens up to and including the stop token: the recorded answer's length + 1. (A step
  /// whose accepted draft runs past the stop token commits more than this to the context; those
  /// tokens are not part of the answer and are not counted.)
  std::int64_t tokens = 0;
  /// With a StepCoster: what the steps' forwards and commits cost, and what plain decoding of the
  /// same tokens costs (seconds; 0 without one).
  double cost_seconds = 0, plain_cost_seconds = 0;
};

/// The automatic budget's acceptance model at the end of a run (one decoder per run).
struct Calibration {
  double error = 0;     ///< AcceptanceModel::calibration_error()
  double verdicts = 0;  ///< AcceptanceModel::tested()
};

/// The calibration of `decoder`'s acceptance model; empty without the automatic budget.
template <class Decoder>
Calibration calibration_of(const Decoder& decoder) {
  const specdec::AcceptanceModel* model = decoder.acceptance_model();
  return model ? Calibration{model->calibration_error(), model->tested()} : Calibration{};
}

struct ReplayRun {
  std::vector<std::string> drafters;
  std::vector<TurnResult> turns;  ///< one per corpus turn, in corpus order
  double seconds = 0;             ///< wall time of the whole replay
  Calibration calibration;
};

inline specdec::ReplayTarget& replay_target(specdec::ReplayTarget& target) { return target; }
template <class Coster>
specdec::ReplayTarget& replay_target(specdec::TimedTarget<specdec::ReplayTarget, Coster>& target) {
  return target.decider();
}

/// The decoder of --warm-history's turns: the replay alone, no coster, the main decoder's budget
/// (fixed: no cost model, so no clock either), and drafters that share the main decoder's
/// drafters' memory across requests (specdec::SharesStateAcrossRequests).
template <class... Drafters>
struct WarmDecoder {
  specdec::ReplayTarget target;
  specdec::SpeculativeDecoder<specdec::ReplayTarget, Drafters..., specdec::ExactVerifier> decoder;

  template <class Main>
  WarmDecoder(Main& main, const ReplayOptions& options, const Corpus& corpus)
      : target({corpus.stop_token}, corpus.vocab_size, corpus.stop_token),
        decoder(target, specdec::DecoderOptions{.budget = options.budget},
                make_drafter<Drafters>(options.resources, TargetInfo{corpus.vocab_size, nullptr})...,
                specdec::ExactVerifier{}) {
    specdec::share_drafter_states(decoder.drafters(), main.drafters());
  }
};

/// Replays every turn of `corpus` with the drafters `Drafters...` merged into one decoder.
/// Throws std::logic_error when a turn's output differs from its recorded answer (the decoder or
/// a policy broke losslessness).
template <class... Drafters>
ReplayRun replay(const Corpus& corpus, const ReplayOptions& options) {
  using Target = specdec::TimedTarget<specdec::ReplayTarget, StepCoster&>;
  using Decoder = specdec::SpeculativeDecoder<Target, Drafters..., specdec::ExactVerifier>;
  const auto start = std::chrono::steady_clock::now();
  ReplayRun run;
  run.drafters = Decoder::names();
  run.turns.reserve(corpus.turns.size());
  const std::array<token_t, 1> stop{corpus.stop_token};
  // One decoder for the whole run, as in a server: its drafters live across turns (begin() starts
  // each sequence), so a drafter may learn from earlier requests' outputs (tree_history). Each
  // turn puts its reference in the target the decoder holds.
  NoCost no_cost;
  StepCoster& coster = options.coster ? *options.coster : no_cost;
  Target target(specdec::ReplayTarget({corpus.stop_token}, corpus.vocab_size, corpus.stop_token), coster);
  Decoder decoder(target,
                  specdec::DecoderOptions{.budget = options.budget, .cost = options.cost, .measured_pause = options.timed},
                  make_drafter<Drafters>(options.resources, TargetInfo{corpus.vocab_size, nullptr})..., specdec::ExactVerifier{});
  // --warm-history: the turns nobody costs go through a decoder of their own whose drafters share
  // the first one's memory (shared_state_type), so the first one's clock (its measured pause)
  // never sees a step that runs no model.
  std::optional<WarmDecoder<Drafters...>> warm;
  if (!corpus.history.empty()) warm.emplace(decoder, options, corpus);
  std::vector<token_t> reference;
  const auto decode = [&](auto& on, const Turn& turn) {
    reference.assign(turn.prompt.begin(), turn.prompt.end());
    reference.insert(reference.end(), turn.answer.begin(), turn.answer.end());
    reference.push_back(corpus.stop_token);
    replay_target(on.target()) = specdec::ReplayTarget(reference, corpus.vocab_size, corpus.stop_token);
    on.prefill(turn.prompt);
    const std::vector<token_t> out = on.generate(static_cast<int>(turn.answer.size()) + 1, stop);
    if (out.size() != turn.answer.size() + 1 || out.back() != corpus.stop_token ||
        !std::equal(turn.answer.begin(), turn.answer.end(), out.begin()))
      throw std::logic_error("question " + std::to_string(turn.question_id) + " turn " +
                             std::to_string(turn.index + 1) + ": the decoder's output differs from the recorded answer");
    return static_cast<std::int64_t>(out.size());
  };
  std::size_t history_done = 0;
  for (const Turn& turn : corpus.turns) {
    for (; history_done < turn.history_end; ++history_done) {
      decode(warm->decoder, corpus.history[history_done]);
      specdec::end_drafters(warm->decoder.drafters());
    }
    const std::int64_t tokens = decode(decoder, turn);
    if (warm) specdec::end_drafters(decoder.drafters());  // its output joins the history before the turns that follow
    const auto [cost, plain] = coster.turn_seconds(tokens);
    run.turns.push_back({decoder.stats(), tokens, cost, plain});
  }
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.calibration = calibration_of(decoder);
  return run;
}

}  // namespace specbench
