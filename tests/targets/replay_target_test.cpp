#include <catch2/catch.hpp>

#include <array>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/tree_merger.hpp>
#include <specdec/policies/drafters/empty.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/targets/replay_target.hpp>

using namespace specdec;

namespace {

constexpr int kVocab = 40;
constexpr token_t kStop = 2;

/// A prompt of `prompt_length` tokens and an answer of `answer_length` tokens, none of them the
/// stop token, then the stop token.
std::vector<token_t> make_reference(int prompt_length, int answer_length, unsigned seed) {
  std::vector<token_t> r;
  unsigned x = seed;
  for (int i = 0; i < prompt_length + answer_length; ++i) {
    x = x * 1103515245u + 12345u;
    r.push_back(static_cast<token_t>(3 + (x >> 16) % (kVocab - 3)));
  }
  r.push_back(kStop);
  return r;
}

/// Lays out `tree` for a target whose cache holds `cached` tokens.
TreeView lay_out(TreeMerger& merger, const DraftTree& tree, int cached) {
  const std::array<const DraftTree*, 1> trees{&tree};
  merger.merge(trees, 64, 64);
  TreeView view = merger.view();
  view.base_position = cached;
  return view;
}

}  // namespace

TEST_CASE("ReplayTarget accepts the recorded token and rejects a wrong one", "[replay_target]") {
  const std::vector<token_t> reference{5, 6, 7, 8, 9, kStop};
  ReplayTarget target(reference, kVocab, kStop);
  target.prefill(std::span(reference).first(2));  // root: token 7 at position 2

  DraftTree tree;
  tree.reset(7);
  const node_t right = tree.add(0, 8);
  const node_t wrong = tree.add(0, 11);
  tree.add(right, 9);
  tree.add(wrong, 9);
  TreeMerger merger;
  const TreeView view = lay_out(merger, tree, 2);
  const auto& out = target.forward(view);

  CHECK(out.argmax(0) == 8);
  CHECK(out.argmax(right) == 9);
  CHECK(out.argmax(3) == kStop);  // below `right`: 9 agrees, the stop token follows
  // Below the wrong token the recorded model never ran: the argmax must differ from the recorded
  // token so that the exact verifier accepts nothing there.
  CHECK(out.argmax(wrong) != 9);
  CHECK(out.argmax(4) != kStop);

  SECTION("a path through the wrong token is refused") {
    const std::vector<node_t> path{0, wrong};
    CHECK_THROWS_WITH(target.commit(path), Catch::Contains("not on the recorded sequence") &&
                                               Catch::Contains("expected token 8"));
  }
  SECTION("the recorded path is committed") {
    const std::vector<node_t> path{0, right, 3};
    target.commit(path);
    CHECK(target.cached() == 5);
  }
  SECTION("a path that is not a chain of the tree is refused") {
    const std::vector<node_t> path{0, 3};
    CHECK_THROWS_WITH(target.commit(path), Catch::Contains("not a child of the previous entry"));
  }
}

TEST_CASE("ReplayTarget repeats the stop token past the end of the reference", "[replay_target]") {
  const std::vector<token_t> reference{5, 6, kStop};
  ReplayTarget target(reference, kVocab, kStop);
  target.prefill(std::span(reference).first(2));  // root: the stop token, the last reference token
  DraftTree tree;
  tree.reset(kStop);
  tree.add(0, kStop);
  TreeMerger merger;
  const auto& out = target.forward(lay_out(merger, tree, 2));
  CHECK(out.argmax(0) == kStop);
  CHECK(out.argmax(1) == kStop);
}

TEST_CASE("replaying with the empty drafter gives tau 1 and the recorded tokens", "[replay_target]") {
  const int prompt_length = GENERATE(1, 7);
  const std::vector<token_t> reference = make_reference(prompt_length, 120, 11);
  const std::span<const token_t> prompt = std::span(reference).first(static_cast<std::size_t>(prompt_length));
  const std::vector<token_t> recorded(reference.begin() + prompt_length, reference.end());

  ReplayTarget target(reference, kVocab, kStop);
  SpeculativeDecoder<ReplayTarget, EmptyDrafter, ExactVerifier> decoder(target);
  decoder.prefill(prompt);
  const std::array<token_t, 1> stop{kStop};
  const std::vector<token_t> out = decoder.generate(1000, stop);

  CHECK(out == recorded);
  CHECK(decoder.stats().steps == static_cast<std::int64_t>(recorded.size()));
  CHECK(decoder.stats().tau() == 1.0);
}

