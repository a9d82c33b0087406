// Feature drafters (needs_target_features) are told, after prefill and after every step, exactly
// the features a plain single-sequence forward of the real stories260K model gives at those
// positions, bit for bit: on wide drafted trees with partial acceptance, merged with a drafter
// that reads no features, and under rejection sampling.
#include <catch2/catch.hpp>

#include <algorithm>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "support/laid_out_tree.hpp"
#include "support/stories260k.hpp"

using namespace specdec;

namespace {

constexpr int kNew = 150;

/// Drafts like an OracleDrafter (wide, noisy trees: partial acceptance) and keeps every feature
/// row it is told, by position. `error` says what broke the protocol, if anything did. Given a
/// model, it follows a sampled sequence too: whenever the context leaves its reference, the
/// reference becomes the context and the model's next greedy tokens.
class FeatureProbe {
 public:
  static constexpr const char* name = "feature probe";
  static constexpr bool needs_target_features = true;

  explicit FeatureProbe(OracleDrafter oracle, std::shared_ptr<const Llama2cModel> follow = nullptr)
      : oracle_(std::move(oracle)), follow_(std::move(follow)) {}

  void begin(std::span<const token_t> prompt, const TargetFeatures& features) {
    rows.clear();
    error.clear();
    if (features.first_position != 0 || features.rows != static_cast<int>(prompt.size()) - 1)
      error = "begin: rows [" + std::to_string(features.first_position) + ", +" + std::to_string(features.rows) +
              ") for a prompt of " + std::to_string(prompt.size());
    keep(features);
    oracle_.begin(prompt);
  }
  void observe(std::span<const token_t> committed, const TargetFeatures& features) {
    if (features.first_position != static_cast<int>(rows.size()) || features.rows != static_cast<int>(committed.size()))
      error = "observe: rows [" + std::to_string(features.first_position) + ", +" + std::to_string(features.rows) +
              ") after " + std::to_string(rows.size()) + " rows, " + std::to_string(committed.size()) + " committed";
    keep(features);
    oracle_.observe(committed);
  }
  void propose(const DraftContext& ctx, DraftTree& tree) {
    const bool on_reference = ctx.tokens.size() + 5 <= reference_.size() &&
                              std::equal(ctx.tokens.begin(), ctx.tokens.end(), reference_.begin());
    if (follow_ && !on_reference) {
      reference_.assign(ctx.tokens.begin(), ctx.tokens.end());
      Llama2cTarget model(follow_);
      for (token_t t : model.generate(ctx.tokens, 12)) reference_.push_back(t);
      oracle_ = OracleDrafter(reference_, 5, 0.3, 4, ctx.tokens.size());
    }
    oracle_.propose(ctx, tree);
  }

  std::vector<std::vector<float>> rows;  // rows[p]: the feature at position p
  std::string error;

 private:
  void keep(const TargetFeatures& features) {
    for (int i = 0; i < features.rows; ++i) rows.emplace_back(features.row(i).begin(), features.row(i).end());
  }
  OracleDrafter oracle_;
  std::shared_ptr<const Llama2cModel> follow_;
  std::vector<token_t> reference_;
};
static_assert(Drafter<FeatureProbe>);
static_assert(drafter_traits<FeatureProbe>::needs_target_features);

struct Fixture {
  std::shared_ptr<const Llama2cModel> model;
  std::vector<std::vector<token_t>> prompts;
  std::vector<std::vector<token_t>> references;  // prompt + greedy continuation

