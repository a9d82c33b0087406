// Speculative decoding of the real stories260K model is lossless: with the exact verifier and
// drafters of every shape, the output equals Llama2cTarget::generate() token for token.
#include <catch2/catch.hpp>

#include <memory>
#include <utility>
#include <string>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/empty.hpp>
#include <specdec/policies/drafters/fixed_tree.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "support/same_counters.hpp"
#include "support/stories260k.hpp"

using namespace specdec;

namespace {

constexpr int kNew = 200;

const char* const kPrompts[] = {
    "Once upon a time",          "One day, a little girl named Lily",  "Tom had a big red ball.",
    "The sun was shining",       "There was a dog",                    "Sara and Ben went to the park",
    "Mom said",                  "The cat",                            "A little bird lived in a tree.",
    "Tim wanted to play",        "It was a cold day.",                 "The boy found a box",
    "Once there was a king",     "Anna likes to draw.",                "The fish swam",
    "Max was sad because",       "\"Look!\" said Sam.",               "In the forest, there",
    "Every morning, Sue",        "The big truck",
};

struct Fixture {
  std::shared_ptr<const Llama2cModel> model;
  std::vector<std::vector<token_t>> prompts;
  std::vector<std::vector<token_t>> greedy;  // kNew + 80 tokens after each prompt

  static const Fixture* get() {
    static const std::unique_ptr<Fixture> fixture = []() -> std::unique_ptr<Fixture> {
      const testing::Stories260K* stories = testing::stories260k();
      if (!stories) return nullptr;
      auto f = std::make_unique<Fixture>();
      f->model = stories->model;
      const Llama2cTokenizer& tokenizer = stories->tokenizer;
      Llama2cTarget target(f->model);
      for (const char* text : kPrompts) {
        f->prompts.push_back(tokenizer.encode(text));
        f->greedy.push_back(target.generate(f->prompts.back(), kNew + 80));
      }
      return f;
    }();
    return fixture.get();
  }

  /// The prompt followed by the target's greedy continuation: what an oracle drafter knows.
  std::vector<token_t> reference(std::size_t p) const {
    std::vector<token_t> r = prompts[p];
    r.insert(r.end(), greedy[p].begin(), greedy[p].end());
    return r;
  }
  std::vector<token_t> expected(std::size_t p, int n = kNew) const {
    return {greedy[p].begin(), greedy[p].begin() + n};
  }
};

/// A fixed tree of 16 arbitrary tokens, 3 children per node.
FixedTreeDrafter arbitrary_tree(int salt) {
  std::vector<node_t> parents;
  std::vector<token_t> tokens;
  for (int k = 0; k < 16; ++k) {
    parents.push_back(k / 3);
    tokens.push_back((k * 37 + salt * 11) % 512);
  }
  return FixedTreeDrafter(parents, tokens);
}

template <class... Policies>
std::pair<std::vector<token_t>, DecodeStats> decode(Llama2cTarget& target, const std::vector<token_t>& prompt,
                                                    DecoderOptions options, Policies... policies) {
  SpeculativeDecoder<Llama2cTarget, Policies...> decoder(target, options, std::move(policies)...);
  decoder.prefill(prompt);
  auto tokens = decoder.generate(kNew);
  return {std::move(tokens), decoder.stats()};
}

}  // namespace

TEST_CASE("stories260K: exact oracle chain is lossless and accepts every draft", "[llama2c][lossless]") {
  const Fixture* f = Fixture::get();
  if (!f) return;
  Llama2cTarget target(f->model);
  for (std::size_t p = 0; p < f->prompts.size(); ++p) {
    SpeculativeDecoder<Llama2cTarget, OracleDrafter, ExactVerifier> decoder(
        target, DecoderOptions{.budget = 16}, OracleDrafter(f->reference(p), 7), ExactVerifier{});
    decoder.prefill(f->prompts[p]);
    CHECK(decoder.generate(kNew) == f->expected(p));
    CHECK(decoder.stats().tau() == Approx(8.0));  // 200 tokens = 25 steps of 7 drafts + 1
  }
}

// One test case per drafter shape (not SECTIONs inside the prompt loop: Catch enters a section
// once per run, so it would see only the first prompt). Each checks all 20 prompts x 200 tokens,
// then `expect` on the totals — tau (tokens per target call) and nodes (draft nodes per call) —
// to show the drafts really reached the target.
#define LOSSLESS_CASE(title, expect, ...)                                                         \
  TEST_CASE("stories260K lossless: " title, "[llama2c][lossless]") {                            \
    const Fixture* f = Fixture::get();                                                           \
    if (!f) return;                                                                              \
    Llama2cTarget target(f->model);                                                              \
    double tokens = 0, steps = 0, drafted = 0;                                                   \
    for (std::size_t p = 0; p < f->prompts.size(); ++p) {                                        \
      const auto ref = f->reference(p);                                                          \
      const int seed = static_cast<int>(p);                                                      \
      (void)ref;                                                                                 \
      (void)seed;                                                                                \
      INFO("prompt " << p << ": " << kPrompts[p]);                                               \
      const auto [out, stats] = decode(target, f->prompts[p], __VA_ARGS__);                      \
      CHECK(out == f->expected(p));                                                              \
      tokens += static_cast<double>(stats.tokens);                                               \
      steps += static_cast<double>(stats.steps);                                                 \
      drafted += static_cast<double>(stats.drafted_nodes);                                       \
    }                                                                                            \
    const double tau = tokens / steps, nodes = drafted / steps;                                  \
    INFO("tau " << tau << ", draft nodes per call " << nodes);                                   \
    CHECK((expect));                                                                             \
  }

LOSSLESS_CASE("empty drafter (plain decoding through the loop)", tau == 1.0 && nodes == 0.0, {}, EmptyDrafter{},
              ExactVerifier{})
