// RestDrafter: its tree equals a brute-force prefix counter, the longest span wins, the occurrence
// sample is proportional, bad options and vocabularies are refused, and decoding with it is
// lossless (HashTarget, and the stories260K model with a datastore of its own greedy text).
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <random>
#include <tuple>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/index/datastore_builder.hpp>
#include <specdec/policies/drafters/rest.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "support/data.hpp"
#include "support/temp_dir.hpp"

using namespace specdec;

namespace {

using Words = std::vector<std::uint32_t>;
using Path = std::vector<std::uint32_t>;  // a draft node's tokens from the root down

/// A datastore of `docs`, kept in a temporary directory for as long as the pointer lives.
struct Store {
  testing::TempDir dir;
  std::shared_ptr<const TokenDatastore> ds;
  explicit Store(const TokenDocuments& docs, int vocab_size = 0) {
    build_datastore(docs, dir.path / "ds.bin", {.vocab_size = vocab_size});
    ds = std::make_shared<const TokenDatastore>(dir.path / "ds.bin", DatastoreVerify::full);
  }
};

TokenDocuments documents(std::initializer_list<Words> docs) {
  TokenDocuments out;
  for (const Words& d : docs) out.add(d);
  return out;
}

/// The draft of `drafter` for `context` as path -> score.
std::map<Path, float> draft(RestDrafter& drafter, const std::vector<token_t>& context, int vocab, int budget = 64,
                            int max_depth = 64) {
  DraftTree tree;
  tree.reset(context.back());
  drafter.propose(DraftContext{context, 0, budget, max_depth, vocab}, tree);
  std::map<Path, float> out;
  std::vector<Path> paths(static_cast<std::size_t>(tree.size()));
  for (int i = 1; i < tree.size(); ++i) {
    REQUIRE(tree.parent(i) < i);
    Path p = paths[static_cast<std::size_t>(tree.parent(i))];
    p.push_back(static_cast<std::uint32_t>(tree.token(i)));
    paths[static_cast<std::size_t>(i)] = p;
    REQUIRE(out.emplace(p, tree.score(i)).second);  // no duplicate siblings
  }
  return out;
}

/// REST's rule by brute force: scan for the longest suffix of `context` that occurs, sort its
/// occurrences by suffix, take the evenly spaced sample, count every continuation prefix in a map,
/// keep the `nodes` most frequent (ties: shallower, then lexicographically smaller).
std::map<Path, float> brute_draft(const Words& text, const std::vector<token_t>& context, const RestOptions& o,
                                  int max_depth = 64) {
  const Words ctx(context.begin(), context.end());
  for (int m = std::min<int>(o.max_suffix, static_cast<int>(ctx.size())); m >= o.min_suffix; --m) {
    const Words query(ctx.end() - m, ctx.end());
    std::vector<std::size_t> hits;
    for (std::size_t p = 0; p + query.size() <= text.size(); ++p)
      if (std::equal(query.begin(), query.end(), text.begin() + static_cast<std::ptrdiff_t>(p))) hits.push_back(p);
    if (hits.empty()) continue;
    std::sort(hits.begin(), hits.end(), [&](std::size_t a, std::size_t b) {
      return std::lexicographical_compare(text.begin() + static_cast<std::ptrdiff_t>(a), text.end(),
                                          text.begin() + static_cast<std::ptrdiff_t>(b), text.end());
    });
    const std::size_t take = std::min<std::size_t>(hits.size(), static_cast<std::size_t>(o.max_occurrences));
    std::map<Path, int> counts;
    for (std::size_t i = 0; i < take; ++i) {
      Path prefix;
      for (std::size_t p = hits[i * hits.size() / take] + static_cast<std::size_t>(m);
           text[p] != kDocumentEnd && static_cast<int>(prefix.size()) < std::min(o.depth, max_depth); ++p) {
        prefix.push_back(text[p]);
        ++counts[prefix];
      }
    }
    std::vector<std::tuple<int, std::size_t, Path>> ranked;  // (-count, depth, path)
    for (const auto& [path, count] : counts) ranked.emplace_back(-count, path.size(), path);
    std::sort(ranked.begin(), ranked.end());
    std::map<Path, float> out;
    for (std::size_t i = 0; i < ranked.size() && static_cast<int>(i) < o.budget; ++i)
      out[std::get<2>(ranked[i])] = static_cast<float>(-std::get<0>(ranked[i])) / static_cast<float>(take);
    return out;
  }
  return {};
}

}  // namespace

