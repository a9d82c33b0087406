// SpeculativeDecoder<Target, Drafter..., Verifier>: the decode loop of one sequence. Its step is
// step/driver.hpp's, the one SpeculativeBatch (batch_decoder.hpp) runs for many sequences, with
// one sequence on slot 0: the phases of step/sequence_step.hpp (draft, merge, commit, observe,
// record) and the automatic budget of step/budget.hpp. Drafting and merging run on the host; the
// forward, verification and commit run on the host for a Target (presented to the driver as a
// batch of one slot), and on the target's backend (host or CUDA, step/backend_step.hpp, with one
// tree) for a BackendTarget.
//
// A host Target's decoder compiles none of the backend operations nor the sampling code: only a
// BackendTarget needs step/backend_step.hpp, which its own header includes.
#pragma once

#include <algorithm>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <specdec/checks.hpp>
#include <specdec/concepts.hpp>
#include <specdec/draft_budget.hpp>
#include <specdec/draft_tree.hpp>
#include <specdec/error.hpp>
#include <specdec/stats.hpp>
#include <specdec/step/budget.hpp>
#include <specdec/step/driver.hpp>
#include <specdec/step/sequence_step.hpp>
#include <specdec/type_list.hpp>

namespace specdec {

namespace detail {
/// What forward() returns, or void when the target has no usable forward() (its check says so).
template <class Target>
struct forward_output {
  using type = void;
};
template <class Target>
  requires requires(Target& t, const TreeView& tree) { t.forward(tree); }
struct forward_output<Target> {
  using type = target_output_t<Target>;
};

}  // namespace detail

struct DecoderOptions {
  /// Most non-root draft nodes sent to the target per step, after merging all drafters.
  int budget = 64;
  /// The automatic budget, on when a cost model is given (any CostModel, draft_budget.hpp: a
  /// measured cost table, or the user's own model of their target). Each step then asks the
  /// drafters for up to `budget` nodes (at most twice the most a recent step sent, at least 4:
  /// DraftingPause::ask_nodes), ranks the merged nodes by the estimated probability that their
  /// path is accepted (an AcceptanceModel that learns from this decoder's verdicts, across
  /// sequences) and sends the k best, k = 0 included, that maximise expected tokens per second:
  /// (1 + their probabilities) / (cost.step_seconds(1 + k, cached tokens) + the step's drafting
  /// time); while drafting does not pay over the recent drafting steps (measured_pause), the
  /// drafters are not asked for 1, 2, 4, ... up to 32 steps, or up to 256 where one probe costs a
  /// fair part of them (DraftingPause; a new sequence drafts at once). It is SpeculativeBatch's
  /// automatic budget for a batch of one (step/budget.hpp). The cost model must answer for every
  /// size up to budget + 1. Without one, every step sends up to `budget` nodes ranked by the
  /// drafters' own scores. Either way the committed tokens are the same: the budget changes what
  /// is drafted, never what is accepted.
  AnyCostModel cost{};
  AcceptanceModelOptions acceptance{};  ///< the automatic budget's calibration
  /// How the automatic budget's pause weighs a drafting step (DraftingPause): by its measured
  /// time against the measured time of the steps that send the root alone (true: what the target
  /// really costs, with the decoder's own work and what drafting does to the caches), or by the
  /// cost model's forward times plus the measured drafting (false: for a target whose own time is
  /// not the step's, e.g. a replay priced by a cost table).
  bool measured_pause = true;
  /// Whether generate() hands the steps that would send the root alone (all of them at budget 0,
  /// or without drafters; the rest of a pause under the automatic budget) to the target's own
  /// decoding loop, in one call, where it has one (a PlainDecodingTarget) and the verifier is
  /// greedy (needs output_need::argmax), the target's features unread and the target not a
  /// BackendTarget: the same tokens and counters as step by step (the verifier is then not
  /// called), without the decoder's work and clock reads per token.
  bool plain_runs = true;
  /// The clock the steps time themselves with (DecodeStats' seconds, the automatic budget's
  /// measured pause): steady_clock by default; a test gives a clock it advances itself.
  StepClock clock = &std::chrono::steady_clock::now;
};

/// Speculative decoding of `Target` with drafts from every `Drafter` merged into one tree and
/// checked by the last policy, the `Verifier`.
///
///   specdec::SpeculativeDecoder<MyModel, specdec::CasdDrafter, specdec::ExactVerifier> dec(model);
///   dec.prefill(prompt);
///   auto tokens = dec.generate(256, {eos});
///
/// The target is held by reference and must outlive the decoder; policies are owned.
template <class Target, class... Policies>
class SpeculativeDecoder {
  static_assert(sizeof...(Policies) >= 1,
                "SpeculativeDecoder<Target, Drafter..., Verifier>: the last template argument must be "
                "a verifier (e.g. specdec::ExactVerifier), and none was given.");
  using split = detail::split_last<Policies...>;
  using drafter_list = typename split::init;
  using sequence_type = detail::SequenceStep<drafter_list>;

