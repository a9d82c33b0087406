#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include <specdec/draft_budget.hpp>

using namespace specdec;

namespace {

// A forward that costs `fixed` plus `per_node` per node (a memory-bound target has a large
// fixed part: reading the weights).
struct LinearCost {
  double fixed, per_node;
  double step_seconds(int nodes, int /*context*/) const { return fixed + per_node * nodes; }
};
static_assert(CostModel<LinearCost>);

struct BrokenCost {
  double step_seconds(int nodes, int) const { return nodes > 2 ? NAN : 1.0; }
};

// The best k by brute force: (1 + sum of the first k) / (cost(1 + k) + drafting).
int brute_force(const std::vector<double>& p, const LinearCost& cost, double drafting) {
  int best = 0;
  double best_rate = 1.0 / (cost.step_seconds(1, 0) + drafting), expected = 1.0;
  for (std::size_t k = 1; k <= p.size(); ++k) {
    expected += p[k - 1];
    const double rate = expected / (cost.step_seconds(static_cast<int>(k) + 1, 0) + drafting);
    if (rate > best_rate) best_rate = rate, best = static_cast<int>(k);
  }
  return best;
}

}  // namespace

TEST_CASE("choose_draft_size maximises expected tokens per second", "[draft_budget]") {
  const std::vector<double> p{0.9, 0.8, 0.6, 0.5, 0.3, 0.2, 0.1, 0.05, 0.01, 0.001};
  for (const LinearCost cost : {LinearCost{1.0, 0.01}, LinearCost{1.0, 0.2}, LinearCost{0.1, 0.1}, LinearCost{1.0, 5.0}}) {
    for (double drafting : {0.0, 0.05, 1.0}) {
      const DraftSizeChoice c = choose_draft_size(p, cost, 0, drafting);
      CHECK(c.nodes == brute_force(p, cost, drafting));
      double expected = 1.0;
      for (int k = 0; k < c.nodes; ++k) expected += p[static_cast<std::size_t>(k)];
      CHECK(c.expected_tokens == Approx(expected));
      CHECK(c.seconds == Approx(cost.step_seconds(c.nodes + 1, 0) + drafting));
    }
  }
  // Memory-bound: extra nodes nearly free, so every useful node goes.
  CHECK(choose_draft_size(p, LinearCost{1.0, 1e-4}, 0).nodes == 10);
  // Compute-bound: each node costs as much as a forward, nothing pays.
  CHECK(choose_draft_size(p, LinearCost{0.0, 1.0}, 0).nodes == 0);
  CHECK(choose_draft_size(p, LinearCost{1.0, 1e-4}, 0, 0.0, 3).nodes == 3);
  CHECK(choose_draft_size({}, LinearCost{1.0, 1.0}, 0).nodes == 0);
}

TEST_CASE("choose_draft_size refuses bad rankings and costs", "[draft_budget]") {
  const LinearCost cost{1.0, 0.1};
  CHECK_THROWS_WITH(choose_draft_size(std::vector<double>{0.5, 0.6}, cost, 0), Catch::Contains("ranked best first"));
  CHECK_THROWS_WITH(choose_draft_size(std::vector<double>{1.5}, cost, 0), Catch::Contains("not in [0, 1]"));
  CHECK_THROWS_WITH(choose_draft_size(std::vector<double>{NAN}, cost, 0), Catch::Contains("not in [0, 1]"));
  CHECK_THROWS_WITH(choose_draft_size(std::vector<double>{0.5, 0.4}, BrokenCost{}, 0),
                    Catch::Contains("forward of 3 nodes costs nan"));
  CHECK_THROWS_WITH(choose_draft_size(std::vector<double>{0.5}, cost, 0, -1.0), Catch::Contains("drafting time"));
}
