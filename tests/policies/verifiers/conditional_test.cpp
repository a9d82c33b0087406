#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <type_traits>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/verifiers/conditional.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

#include "support/random_tree.hpp"

using namespace specdec;

namespace {

/// Target output with one row of logits per node (the last row for nodes beyond).
struct RowsOutput {
  std::vector<std::vector<float>> rows;
  std::span<const float> logits(node_t node) const {
    const auto& row = rows[std::min<std::size_t>(static_cast<std::size_t>(node), rows.size() - 1)];
    return {row.data(), row.size()};
  }
};

std::vector<float> log_of(std::vector<float> p) {
  for (float& x : p) x = std::log(x);
  return p;
}

struct Laid {
  DraftTree tree;
  TreeMerger merger;
  TreeView view() {
    const DraftTree* one[] = {&tree};
    merger.merge(one, 64, 16);
    return merger.view();
  }
};

Verdict verify(ConditionalParams params, const TreeView& view, const RowsOutput& out) {
  ConditionalVerifier verifier(params);
  Verdict verdict;
  verifier.verify(view, out, verdict);
  return verdict;
}

}  // namespace

TEST_CASE("conditional: p(x) > delta, the EOS rule and the top-k rule", "[conditional]") {
  // after the root: p = 0.5, 0.3, 0.15, 0.05 for tokens 0..3
  const RowsOutput out{{log_of({0.5f, 0.3f, 0.15f, 0.05f})}};
  Laid laid;
  laid.tree.reset(0);
  laid.tree.add(0, 3);  // node 1: p 0.05
  laid.tree.add(0, 2);  // node 2: p 0.15
  laid.tree.add(0, 1);  // node 3: p 0.3
  const TreeView view = laid.view();

  // delta 0.1 accepts nodes 2 and 3; equal depth: the lowest index wins
  auto v = verify({0.1f, 0, core::kNoEos}, view, out);
  CHECK(v.path == std::vector<node_t>{0, 2});
  CHECK(v.next_token == 0);  // greedy after node 2 (its row is the last one: same)
  // delta 0.2: only token 1 (0.3)
  CHECK(verify({0.2f, 0, core::kNoEos}, view, out).path == std::vector<node_t>{0, 3});
  // delta 0.01 accepts all three; still the lowest index
  CHECK(verify({0.01f, 0, core::kNoEos}, view, out).path == std::vector<node_t>{0, 1});
  // EOS = token 2 (p 0.15): the bar is max(0.1, 0.15) and the comparison is strict
  CHECK(verify({0.1f, 0, 2}, view, out).path == std::vector<node_t>{0, 3});
  // EOS = token 3 (p 0.05) is below delta: delta rules
  CHECK(verify({0.1f, 0, 3}, view, out).path == std::vector<node_t>{0, 2});
  // mixed mode: top-2 keeps tokens 0 and 1 only
  CHECK(verify({0.1f, 2, core::kNoEos}, view, out).path == std::vector<node_t>{0, 3});
  // top-1: only the argmax (token 0), which no node carries: nothing accepted
  v = verify({0.1f, 1, core::kNoEos}, view, out);
  CHECK(v.path == std::vector<node_t>{0});
  CHECK(v.next_token == 0);
}

TEST_CASE("conditional: a rejected node's children are not considered, the longest path wins",
          "[conditional]") {
  // every row: p = 0.5, 0.3, 0.15, 0.05
  const RowsOutput out{{log_of({0.5f, 0.3f, 0.15f, 0.05f})}};
  Laid laid;
  laid.tree.reset(0);
  const node_t a = laid.tree.add(0, 3);  // 1: rejected (0.05)
  const node_t b = laid.tree.add(0, 2);  // 2: accepted
  const node_t c = laid.tree.add(0, 1);  // 3: accepted
  laid.tree.add(a, 0);                   // 4: below a rejected node
  laid.tree.add(a, 0);                   // (a duplicate: the merge drops it, so 5 is next)
  laid.tree.add(c, 1);                   // 5: accepted (0.3), depth 2
  laid.tree.add(b, 3);                   // 6: rejected (0.05)
  const node_t e = laid.tree.add(c, 0);  // 7: accepted (0.5), depth 2
  laid.tree.add(e, 2);                   // 8: accepted (0.15), depth 3
  const TreeView view = laid.view();
  REQUIRE(view.size == 9);
  CHECK(verify({0.1f, 0, core::kNoEos}, view, out).path == std::vector<node_t>{0, 3, 7, 8});
  // delta 0.2: node 8 (0.15) goes; at depth 2 nodes 5 and 7 tie: the lower index wins
  CHECK(verify({0.2f, 0, core::kNoEos}, view, out).path == std::vector<node_t>{0, 3, 5});
}

TEST_CASE("conditional: ties between equally deep paths go to the lowest node index", "[conditional]") {
  const RowsOutput out{{log_of({0.4f, 0.4f, 0.2f})}};
  Laid laid;
  laid.tree.reset(0);
  const node_t a = laid.tree.add(0, 0);  // 1
  const node_t b = laid.tree.add(0, 1);  // 2
  laid.tree.add(b, 0);                   // 3: child of the later parent, lower index
  laid.tree.add(a, 1);                   // 4
  CHECK(verify({0.1f, 0, core::kNoEos}, laid.view(), out).path == std::vector<node_t>{0, 2, 3});
}