 public:
  using target_type = Target;
  using verifier_type = typename split::last;
  using drafters_type = typename drafter_list::template apply<std::tuple>;
  using output_type = typename detail::forward_output<Target>::type;
  static constexpr std::size_t num_drafters = drafter_list::size;

 private:
  // Every misuse of the composition is one static_assert sentence, given here (checks.hpp); when
  // one fired, the member functions below compile to nothing, so that no knock-on error follows.
  static constexpr bool composition_checked = [] {
    if constexpr (sizeof...(Policies) == 0) return false;  // said above
    else return detail::check_decoder<Target>(drafter_list{}, static_cast<verifier_type*>(nullptr));
  }();
  static_assert(num_drafters <= 32, "SpeculativeDecoder: at most 32 drafters (one source bit each).");
  // A BackendTarget's step is defined in step/backend_step.hpp, which a host decoder does not include.
  static constexpr bool step_defined = detail::complete<typename detail::backend_step_for<Target>::type>;
  static_assert(!composition_checked || step_defined,
                "This target is a BackendTarget: include <specdec/step/backend_step.hpp> (the decoder's step on "
                "its backend) before using SpeculativeDecoder with it.");
  static constexpr bool checked = composition_checked && step_defined;

 public:
  /// Some drafter reads the target's features: each step gathers the accepted path's rows.
  static constexpr bool gathers_features = checked && detail::any_feature_drafter<drafter_list>::value;

  /// generate() may run plain steps in the target's own loop (DecoderOptions::plain_runs).
  static constexpr bool runs_plainly = [] {
    if constexpr (!checked || BackendTarget<Target> || !PlainDecodingTarget<Target>) return false;
    else if constexpr (gathers_features && !PlainDecodingFeatureTarget<Target>) return false;
    else return verifier_type::needs == output_need::argmax;
  }();

  /// Policies given in template order: drafters, then the verifier.
  SpeculativeDecoder(Target& target, Policies... policies)
      : SpeculativeDecoder(target, DecoderOptions{}, std::move(policies)...) {}

  SpeculativeDecoder(Target& target, DecoderOptions options, Policies... policies)
      : SpeculativeDecoder(target, options, std::forward_as_tuple(std::move(policies)...),
                           std::make_index_sequence<num_drafters>{}) {}

  /// All policies default-constructed.
  explicit SpeculativeDecoder(Target& target, DecoderOptions options = {})
    requires(std::default_initializable<Policies> && ...)
      : SpeculativeDecoder(target, options, Policies{}...) {}

  /// Starts a new sequence. The prompt's last token becomes the first tree's root; the target's
  /// KV cache is filled with the tokens before it. Throws specdec::error on an empty prompt or a
  /// token outside the vocabulary.
  void prefill(std::span<const token_t> prompt) {
    if constexpr (!checked) {
      return;  // the composition failed a check: its sentence is the error
    } else {
      seq_.stop();  // a prefill that throws leaves no sequence to step
      if (prompt.empty()) throw error("SpeculativeDecoder::prefill: the prompt is empty (it needs at least one token)");
      if (options_.budget < 0)
        throw error("SpeculativeDecoder: budget must be >= 0, got " + std::to_string(options_.budget));
      const int vocab = static_cast<int>(target_.vocab_size());
      for (std::size_t i = 0; i < prompt.size(); ++i)
        detail::check_token(prompt[i], vocab, [i] { return "prompt token " + std::to_string(i); });
      if constexpr (BackendTarget<Target>) {
        using step_type = typename detail::backend_step_for<Target>::type;
        if (options_.budget > step_type::max_budget)
          throw error("SpeculativeDecoder: budget " + std::to_string(options_.budget) + " is above what a backend " +
                      "step verifies and compacts (" + std::to_string(step_type::max_budget) + " draft nodes)");
        backend_step_.prepare(target_.backend(), vocab, "SpeculativeDecoder", false, 1, options_.budget + 1);
      }
      target_.prefill(prompt.first(prompt.size() - 1));
      TargetFeatures features{};
      if constexpr (gathers_features)
        features = detail::prefill_features(target_.prefill_features(), prompt.size(), feature_dim(),
                                            "SpeculativeDecoder::prefill: the target's prefill_features()");
      seq_.begin(prompt, vocab, features);
      lane_.pause.restart();  // a new sequence: draft from its first step
    }
  }

