#include <catch2/catch.hpp>

#include <vector>

#include <specdec/tree_merger.hpp>
#include <specdec/testing/hash_target.hpp>
#include <specdec/testing/target_conformance.hpp>

using namespace specdec;

TEST_CASE("HashTarget: a tree forward agrees with each node's path run alone", "[targets]") {
  HashTarget target(40, 2);
  const std::vector<token_t> prompt{3, 1, 4, 1, 5};
  DraftTree t;
  t.reset(9);
  const node_t a = t.add(0, 2);
  t.add(a, 6);
  t.add(0, 5);
  TreeMerger m;
  std::vector<const DraftTree*> trees{&t};
  m.merge(trees, 10, 10);
  TreeView view = m.view();
  target.prefill(prompt);
  view.base_position = target.cached();
  const auto& out = target.forward(view);
  for (int i = 0; i < view.size; ++i) {
    std::vector<token_t> path;
    for (int k = i; k >= 0; k = view.parent[k]) path.insert(path.begin(), view.token[k]);
    std::vector<token_t> seq = prompt;
    seq.insert(seq.end(), path.begin(), path.end());
    CHECK(out.argmax(i) == target.generate(seq, 1)[0]);
  }
}

TEST_CASE("HashTarget: wrong positions and bad tokens are refused", "[targets][errors]") {
  HashTarget target(40, 2);
  CHECK_THROWS_WITH(HashTarget(1), Catch::Contains("vocab_size must be >= 2"));
  CHECK_THROWS_WITH(target.prefill(std::vector<token_t>{1, 40}), Catch::Contains("token 40 outside"));
  target.prefill(std::vector<token_t>{1, 2});
  DraftTree t;
  t.reset(3);
  TreeMerger m;
  std::vector<const DraftTree*> trees{&t};
  m.merge(trees, 0, 0);
  TreeView view = m.view();
  view.base_position = 5;
  CHECK_THROWS_WITH(target.forward(view), Catch::Contains("starts at position 5 but the cache holds 2"));
}

// [conformance]
TEST_CASE("HashTarget passes the target conformance kit", "[targets][conformance]") {
  for (int vocab : {2, 64, 1000}) {
    HashTarget target(vocab, /*seed=*/3);
    const testing::ConformanceReport report = testing::check_target(target, {.prompts = 4, .tree_nodes = 24});
    INFO("vocab " << vocab << ": " << report.str());  // what failed, one sentence each
    CHECK(report.ok());
  }
}
// [conformance]
