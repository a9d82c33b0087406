// The step engine's shared pieces (include/specdec/step/): the bounds of a tree on a target's
// positions and the automatic budget's controller that SpeculativeDecoder (one sequence) and
// SpeculativeBatch (many) both size their steps with.
#include <catch2/catch.hpp>

#include <climits>
#include <numeric>
#include <vector>

#include <specdec/step/budget.hpp>

using namespace specdec;
using namespace specdec::detail;

namespace {

struct LinearCost {
  double base, per_node;
  double step_seconds(int nodes, int /*context*/) const { return base + per_node * nodes; }
};

// The merged ranking of one drafter's chain below root 0 (tokens 1, 2, ...), ranked by the
// chain's scores (no acceptance model: a node's priority is the least score on its path).
TreeMerger ranking_of(const std::vector<float>& scores) {
  DraftTree tree;
  tree.reset(0);
  node_t at = 0;
  for (std::size_t i = 0; i < scores.size(); ++i) at = tree.add(at, static_cast<token_t>(i + 1), scores[i]);
  TreeMerger merger;
  const DraftTree* one[] = {&tree};
  const int n = static_cast<int>(scores.size());
  merger.rank(one, n, n);
  return merger;
}

std::vector<double> priorities(const TreeMerger& m) {
  std::vector<double> p(static_cast<std::size_t>(m.ranked()));
  for (int i = 0; i < m.ranked(); ++i) p[static_cast<std::size_t>(i)] = m.ranked_priority(i);
  return p;
}

}  // namespace

TEST_CASE("tree_bounds: a backend target must hold every node, a host target only the depth", "[step]") {
  CHECK(tree_bounds<true>(64, 10).nodes == 10);
  CHECK(tree_bounds<true>(64, 10).depth == 10);
  CHECK(tree_bounds<false>(64, 10).nodes == 64);
  CHECK(tree_bounds<false>(64, 10).depth == 10);
  CHECK(tree_bounds<true>(8, 100).nodes == 8);
  CHECK(tree_bounds<false>(8, -1).depth == 0);  // no room: the root alone
  CHECK(tree_bounds<true>(INT_MAX, INT_MAX).nodes == INT_MAX);
}

TEST_CASE("StepBudget with one sequence sizes its tree as choose_draft_size does", "[step][budget]") {
  const LinearCost cost{10e-6, 2e-6};
  StepBudget budget(cost, /*measured_pause=*/false);
  const TreeMerger ranking = ranking_of({0.9f, 0.8f, 0.5f, 0.2f, 0.05f});
  SequenceBudget s;
  s.ranked = true;
  s.draft_seconds = 3e-6;
  s.budget = 8;
  budget.begin();
  budget.join(s, &ranking, 100);
  const DraftSizeChoice got = budget.size();
  const std::vector<double> p = priorities(ranking);
  const DraftSizeChoice want = choose_draft_size(p, cost, 100, 3e-6);
  REQUIRE(want.nodes == 3);  // the case is not trivial: neither none nor all
  CHECK(got.nodes == want.nodes);
  CHECK(got.expected_tokens == want.expected_tokens);
  CHECK(got.seconds == want.seconds);
  CHECK(s.nodes == want.nodes);
  CHECK(s.tokens == Approx(std::accumulate(p.begin(), p.begin() + want.nodes, 0.0)));
}

TEST_CASE("StepBudget shares one step's nodes out by probability across the sequences", "[step][budget]") {
  const LinearCost cost{10e-6, 1e-6};
  StepBudget budget(cost, false);
  const TreeMerger a = ranking_of({0.9f, 0.2f});
  const TreeMerger b = ranking_of({0.8f, 0.7f});
  SequenceBudget sa, sb, sc;
  sa.ranked = sb.ranked = true;
  sa.draft_seconds = sb.draft_seconds = 1e-6;
  sc.nodes = 5;  // left from an earlier step: a sequence that sends its root alone gets none
  budget.begin();
  budget.join(sa, &a, 10);
  budget.join(sb, &b, 20);
  budget.join(sc, nullptr, 30);
  const DraftSizeChoice choice = budget.size();
  // Three roots, the nodes 0.9 (a), 0.8, 0.7 (b), 0.2 (a): the fourth does not pay.
  const DraftSizeChoice want = choose_draft_size(std::vector<double>{0.9f, 0.8f, 0.7f, 0.2f}, cost, 20, 2e-6, INT_MAX, 3);
  REQUIRE(want.nodes == 3);
  CHECK(choice.nodes == 3);
  CHECK(choice.expected_tokens == Approx(want.expected_tokens));
  CHECK(sa.nodes == 1);
  CHECK(sb.nodes == 2);
  CHECK(sc.nodes == 0);
  CHECK(sa.tokens == Approx(0.9f));
  CHECK(sb.tokens == Approx(0.8f + 0.7f));
}

TEST_CASE("StepBudget's gain of one sequence is the single-sequence gain: (1 + P) plain steps - the step", "[step][budget]") {
  // A sequence drafts every step it is asked; its drafting costs 5, 80, then 5 us again. The
  // controller's pause must decide as a DraftingPause told the single-sequence (modelled) gain
  // (1 + P) x cost(1) - cost(1 + k) - drafting.
  const LinearCost cost{20e-6, 2e-6};
  StepBudget budget(cost, false);
  SequenceBudget s;
  s.budget = 16;
  DraftingPause mirror;
  const TreeMerger ranking = ranking_of({0.6f, 0.5f, 0.3f, 0.1f});
  int paused = 0;
  for (int step = 0; step < 60; ++step) {
    const bool skipped = s.pause.skip_step();
    REQUIRE(skipped == mirror.skip_step());
    if (skipped) {
      ++paused;
      continue;
    }
    s.ranked = true;
    s.draft_seconds = step < 20 || step >= 40 ? 5e-6 : 80e-6;
    budget.begin();
    budget.join(s, &ranking, 50);
    budget.size();
    budget.weigh(1.0);  // modelled: the measured step's time plays no part
    const double plain = cost.step_seconds(1, 50);
    const double gain = (1 + s.tokens) * plain - cost.step_seconds(1 + s.nodes, 50) - s.draft_seconds;
    mirror.drafted(s.nodes, gain, s.draft_seconds, plain, DraftingPause::most_tokens_at(s.budget));
    REQUIRE(s.pause.remaining() == mirror.remaining());
    REQUIRE(s.pause.ask_nodes(s.budget) == mirror.ask_nodes(s.budget));
  }
  CHECK(paused > 0);  // the costly stretch paused the drafters
}