  /// One speculative step: draft, one target forward, verify, commit. Returns the tokens
  /// committed by this step (accepted draft tokens, then the next token), valid until the next call.
  /// If a drafter, a host Target's forward or the verifier throws, nothing was committed and the
  /// next step drafts again; if the target's commit throws, or a BackendTarget's step (forward,
  /// verification, compaction), the cache may hold part of the step: only prefill() can go on.
  std::span<const token_t> step() {
    const std::span<const token_t> committed = advance();
    seq_.record_output(committed.size());
    return committed;
  }

 private:
  // step() without counting its tokens as output: generate() counts the tokens it keeps.
  std::span<const token_t> advance() {
    if constexpr (!checked) {
      return {};  // the composition failed a check: its sentence is the error
    } else {
      if (!seq_.started()) throw error("SpeculativeDecoder::step: call prefill() first");
      driver_.begin();
      driver_.draft(0, seq_, lane_, options_.budget, tree_bounds(seq_.cached()), verifier_,
                    acceptance_ ? &*acceptance_ : nullptr, nullptr);
      if constexpr (BackendTarget<Target>) driver_.run(target_, backend_step_, feature_dim(), StepHooks{*this});
      else driver_.run(detail::OneSlotTarget<Target>(target_), backend_step_, feature_dim(), StepHooks{*this});
      return driver_.committed(0);
    }
  }

  // What the step driver leaves to a decoder: its sizing is its sequence's, and a step that may
  // have left part of itself in the cache stops the sequence (only a new prefill can go on).
  struct StepHooks {
    SpeculativeDecoder& decoder;
    void sized(const DraftSizeChoice& choice) { decoder.seq_.record_sizing(choice.expected_tokens, choice.seconds); }
    void end(int) { decoder.seq_.stop(); }
    void recorded(int) {}
  };

 public:
  /// Steps until `max_new_tokens` tokens were generated or a stop token was produced. Returns the
  /// new tokens, cut after the first stop token (included) or at max_new_tokens. The decoder's
  /// context() keeps everything committed, including tokens of the last step past the cut.
  std::vector<token_t> generate(int max_new_tokens, std::span<const token_t> stop_tokens = {}) {
    if (max_new_tokens < 0)
      throw error("SpeculativeDecoder::generate: max_new_tokens must be >= 0, got " + std::to_string(max_new_tokens));
    std::vector<token_t> out;
    while (static_cast<int>(out.size()) < max_new_tokens) {
      if constexpr (runs_plainly) {
        const int steps = plain_steps(max_new_tokens - static_cast<int>(out.size()));
        if (steps > 0) {
          const std::span<const token_t> run = decode_plainly(steps, stop_tokens);
          out.insert(out.end(), run.begin(), run.end());
          seq_.record_output(run.size());
          if (std::find(stop_tokens.begin(), stop_tokens.end(), run.back()) != stop_tokens.end()) return out;
          continue;
        }
      }
      const std::size_t before = out.size();
      bool done = false;
      for (token_t t : advance()) {
        out.push_back(t);
        done = static_cast<int>(out.size()) == max_new_tokens ||
               std::find(stop_tokens.begin(), stop_tokens.end(), t) != stop_tokens.end();
        if (done) break;
      }
      seq_.record_output(out.size() - before);
      if (done) return out;
    }
    return out;
  }

