// Repeated plain and speculative passes, alternated so that a drift of the machine's speed hits
// both arms alike, and what their ratios say: the median speedup with its spread, beside an A/A
// figure (plain against the previous plain pass) that shows how far noise alone moves a ratio.
// See docs/specbench.md, "Reading the ratios".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace specbench {

/// How long the two arms alternate: at least `min_rounds` rounds, and until each arm has run at
/// least `min_seconds` in all (--min-rounds, --min-seconds). The default is a single round.
struct RoundRule {
  int min_rounds = 1;
  double min_seconds = 0;
  /// Whether another round is due after `rounds` rounds of these summed seconds per arm.
  bool more(int rounds, double plain_seconds, double speculative_seconds) const {
    return rounds < min_rounds || plain_seconds < min_seconds || speculative_seconds < min_seconds;
  }
};

/// One round: each arm's throughput (tokens/s) and the seconds it ran.
struct RoundTime {
  double plain_rate = 0, plain_seconds = 0;
  double speculative_rate = 0, speculative_seconds = 0;
};

/// The round in which each arm made its tokens in its seconds (a rate is 0 where no time passed).
inline RoundTime round_time(std::int64_t plain_tokens, double plain_seconds, std::int64_t speculative_tokens,
                            double speculative_seconds) {
  const auto rate = [](std::int64_t tokens, double seconds) {
    return seconds > 0 ? static_cast<double>(tokens) / seconds : 0.0;
  };
  return {rate(plain_tokens, plain_seconds), plain_seconds, rate(speculative_tokens, speculative_seconds),
          speculative_seconds};
}

/// The median of some ratios and their range (count 0: none).
struct Spread {
  double median = 0, low = 0, high = 0;
  int count = 0;
};
Spread spread_of(std::vector<double> values);
/// "1.234 [1.201-1.250]"; "n/a" without values.
std::string spread_text(const Spread& s);

/// The rounds of one plain-against-speculative comparison.
class Rounds {
 public:
  void add(const RoundTime& round) { rounds_.push_back(round); }
  int count() const { return static_cast<int>(rounds_.size()); }
  const std::vector<RoundTime>& rounds() const { return rounds_; }
  /// Seconds each arm ran, summed over the rounds (what RoundRule counts).
  double plain_seconds() const;
  double speculative_seconds() const;
  /// Per round: speculative / plain throughput.
  std::vector<double> speedups() const;
  /// Per pair of consecutive rounds: plain throughput / the previous round's (an A/A ratio: the
  /// same work twice; its spread is what noise alone does to a ratio). None with one round.
  std::vector<double> plain_to_plain() const;
  Spread speedup() const { return spread_of(speedups()); }
  Spread noise_floor() const { return spread_of(plain_to_plain()); }
  /// Each arm's median throughput.
  double plain_rate() const;
  double speculative_rate() const;

 private:
  std::vector<RoundTime> rounds_;
};

/// "3 rounds, 1.52 s plain and 1.10 s speculative in all".
std::string rounds_text(const Rounds& r);
/// "speedup 1.234 [1.201-1.250], A/A 1.002 [0.981-1.030]".
std::string ratios_text(const Rounds& r);
/// {"rounds", "plain_seconds", "speculative_seconds", "speedup": {median, min, max, per_round},
///  "aa": {...}} (docs/specbench.md).
nlohmann::ordered_json to_json(const Rounds& r);

}  // namespace specbench
