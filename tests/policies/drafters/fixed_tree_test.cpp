#include <catch2/catch.hpp>

#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/fixed_tree.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

using namespace specdec;

TEST_CASE("fixed tree: nodes outside the vocabulary are left out with their subtrees", "[fixed_tree]") {
  // Node 1 (token 40) is outside a 30-token vocabulary: its child (node 2) goes with it; node 3
  // and its child stay, re-parented to their new ids.
  FixedTreeDrafter d({0, 1, 0, 3}, {40, 5, 7, 8});
  const std::vector<token_t> context{1, 2};
  DraftTree tree;
  tree.reset(2);
  d.propose(DraftContext{context, 2, 64, 64, /*vocab_size=*/30}, tree);
  REQUIRE(tree.size() == 3);
  CHECK(tree.token(1) == 7);
  CHECK(tree.token(2) == 8);
  CHECK(tree.parent(2) == 1);
  tree.reset(2);
  d.propose(DraftContext{context, 2, 64, 64, /*vocab_size=*/41}, tree);
  CHECK(tree.size() == 5);
}

TEST_CASE("fixed tree: the frequent-token tree on a 30-token vocabulary decodes (token id outside the vocabulary)",
          "[fixed_tree][lossless]") {
  // Issue 20: specbench's `frequent` drafter (Llama token ids up to 29892) with a 30-token
  // SentencePiece model ended in "internal error: ... token id outside the vocabulary".
  HashTarget target(/*vocab_size=*/30, /*seed=*/4);
  SpeculativeDecoder<HashTarget, FixedTreeDrafter, ExactVerifier> dec(
      target, FixedTreeDrafter(std::vector<node_t>(8, 0), {13, 29892, 29889, 278, 322, 310, 304, 263}), ExactVerifier{});
  const std::vector<token_t> prompt{3, 1, 4};
  dec.prefill(prompt);
  CHECK(dec.generate(40) == target.generate(prompt, 40));
  CHECK(dec.stats().drafted_nodes > 0);  // token 13, the one inside the vocabulary, is drafted
}
