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

namespace {

// Steps `steps` times; each step that is not paused drafts `nodes` nodes with `gain` seconds.
// Returns the drafting steps.
int drafting_steps(DraftingPause& pause, int steps, int nodes, double gain) {
  int drafted = 0;
  for (int i = 0; i < steps; ++i) {
    if (pause.skip_step()) continue;
    pause.drafted(nodes, gain, 1e-6);
    ++drafted;
  }
  return drafted;
}

}  // namespace

TEST_CASE("DraftingPause drafts while drafting pays and pauses, doubling, while it does not", "[draft_budget]") {
  DraftingPause pays;
  CHECK(drafting_steps(pays, 1000, 3, 1e-3) == 1000);

  // Nodes are sent, but drafting costs more than they save: pauses of 1, 2, 4, ..., 32, 32, ...
  DraftingPause loses;
  const int drafted = drafting_steps(loses, 1000, 3, -1e-6);
  CHECK(drafted < 40);
  CHECK(drafted > 25);

  // Steps that find nothing lose their drafting time: each probe pauses 1, 2, 4, 8 steps.
  DraftingPause idle;
  std::vector<int> pauses;
  for (int probe = 0; probe < 4; ++probe) {
    idle.drafted(0, -1e-6, 1e-6);
    int paused = 0;
    while (idle.skip_step()) ++paused;
    pauses.push_back(paused);
  }
  CHECK(pauses == std::vector<int>{1, 2, 4, 8});
  idle.restart();  // a new sequence drafts at once
  CHECK_FALSE(idle.skip_step());

  // A cheap drafter whose finds pay goes on through a few steps that find nothing: finds worth
  // 1 s, one step in 10, against 10 us of drafting a step.
  DraftingPause cheap;
  int asked = 0;
  for (int i = 0; i < 1000; ++i) {
    if (cheap.skip_step()) continue;
    ++asked;
    const bool finds = i % 10 == 0;
    cheap.drafted(finds ? 3 : 0, finds ? 1.0 : -10e-6, 10e-6);
  }
  CHECK(asked == 1000);
}

TEST_CASE("DraftingPause: a probe restarts the mean, and paying steps shorten the next pause", "[draft_budget]") {
  DraftingPause pause;
  drafting_steps(pause, 500, 2, -1e-3);  // long pauses by now
  while (pause.skip_step()) {
  }
  pause.drafted(2, 1e-3, 1e-6);  // the probe pays: its gain alone is the mean
  CHECK_FALSE(pause.skip_step());
  for (int i = 0; i < 6; ++i) pause.drafted(2, 1e-3, 1e-6);  // each halves the next pause: 32 -> 1
  pause.drafted(0, -1e-2, 1e-6);  // a step that loses enough to turn the mean: pause
  int paused = 0;
  while (pause.skip_step()) ++paused;
  CHECK(paused == 1);

  // The mean weighs a step 1/8: a paying streak survives a few losing steps, not many.
  DraftingPause streak;
  for (int i = 0; i < 20; ++i) streak.drafted(2, 1e-3, 1e-6);
  streak.drafted(2, -2e-3, 1e-6);
  CHECK_FALSE(streak.skip_step());
  for (int i = 0; i < 10; ++i) streak.drafted(2, -2e-3, 1e-6);
  CHECK(streak.skip_step());
}

TEST_CASE("DraftingPause: a paying probe alone does not shorten the next pause", "[draft_budget]") {
  DraftingPause pause;
  CHECK(pause.probing());  // the first step
  for (int probe = 0; probe < 5; ++probe) {  // pauses 1, 2, 4, 8, 16
    pause.drafted(0, -1e-6, 1e-6);
    CHECK(pause.probing());
    while (pause.skip_step()) {
    }
  }
  pause.drafted(2, 1e-3, 1e-6);  // the probe pays
  CHECK_FALSE(pause.probing());
  CHECK_FALSE(pause.skip_step());
  pause.drafted(0, -1e-2, 1e-6);  // the next step turns the mean: the pause is the one learnt (32)
  int paused = 0;
  while (pause.skip_step()) ++paused;
  CHECK(paused == 32);
  pause.drafted(2, 1e-3, 1e-6);  // a probe, then a paying step: that one halves it
  pause.drafted(2, 1e-3, 1e-6);
  pause.drafted(0, -1e-1, 1e-6);
  paused = 0;
  while (pause.skip_step()) ++paused;
  CHECK(paused == 16);  // 32 (the longest) learnt by the last pause, halved once
  pause.restart();
  CHECK(pause.probing());  // a new sequence's first drafting step is a probe too
}

