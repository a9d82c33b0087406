// NgramDrafter: its tree is the best-first tree (the likeliest nodes of the top_k expansion, scores
// that are path probabilities and never grow down a path), budget and depth are honoured, bad
// options and vocabularies are refused, and decoding with it is lossless: identical to greedy
// with the exact verifier (a tiny model and stories260K), distributed as the target under
// rejection sampling (chi-square).
#include <catch2/catch.hpp>

#include <algorithm>
#include <iostream>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/index/ngram_model_builder.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/ngram.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/targets/llama2c.hpp>

#include "support/chi_square.hpp"
#include "support/llama_decode.hpp"
#include "support/stories260k.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_llama.hpp"

using namespace specdec;
using specdec::testing::require_greedy;

namespace {

using Words = std::vector<std::uint32_t>;
using Tokens = std::vector<token_t>;

/// A model of `docs`, kept in a temporary directory for as long as the pointer lives.
struct Model {
  testing::TempDir dir;
  std::shared_ptr<const NgramModel> model;
  explicit Model(const TokenDocuments& docs, int vocab_size = 0) {
    build_ngram_model(docs, dir.path / "m.ngram", {.vocab_size = vocab_size});
    model = std::make_shared<const NgramModel>(dir.path / "m.ngram", DatastoreVerify::full);
  }
};

TokenDocuments random_documents(std::uint64_t seed, int documents, int length, int vocab) {
  std::mt19937_64 rng(seed);
  std::vector<double> weights;
  for (int i = 0; i < vocab; ++i) weights.push_back(1.0 / (1 + i));
  std::discrete_distribution<int> token(weights.begin(), weights.end());
  TokenDocuments docs;
  for (int d = 0; d < documents; ++d) {
    Words doc(static_cast<std::size_t>(length));
    for (auto& t : doc) t = static_cast<std::uint32_t>(token(rng));
    docs.add(doc);
  }
  return docs;
}

DraftTree draft(NgramDrafter& drafter, const Tokens& context, int vocab, int budget = 64, int max_depth = 64) {
  DraftTree tree;
  tree.reset(context.back());
  drafter.propose(DraftContext{context, 0, budget, max_depth, vocab}, tree);
  return tree;
}

/// Every node of the tree in which each node below max_depth has its top_k next tokens as
/// children, as path probabilities (what best-first growth chooses from).
void expansion_scores(const NgramModel& model, const Tokens& context, int top_k, int depth, double score,
                      std::vector<double>& out) {
  if (depth == 0) return;
  std::vector<NgramCandidate> next;
  model.top_k(std::span<const token_t>(context).last(std::min<std::size_t>(2, context.size())), top_k, next);
  for (const NgramCandidate& c : next) {
    out.push_back(score * c.probability);
    Tokens longer = context;
    longer.push_back(c.token);
    expansion_scores(model, longer, top_k, depth - 1, score * c.probability, out);
  }
}

/// The tokens of node i's path: the context, then the path from the root's child to i.
Tokens path_context(const DraftTree& tree, const Tokens& context, int i) {
  Tokens path;
  for (int n = i; n > 0; n = tree.parent(n)) path.push_back(tree.token(n));
  Tokens out = context;
  out.insert(out.end(), path.rbegin(), path.rend());
  return out;
}

}  // namespace

