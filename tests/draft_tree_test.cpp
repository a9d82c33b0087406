#include <catch2/catch.hpp>

#include <vector>

#include <specdec/tree_merger.hpp>

using namespace specdec;

namespace {

TreeMerger merged(std::vector<const DraftTree*> trees, int budget, int max_depth = 1000) {
  TreeMerger m;
  m.merge(trees, budget, max_depth);
  return m;
}

}  // namespace

TEST_CASE("DraftTree::add checks its parent and score", "[draft_tree]") {
  DraftTree t;
  t.reset(7);
  CHECK(t.size() == 1);
  CHECK(t.root_token() == 7);
  const node_t a = t.add(0, 3);
  CHECK(a == 1);
  CHECK_THROWS_WITH(t.add(5, 1), Catch::Contains("parent 5 does not exist"));
  CHECK_THROWS_WITH(t.add(-1, 1), Catch::Contains("parent -1 does not exist"));
  CHECK_THROWS_WITH(t.add(0, 1, NAN), Catch::Contains("NaN"));
  CHECK(t.find_child(0, 3) == 1);
  CHECK(t.find_child(0, 4) == -1);
  const node_t last = t.add_chain(a, std::vector<token_t>{4, 5}, 0.5f, 0.5f);
  CHECK(last == 3);
  CHECK(t.score(3) == 0.25f);
}

TEST_CASE("merge dedups by (parent, token) and records sources", "[draft_tree][merge]") {
  DraftTree a, b;
  a.reset(1);
  b.reset(1);
  // a: 1 -> 2 -> 3 ; 1 -> 4
  a.add_chain(0, std::vector<token_t>{2, 3});
  a.add(0, 4, 0.5f);
  // b: 1 -> 2 -> 5 ; 1 -> 2 (duplicate inside b too)
  const node_t b2 = b.add(0, 2, 0.9f);
  b.add(b2, 5, 0.8f);
  b.add(0, 2, 0.3f);
  const TreeMerger m = merged({&a, &b}, 100);
  const DraftTree& t = m.tree();
  REQUIRE(t.size() == 5);  // root, 2, 3, 4, 5
  CHECK(std::vector<node_t>(t.parents().begin(), t.parents().end()) == std::vector<node_t>{-1, 0, 1, 0, 1});
  CHECK(std::vector<token_t>(t.tokens().begin(), t.tokens().end()) == std::vector<token_t>{1, 2, 3, 4, 5});
  CHECK(t.source(0) == 0b11);
  CHECK(t.source(1) == 0b11);
  CHECK(t.source(2) == 0b01);
  CHECK(t.source(3) == 0b01);
  CHECK(t.source(4) == 0b10);
  CHECK(t.score(1) == 1.0f);  // the highest proposed
}

TEST_CASE("merge keeps the budget by path priority, connected and deterministic", "[draft_tree][merge]") {
  DraftTree a;
  a.reset(0);
  const node_t x = a.add(0, 10, 0.9f);
  a.add(x, 11, 0.95f);            // priority min(0.95, 0.9) = 0.9: ties with x, after it
  const node_t y = a.add(0, 20, 0.5f);
  a.add(y, 21, 0.99f);            // priority 0.5: cannot outrank its parent
  a.add(0, 30, 0.9f);             // ties with x; later in merge order
  SECTION("budget 2 keeps the first two of the 0.9 tie, in merge order") {
    const TreeMerger m_t = merged({&a}, 2);
    const DraftTree& t = m_t.tree();
    CHECK(std::vector<token_t>(t.tokens().begin(), t.tokens().end()) == std::vector<token_t>{0, 10, 11});
  }
  SECTION("budget 3 adds the other 0.9 node") {
    const TreeMerger m_t = merged({&a}, 3);
    const DraftTree& t = m_t.tree();
    CHECK(std::vector<token_t>(t.tokens().begin(), t.tokens().end()) == std::vector<token_t>{0, 10, 11, 30});
  }
  SECTION("budget 4: a child with a higher score still follows its parent") {
    const TreeMerger m_t = merged({&a}, 4);
    const DraftTree& t = m_t.tree();
    CHECK(std::vector<token_t>(t.tokens().begin(), t.tokens().end()) == std::vector<token_t>{0, 10, 11, 20, 30});
    const TreeMerger m_t5 = merged({&a}, 5);
    const DraftTree& t5 = m_t5.tree();
    CHECK(std::vector<node_t>(t5.parents().begin(), t5.parents().end()) == std::vector<node_t>{-1, 0, 1, 0, 3, 0});
  }
  SECTION("budget 0 leaves the root") { const TreeMerger m0 = merged({&a}, 0);
    CHECK(m0.tree().size() == 1); }
  SECTION("max_depth drops deeper nodes") {
    const TreeMerger m_t = merged({&a}, 10, 1);
    const DraftTree& t = m_t.tree();
    CHECK(std::vector<token_t>(t.tokens().begin(), t.tokens().end()) == std::vector<token_t>{0, 10, 20, 30});
  }
}