TEST_CASE("conditional with top-1 accepts only greedy tokens", "[conditional]") {
  std::mt19937_64 rng(5);
  HashTarget target(24, 3, 4.0f);
  const std::vector<token_t> prompt = {1, 2, 3};
  DraftTree tree;
  TreeMerger merger;
  Verdict exact, conditional;
  std::size_t longest = 0;
  for (int round = 0; round < 300; ++round) {
    target.prefill(std::span<const token_t>(prompt).first(2));
    const auto greedy = target.generate(prompt, 6);
    const auto random = specdec::testing::random_tree(rng, 1 + static_cast<int>(rng() % 20), 24);
    tree.reset(3);
    node_t node = 0;
    for (int k = 0; k < static_cast<int>(rng() % 6); ++k) node = tree.add(node, greedy[k]);
    for (std::size_t i = 1; i < random.parent.size(); ++i)
      tree.add(static_cast<node_t>(random.parent[i] % tree.size()), random.token[i]);
    const DraftTree* one[] = {&tree};
    merger.merge(one, 64, 16);
    TreeView view = merger.view();
    view.base_position = 2;
    const auto& out = target.forward(view);
    ExactVerifier{}.verify(view, out, exact);
    ConditionalVerifier({0.0f, 1, core::kNoEos}).verify(view, out, conditional);
    REQUIRE(conditional.path == exact.path);
    REQUIRE(conditional.next_token == exact.next_token);
    // delta near 1: only near-certain greedy tokens, so a prefix of the greedy path
    ConditionalVerifier({0.999f, 1, core::kNoEos}).verify(view, out, conditional);
    REQUIRE(conditional.path.size() <= exact.path.size());
    REQUIRE(std::equal(conditional.path.begin(), conditional.path.end(), exact.path.begin()));
    longest = std::max(longest, exact.path.size());
  }
  CHECK(longest >= 4);
}

TEST_CASE("conditional: the EOS token is required, never silently off", "[conditional][errors]") {
  static_assert(!std::is_default_constructible_v<ConditionalVerifier>);
  CHECK_THROWS_WITH(ConditionalVerifier({0.1f, 5}),
                    "ConditionalVerifier: the EOS token is required (CASD accepts x only when p(x) > p(eos)): set "
                    "ConditionalParams::eos to the target's, or to core::kNoEos for a target without one");
  CHECK_THROWS_WITH(ConditionalVerifier(ConditionalParams{}), Catch::Contains("the EOS token is required"));
  CHECK_THROWS_WITH(ConditionalVerifier({0.1f, 0, -3}), Catch::Contains("eos -3"));
  CHECK_NOTHROW(ConditionalVerifier({0.1f, 5, 2}));
  CHECK_NOTHROW(ConditionalVerifier({0.1f, 5, core::kNoEos}));
}

TEST_CASE("conditional: bad parameters and rows are clear errors", "[conditional][errors]") {
  CHECK_THROWS_WITH(ConditionalVerifier({1.5f, 0, core::kNoEos}), Catch::Contains("delta 1.5"));
  CHECK_THROWS_WITH(ConditionalVerifier({0.1f, -2, core::kNoEos}), Catch::Contains("top_k -2"));
  Laid laid;
  laid.tree.reset(0);
  laid.tree.add(0, 1);
  const TreeView view = laid.view();
  Verdict verdict;
  ConditionalVerifier eos_outside({0.1f, 0, 7});
  CHECK_THROWS_WITH(eos_outside.verify(view, RowsOutput{{{0.0f, 1.0f}}}, verdict), Catch::Contains("eos token 7"));
  ConditionalVerifier verifier({0.1f, 0, core::kNoEos});
  CHECK_THROWS_WITH(verifier.verify(view, RowsOutput{{{0.0f, std::nanf("")}}}, verdict), Catch::Contains("NaN"));
}

TEST_CASE("conditional in the decoder: tau does not fall as delta falls", "[conditional][decoder]") {
  HashTarget target(32, 4, 1.0f);  // flat rows: many tokens are plausible
  const std::vector<token_t> prompt = {1, 2, 3};
  std::vector<double> taus;
  for (float delta : {0.1f, 0.03f, 0.01f}) {
    // a drafter that always proposes the same 4-token chain: accepted only when plausible
    struct Repeat {
      void begin(std::span<const token_t>) {}
      void observe(std::span<const token_t>) {}
      void propose(const DraftContext&, DraftTree& tree) {
        const token_t chain[] = {5, 6, 7, 8};
        tree.add_chain(0, chain);
      }
    };
    SpeculativeDecoder<HashTarget, Repeat, ConditionalVerifier> decoder(target, Repeat{},
                                                                        ConditionalVerifier({delta, 0, core::kNoEos}));
    decoder.prefill(prompt);
    decoder.generate(300);
    taus.push_back(decoder.stats().tau());
  }
  CHECK(taus[0] <= taus[1]);
  CHECK(taus[1] <= taus[2]);
  CHECK(taus[2] > 1.0);
}