TEST_CASE("DraftingPause keeps the mean drafting time of drafting steps and refuses bad reports", "[draft_budget]") {
  DraftingPause pause;
  CHECK(pause.drafting_seconds() == 0.0);
  pause.drafted(1, 1.0, 8e-6);
  CHECK(pause.drafting_seconds() == 8e-6);
  pause.drafted(1, 1.0, 16e-6);
  CHECK(pause.drafting_seconds() == Approx(12e-6));  // the mean of the first steps
  for (int i = 0; i < 20; ++i) pause.drafted(1, 1.0, 8e-6);
  const double before = pause.drafting_seconds();
  pause.drafted(1, 1.0, 16e-6);
  CHECK(pause.drafting_seconds() == Approx(before + (16e-6 - before) / DraftingPause::window));  // then 1/8 each
  CHECK_THROWS_WITH(pause.drafted(-1, 1.0, 0.0), Catch::Contains("nodes must be >= 0"));
  CHECK_THROWS_WITH(pause.drafted(1, NAN, 0.0), Catch::Contains("gain must be finite"));
  CHECK_THROWS_WITH(pause.drafted(1, 1.0, -1.0), Catch::Contains("drafting time"));
  CHECK_THROWS_WITH(pause.drafted(1, 1.0, INFINITY), Catch::Contains("drafting time"));
  CHECK_THROWS_WITH(pause.drafted(1, 1.0, 0.0, -1.0), Catch::Contains("plain step time"));
  CHECK_THROWS_WITH(pause.drafted(1, 1.0, 0.0, NAN), Catch::Contains("plain step time"));
}

TEST_CASE("DraftingPause: one lucky probe buys a costly drafter a few steps, not a window's", "[draft_budget]") {
  // Drafting costs 2 us a step; the probe's find gains 5 us, the steps after it find nothing.
  DraftingPause pause;
  drafting_steps(pause, 200, 0, -2e-6);  // paused often by now
  while (pause.skip_step()) {
  }
  pause.drafted(1, 5e-6, 2e-6);
  int drafted = 1;
  while (!pause.skip_step()) {
    pause.drafted(0, -2e-6, 2e-6);
    ++drafted;
  }
  CHECK(drafted == 4);  // the probe and three steps: means 5, 1.5, 0.33, then (5 - 6) / 4 < 0: paused
}

TEST_CASE("DraftingPause: pauses grow past 32 steps while a probe costs a fair part of them", "[draft_budget]") {
  // A probe of 12 us next to 26 us plain steps (a tiny model): pauses double up to 512 steps,
  // where a probe is less than 0.1 % of them.
  DraftingPause costly;
  std::vector<int> pauses;
  for (int probe = 0; probe < 11; ++probe) {
    costly.drafted(0, -12e-6, 12e-6, 26e-6);
    int paused = 0;
    while (costly.skip_step()) ++paused;
    pauses.push_back(paused);
  }
  CHECK(pauses == std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 512});
  CHECK(costly.longest_pause(26e-6) == 512);
  // A probe that costs 300 plain steps (a dense search next to that model): up to the longest.
  DraftingPause search;
  search.drafted(0, -8e-3, 8e-3, 26e-6);
  CHECK(search.longest_pause(26e-6) == DraftingPause::longest_costly);
  // And, where a step can commit at most 65 tokens, it cannot pay at all: the longest pause at once.
  DraftingPause hopeless;
  hopeless.drafted(4, 26e-6, 8e-3, 26e-6, 65);
  int paused = 0;
  while (hopeless.skip_step()) ++paused;
  CHECK(paused == DraftingPause::longest_costly);
  CHECK(hopeless.probing());
  // 1.5 ms of drafting is less than 65 plain steps, but more than 32: a losing probe that costly
  // pauses the longest too.
  DraftingPause dear;
  dear.drafted(4, -1e-3, 1.5e-3, 26e-6, 65);
  paused = 0;
  while (dear.skip_step()) ++paused;
  CHECK(paused == DraftingPause::longest_costly);
  // 0.5 ms, less than 32 plain steps: it pauses 1 step, as any loss does; so does a dear step
  // that is not a probe.
  DraftingPause cheaper;
  cheaper.drafted(4, -1e-3, 0.5e-3, 26e-6, 65);
  paused = 0;
  while (cheaper.skip_step()) ++paused;
  CHECK(paused == 1);
  DraftingPause streak;
  streak.drafted(4, 1e-3, 0.5e-3, 26e-6, 65);  // a paying probe
  streak.drafted(4, -3e-3, 1.5e-3, 26e-6, 65);  // then a dear step that turns the mean
  paused = 0;
  while (streak.skip_step()) ++paused;
  CHECK(paused == 1);
  CHECK_THROWS_WITH(dear.drafted(1, 1.0, 0.0, 1.0, -1), Catch::Contains("most_tokens must be >= 0, got -1"));
  // The same probe next to a 44 ms step costs nothing to speak of: pauses stop at 32.
  CHECK(costly.longest_pause(44e-3) == DraftingPause::longest);
  CHECK(costly.longest_pause(0.0) == DraftingPause::longest);  // unknown
  // In between: a probe costs at most probe_share of the pause's plain steps.
  const int most = costly.longest_pause(120e-6);
  CHECK(most == 128);
  CHECK(costly.drafting_seconds() <= DraftingPause::probe_share * most * 120e-6);
  CHECK(costly.drafting_seconds() > DraftingPause::probe_share * (most / 2) * 120e-6);
}