  /// Goes on from `context` instead of context(), e.g. when this decoder drafts for another one
  /// whose sequence went elsewhere (StagedDrafter). Keeps the target's KV cache for the longest
  /// common prefix of context() and `context` (the new root excluded), feeds the rest of
  /// `context` but its last token to the target with one forward (none when the cache already
  /// holds it), and begins every drafter again on `context`. The statistics go on (not reset);
  /// prompt_length() is cut to `context`'s size. Needs a RewindableTarget (a host Target with
  /// rewind()) and drafters that read no features (begin() would need the whole context's).
  /// Throws specdec::error before prefill(), on an empty context or a token outside the
  /// vocabulary (the decoder is then left as before), and passes on the target's errors (e.g. a
  /// context longer than its positions; only prefill() can go on after those).
  void resume(std::span<const token_t> context)
    requires RewindableTarget<Target>
  {
    static_assert(!gathers_features,
                  "SpeculativeDecoder::resume: a drafter reads the target's features (needs_target_features), "
                  "and begin() would need them for the whole context; resume() is for feature-free drafters.");
    if constexpr (checked) {
      if (!seq_.started()) throw error("SpeculativeDecoder::resume: call prefill() first");
      if (context.empty()) throw error("SpeculativeDecoder::resume: the context is empty (it needs at least one token)");
      for (std::size_t i = 0; i < context.size(); ++i)
        detail::check_token(context[i], seq_.vocab(), [i] { return "resume: token " + std::to_string(i); });
      const std::span<const token_t> before = seq_.context();
      const std::size_t cacheable = context.size() - 1;
      std::size_t keep = 0;
      while (keep < cacheable && keep < static_cast<std::size_t>(seq_.cached()) && before[keep] == context[keep]) ++keep;
      target_.rewind(static_cast<int>(keep));
      seq_.rewind(static_cast<int>(keep), context);
      try {
        if (keep < cacheable) feed(context.subspan(keep + 1, cacheable - keep));
      } catch (...) {
        seq_.stop();  // the cache holds part of the context: only a new prefill can go on
        throw;
      }
      seq_.restart(context);
    }
  }

  /// Prompt and generated tokens; back() is the next root (committed, not yet seen by the target).
  std::span<const token_t> context() const { return seq_.context(); }
  int prompt_length() const { return seq_.prompt_length(); }
  const DecodeStats& stats() const { return seq_.stats(); }
  /// The automatic budget's calibration (null without DecoderOptions::cost): its estimates and
  /// calibration_error() against the verdicts so far.
  const AcceptanceModel* acceptance_model() const { return acceptance_ ? &*acceptance_ : nullptr; }
  const DecoderOptions& options() const { return options_; }
  /// The last step's merged, laid-out tree and verdict (for inspection and tests).
  const DraftTree& last_tree() const { return seq_.tree(); }
  const Verdict& last_verdict() const { return seq_.verdict(); }

  template <std::size_t I>
  auto& drafter() { return std::get<I>(seq_.drafters()); }
  drafters_type& drafters() { return seq_.drafters(); }
  verifier_type& verifier() { return verifier_; }
  Target& target() { return target_; }

  /// Display names of the drafters, in template order.
  static std::vector<std::string> names() { return sequence_type::names(); }

 private:
  template <class Tuple, std::size_t... I>
  SpeculativeDecoder(Target& target, DecoderOptions options, Tuple&& all, std::index_sequence<I...>)
      : target_(target),
        options_(options),
        seq_(drafters_type(std::move(std::get<I>(all))...)),
        verifier_(std::move(std::get<num_drafters>(all))),
        driver_("SpeculativeDecoder::step", options_.clock, options_.cost, options_.measured_pause) {
    if (options_.cost)
      acceptance_.emplace(static_cast<int>(std::max<std::size_t>(num_drafters, 1)), options_.acceptance);
  }

  // The bounds of this step's tree (see tree_bounds) on `cached` tokens; throws when the target
  // has no room for the root.
  detail::TreeBounds tree_bounds(int cached) const {
    if constexpr (BackendTarget<Target> || BoundedTarget<Target>) {
      int max_positions = 0;
      if constexpr (BackendTarget<Target>) max_positions = target_.kv_cache().layout.max_positions;
      else max_positions = static_cast<int>(target_.max_positions());
      const int room = max_positions - cached - 1;
      if (room < 0) throw error("SpeculativeDecoder::step: the target is full (" + std::to_string(max_positions) + " positions)");
      return detail::tree_bounds<BackendTarget<Target>>(options_.budget, room);
    } else {
      return {options_.budget, options_.budget};
    }
  }

