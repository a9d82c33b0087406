// The model runner: prompts decoded by a real llama2.c model with SpeculativeDecoder<Llama2cTarget,
// Drafters..., Verifier>, timed next to plain decoding of the same prompts. Defined here,
// instantiated once per combination and verifier in registry_model.cpp.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/verifiers/conditional.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "clock.hpp"
#include "costers.hpp"
#include "replay.hpp"
#include "rounds.hpp"
#include "tasks.hpp"

namespace specbench {

/// One prompt to decode.
struct ModelPrompt {
  std::string task;
  std::vector<token_t> tokens;
  int max_new_tokens = 0;  ///< already clamped to the model's positions
};

/// The model and what it decodes.
struct ModelBench {
  std::shared_ptr<const specdec::Llama2cModel> model;
  std::vector<ModelPrompt> prompts;
  std::vector<token_t> stop_tokens;  ///< a story ends after one of these (included)
  int skipped = 0;                   ///< prompts left out: longer than the model's positions
};

/// The first `max_prompts` prompts (0: all) of each task, tokenised with BOS, each to be
/// continued by `max_new_tokens` at most, cut to the model's positions (the last new token is
/// predicted at the last position); `clamped` counts the prompts cut. Stop tokens: BOS and EOS
/// (TinyStories models end a story with BOS). A prompt longer than the model's positions is left
/// out and counted (ModelBench::skipped); input_error when that leaves none.
ModelBench make_model_bench(std::shared_ptr<const specdec::Llama2cModel> model, const specdec::Llama2cTokenizer& tokenizer,
                            std::span<const Task* const> tasks, int max_new_tokens, int max_prompts, int* clamped);

enum class VerifierKind { exact, rejection, conditional };

struct ModelOptions {
  int budget = 64;  ///< auto: the cap
  specdec::AnyCostModel cost;  ///< `--budget auto`: the decoder's cost model; empty: a fixed budget
  int threads = 1;  ///< the target's forward threads (plain and speculative alike)
  VerifierKind verifier = VerifierKind::exact;
  specdec::SamplingParams sampling{};        ///< rejection sampling; also the conditional's next token
  std::uint64_t seed = 0;                    ///< prompt i draws from Philox stream (seed, sequence i)
  specdec::ConditionalParams conditional{};  ///< delta, top_k (eos: the first stop token)
  DrafterResources resources;
  RoundRule rounds;  ///< how many plain and speculative passes alternate (default one each)
};

/// One decoded prompt (of the first round; see decode_model).
struct ModelTurn {
  TurnResult result;                 ///< the speculative decode
  std::vector<token_t> output;       ///< its new tokens
  std::int64_t plain_tokens = 0;
  /// output == the plain decode's output, in every round (meaningful for exact)
  bool equals_plain = false;
  std::int64_t draft_forwards = 0;   ///< forwards of the drafters' draft models (see counts_draft_forwards)
  std::int64_t draft_nodes = 0;      ///< tree nodes those forwards ran
};

struct ModelRun {
  std::vector<std::string> drafters;
  bool counts_draft_forwards = false;  ///< some drafter runs a draft model (staged, draft_model)
  std::vector<ModelTurn> turns;  ///< one per prompt, in order
  double seconds = 0;            ///< wall time of all rounds
  Calibration calibration;       ///< of the first round's decoder
  Rounds rounds;                 ///< per round, each arm's tokens/s over all prompts, prefills included
  Rounds decode_rounds;          ///< the same without the prefills (as `--batch` reports)
};

namespace detail {

template <class Verifier>
Verifier make_verifier(const ModelOptions& o, std::uint32_t sequence, token_t eos) {
  if constexpr (std::is_same_v<Verifier, specdec::RejectionSampling>) {
    return Verifier(specdec::SamplingOptions{o.sampling, o.seed, sequence});
  } else if constexpr (std::is_same_v<Verifier, specdec::ConditionalVerifier>) {
    specdec::ConditionalParams params = o.conditional;
    params.eos = eos;
    return Verifier(params, specdec::SamplingOptions{o.sampling, o.seed, sequence});
  } else {
    return Verifier{};
  }
}

/// A drafter that runs a draft model and counts its forwards and their nodes (StagedDrafter).
template <class D>
concept CountsDraftForwards = requires(const D& d) {
  { d.draft_forwards() } -> std::convertible_to<std::int64_t>;
  { d.draft_nodes() } -> std::convertible_to<std::int64_t>;
};

/// The draft-model forwards and nodes of every drafter of `decoder` that counts them.
template <class Decoder, std::size_t... I>
std::pair<std::int64_t, std::int64_t> draft_work(Decoder& decoder, std::index_sequence<I...>) {
  std::pair<std::int64_t, std::int64_t> sum{0, 0};
  const auto add = [&](const auto& drafter) {
    if constexpr (CountsDraftForwards<std::remove_cvref_t<decltype(drafter)>>) {
      sum.first += drafter.draft_forwards();
      sum.second += drafter.draft_nodes();
    }
  };
  (add(decoder.template drafter<I>()), ...);
  return sum;
}

}  // namespace detail

/// Decodes every prompt with the drafters merged into one decoder (one decoder for the whole
/// pass: drafters live across prompts, as in a server), and, before each, plainly: with the exact
/// verifier by Llama2cTarget::prefill + decode (generate()'s two halves: one forward per token,
/// the reference the output must equal), with a sampling verifier by the same decoder type
/// without drafters (one token per step, the same random streams). Each pass's prefills are timed
/// apart too (the same work in both: the report gives the ratio with and without them).
///
/// Rounds of both passes repeat as options.rounds asks, each with a fresh decoder, so that a
/// drafter learning across prompts never sees a prompt twice and every round is the same
/// experiment: the turns and the calibration are the first round's; every round's outputs are
/// compared with its plain decode.
template <class Verifier, class... Drafters>
ModelRun decode_model(const ModelBench& bench, const ModelOptions& options) {
  using Decoder = specdec::SpeculativeDecoder<specdec::Llama2cTarget, Drafters..., Verifier>;
  using PlainDecoder = specdec::SpeculativeDecoder<specdec::Llama2cTarget, Verifier>;
  const auto start = std::chrono::steady_clock::now();
  const token_t eos = bench.stop_tokens.empty() ? specdec::core::kNoEos : bench.stop_tokens.back();
  ModelRun run;
  run.drafters = Decoder::names();
  run.counts_draft_forwards = (detail::CountsDraftForwards<Drafters> || ... || false);
  const auto draft_work = [](Decoder& d) { return detail::draft_work(d, std::index_sequence_for<Drafters...>{}); };
  specdec::Llama2cTarget target = make_llama_target(bench.model, options.threads);
  std::optional<Decoder> decoder;
  do {
    const bool first_round = run.rounds.count() == 0;
    decoder.emplace(target, specdec::DecoderOptions{.budget = options.budget, .cost = options.cost},
                    make_drafter<Drafters>(options.resources, TargetInfo{bench.model->config().vocab_size, bench.model})...,
                    detail::make_verifier<Verifier>(options, 0, eos));
    double plain_seconds = 0, plain_prefill = 0, speculative_seconds = 0, speculative_prefill = 0;
    std::int64_t plain_tokens = 0, speculative_tokens = 0;
    for (std::size_t p = 0; p < bench.prompts.size(); ++p) {
      const ModelPrompt& prompt = bench.prompts[p];
      const auto sequence = static_cast<std::uint32_t>(p);
      ModelTurn turn;

      const std::span<const token_t> tokens(prompt.tokens);
      auto t0 = std::chrono::steady_clock::now();
      std::vector<token_t> plain;
      if constexpr (std::is_same_v<Verifier, specdec::ExactVerifier>) {
        target.prefill(tokens.first(tokens.size() - 1));
        plain_prefill += detail::seconds_since(t0);
        plain = target.decode(tokens.back(), prompt.max_new_tokens, bench.stop_tokens);
      } else {
        PlainDecoder plain_decoder(target, specdec::DecoderOptions{.budget = 0},
                                   detail::make_verifier<Verifier>(options, sequence, eos));
        plain_decoder.prefill(prompt.tokens);
        plain_prefill += detail::seconds_since(t0);
        plain = plain_decoder.generate(prompt.max_new_tokens, bench.stop_tokens);
      }
      plain_seconds += detail::seconds_since(t0);
      turn.plain_tokens = static_cast<std::int64_t>(plain.size());

      decoder->verifier() = detail::make_verifier<Verifier>(options, sequence, eos);
      const auto work_before = draft_work(*decoder);
      t0 = std::chrono::steady_clock::now();
      decoder->prefill(prompt.tokens);
      speculative_prefill += detail::seconds_since(t0);
      turn.output = decoder->generate(prompt.max_new_tokens, bench.stop_tokens);
      speculative_seconds += detail::seconds_since(t0);
      const auto work_after = draft_work(*decoder);
      turn.draft_forwards = work_after.first - work_before.first;
      turn.draft_nodes = work_after.second - work_before.second;
      turn.result = {decoder->stats(), static_cast<std::int64_t>(turn.output.size())};
      turn.equals_plain = turn.output == plain;
      plain_tokens += turn.plain_tokens;
      speculative_tokens += turn.result.tokens;
      if (first_round) run.turns.push_back(std::move(turn));
      else run.turns[p].equals_plain = run.turns[p].equals_plain && turn.equals_plain;
    }
    if (first_round) run.calibration = calibration_of(*decoder);
    run.rounds.add(round_time(plain_tokens, plain_seconds, speculative_tokens, speculative_seconds));
    run.decode_rounds.add(round_time(plain_tokens, plain_seconds - plain_prefill, speculative_tokens,
                                     speculative_seconds - speculative_prefill));
  } while (options.rounds.more(run.rounds.count(), run.rounds.plain_seconds(), run.rounds.speculative_seconds()));
  run.seconds = detail::seconds_since(start);
  return run;
}

}  // namespace specbench
