// specbench's rounds (bench/specbench/rounds.hpp): when another round is due, the median speedup
// and its range, the A/A ratio of consecutive plain passes, and how they are printed and saved.
#include <catch2/catch.hpp>

#include <vector>

#include "rounds.hpp"

using namespace specbench;

TEST_CASE("rounds: another is due until both the rounds and each arm's seconds reach their minimum", "[specbench][rounds]") {
  const RoundRule rule{3, 1.0};
  CHECK(rule.more(2, 5.0, 5.0));        // too few rounds
  CHECK(rule.more(3, 0.9, 5.0));        // the plain arm too short
  CHECK(rule.more(7, 5.0, 0.5));        // the speculative arm too short
  CHECK_FALSE(rule.more(3, 1.0, 1.0));
  CHECK_FALSE(RoundRule{}.more(1, 0.0, 0.0));  // the default: one round
  CHECK(RoundRule{}.more(0, 0.0, 0.0));
}

TEST_CASE("rounds: the median and range of an odd and an even count, none of none", "[specbench][rounds]") {
  const Spread odd = spread_of({3.0, 1.0, 2.0});
  CHECK(odd.median == 2.0);
  CHECK(odd.low == 1.0);
  CHECK(odd.high == 3.0);
  CHECK(odd.count == 3);
  CHECK(spread_of({4.0, 1.0, 2.0, 10.0}).median == 3.0);
  CHECK(spread_of({}).count == 0);
  CHECK(spread_text(odd) == "2.000 [1.000-3.000]");
  CHECK(spread_text(spread_of({})) == "n/a");
}

TEST_CASE("rounds: speedups per round, A/A from consecutive plain rounds, each arm's seconds summed", "[specbench][rounds]") {
  Rounds r;
  r.add({100, 1.0, 150, 0.5});  // plain 100 tokens/s in 1 s; speculative 150 tokens/s in 0.5 s
  CHECK(r.plain_to_plain().empty());
  CHECK(r.noise_floor().count == 0);
  r.add({80, 1.25, 100, 1.0});
  r.add({100, 1.0, 120, 0.75});
  CHECK(r.count() == 3);
  CHECK(r.plain_seconds() == Approx(3.25));
  CHECK(r.speculative_seconds() == Approx(2.25));
  const std::vector<double> speedups = r.speedups();
  REQUIRE(speedups.size() == 3);
  CHECK(speedups[0] == Approx(1.5));
  CHECK(speedups[1] == Approx(1.25));
  CHECK(speedups[2] == Approx(1.2));
  CHECK(r.speedup().median == Approx(1.25));
  const std::vector<double> aa = r.plain_to_plain();
  REQUIRE(aa.size() == 2);
  CHECK(aa[0] == Approx(0.8));
  CHECK(aa[1] == Approx(1.25));
  CHECK(r.noise_floor().median == Approx(1.025));
  CHECK(r.plain_rate() == 100);
  CHECK(r.speculative_rate() == 120);
  CHECK(rounds_text(r) == "3 rounds, 3.25 s plain and 2.25 s speculative in all");
  CHECK(ratios_text(r) == "speedup 1.250 [1.200-1.500], A/A 1.025 [0.800-1.250]");

  const auto j = to_json(r);
  CHECK(j["rounds"] == 3);
  CHECK(j["speedup"]["median"].get<double>() == Approx(1.25));
  CHECK(j["speedup"]["per_round"].size() == 3);
  CHECK(j["aa"]["min"].get<double>() == Approx(0.8));
  CHECK(j["aa"]["per_round"].size() == 2);

  Rounds one;
  one.add({100, 1.0, 150, 0.5});
  CHECK(to_json(one)["aa"].is_null());
  CHECK(ratios_text(one) == "speedup 1.500 [1.500-1.500], A/A n/a");
}
