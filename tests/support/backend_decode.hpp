// Decoding scenarios shared by the host test of the backend step (tests/backend_step_test.cpp)
// and its GPU twin (tests/kernels/backend_step_test.cpp via device_decoder.cpp): the same drafters
// and verifiers, run on any target, so the results of the host path, the host backend and the
// CUDA backend can be compared token for token.
#pragma once

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/error.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/conditional.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/testing/hash_target.hpp>

namespace specdec::testing {

enum class drafts {
  none,
  oracle_chain,   ///< the right continuation, 6 deep (tau = 7 until the end of the cache)
  oracle_wide,    ///< 5 deep, 20% wrong, 3 siblings per node
  casd_and_oracle,
  sampled,        ///< a chain drawn from an attached q (DraftTree::add_sampled) plus CASD
};
enum class verifier { exact, rejection, conditional };

struct DecodeCase {
  int vocab = 64;
  int max_positions = 4096;  ///< of a BackendHashTarget
  std::uint64_t seed = 1;    ///< the hash model's
  std::vector<token_t> prompt = {1, 2, 3};
  int new_tokens = 200;
  int budget = 32;
  drafts drafter = drafts::oracle_chain;
  verifier check = verifier::exact;
  float temperature = 0.8f;  ///< sampling verifiers
};

struct DecodeResult {
  std::vector<token_t> context;  ///< prompt and everything committed
  double tau = 0;
  std::string error;             ///< what a specdec::error said, if one was thrown
};

/// Drafts a 3-token chain, each token drawn from q = half the mass on the hash model's greedy
/// token (another seed), the rest spread evenly, and attaches q.
class SampledChainDrafter {
 public:
  static constexpr const char* name = "sampled-chain";
  static constexpr bool emits_draft_probabilities = true;
  void begin(std::span<const token_t>) {}
  void observe(std::span<const token_t>) {}
  void propose(const DraftContext& ctx, DraftTree& tree) {
    const token_t guess = HashTarget(ctx.vocab_size, 77).generate(ctx.tokens, 1)[0];
    std::vector<float> q(ctx.vocab_size, 0.5f / (ctx.vocab_size - 1));
    q[guess] = 0.5f;
    node_t node = 0;
    for (int k = 0; k < std::min(3, ctx.max_depth); ++k) {
      const token_t draws[] = {static_cast<token_t>(std::discrete_distribution<int>(q.begin(), q.end())(rng_))};
      tree.add_sampled(node, q, draws);
      node = tree.find_child(node, draws[0]);
    }
  }

 private:
  std::mt19937_64 rng_{5};
};

/// The case's prompt followed by the hash model's greedy continuation (new_tokens + 64 tokens):
/// what exact decoding must produce, and what the oracle drafters draft from.
inline std::vector<token_t> greedy_reference(const DecodeCase& c) {
  std::vector<token_t> r = c.prompt;
  const auto g = HashTarget(c.vocab, c.seed).generate(c.prompt, c.new_tokens + 64);
  r.insert(r.end(), g.begin(), g.end());
  return r;
}

namespace detail {
template <class Decoder>
DecodeResult run_decoder(Decoder& dec, const DecodeCase& c) {
  DecodeResult r;
  try {
    dec.prefill(c.prompt);
    dec.generate(c.new_tokens);
  } catch (const specdec::error& e) {
    r.error = e.what();
  }
  r.context.assign(dec.context().begin(), dec.context().end());
  r.tau = dec.stats().tau();
  return r;
}

template <class Target, class Verifier>
DecodeResult with_drafters(Target& target, const DecodeCase& c, Verifier verifier) {
  const DecoderOptions options{c.budget};
  const std::vector<token_t> reference = greedy_reference(c);
  switch (c.drafter) {
    case drafts::none: {
      SpeculativeDecoder<Target, Verifier> dec(target, options, verifier);
      return run_decoder(dec, c);
    }
    case drafts::oracle_chain: {
      SpeculativeDecoder<Target, OracleDrafter, Verifier> dec(target, options, OracleDrafter(reference, 6), verifier);
      return run_decoder(dec, c);
    }
    case drafts::oracle_wide: {
      SpeculativeDecoder<Target, OracleDrafter, Verifier> dec(target, options, OracleDrafter(reference, 5, 0.2, 3),
                                                              verifier);
      return run_decoder(dec, c);
    }
    case drafts::casd_and_oracle: {
      SpeculativeDecoder<Target, CasdDrafter, OracleDrafter, Verifier> dec(
          target, options, CasdDrafter(), OracleDrafter(reference, 4, 0.5, 2), verifier);
      return run_decoder(dec, c);
    }
    case drafts::sampled: {
      SpeculativeDecoder<Target, SampledChainDrafter, CasdDrafter, Verifier> dec(target, options, SampledChainDrafter(),
                                                                                 CasdDrafter(), verifier);
      return run_decoder(dec, c);
    }
  }
  throw specdec::error("unknown drafter set");
}
}  // namespace detail

/// Decodes case `c` on `target` (a HashTarget or a BackendHashTarget of the case's vocab and seed).
template <class Target>
DecodeResult decode(Target& target, const DecodeCase& c) {
  const SamplingOptions sampling{SamplingParams{c.temperature}, 11, 2};
  switch (c.check) {
    case verifier::exact: return detail::with_drafters(target, c, ExactVerifier{});
    case verifier::rejection: return detail::with_drafters(target, c, RejectionSampling(sampling));
    case verifier::conditional:
      return detail::with_drafters(target, c, ConditionalVerifier(ConditionalParams{0.05f, 0, 0}, sampling));
  }
  throw specdec::error("unknown verifier");
}

struct CacheCheck {
  int steps_matching = 0;  ///< steps after which the cache held exactly the committed tokens
  int long_steps = 0;      ///< steps that committed more than 2 tokens (compaction moved rows)
};

/// Steps an exact decoder with an oracle drafter (5 deep, 30% wrong, 3 siblings) `steps` times on
/// `target` (a BackendHashTarget of the case's vocab and seed) and checks after each step that the
/// cache holds the running hashes of every committed token but the last (the next root).
template <class Target>
CacheCheck check_cache_after_each_step(Target& target, const DecodeCase& c, int steps) {
  SpeculativeDecoder<Target, OracleDrafter, ExactVerifier> dec(target, DecoderOptions{c.budget},
                                                               OracleDrafter(greedy_reference(c), 5, 0.3, 3),
                                                               ExactVerifier{});
  dec.prefill(c.prompt);
  CacheCheck check;
  for (int s = 0; s < steps; ++s) {
    check.long_steps += dec.step().size() > 2;
    const auto cached = dec.context().first(dec.context().size() - 1);
    check.steps_matching +=
        target.cached_hashes(static_cast<int>(cached.size())) == hash_model::running_hashes(cached, c.seed);
  }
  return check;
}

}  // namespace specdec::testing
