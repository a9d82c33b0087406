// Every size option at its extreme (INT_MAX budgets, depths, lengths and counts): a decode that
// stays lossless, or a specdec::error naming the value; never an overflow, a bad_alloc or a
// silently empty draft. Built twice: plain, and with UBSan (extreme_options_ubsan_test) so that
// CI catches signed overflow in size arithmetic on every run (issue 20).
#include <catch2/catch.hpp>

#include <limits>
#include <vector>

#include <specdec/batch_decoder.hpp>
#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/context_tree.hpp>
#include <specdec/policies/drafters/fixed_tree.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/drafters/pld.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>
#include <specdec/targets/replay_target.hpp>

using namespace specdec;

namespace {

constexpr int kMax = std::numeric_limits<int>::max();
constexpr int kVocab = 8;

/// A prompt that repeats, so that every copy drafter finds matches.
std::vector<token_t> repetitive_prompt() {
  std::vector<token_t> p;
  for (int i = 0; i < 60; ++i) p.push_back(static_cast<token_t>((i * i) % 7 % kVocab));
  return p;
}

template <class... Drafters>
void check_lossless_at_budget_max(Drafters... drafters) {
  HashTarget target(kVocab, 11);
  const auto prompt = repetitive_prompt();
  SpeculativeDecoder<HashTarget, Drafters..., ExactVerifier> dec(target, DecoderOptions{.budget = kMax},
                                                                 std::move(drafters)..., ExactVerifier{});
  dec.prefill(prompt);
  CHECK(dec.generate(80) == target.generate(prompt, 80));
  CHECK(dec.stats().drafted_nodes > 0);  // a huge budget must not make a drafter propose nothing
}

}  // namespace

TEST_CASE("extreme options: budget INT_MAX with every drafter stays lossless and drafts", "[extreme]") {
  check_lossless_at_budget_max(CasdDrafter{});
  check_lossless_at_budget_max(CasdPromptDrafter{});
  check_lossless_at_budget_max(PldDrafter{});
  check_lossless_at_budget_max(ContextTreeDrafter{});
  check_lossless_at_budget_max(HistoryTreeDrafter{});
  check_lossless_at_budget_max(FixedTreeDrafter({0, 1, 0}, {1, 2, 3}));
  check_lossless_at_budget_max(CasdDrafter(CasdOptions{.k = kMax, .max_match = 1024, .depth = kMax}),
                               PldDrafter(PldOptions{.max_ngram = 1024, .depth = kMax}));
  check_lossless_at_budget_max(ContextTreeDrafter(ContextTreeOptions{
      .root_breadth = kMax, .history_breadth = kMax, .node_breadth = kMax, .node_contexts = kMax}));
  check_lossless_at_budget_max(HistoryTreeDrafter(ContextTreeOptions{.history_tokens = kMax}));
  HashTarget target(kVocab, 11);
  std::vector<token_t> reference = repetitive_prompt();
  for (token_t t : target.generate(reference, 200)) reference.push_back(t);
  check_lossless_at_budget_max(OracleDrafter(reference, kMax, 0.3, 3));
}

TEST_CASE("extreme options: sizes that would allocate per unit are refused with the value", "[extreme][errors]") {
  CHECK_THROWS_WITH(CasdDrafter(CasdOptions{.max_match = kMax}), Catch::Contains("max_match must be <= 1024, got 2147483647"));
  CHECK_THROWS_WITH(PldDrafter(PldOptions{.max_ngram = kMax}), Catch::Contains("max_ngram must be <= 1024, got 2147483647"));
  CHECK_THROWS_WITH(ContextIndex(kMax), Catch::Contains("max_depth must be <= 1024, got 2147483647"));
}

TEST_CASE("extreme options: generate(INT_MAX) stops at the stop token", "[extreme]") {
  const std::vector<token_t> reference{1, 2, 3, 1, 2, 3, 1, 2, 3, 4, 5};
  ReplayTarget target(reference, kVocab, 5);
  SpeculativeDecoder<ReplayTarget, PldDrafter, ExactVerifier> dec(target, DecoderOptions{.budget = kMax});
  dec.prefill(std::vector<token_t>(reference.begin(), reference.begin() + 4));
  const std::vector<token_t> stop{5};
  CHECK(dec.generate(kMax, stop) == std::vector<token_t>(reference.begin() + 4, reference.end()));
}

namespace {
// A forward that costs a fixed part plus a little per node: every size up to INT_MAX answers.
struct CheapNodes {
  double step_seconds(int nodes, int) const { return 1e-3 + 1e-6 * nodes; }
};
}  // namespace

// budget + 1 overflowed to INT_MIN in the pause's "most tokens a step", and the first drafting
// step threw "DraftingPause: most_tokens must be >= 0" (issue 49, defect a).
TEST_CASE("extreme options: budget INT_MAX with a cost model drafts and stays lossless", "[extreme][budget]") {
  HashTarget target(kVocab, 11);
  const auto prompt = repetitive_prompt();
  SpeculativeDecoder<HashTarget, CasdDrafter, ExactVerifier> dec(
      target, DecoderOptions{.budget = kMax, .cost = CheapNodes{}, .measured_pause = false});
  dec.prefill(prompt);
  CHECK(dec.generate(80) == target.generate(prompt, 80));
  CHECK(dec.stats().drafted_nodes > 0);
}

TEST_CASE("extreme options: a batch request's budget INT_MAX with a cost model drafts and stays lossless",
          "[extreme][budget][batch]") {
  HashTarget target(kVocab, 11);
  const auto prompt = repetitive_prompt();
  SpeculativeBatch<HashTarget, CasdDrafter, ExactVerifier> batch(
      target, 1, BatchOptions{.cost = CheapNodes{}, .measured_pause = false}, CasdDrafter{}, ExactVerifier{});
  batch.add(prompt, RequestOptions{.max_new_tokens = 80, .eos = {}, .budget = kMax});
  std::vector<token_t> out;
  while (batch.active() > 0)
    for (const RequestUpdate& u : batch.step()) out.insert(out.end(), u.tokens.begin(), u.tokens.end());
  CHECK(out == target.generate(prompt, 80));
  CHECK(batch.stats().drafted_nodes > 0);
}
