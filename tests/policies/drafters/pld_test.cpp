#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/drafters/pld.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

using namespace specdec;

namespace {

using Tokens = std::vector<token_t>;

struct Lookup {
  int position = -1;  // end of the matched n-gram
  int ngram = 0;
  bool operator==(const Lookup&) const = default;
};

/// Spec-Bench's prompt lookup, rescanning: for each n-gram size from the largest, the first window
/// equal to the context's last n tokens whose continuation of depth tokens fits in the
/// context and starts before the query n-gram.
Lookup rescan(const Tokens& c, const PldOptions& o) {
  const int n = static_cast<int>(c.size());
  for (int g = o.max_ngram; g >= o.min_ngram; --g) {
    if (g > n) continue;
    for (int start = 0; start + g <= n; ++start) {
      if (!std::equal(c.begin() + start, c.begin() + start + g, c.end() - g)) continue;
      const int from = start + g, to = from + o.depth;
      if (to <= n && from < n - g) return {from - 1, g};
    }
  }
  return {};
}

Lookup lookup(PldDrafter& d, const Tokens& c) {
  const core::SuffixMatch m = d.find_match(c);
  return m.position < 0 ? Lookup{} : Lookup{m.position, m.length};
}

Tokens random_tokens(std::mt19937_64& rng, int n, int vocab) {
  Tokens t(static_cast<std::size_t>(n));
  for (auto& x : t) x = static_cast<token_t>(rng() % static_cast<unsigned>(vocab));
  return t;
}

DraftContext context_of(const Tokens& c, int max_depth = 64) {
  return DraftContext{c, 1, /*budget=*/64, max_depth, /*vocab_size=*/1 << 20};
}

/// The draft as (token, score) in chain order; checks that it is a chain.
std::vector<std::pair<token_t, float>> chain_of(const DraftTree& tree) {
  std::vector<std::pair<token_t, float>> out;
  for (int i = 1; i < tree.size(); ++i) {
    REQUIRE(tree.parent(i) == i - 1);
    out.emplace_back(tree.token(i), tree.score(i));
  }
  return out;
}

}  // namespace

TEST_CASE("pld: the occurrence and the draft equal a rescanning reference, step after step", "[pld]") {
  std::mt19937_64 rng(4);
  for (int trial = 0; trial < 300; ++trial) {
    PldOptions o;
    o.max_ngram = 1 + static_cast<int>(rng() % 5);
    o.min_ngram = 1 + static_cast<int>(rng() % static_cast<unsigned>(o.max_ngram));
    if (rng() % 2) o.min_ngram = 1;
    o.depth = 1 + static_cast<int>(rng() % 12);
    const int vocab = 2 + static_cast<int>(rng() % 7);
    const Tokens all = random_tokens(rng, 250, vocab);
    const int max_depth = 1 + static_cast<int>(rng() % 14);
    PldDrafter drafter(o);
    drafter.begin(std::span<const token_t>(all).first(1));
    for (int n = 1; n <= static_cast<int>(all.size()); n += 1 + static_cast<int>(rng() % 4)) {
      const Tokens c(all.begin(), all.begin() + n);
      INFO("trial " << trial << ", n " << n << ", ngrams " << o.min_ngram << ".." << o.max_ngram << ", draft "
                    << o.depth);
      const Lookup expected = rescan(c, o);
      REQUIRE(lookup(drafter, c) == expected);
      DraftTree tree;
      tree.reset(c.back());
      drafter.propose(context_of(c, max_depth), tree);
      const auto chain = chain_of(tree);
      if (expected.position < 0) {
        REQUIRE(chain.empty());
        continue;
      }
      REQUIRE(static_cast<int>(chain.size()) == std::min(o.depth, max_depth));
      for (std::size_t j = 0; j < chain.size(); ++j) {
        REQUIRE(chain[j].first == c[static_cast<std::size_t>(expected.position) + 1 + j]);
        const float score = static_cast<float>(expected.ngram + 1) / static_cast<float>(expected.ngram + j + 2);
        REQUIRE(chain[j].second == score);
      }
    }
  }
}

