// DresdDrafter: the first-token filter, the merge of the drafts and their scores on a hand-made
// datastore; losslessness with the exact verifier on the real stories260K model, drafting from a
// datastore of the model's own stories built here; bad input.
#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/index/dense_datastore_builder.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/dresd.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/targets/llama2c.hpp>

#include "support/stories260k.hpp"
#include "support/temp_dir.hpp"

using namespace specdec;

namespace {

constexpr int kDim = 8;

/// Documents whose marked positions (`near`) have features close to `center`, the others random.
struct HandMade {
  TokenDocuments docs;
  std::vector<float> features;
  std::vector<float> center;

  HandMade() {
    std::mt19937_64 rng(17);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (int d = 0; d < kDim; ++d) center.push_back(normal(rng));
    const auto add = [&](std::vector<std::uint32_t> doc, int near) {
      for (int p = 0; p < static_cast<int>(doc.size()); ++p)
        for (int d = 0; d < kDim; ++d) features.push_back(p == near ? center[d] + 0.01f * normal(rng) : normal(rng));
      docs.add(doc);
    };
    add({1, 2, 3, 4, 5}, 0);  // near the center: token 1, whose value is 2 3 4 5
    add({1, 2, 3, 6, 7}, 0);
    add({9, 2, 8, 8}, 0);
    add({1, 5, 5, 5}, 0);     // its value starts with 5: filtered out when the root is 2
    for (int filler = 0; filler < 40; ++filler) add({20, 21, 22, 23, 24, 25}, -1);
  }
};

/// The tree's nodes as path → score ("3 4" → score of the node 4 below 3).
std::map<std::string, float> paths(const DraftTree& tree) {
  std::map<std::string, float> out;
  std::vector<std::string> name(static_cast<std::size_t>(tree.size()));
  for (int i = 1; i < tree.size(); ++i) {
    const std::string& up = name[static_cast<std::size_t>(tree.parent(i))];
    name[static_cast<std::size_t>(i)] = (up.empty() ? "" : up + " ") + std::to_string(tree.token(i));
    out[name[static_cast<std::size_t>(i)]] = tree.score(i);
  }
  return out;
}

DraftTree propose(DresdDrafter& d, std::vector<token_t> context, int max_depth = 64) {
  DraftTree tree;
  tree.reset(context.back());
  d.propose({.tokens = context, .prompt_length = 1, .budget = 64, .max_depth = max_depth, .vocab_size = 100}, tree);
  return tree;
}

}  // namespace

TEST_CASE("dresd: nearest keys whose value starts with the root, merged with shares as scores", "[dresd]") {
  testing::TempDir dir;
  const HandMade h;
  build_dense_datastore(h.docs, h.features, kDim, dir.path / "ds.bin", {.key_dim = kDim});
  const auto ds = std::make_shared<const DenseDatastore>(dir.path / "ds.bin");
  DresdDrafter d(ds, {.neighbours = 4, .drafts = 3, .depth = 3});
  const TargetFeatures query{.first_position = 0, .rows = 1, .dim = kDim, .data = h.center.data()};

  SECTION("root 2: three values start with it, the fourth is filtered out") {
    d.begin(std::vector<token_t>{7, 2}, query);
    const auto got = paths(propose(d, {7, 2}));
    const std::map<std::string, float> expected{{"3", 2.0f / 3},     {"3 4", 1.0f / 3}, {"3 4 5", 1.0f / 3},
                                                {"3 6", 1.0f / 3}, {"3 6 7", 1.0f / 3}, {"8", 1.0f / 3},
                                                {"8 8", 1.0f / 3}};
    CHECK(got == expected);
    CHECK(d.last_retrieval().neighbours == 4);
    CHECK(d.last_retrieval().drafts == 3);
  }
  SECTION("the depth the decoder allows cuts the drafts") {
    d.begin(std::vector<token_t>{7, 2}, query);
    CHECK(paths(propose(d, {7, 2}, 1)) == std::map<std::string, float>{{"3", 2.0f / 3}, {"8", 1.0f / 3}});
  }
  SECTION("root 5: only the fourth value fits") {
    d.observe(std::vector<token_t>{5}, query);
    CHECK(paths(propose(d, {7, 5})) == std::map<std::string, float>{{"5", 1.0f}, {"5 5", 1.0f}});
  }
  SECTION("a root no neighbour's value starts with: an empty draft") {
    d.observe(std::vector<token_t>{42}, query);
    CHECK(propose(d, {7, 42}).size() == 1);
    CHECK(d.last_retrieval().drafts == 0);
  }
  SECTION("no feature yet (a one-token prompt): an empty draft") {
    d.begin(std::vector<token_t>{2}, TargetFeatures{.first_position = 0, .rows = 0, .dim = kDim});
    CHECK(propose(d, {2}).size() == 1);
  }
  SECTION("bad input") {
    const std::vector<float> row(7);
    CHECK_THROWS_WITH(d.begin(std::vector<token_t>{1, 2}, TargetFeatures{.rows = 1, .dim = 7, .data = row.data()}),
                      Catch::Matchers::Contains("dresd: the target's features have 7 floats, the datastore") &&
                          Catch::Matchers::Contains("was built from features of 8 (another model?)"));
    DraftTree tree;
    tree.reset(2);
    d.observe(std::vector<token_t>{2}, query);
    CHECK_THROWS_WITH(d.propose({.tokens = std::vector<token_t>{2}, .budget = 8, .max_depth = 8, .vocab_size = 10}, tree),
                      "dresd: the datastore's vocabulary (26 tokens) is larger than the target's (10)");
    CHECK_THROWS_WITH(DresdDrafter(ds, {.drafts = 0}), "dresd: drafts must be >= 1, got 0");
    CHECK_THROWS_WITH(DresdDrafter(nullptr), "dresd: no datastore (null pointer)");
  }
}