  // How many of the next steps, at most `most`, would send the root alone without asking a
  // drafter (every step at budget 0, or without drafters and cost model; else the rest of the
  // automatic budget's pause) and fit the target's positions; 0 where generate() steps one by one.
  int plain_steps(int most) const {
    if (!options_.plain_runs || !seq_.started()) return 0;
    const bool all = options_.budget == 0 || (num_drafters == 0 && !options_.cost);
    int steps = all ? most : driver_.budget() ? std::min(most, lane_.pause.remaining()) : 0;
    if constexpr (BoundedTarget<Target>)
      steps = std::min(steps, static_cast<int>(target_.max_positions()) - seq_.cached());
    return std::max(steps, 0);
  }

  // `steps` plain steps (plain_steps) in the target's own loop, fewer after a stop token: the
  // tokens and counters of as many root-only steps, the pause counted down, and for the automatic
  // budget one measure of a plain step, the run's mean (MeasuredPlainStep: one entry, so that a
  // descheduled run moves its median no more than one step does). Returns the committed tokens.
  std::span<const token_t> decode_plainly(int steps, std::span<const token_t> stop_tokens) {
    using seconds = std::chrono::duration<double>;
    const int cached = seq_.cached();
    const auto t0 = options_.clock();
    std::vector<token_t> run;
    try {
      if constexpr (gathers_features) run = target_.decode(seq_.context().back(), steps, stop_tokens, seq_.feature_rows());
      else run = target_.decode(seq_.context().back(), steps, stop_tokens);
      if (run.empty() || static_cast<int>(run.size()) > steps)
        throw error("SpeculativeDecoder::generate: the target's decode() returned " + std::to_string(run.size()) +
                    " tokens for " + std::to_string(steps) + " steps");
      if (gathers_features && seq_.feature_rows().size() != run.size() * static_cast<std::size_t>(feature_dim()))
        throw error("SpeculativeDecoder::generate: the target's decode() gave " + std::to_string(seq_.feature_rows().size()) +
                    " feature floats for " + std::to_string(run.size()) + " tokens of feature_dim() " +
                    std::to_string(feature_dim()));
      for (std::size_t i = 0; i < run.size(); ++i)
        detail::check_token(run[i], seq_.vocab(), [i] { return "the target's decode(): token " + std::to_string(i); });
    } catch (...) {
      seq_.stop();  // the target's cache went on without the decoder: only a new prefill can go on
      throw;
    }
    const auto t1 = options_.clock();
    const std::span<const token_t> committed = seq_.commit_plain(run);
    seq_.observe(gathers_features ? seq_.path_features(cached, static_cast<int>(run.size()), feature_dim())
                                  : TargetFeatures{});
    const auto t2 = options_.clock();
    const int done = static_cast<int>(committed.size());
    if (detail::StepBudget* budget = driver_.budget()) {
      double modelled = 0;
      for (int i = 0; i < done; ++i) modelled += options_.cost.step_seconds(1, cached + i);
      seq_.record_sizing(done, modelled, done);
      budget->observe_plain(seconds(t2 - t0).count() / done, modelled / done);
    }
    seq_.record_plain(lane_.pause.skip_steps(done), seconds(t1 - t0).count(), seconds(t2 - t1).count());
    return committed;
  }

  int feature_dim() const {
    if constexpr (gathers_features) return static_cast<int>(target_.feature_dim());
    else return 0;
  }

  // Puts the root and `tokens` but the last into the target's cache with one forward of the
  // chain; the last of `tokens` becomes the root.
  void feed(std::span<const token_t> tokens) {
    target_.forward(seq_.chain(tokens.first(tokens.size() - 1)));
    feed_path_.resize(tokens.size());
    for (std::size_t k = 0; k < feed_path_.size(); ++k) feed_path_[k] = static_cast<node_t>(k);
    target_.commit(std::span<const node_t>(feed_path_));
    seq_.cache(static_cast<int>(feed_path_.size()));
  }

  Target& target_;
  DecoderOptions options_;
  sequence_type seq_;  // the sequence's state and the step's phases
  verifier_type verifier_;
  [[no_unique_address]] std::conditional_t<step_defined, typename detail::backend_step_for<Target>::type,
                                           detail::NoBackendStep> backend_step_;
  detail::StepDriver<sequence_type, verifier_type, 1> driver_;  // the step of its one sequence, and the automatic budget's controller
  // The automatic budget (DecoderOptions::cost): its calibration and this sequence's part in it
  // (the drafters' pause).
  std::optional<AcceptanceModel> acceptance_;
  detail::SequenceBudget lane_;
  std::vector<node_t> feed_path_;  // resume(): the fed chain, root first
};

}  // namespace specdec