LOSSLESS_CASE("noisy chain", tau > 2.0, {.budget = 16}, OracleDrafter(ref, 8, 0.2, 1, seed), ExactVerifier{})
LOSSLESS_CASE("wide noisy tree", tau > 2.0 && nodes > 10.0, {.budget = 32}, OracleDrafter(ref, 5, 0.3, 4, seed),
              ExactVerifier{})
LOSSLESS_CASE("always wrong", tau == 1.0 && nodes > 10.0, {.budget = 12}, OracleDrafter(ref, 4, 1.0, 3, seed),
              ExactVerifier{})
LOSSLESS_CASE("fixed tree of arbitrary tokens", nodes == 16.0, {.budget = 16}, arbitrary_tree(seed), ExactVerifier{})
LOSSLESS_CASE("merged noisy chain + wide tree + fixed tree + empty, budget cut", tau > 2.0 && nodes <= 12.0,
              {.budget = 12}, OracleDrafter(ref, 10, 0.15, 1, seed), OracleDrafter(ref, 4, 0.4, 3, seed + 100),
              arbitrary_tree(seed), EmptyDrafter{}, ExactVerifier{})

TEST_CASE("stories260K: decoding up to the last position never drafts past it", "[llama2c][lossless]") {
  const Fixture* f = Fixture::get();
  if (!f) return;
  Llama2cTarget target(f->model);
  // A long prompt: a story and its greedy continuation, 440 tokens.
  std::vector<token_t> prompt = f->reference(0);
  prompt.resize(440);
  const int room = target.max_positions() - static_cast<int>(prompt.size()) + 1;  // tokens until full
  const auto expected = target.generate(prompt, room);
  std::vector<token_t> ref = prompt;
  ref.insert(ref.end(), expected.begin(), expected.end());
  SpeculativeDecoder<Llama2cTarget, OracleDrafter, ExactVerifier> decoder(
      target, DecoderOptions{.budget = 16}, OracleDrafter(ref, 9, 0.1, 2, 3), ExactVerifier{});
  decoder.prefill(prompt);
  CHECK(decoder.generate(room) == expected);
  CHECK(target.cached() <= target.max_positions());
  CHECK_THROWS_WITH(decoder.step(), Catch::Matchers::Contains("full"));
}

// Llama2cTarget is a PlainDecodingTarget: generate() hands it the steps that send the root alone
// (DecoderOptions::plain_runs). The same tokens and counters as step by step.
TEST_CASE("stories260K plain runs: budget 0 and the automatic budget's pauses", "[llama2c][lossless][plain_runs]") {
  const Fixture* f = Fixture::get();
  if (!f) return;
  STATIC_REQUIRE(SpeculativeDecoder<Llama2cTarget, OracleDrafter, ExactVerifier>::runs_plainly);
  struct DearNodes {  // no draft node ever pays: the drafters pause
    double step_seconds(int nodes, int) const { return nodes; }
  };
  Llama2cTarget target(f->model);
  for (const DecoderOptions& options : {DecoderOptions{.budget = 0},
                                       DecoderOptions{.budget = 8, .cost = DearNodes{}, .measured_pause = false}}) {
    DecoderOptions by_steps = options;
    by_steps.plain_runs = false;
    for (std::size_t p = 0; p < f->prompts.size(); p += 4) {
      INFO("prompt " << p << ", budget " << options.budget);
      const auto ref = f->reference(p);
      const auto [out, stats] =
          decode(target, f->prompts[p], options, OracleDrafter(ref, 4, 1.0, 3, 1), ExactVerifier{});
      const auto [out_by_step, stats_by_step] =
          decode(target, f->prompts[p], by_steps, OracleDrafter(ref, 4, 1.0, 3, 1), ExactVerifier{});
      CHECK(out == f->expected(p));
      CHECK(out_by_step == out);
      testing::check_same_counters(stats, stats_by_step);
    }
  }
}

// bf16 weights (AMX) make another model's numbers, and speculative decoding of that model is as
// lossless: drafts that branch and miss, checked against its own plain greedy decoding.
TEST_CASE("stories260K in bf16 (AMX): a noisy tree is lossless against the bf16 model's greedy decoding",
          "[llama2c][lossless][bf16]") {
  const Fixture* f = Fixture::get();
  const auto path = testing::data_file("models/stories260K.bin");
  if (!f || !path || !llama::bf16_unavailable().empty()) return;  // the error itself: tree_forward_bitexact_test
  const auto model = std::make_shared<const Llama2cModel>(Llama2cModel::load(*path, WeightFormat::bf16));
  Llama2cTarget target(model, Llama2cTarget::Options{2});
  double tokens = 0, steps = 0;
  int differs_from_fp32 = 0;
  for (std::size_t p = 0; p < f->prompts.size(); p += 2) {
    std::vector<token_t> ref = f->prompts[p];
    const std::vector<token_t> greedy = target.generate(f->prompts[p], kNew + 40);
    ref.insert(ref.end(), greedy.begin(), greedy.end());
    INFO("prompt " << p << ": " << kPrompts[p]);
    const auto [out, stats] = decode(target, f->prompts[p], {.budget = 24},
                                     OracleDrafter(ref, 5, 0.3, 3, static_cast<int>(p)), ExactVerifier{});
    CHECK(out == std::vector<token_t>(greedy.begin(), greedy.begin() + kNew));
    differs_from_fp32 += out != f->expected(p);
    tokens += static_cast<double>(stats.tokens);
    steps += static_cast<double>(stats.steps);
  }
  INFO("tau " << tokens / steps << "; outputs unlike the fp32 model's: " << differs_from_fp32);
  CHECK(tokens / steps > 2.0);
}