TEST_CASE("ngram: the tree holds the likeliest nodes of the top_k expansion, best first", "[ngram]") {
  const Model m(random_documents(3, 40, 150, 30));
  std::mt19937_64 rng(9);
  int trees = 0;
  for (const NgramOptions options : {NgramOptions{}, NgramOptions{8, 4, 2}, NgramOptions{30, 3, 5}, NgramOptions{5, 10, 1}}) {
    NgramDrafter drafter(m.model, options);
    for (int q = 0; q < 30; ++q) {
      Tokens context;
      for (std::uint64_t i = 0, n = 1 + rng() % 5; i < n; ++i) context.push_back(static_cast<token_t>(rng() % 30));
      const int budget = q % 3 == 0 ? 5 : 64, max_depth = q % 4 == 0 ? 2 : 64;
      const DraftTree tree = draft(drafter, context, 30, budget, max_depth);
      const int keep = std::min(options.budget, budget), depth = std::min(options.depth, max_depth);
      std::vector<double> all;
      expansion_scores(*m.model, context, options.top_k, depth, 1.0, all);
      std::sort(all.rbegin(), all.rend());
      all.resize(std::min<std::size_t>(all.size(), static_cast<std::size_t>(keep)));
      INFO("options " << options.budget << "/" << options.depth << "/" << options.top_k << " query " << q);
      REQUIRE(tree.size() - 1 == static_cast<int>(all.size()));  // the budget, or every node reachable
      std::vector<double> got;
      for (int i = 1; i < tree.size(); ++i) {
        REQUIRE(tree.parent(i) < i);
        const int parent = tree.parent(i);
        // A node's score is its parent's times the model's probability of its token.
        const Tokens before = path_context(tree, context, parent);
        const double p = m.model->probability(std::span<const token_t>(before).last(std::min<std::size_t>(2, before.size())),
                                              tree.token(i));
        const double parent_score = parent == 0 ? 1.0 : tree.score(parent);
        CHECK(tree.score(i) == Approx(parent_score * p).epsilon(1e-6));
        CHECK(tree.score(i) <= (parent == 0 ? 1.0f : tree.score(parent)));  // never grows down a path
        CHECK(static_cast<int>(path_context(tree, context, i).size() - context.size()) <= depth);
        for (int j = 1; j < i; ++j) CHECK((tree.parent(j) != parent || tree.token(j) != tree.token(i)));
        // Best first: nodes come in order of score.
        if (i > 1) CHECK(tree.score(i) <= tree.score(i - 1));
        got.push_back(tree.score(i));
      }
      // The same multiset of scores as the best `keep` nodes of the full expansion.
      for (std::size_t i = 0; i < all.size(); ++i) CHECK(got[i] == Approx(all[i]).epsilon(1e-6));
      ++trees;
    }
  }
  CHECK(trees == 120);
}

TEST_CASE("ngram: budget 0, depth 0 and a one-token context", "[ngram]") {
  const Model m(random_documents(4, 10, 100, 20));
  NgramDrafter drafter(m.model);
  CHECK(draft(drafter, {1, 2, 3}, 20, 0).size() == 1);
  CHECK(draft(drafter, {1, 2, 3}, 20, 64, 0).size() == 1);
  const DraftTree one = draft(drafter, {3}, 20, 64, 1);  // the bigram distribution after 3
  std::vector<NgramCandidate> top;
  m.model->top_k(Tokens{3}, 3, top);
  REQUIRE(one.size() == 4);
  for (int i = 1; i < 4; ++i) {
    CHECK(one.token(i) == top[static_cast<std::size_t>(i - 1)].token);
    CHECK(one.score(i) == static_cast<float>(top[static_cast<std::size_t>(i - 1)].probability));
  }
  // Deterministic: the same context, the same tree.
  const DraftTree a = draft(drafter, {5, 1, 2}, 20), b = draft(drafter, {5, 1, 2}, 20);
  REQUIRE(a.size() == 17);
  for (int i = 0; i < a.size(); ++i) CHECK((a.parent(i) == b.parent(i) && a.token(i) == b.token(i)));
}

TEST_CASE("ngram: bad options, a null model and another vocabulary are refused", "[ngram][errors]") {
  const Model m(random_documents(5, 4, 50, 40), 40);
  CHECK_THROWS_WITH(NgramDrafter(std::shared_ptr<const NgramModel>{}), "ngram: no model (null pointer)");
  CHECK_THROWS_WITH(NgramDrafter(m.model, {.budget = 0}), "ngram: budget must be >= 1, got 0");
  CHECK_THROWS_WITH(NgramDrafter(m.model, {.depth = -2}), "ngram: depth must be >= 1, got -2");
  CHECK_THROWS_WITH(NgramDrafter(m.model, {.top_k = 0}), "ngram: top_k must be >= 1, got 0");
  CHECK_THROWS_WITH(NgramDrafter(m.dir.path / "missing.ngram"), Catch::Matchers::Contains("missing.ngram cannot be opened"));
  NgramDrafter drafter(m.dir.path / "m.ngram");  // from the file
  CHECK(draft(drafter, {1, 2}, 40).size() > 1);
  CHECK_THROWS_WITH(draft(drafter, {1, 2}, 41), "ngram: the model " + (m.dir.path / "m.ngram").string() +
                                                    " has a vocabulary of 40 tokens, the target's has 41");
  CHECK_THROWS_WITH(draft(drafter, {1, 2}, 39), Catch::Matchers::Contains("the target's has 39"));
}