TEST_CASE("replaying with oracle drafts gives the recorded tokens", "[replay_target]") {
  const int depth = GENERATE(1, 4, 12);
  const double error_rate = GENERATE(0.0, 0.3, 1.0);
  const int width = GENERATE(1, 3);
  const std::vector<token_t> reference = make_reference(9, 200, 5);
  const std::span<const token_t> prompt = std::span(reference).first(9);
  const std::vector<token_t> recorded(reference.begin() + 9, reference.end());

  ReplayTarget target(reference, kVocab, kStop);
  SpeculativeDecoder<ReplayTarget, OracleDrafter, ExactVerifier> decoder(
      target, DecoderOptions{.budget = 32}, OracleDrafter(reference, depth, error_rate, width), ExactVerifier{});
  decoder.prefill(prompt);
  const std::array<token_t, 1> stop{kStop};
  CAPTURE(depth, error_rate, width);
  CHECK(decoder.generate(1000, stop) == recorded);
  if (error_rate == 0.0) {
    // Every drafted chain is accepted whole: depth + 1 tokens per call until the end.
    CHECK(decoder.stats().steps == static_cast<std::int64_t>((recorded.size() + depth) / (depth + 1)));
  }
  if (error_rate == 1.0) CHECK(decoder.stats().tau() == 1.0);
}

TEST_CASE("ReplayTarget rejects bad inputs", "[replay_target]") {
  CHECK_THROWS_WITH(ReplayTarget({1, 2}, 1, 0), Catch::Contains("vocab_size must be >= 2, got 1"));
  CHECK_THROWS_WITH(ReplayTarget({}, kVocab, kStop), Catch::Contains("reference sequence is empty"));
  CHECK_THROWS_WITH(ReplayTarget({1, kVocab}, kVocab, kStop),
                    Catch::Contains("reference token 1 is 40, outside the vocabulary [0, 40)"));
  CHECK_THROWS_WITH(ReplayTarget({1, 2}, kVocab, -1), Catch::Contains("the stop token is -1"));

  const std::vector<token_t> reference{5, 6, 7, kStop};
  ReplayTarget target(reference, kVocab, kStop);
  DraftTree tree;
  tree.reset(6);
  TreeMerger merger;
  const TreeView view = lay_out(merger, tree, 1);
  CHECK_THROWS_WITH(target.forward(view), Catch::Contains("call prefill() first"));

  const std::vector<token_t> not_prefix{5, 9};
  CHECK_THROWS_WITH(target.prefill(not_prefix), Catch::Contains("prompt token 1 is 9, the reference has 6"));
  const std::vector<token_t> too_long{5, 6, 7, kStop, kStop};
  CHECK_THROWS_WITH(target.prefill(too_long), Catch::Contains("the prompt has 5 tokens, the reference only 4"));

  const std::vector<token_t> prompt{5};
  target.prefill(prompt);
  const std::vector<node_t> root{0};
  CHECK_THROWS_WITH(target.commit(root), Catch::Contains("no tree was forwarded"));
  TreeView shifted = view;
  shifted.base_position = 2;
  CHECK_THROWS_WITH(target.forward(shifted), Catch::Contains("tree starts at position 2 but the cache holds 1"));

  DraftTree bad;
  bad.reset(6);
  bad.add(0, kVocab + 3);
  TreeMerger bad_merger;
  CHECK_THROWS_WITH(target.forward(lay_out(bad_merger, bad, 1)),
                    Catch::Contains("token of node 1 is 43, outside the vocabulary"));

  target.forward(view);
  const std::vector<node_t> not_from_root{1};
  CHECK_THROWS_WITH(target.commit(not_from_root), Catch::Contains("must start at the root"));
  const std::vector<node_t> missing_node{0, 4};
  CHECK_THROWS_WITH(target.commit(missing_node), Catch::Contains("path entry 1 (node 4)"));
}