TEST_CASE("pld: hand-made contexts", "[pld]") {
  PldOptions o;
  o.depth = 3;
  PldDrafter d(o);
  // "1 2 3" occurs at 0..2 and 5..7: the earliest wins; the draft is its next 3 tokens.
  //              0  1  2  3  4  5  6  7  8  9 10 11 12 13 14
  const Tokens c{1, 2, 3, 4, 5, 1, 2, 3, 6, 7, 8, 9, 1, 2, 3};
  CHECK(lookup(d, c) == Lookup{2, 3});
  DraftTree tree;
  tree.reset(3);
  d.propose(context_of(c), tree);
  CHECK(chain_of(tree) == std::vector<std::pair<token_t, float>>{{4, 4.0f / 5}, {5, 4.0f / 6}, {1, 4.0f / 7}});

  // No trigram match: the bigram "9 3" is absent too; the unigram "3" matches at 2.
  const Tokens d2{1, 2, 3, 4, 5, 6, 9, 3};
  CHECK(lookup(d, d2) == Lookup{2, 1});
  // The only occurrence is too close to the end for a full continuation: nothing.
  const Tokens d3{1, 2, 8, 5, 8};
  CHECK(lookup(d, d3) == Lookup{});
  tree.reset(8);
  d.propose(context_of(d3), tree);
  CHECK(tree.size() == 1);
  // No occurrence at all.
  CHECK(lookup(d, Tokens{1, 2, 3, 4}) == Lookup{});
  CHECK(lookup(d, Tokens{1}) == Lookup{});
}

TEST_CASE("pld combines with other drafters and stays lossless", "[pld][lossless]") {
  HashTarget target(/*vocab_size=*/4, /*seed=*/9);
  for (const Tokens& prompt : {Tokens{0, 1, 2, 3, 0, 1, 2, 3}, Tokens{3}}) {
    const Tokens greedy = target.generate(prompt, 400);
    Tokens truth = prompt;
    truth.insert(truth.end(), greedy.begin(), greedy.end());
    SpeculativeDecoder<HashTarget, PldDrafter, CasdDrafter, OracleDrafter, ExactVerifier> dec(
        target, DecoderOptions{.budget = 16}, PldDrafter{}, CasdDrafter{}, OracleDrafter(truth, 3, 0.7), ExactVerifier{});
    dec.prefill(prompt);
    CHECK(dec.generate(300) == Tokens(greedy.begin(), greedy.begin() + 300));
    const auto& accepted = dec.stats().accepted_by_drafter[0];
    std::int64_t steps_with_pld_tokens = 0;
    for (std::size_t k = 1; k < accepted.size(); ++k) steps_with_pld_tokens += accepted[k];
    CHECK(steps_with_pld_tokens > 0);
  }
}

TEST_CASE("pld: options are validated", "[pld][errors]") {
  CHECK_THROWS_WITH(PldDrafter(PldOptions{.max_ngram = 0}), Catch::Contains("pld: max_ngram must be >= 1, got 0"));
  CHECK_THROWS_WITH(PldDrafter(PldOptions{.max_ngram = 3, .min_ngram = 4}),
                    Catch::Contains("min_ngram must be in [1, max_ngram = 3], got 4"));
  CHECK_THROWS_WITH(PldDrafter(PldOptions{.depth = 0}), Catch::Contains("depth must be >= 1, got 0"));
  STATIC_REQUIRE(std::string_view(PldDrafter::name) == "pld");
  STATIC_REQUIRE(std::default_initializable<PldDrafter>);
}

TEST_CASE("pld: a depth of INT_MAX never drafts past the context (earliest + depth overflowed)", "[pld][overflow]") {
  // Issue 20: the fit check overflowed and passed, and the draft read tokens past the context.
  PldDrafter d(PldOptions{.depth = std::numeric_limits<int>::max()});
  const Tokens c{1, 2, 3, 4, 5, 1, 2, 3, 6, 7, 8, 9, 1, 2, 3};
  CHECK(lookup(d, c) == Lookup{});
  DraftTree tree;
  tree.reset(3);
  d.propose(context_of(c, std::numeric_limits<int>::max()), tree);
  CHECK(tree.size() == 1);
}

TEST_CASE("pld: max_ngram is bounded (the index allocates per level)", "[pld][errors]") {
  CHECK_THROWS_WITH(PldDrafter(PldOptions{.max_ngram = 1 << 30}),
                    Catch::Contains("pld: max_ngram must be <= 1024, got 1073741824"));
}