TEST_CASE("rest: the tree equals a brute-force prefix counter", "[rest]") {
  std::mt19937_64 rng(11);
  int nonempty = 0, capped = 0;
  for (int trial = 0; trial < 12; ++trial) {
    // Small alphabets (many matches, ties in counts) and ids >= 65536; repeated blocks.
    const Words alphabet = trial % 2 ? Words{1, 2, 3} : Words{70000, 70001, 65536, 65535, 5};
    TokenDocuments docs;
    for (int d = 0; d < 6; ++d) {
      Words doc;
      for (int i = 0; i < 150; ++i) doc.push_back(alphabet[rng() % alphabet.size()]);
      if (trial % 3 == 0) doc.insert(doc.end(), doc.begin(), doc.begin() + 60);
      docs.add(doc);
    }
    const Store store(docs);
    const RestOptions options{.max_occurrences = trial % 4 == 1 ? 7 : 5000, .depth = 3 + trial % 8,
                              .budget = trial % 2 ? 64 : 9};
    RestDrafter drafter(store.ds, options);
    for (int q = 0; q < 40; ++q) {
      std::vector<token_t> context;
      const int n = 1 + static_cast<int>(rng() % 20);
      for (int i = 0; i < n; ++i) context.push_back(static_cast<token_t>(alphabet[rng() % alphabet.size()]));
      const int depth = q % 5 == 0 ? 2 : 64;
      const auto got = draft(drafter, context, 80000, 64, depth);
      INFO("trial " << trial << " query " << q);
      CHECK(got == brute_draft(docs.text, context, options, depth));
      CHECK(static_cast<int>(got.size()) <= options.budget);
      for (const auto& [path, score] : got) {  // prefix-closed, scores fall along paths
        if (path.size() < 2) continue;
        const auto parent = got.find(Path(path.begin(), path.end() - 1));
        REQUIRE(parent != got.end());
        CHECK(parent->second >= score);
      }
      nonempty += !got.empty();
      capped += drafter.last_match().range.size() > static_cast<std::uint64_t>(options.max_occurrences);
    }
  }
  CHECK(nonempty > 200);
  CHECK(capped > 10);
}

TEST_CASE("rest: the longest matching span wins, and no match drafts nothing", "[rest]") {
  // "8 9" is followed by 1 ten times, but "7 8 9" (longer) only by 2.
  TokenDocuments docs;
  for (int i = 0; i < 10; ++i) docs.add(Words{8, 9, 1, 1});
  docs.add(Words{7, 8, 9, 2, 3});
  const Store store(docs);
  RestDrafter drafter(store.ds);
  auto got = draft(drafter, {5, 7, 8, 9}, 100);
  CHECK(drafter.last_match().length == 3);
  CHECK(got == std::map<Path, float>{{{2}, 1.0f}, {{2, 3}, 1.0f}});
  got = draft(drafter, {5, 6, 8, 9}, 100);
  CHECK(drafter.last_match().length == 2);
  const float ten = 10.0f / 11.0f, one = 1.0f / 11.0f;
  CHECK(got == std::map<Path, float>{{{1}, ten}, {{1, 1}, ten}, {{2}, one}, {{2, 3}, one}});
  // A continuation ends with its document: "2 3" is the end, "1 1" is never followed by 7.
  CHECK(got.count({1, 1, 8}) == 0);
  // Only a one-token match (min_suffix 2): nothing.
  CHECK(draft(drafter, {4, 9}, 100).empty());
  CHECK(drafter.last_match().length == 0);
  CHECK(draft(drafter, {9}, 100).empty());
  // The budget and the remaining depth cut the tree.
  CHECK(draft(drafter, {7, 8, 9}, 100, 1).size() == 1);
  CHECK(draft(drafter, {7, 8, 9}, 100, 64, 1) == std::map<Path, float>{{{2}, 1.0f}});
}

TEST_CASE("rest: a capped sample keeps each continuation's share", "[rest]") {
  // "4 5" is followed by 6 in 750 documents and by 7 in 250; the suffix array sorts all the 6s
  // first, so taking the first 100 occurrences would see only 6s.
  TokenDocuments docs;
  for (int i = 0; i < 1000; ++i) docs.add(Words{4, 5, i % 4 == 3 ? 7u : 6u});
  const Store store(docs);
  RestDrafter drafter(store.ds, {.max_occurrences = 100});
  const auto got = draft(drafter, {4, 5}, 8);
  CHECK(got == std::map<Path, float>{{{6}, 0.75f}, {{7}, 0.25f}});
}