TEST_CASE("DraftingPause: a new sequence probes at once and keeps the pause it learnt", "[draft_budget]") {
  DraftingPause pause;
  for (int probe = 0; probe < 4; ++probe) {  // pauses 1, 2, 4, 8
    pause.drafted(0, -1e-6, 1e-6);
    while (pause.skip_step()) {
    }
  }
  pause.restart();
  CHECK_FALSE(pause.skip_step());  // the new sequence's first step drafts
  pause.drafted(0, -1e-6, 1e-6);   // and does not pay: the next pause, not 1 step again
  int paused = 0;
  while (pause.skip_step()) ++paused;
  CHECK(paused == 16);
}

TEST_CASE("DraftingPause: a probe that costs more than 32 plain steps is not forced at a new sequence", "[draft_budget]") {
  // A probe of 1 ms where a plain step takes 26 us (38 of them): the longest pause, and a new
  // sequence does not cut it short.
  DraftingPause costly;
  costly.drafted(0, -1e-3, 1e-3, 26e-6);
  CHECK(costly.skip_step());
  costly.restart();
  int paused = 0;
  while (costly.skip_step()) ++paused;
  CHECK(paused == DraftingPause::longest_costly - 1);  // the rest of it
  CHECK(costly.probing());
  // 0.5 ms (19 plain steps), once the probe of a drafting streak: the new sequence probes at once,
  // although the mean drafting time since is higher.
  DraftingPause cheap;
  cheap.drafted(0, -0.5e-3, 0.5e-3, 26e-6);
  CHECK(cheap.skip_step());
  cheap.restart();
  CHECK_FALSE(cheap.skip_step());
  // A plain step not known yet (no drafted() told one): the new sequence probes.
  DraftingPause unknown;
  unknown.drafted(0, -1e-3, 1e-3);
  unknown.restart();
  CHECK_FALSE(unknown.skip_step());
}

TEST_CASE("MeasuredPlainStep scales the cost model by what root-only steps measure", "[draft_budget]") {
  MeasuredPlainStep plain;
  CHECK(plain.seconds(2e-3) == 2e-3);  // nothing measured: the model
  plain.observe(3e-3, 2e-3);
  CHECK(plain.seconds(4e-3) == 4e-3);  // ratios {1 (the model), 1.5}: the lower median
  plain.observe(3e-3, 2e-3);
  CHECK(plain.seconds(4e-3) == Approx(6e-3));  // {1, 1.5, 1.5}: two steps outvote the model
  for (int i = 0; i < 50; ++i) plain.observe(2e-3, 1e-3);
  CHECK(plain.seconds(1.0) == Approx(2.0));  // the recent steps' ratio
  CHECK_THROWS_WITH(plain.observe(-1.0, 1.0), Catch::Contains("measured time"));
  CHECK_THROWS_WITH(plain.observe(NAN, 1.0), Catch::Contains("measured time"));
  CHECK_THROWS_WITH(plain.observe(1.0, 0.0), Catch::Contains("modelled time"));
  CHECK_THROWS_WITH(plain.observe(1.0, INFINITY), Catch::Contains("modelled time"));
}

TEST_CASE("MeasuredPlainStep: a descheduled step does not move the scale, most of the window does", "[draft_budget]") {
  MeasuredPlainStep first;
  first.observe(50e-3, 1e-3);  // the very first root-only step lost 49 ms to another process
  CHECK(first.seconds(1e-3) == 1e-3);  // the model's word still counts

  MeasuredPlainStep plain;
  for (int i = 0; i < 8; ++i) plain.observe(1.2e-3, 1e-3);
  for (int i = 0; i < 4; ++i) {
    plain.observe(50e-3, 1e-3);  // up to half the window descheduled: the typical step stays
    CHECK(plain.seconds(1.0) == Approx(1.2));
  }
  plain.observe(50e-3, 1e-3);  // most of the window slow: the steps really are slower now
  CHECK(plain.seconds(1.0) == Approx(50.0));
}

TEST_CASE("DraftingPause asks for twice the most a recent step sent, at least 4", "[draft_budget]") {
  DraftingPause pause;
  CHECK(pause.ask_nodes(64) == 64);  // no history: the budget
  CHECK(pause.ask_nodes(10) == 10);
  for (int i = 0; i < 30; ++i) pause.drafted(1, 1.0, 0.0);  // steps that send one node
  CHECK(pause.ask_nodes(64) == 4);
  pause.drafted(4, 1.0, 0.0);  // all it asked for: the next ask doubles
  CHECK(pause.ask_nodes(64) == 8);
  pause.drafted(8, 1.0, 0.0);
  CHECK(pause.ask_nodes(64) == 16);
  CHECK(pause.ask_nodes(12) == 12);
  CHECK(pause.ask_nodes(0) == 0);
}