TEST_CASE("merge lays the tree out for the target", "[draft_tree][merge]") {
  DraftTree a;
  a.reset(3);
  a.add_chain(0, std::vector<token_t>{4, 5, 6});
  a.add(1, 9);
  const TreeMerger m = merged({&a}, 64);
  const TreeView v = m.view();
  REQUIRE(v.size == 5);
  CHECK(v.max_depth == 3);
  CHECK(v.words_per_row == 1);
  CHECK(v.depth[4] == 2);
  CHECK(v.attends(3, 1));
  CHECK_FALSE(v.attends(4, 2));
  CHECK(v.first_child[1] == 2);
  CHECK(v.next_sibling[2] == 4);
}

TEST_CASE("merge rejects bad input", "[draft_tree][merge]") {
  DraftTree a, b;
  a.reset(1);
  b.reset(2);
  TreeMerger m;
  std::vector<const DraftTree*> both{&a, &b};
  CHECK_THROWS_WITH(m.merge(both, 4, 4), Catch::Contains("tree 1 has root token 2"));
  std::vector<const DraftTree*> one{&a};
  CHECK_THROWS_WITH(m.merge(one, -1, 4), Catch::Contains("budget must be >= 0, got -1"));
  CHECK_THROWS_WITH(m.merge({}, 4, 4), Catch::Contains("no trees"));
}

TEST_CASE("check_tree names the author and the bad node", "[draft_tree]") {
  DraftTree t;
  t.reset(1);
  t.add(0, 70);
  CHECK_THROWS_WITH(check_tree(t, 64, "drafter 0 (x)"),
                    Catch::Contains("drafter 0 (x)") && Catch::Contains("node 1") && Catch::Contains("token 70"));
  CHECK_NOTHROW(check_tree(t, 71, "ok"));
}

TEST_CASE("merge refuses more trees than source bits", "[draft_tree][merge]") {
  std::vector<DraftTree> trees(33);
  std::vector<const DraftTree*> ptrs;
  for (auto& t : trees) ptrs.push_back(&t);
  TreeMerger m;
  CHECK_THROWS_WITH(m.merge(ptrs, 4, 4), Catch::Contains("33 trees"));
  ptrs.pop_back();
  CHECK_NOTHROW(m.merge(ptrs, 4, 4));
  CHECK(m.tree().source(0) == 0xffffffffu);
}

TEST_CASE("add_sampled adds the distinct draws and keeps q and every draw", "[draft_tree][distributions]") {
  DraftTree t;
  t.reset(0);
  const std::vector<float> q = {0.1f, 0.6f, 0.3f};
  const token_t draws[] = {1, 2, 1};
  t.add_sampled(0, q, draws);
  REQUIRE(t.size() == 3);  // two distinct children
  CHECK(t.token(1) == 1);
  CHECK(t.score(1) == Approx(0.6f));
  CHECK(t.token(2) == 2);
  REQUIRE(t.distributions() == 1);
  CHECK(t.distribution_parent(0) == 0);
  CHECK(std::vector<token_t>(t.distribution_draws(0).begin(), t.distribution_draws(0).end()) ==
        std::vector<token_t>{1, 2, 1});
  CHECK(t.distribution_q(0)[1] == 0.6f);
  const token_t below[] = {0};
  t.add_sampled(1, q, below);
  CHECK(t.score(3) == Approx(0.06f));  // parent's score times q
  CHECK_THROWS_WITH(t.add_sampled(9, q, below), Catch::Contains("parent 9"));
  CHECK_THROWS_WITH(t.add_sampled(0, std::vector<float>{0.5f, 0.4f, 0.3f}, below), Catch::Contains("sums to"));
  CHECK_THROWS_WITH(t.add_sampled(0, std::vector<float>{1.0f, 0.0f, 0.0f}, draws), Catch::Contains("support"));
  CHECK_THROWS_WITH(t.add_sampled(0, std::vector<float>{0.5f, 0.5f}, below), Catch::Contains("earlier rows had 3"));
  CHECK_THROWS_WITH(t.add_sampled(0, std::vector<float>{1.5f, -0.5f, 0.0f}, below), Catch::Contains("not a probability"));
  t.reset(0);
  CHECK(t.distributions() == 0);
}

