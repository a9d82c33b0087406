#include "rounds.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace specbench {

namespace {

double rate_ratio(double a, double b) { return b > 0 ? a / b : 0.0; }

double median_of(std::vector<double> values) { return spread_of(std::move(values)).median; }

nlohmann::ordered_json spread_json(const std::vector<double>& values) {
  const Spread s = spread_of(values);
  return {{"median", s.median}, {"min", s.low}, {"max", s.high}, {"per_round", values}};
}

}  // namespace

Spread spread_of(std::vector<double> values) {
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  const double median = n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
  return {median, values.front(), values.back(), static_cast<int>(n)};
}

std::string spread_text(const Spread& s) {
  return s.count == 0 ? std::string("n/a") : fmt::format("{:.3f} [{:.3f}-{:.3f}]", s.median, s.low, s.high);
}

double Rounds::plain_seconds() const {
  double sum = 0;
  for (const RoundTime& r : rounds_) sum += r.plain_seconds;
  return sum;
}

double Rounds::speculative_seconds() const {
  double sum = 0;
  for (const RoundTime& r : rounds_) sum += r.speculative_seconds;
  return sum;
}

std::vector<double> Rounds::speedups() const {
  std::vector<double> out;
  for (const RoundTime& r : rounds_) out.push_back(rate_ratio(r.speculative_rate, r.plain_rate));
  return out;
}

std::vector<double> Rounds::plain_to_plain() const {
  std::vector<double> out;
  for (std::size_t k = 1; k < rounds_.size(); ++k)
    out.push_back(rate_ratio(rounds_[k].plain_rate, rounds_[k - 1].plain_rate));
  return out;
}

double Rounds::plain_rate() const {
  std::vector<double> rates;
  for (const RoundTime& r : rounds_) rates.push_back(r.plain_rate);
  return median_of(std::move(rates));
}

double Rounds::speculative_rate() const {
  std::vector<double> rates;
  for (const RoundTime& r : rounds_) rates.push_back(r.speculative_rate);
  return median_of(std::move(rates));
}

std::string rounds_text(const Rounds& r) {
  return fmt::format("{} round{}, {:.2f} s plain and {:.2f} s speculative in all", r.count(), r.count() == 1 ? "" : "s",
                     r.plain_seconds(), r.speculative_seconds());
}

std::string ratios_text(const Rounds& r) {
  return fmt::format("speedup {}, A/A {}", spread_text(r.speedup()), spread_text(r.noise_floor()));
}

nlohmann::ordered_json to_json(const Rounds& r) {
  nlohmann::ordered_json j{{"rounds", r.count()},
                           {"plain_seconds", r.plain_seconds()},
                           {"speculative_seconds", r.speculative_seconds()},
                           {"speedup", spread_json(r.speedups())}};
  j["aa"] = r.count() > 1 ? spread_json(r.plain_to_plain()) : nlohmann::ordered_json();
  return j;
}

}  // namespace specbench