namespace {

constexpr int kNew = 150;

/// A datastore of stories260K's own greedy stories (openings other than the test prompts), with
/// the model's features of every position.
struct Stories {
  const testing::Stories260K* model = nullptr;
  testing::TempDir dir;
  std::shared_ptr<const DenseDatastore> datastore;
  std::vector<std::vector<token_t>> prompts;

  static const Stories* get() {
    static const std::unique_ptr<Stories> stories = []() -> std::unique_ptr<Stories> {
      const testing::Stories260K* loaded = testing::stories260k();
      if (!loaded) return nullptr;
      auto s = std::make_unique<Stories>();
      s->model = loaded;
      Llama2cTarget target(loaded->model);
      TokenDocuments docs;
      std::vector<float> features;
      for (const char* opening : {"One day", "Lily", "Tim and his mom", "There was a little dog", "The sun was",
                                  "A big bird", "Mia wanted", "Max", "The girl", "Once there was a boy",
                                  "Anna had a doll", "It was a sunny day", "The frog", "Jack", "A little mouse",
                                  "Sue liked", "The old man", "Billy", "Once upon a time, in a small house",
                                  "Sam saw a"}) {
        std::vector<token_t> story = loaded->tokenizer.encode(opening);
        for (token_t t : target.generate(story, 250, std::vector<token_t>{1, 2})) story.push_back(t);
        target.prefill(story);
        const auto rows = target.prefill_features();
        features.insert(features.end(), rows.begin(), rows.end());
        docs.add(std::vector<std::uint32_t>(story.begin(), story.end()));
      }
      build_dense_datastore(docs, features, target.feature_dim(), s->dir.path / "stories.dense",
                            {.key_dim = 32, .vocab_size = target.vocab_size()});
      s->datastore = std::make_shared<const DenseDatastore>(s->dir.path / "stories.dense", DatastoreVerify::full);
      for (const char* text : {"Once upon a time", "Tom had a big red ball.", "Sara and Ben went to the park",
                               "The cat", "\"Look!\" said Sam."})
        s->prompts.push_back(loaded->tokenizer.encode(text));
      return s;
    }();
    return stories.get();
  }
};

}  // namespace

TEST_CASE("dresd on stories260K: lossless with the exact verifier, and it drafts", "[dresd][llama2c]") {
  const Stories* s = Stories::get();
  if (!s) return;
  Llama2cTarget target(s->model->model);
  std::int64_t steps = 0, tokens = 0, drafted = 0;
  for (const auto& prompt : s->prompts) {
    const auto expected = Llama2cTarget(s->model->model).generate(prompt, kNew);
    SpeculativeDecoder<Llama2cTarget, DresdDrafter, ExactVerifier> decoder(target, DecoderOptions{.budget = 64},
                                                                           DresdDrafter(s->datastore), ExactVerifier{});
    decoder.prefill(prompt);
    CHECK(decoder.generate(kNew) == expected);
    steps += decoder.stats().steps;
    tokens += decoder.stats().tokens;
    drafted += decoder.stats().drafted_nodes;
  }
  const double accepted = static_cast<double>(tokens - steps);
  WARN("dresd, stories260K, " << s->prompts.size() << " prompts x " << kNew << " tokens: " << steps << " steps, tau "
                              << static_cast<double>(tokens) / steps << " (bonus included), accepted " << accepted
                              << " of " << drafted << " drafted nodes");
  CHECK(accepted > 0.2 * static_cast<double>(tokens));
}

TEST_CASE("dresd on stories260K: merged with CASD, lossless", "[dresd][llama2c]") {
  const Stories* s = Stories::get();
  if (!s) return;
  Llama2cTarget target(s->model->model);
  for (const auto& prompt : s->prompts) {
    SpeculativeDecoder<Llama2cTarget, DresdDrafter, CasdDrafter, ExactVerifier> decoder(
        target, DecoderOptions{.budget = 32}, DresdDrafter(s->datastore, DresdOptions::sampling()), CasdDrafter{},
        ExactVerifier{});
    decoder.prefill(prompt);
    CHECK(decoder.generate(kNew) == Llama2cTarget(s->model->model).generate(prompt, kNew));
  }
}

TEST_CASE("dresd on stories260K: rejection sampling is reproducible from its seed", "[dresd][llama2c]") {
  const Stories* s = Stories::get();
  if (!s) return;
  Llama2cTarget target(s->model->model);
  const auto run = [&](std::uint64_t seed) {
    SpeculativeDecoder<Llama2cTarget, DresdDrafter, RejectionSampling> decoder(
        target, DecoderOptions{.budget = 32}, DresdDrafter(s->datastore, DresdOptions::sampling()),
        RejectionSampling(SamplingOptions{.sampling = {.temperature = 0.7f}, .seed = seed}));
    decoder.prefill(s->prompts[0]);
    return decoder.generate(kNew);
  };
  CHECK(run(3) == run(3));
  CHECK(run(3) != run(4));
}