namespace {

/// A tiny random llama2.c model (vocab 350, 128 positions) and an n-gram model of its own greedy
/// continuations of `train` prompts.
struct TinySetup {
  testing::TempDir dir;
  std::shared_ptr<const Llama2cModel> model;
  std::shared_ptr<const NgramModel> ngram;
  TinySetup(int layers, std::uint64_t seed) {
    testing::TinyLlamaShape shape;
    shape.layers = layers;
    testing::write_tiny_llama(dir.path / "tiny.bin", shape, seed, 0.5f);
    model = std::make_shared<const Llama2cModel>(Llama2cModel::load(dir.path / "tiny.bin"));
    Llama2cTarget target(model);
    TokenDocuments docs;
    for (token_t first = 2; first < 40; ++first) {
      const Tokens prompt{1, first, first * 7 % 350};
      Words doc(prompt.begin(), prompt.end());
      for (const token_t t : target.generate(prompt, 60)) doc.push_back(static_cast<std::uint32_t>(t));
      docs.add(doc);
    }
    build_ngram_model(docs, dir.path / "tiny.ngram", {.vocab_size = shape.vocab});
    ngram = std::make_shared<const NgramModel>(dir.path / "tiny.ngram");
  }
};

const Tokens tiny_prompts[] = {{1, 40, 41, 42}, {1, 300, 7, 7, 7, 12}, {1, 5}, {1, 3, 21}, {1, 99, 100, 101, 102}};

}  // namespace

TEST_CASE("ngram: output identical to greedy on a tiny model, alone and merged with casd", "[ngram][lossless]") {
  const TinySetup tiny(2, 5);
  const DecodeStats alone = require_greedy(tiny.model, tiny_prompts, 100, {}, NgramDrafter(tiny.ngram));
  const DecodeStats merged = require_greedy(tiny.model, tiny_prompts, 100, {},
                                            NgramDrafter(tiny.ngram, {.budget = 24, .depth = 8, .top_k = 2}),
                                            CasdDrafter{});
  std::cout << "ngram on the tiny model (its own greedy text): tau " << alone.tau() << ", with casd " << merged.tau()
            << " (tokens per target call, bonus included)\n";
  CHECK(alone.tau() > 1.0);
}

TEST_CASE("ngram: output identical to greedy on stories260K", "[ngram][lossless][llama2c]") {
  const testing::Stories260K* s = testing::stories260k();
  if (!s) return;
  Llama2cTarget target(s->model);
  TokenDocuments docs;
  for (const char* text : {"Once upon a time", "One day, a little girl named Lily", "The sun was shining",
                           "There was a dog", "Sara and Ben went to the park", "Mom said", "The cat",
                           "A little bird lived in a tree."}) {
    const Tokens prompt = s->tokenizer.encode(text);
    Words doc(prompt.begin(), prompt.end());
    for (const token_t t : target.generate(prompt, 200)) doc.push_back(static_cast<std::uint32_t>(t));
    docs.add(doc);
  }
  const Model m(docs, s->model->config().vocab_size);
  std::vector<Tokens> held_out;
  for (const char* text : {"Tim wanted to play", "It was a cold day.", "The boy found a box", "Once there was a king"})
    held_out.push_back(s->tokenizer.encode(text));
  const DecodeStats stats = require_greedy(s->model, held_out, 120, {}, NgramDrafter(m.model));
  std::cout << "ngram on stories260K, 4 held-out prompts x 120 tokens, model of 8 greedy stories: tau " << stats.tau()
            << " (tokens per target call, bonus included), " << stats.tokens - stats.steps << " draft tokens accepted\n";
  CHECK(stats.tau() > 1.1);
}

TEST_CASE("ngram under rejection sampling: the first token follows the target's distribution (chi-square)",
          "[ngram][lossless][statistical]") {
  const TinySetup tiny(1, 5);
  const Tokens& prompt = tiny_prompts[0];
  Llama2cTarget target(tiny.model);
  std::vector<std::int64_t> counts(350, 0);
  double accepted = 0;
  const int trials = 6000;
  for (int t = 0; t < trials; ++t) {
    SpeculativeDecoder<Llama2cTarget, NgramDrafter, RejectionSampling> decoder(
        target, DecoderOptions{.budget = 24}, NgramDrafter(tiny.ngram),
        RejectionSampling(SamplingOptions{.sampling = {.temperature = 1.0f}, .seed = 2024, .sequence = static_cast<std::uint32_t>(t)}));
    decoder.prefill(prompt);
    const auto committed = decoder.step();
    ++counts[static_cast<std::size_t>(committed[0])];
    accepted += static_cast<double>(committed.size() - 1);
  }
  const testing::ChiSquare chi = testing::chi_square(counts, testing::next_token_distribution(tiny.model, prompt));
  std::cout << "chi-square [ngram, one-hot drafts, T=1] first token: X2 = " << chi.statistic << ", df = "
            << chi.degrees_of_freedom << ", p = " << chi.p_value << "; accepted draft tokens per step: "
            << accepted / trials << "\n";
  CHECK(chi.p_value > 0.001);
  CHECK(accepted / trials > 0.05);  // drafts were accepted, not only rejected
}