TEST_CASE("draft distributions survive the merge and the budget", "[draft_tree][merge][distributions]") {
  const std::vector<float> q = {0.25f, 0.25f, 0.25f, 0.25f};
  DraftTree plain, sampled;
  plain.reset(0);
  plain.add(0, 3, 0.9f);  // merged node 1
  sampled.reset(0);
  const token_t root_draws[] = {2, 3, 2};
  sampled.add_sampled(0, q, root_draws);  // node 3 (score .25) dedups with plain's; node 2 new
  const token_t deep_draws[] = {1};
  sampled.add_sampled(sampled.find_child(0, 2), q, deep_draws);  // below token 2: score .0625
  const DraftTree* trees[] = {&plain, &sampled};

  SECTION("everything kept") {
    const auto m = merged({trees[0], trees[1]}, 10);
    const TreeView v = m.view();
    REQUIRE(v.size == 4);
    REQUIRE(v.proposals == 2);
    CHECK(v.proposal_node[0] == 0);
    CHECK(v.first_proposal[0] == 0);
    CHECK(v.next_proposal[0] == -1);
    const node_t two = m.tree().find_child(0, 2);
    CHECK(v.first_proposal[two] == 1);
    CHECK(v.draw_begin[0] == 0);
    CHECK(v.draw_begin[1] == 3);
    CHECK(v.draw_begin[2] == 4);
    CHECK(v.draw_token[2] == 2);
    CHECK(v.draw_node[0] == two);
    CHECK(v.draw_node[1] == 1);  // the draw of 3 is the node plain proposed
    CHECK(v.draw_node[3] == m.tree().find_child(two, 1));
    CHECK(v.proposal_q[4 + 1] == 0.25f);
  }
  SECTION("budget 2 cuts the deepest node: its draw stays, pointing nowhere") {
    const auto m = merged({trees[0], trees[1]}, 2);
    const TreeView v = m.view();
    REQUIRE(v.size == 3);
    REQUIRE(v.proposals == 2);
    CHECK(v.draw_node[3] == -1);
  }
  SECTION("budget 1 cuts token 2: the distribution below it goes, the root's draws stay") {
    const auto m = merged({trees[0], trees[1]}, 1);
    const TreeView v = m.view();
    REQUIRE(v.size == 2);
    REQUIRE(v.proposals == 1);
    CHECK(v.draw_begin[1] == 3);
    CHECK(v.draw_node[0] == -1);
    CHECK(v.draw_node[1] == 1);
  }
  SECTION("max depth 0 drops every node and every distribution below them") {
    const auto m = merged({trees[0], trees[1]}, 10, 0);
    const TreeView v = m.view();
    CHECK(v.size == 1);
    REQUIRE(v.proposals == 1);  // the root's draws are still verifiable: each would be the next token
    CHECK(v.draw_node[0] == -1);
  }
  SECTION("no distributions: the view has none") {
    const auto m = merged({trees[0]}, 10);
    CHECK(m.view().proposals == 0);
    CHECK(m.view().first_proposal == nullptr);
    CHECK(m.view().proposal_of(0) == -1);
  }
}

TEST_CASE("a calibrated rank orders nodes by estimated path probability across drafters", "[draft_tree]") {
  DraftTree a, b;
  a.reset(1);
  const node_t a1 = a.add(0, 10, 0.95f);  // scores away from the buckets' edges (tenths)
  a.add(a1, 11, 0.95f * 0.95f);
  b.reset(1);
  b.add(0, 20, 0.5f);
  std::vector<const DraftTree*> trees{&a, &b};
  AcceptanceModel model(2, {.buckets = 10, .depths = 4, .prior_strength = 1.0});
  for (int i = 0; i < 99; ++i) model.record(0, 1, 0.95, false);  // drafter 0 over-claims at depth 1

  TreeMerger by_score;
  by_score.rank(trees, 3, 10);
  REQUIRE(by_score.ranked() == 3);
  CHECK(by_score.ranked_priority(0) == Approx(0.95));  // a1, then a2 (0.9025), then b1 (0.5)
  CHECK(by_score.ranked_priority(2) == Approx(0.5));

  TreeMerger calibrated;
  calibrated.rank(trees, 3, 10, &model);
  CHECK(calibrated.ranked_priority(0) == Approx(0.55));                 // b1: drafter 1's prior (bucket 5)
  CHECK(calibrated.ranked_priority(1) == Approx(0.95 / 100));           // a1: 0.95 prior, 0 of 99 accepted
  CHECK(calibrated.ranked_priority(2) == Approx(0.95 / 100 * 0.95));    // a2: conditional 0.95 at depth 2
  calibrated.keep(1);
  REQUIRE(calibrated.tree().size() == 2);
  CHECK(calibrated.tree().token(1) == 20);
  CHECK_THROWS_WITH(calibrated.keep(4), Catch::Contains("4 nodes, but 3 were ranked"));

  // The target accepted b1: the root's kept children were tested, b1 accepted.
  calibrated.keep(3);
  const node_t b1 = calibrated.tree().token(1) == 20 ? 1 : calibrated.tree().find_child(0, 20);
  const std::vector<node_t> accepted{0, b1};
  calibrated.record_verdict(model, accepted);
  CHECK(model.tested(1, 1, 5) == 1);
  CHECK(model.accepted(1, 1, 5) == 1);
  CHECK(model.tested(0, 1, 9) == 100);  // a1 rejected once more
  CHECK(model.accepted(0, 1, 9) == 0);
  CHECK(model.tested(0, 2, 9) == 0);    // a2's parent was rejected: not tested

  AcceptanceModel small(1);
  CHECK_THROWS_WITH(calibrated.rank(trees, 3, 10, &small), Catch::Contains("knows 1 drafters, but 2 trees"));
}