TEST_CASE("rest: bad options, a null datastore and a too large vocabulary are refused", "[rest][errors]") {
  const Store store(documents({{1, 2, 3}}), 70000);
  CHECK_THROWS_WITH(RestDrafter(nullptr), "rest: no datastore (null pointer)");
  CHECK_THROWS_WITH(RestDrafter(store.ds, {.min_suffix = 0}), "rest: min_suffix must be >= 1, got 0");
  CHECK_THROWS_WITH(RestDrafter(store.ds, {.max_suffix = 1}), "rest: max_suffix must be >= min_suffix = 2, got 1");
  CHECK_THROWS_WITH(RestDrafter(store.ds, {.max_occurrences = 0}), "rest: max_occurrences must be >= 1, got 0");
  CHECK_THROWS_WITH(RestDrafter(store.ds, {.depth = -1}), "rest: depth must be >= 1, got -1");
  CHECK_THROWS_WITH(RestDrafter(store.ds, {.budget = 0}), "rest: budget must be >= 1, got 0");
  RestDrafter drafter(store.ds);
  CHECK_THROWS_WITH(draft(drafter, {1, 2}, 65536),
                    "rest: the datastore's vocabulary (70000 tokens) is larger than the target's (65536)");
  CHECK(draft(drafter, {1, 2}, 70000) == std::map<Path, float>{{{3}, 1.0f}});
}

TEST_CASE("rest: lossless with the exact verifier on a hash target", "[rest][lossless]") {
  HashTarget target(48, 3);
  std::vector<std::vector<token_t>> prompts;
  TokenDocuments docs;
  for (int p = 0; p < 8; ++p) {
    prompts.push_back({p % 48, (p * 7 + 1) % 48, (p * 13 + 5) % 48});
    const auto greedy = target.generate(prompts.back(), 120);
    Words doc(prompts.back().begin(), prompts.back().end());
    doc.insert(doc.end(), greedy.begin(), greedy.end());
    if (p % 2 == 0) docs.add(doc);  // the datastore knows half of the continuations
  }
  const Store store(docs);
  DecodeStats total;
  for (const auto& prompt : prompts) {
    SpeculativeDecoder<HashTarget, RestDrafter, ExactVerifier> decoder(target, {}, RestDrafter(store.ds), ExactVerifier{});
    decoder.prefill(prompt);
    CHECK(decoder.generate(120) == target.generate(prompt, 120));
    total.add(decoder.stats());
  }
  WARN("hash target: " << total.tokens - total.steps << " draft tokens accepted of " << total.tokens
                       << ", tau " << total.tau());
  CHECK(total.tau() > 1.5);
}

TEST_CASE("rest: lossless on stories260K with a datastore of its own greedy text", "[rest][lossless][llama2c]") {
  const auto model_path = testing::data_file("models/stories260K.bin");
  const auto tok_path = testing::data_file("models/tok512.bin");
  if (!model_path || !tok_path) return;
  const auto model = std::make_shared<const Llama2cModel>(Llama2cModel::load(*model_path));
  const auto tokenizer = Llama2cTokenizer::load(*tok_path, model->config().vocab_size);
  Llama2cTarget target(model);
  const char* const train[] = {"Once upon a time", "One day, a little girl named Lily", "The sun was shining",
                               "There was a dog", "Sara and Ben went to the park", "Mom said", "The cat",
                               "A little bird lived in a tree."};
  const char* const held_out[] = {"Tim wanted to play", "It was a cold day.", "The boy found a box",
                                  "Once there was a king"};
  TokenDocuments docs;
  for (const char* text : train) {
    Words doc;
    for (const token_t t : tokenizer.encode(text)) doc.push_back(static_cast<std::uint32_t>(t));
    for (const token_t t : target.generate(tokenizer.encode(text), 200)) doc.push_back(static_cast<std::uint32_t>(t));
    docs.add(doc);
  }
  const Store store(docs, model->config().vocab_size);
  for (const bool seen : {true, false}) {
    DecodeStats total;
    for (const char* text : seen ? std::span<const char* const>(train) : std::span<const char* const>(held_out)) {
      const auto prompt = tokenizer.encode(text);
      const auto expected = target.generate(prompt, 150);  // before the decoder takes the target
      SpeculativeDecoder<Llama2cTarget, RestDrafter, ExactVerifier> decoder(target, {}, RestDrafter(store.ds),
                                                                            ExactVerifier{});
      decoder.prefill(prompt);
      CHECK(decoder.generate(150) == expected);
      total.add(decoder.stats());
    }
    WARN("stories260K, " << (seen ? "prompts in" : "held-out prompts, not in") << " the datastore: "
                         << total.tokens - total.steps << " draft tokens accepted of " << total.tokens << ", tau "
                         << total.tau());
    CHECK(total.tau() > (seen ? 3.0 : 1.1));
  }
}