  static const Fixture* get() {
    static const std::unique_ptr<Fixture> fixture = []() -> std::unique_ptr<Fixture> {
      const testing::Stories260K* stories = testing::stories260k();
      if (!stories) return nullptr;
      auto f = std::make_unique<Fixture>();
      f->model = stories->model;
      const Llama2cTokenizer& tokenizer = stories->tokenizer;
      Llama2cTarget target(f->model);
      for (const char* text : {"Once upon a time", "Tom had a big red ball.", "Sara and Ben went to the park",
                               "The cat", "\"Look!\" said Sam."}) {
        f->prompts.push_back(tokenizer.encode(text));
        f->references.push_back(f->prompts.back());
        for (token_t t : target.generate(f->prompts.back(), kNew + 40)) f->references.back().push_back(t);
      }
      return f;
    }();
    return fixture.get();
  }
};

/// The features of every position of `context` but the last, one token at a time.
std::vector<std::vector<float>> plain_features(const std::shared_ptr<const Llama2cModel>& model,
                                               std::span<const token_t> context) {
  Llama2cTarget plain(model);
  std::vector<std::vector<float>> rows;
  std::vector<token_t> read(context.begin(), context.end());
  read.pop_back();
  testing::forward_one_by_one(plain, read,
                              [&](int, const Llama2cTarget::Output& out) {
                                rows.emplace_back(out.features(0).begin(), out.features(0).end());
                              });
  return rows;
}

/// Decodes every prompt, then checks the probe's rows against the plain forward of the context.
/// Returns tau and draft nodes per step over all prompts.
template <class Verifier, class... Others>
std::pair<double, double> check_rows(const Fixture* f, bool follow, Verifier verifier, Others... others) {
  Llama2cTarget target(f->model);
  double steps = 0, tokens = 0, drafted = 0;
  for (std::size_t p = 0; p < f->prompts.size(); ++p) {
    INFO("prompt " << p);
    SpeculativeDecoder<Llama2cTarget, FeatureProbe, Others..., Verifier> decoder(
        target, DecoderOptions{.budget = 24},
        FeatureProbe(OracleDrafter(f->references[p], 5, 0.3, 4, p), follow ? f->model : nullptr), others...,
        verifier);
    decoder.prefill(f->prompts[p]);
    const FeatureProbe& probe = decoder.template drafter<0>();
    REQUIRE(probe.error.empty());
    REQUIRE(probe.rows.size() == f->prompts[p].size() - 1);
    decoder.generate(kNew);
    INFO(probe.error);
    REQUIRE(probe.error.empty());
    const std::span<const token_t> context = decoder.context();
    REQUIRE(probe.rows.size() == context.size() - 1);
    const auto expected = plain_features(f->model, context);
    std::size_t equal = 0;
    for (std::size_t i = 0; i < expected.size(); ++i) equal += probe.rows[i] == expected[i];
    CHECK(equal == expected.size());
    steps += static_cast<double>(decoder.stats().steps);
    tokens += static_cast<double>(decoder.stats().tokens);
    drafted += static_cast<double>(decoder.stats().drafted_nodes);
  }
  return {tokens / steps, drafted / steps};
}

}  // namespace

TEST_CASE("feature drafter: prefill rows equal the plain forward's", "[features]") {
  const Fixture* f = Fixture::get();
  if (!f) return;
  Llama2cTarget target(f->model);
  const std::vector<token_t>& prompt = f->references[0];  // a long prompt: prompt + answer
  target.prefill(std::span(prompt).first(prompt.size() - 1));
  const std::span<const float> rows = target.prefill_features();
  const auto expected = plain_features(f->model, prompt);
  REQUIRE(rows.size() == expected.size() * 64);
  for (std::size_t i = 0; i < expected.size(); ++i)
    CHECK(std::vector<float>(rows.begin() + i * 64, rows.begin() + (i + 1) * 64) == expected[i]);
}

TEST_CASE("feature drafter: every position's row equals the plain forward's (exact verifier)", "[features]") {
  const Fixture* f = Fixture::get();
  if (!f) return;
  const auto [tau, nodes] = check_rows(f, false, ExactVerifier{});
  // The trees were wide and only partly accepted: the rows came from every kind of path.
  INFO("tau " << tau << ", draft nodes per step " << nodes);
  CHECK(tau > 1.5);
  CHECK(tau < 5.0);
  CHECK(nodes > 10.0);
}

TEST_CASE("feature drafter: merged with a drafter that reads no features", "[features]") {
  const Fixture* f = Fixture::get();
  if (!f) return;
  check_rows(f, false, ExactVerifier{}, OracleDrafter(f->references[0], 3, 0.5, 2, 7));
}

TEST_CASE("feature drafter: rows under rejection sampling", "[features]") {
  const Fixture* f = Fixture::get();
  if (!f) return;
  const auto [tau, nodes] =
      check_rows(f, true, RejectionSampling(SamplingOptions{.sampling = {.temperature = 0.5f}, .seed = 11}));
  INFO("tau " << tau << ", draft nodes per step " << nodes);
  CHECK(tau > 1.5);
  CHECK(nodes > 10.0);
}
