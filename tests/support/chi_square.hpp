// Pearson's chi-square goodness-of-fit test, with its p-value from the regularized upper
// incomplete gamma function Q(df/2, x/2) (series for x < a + 1, Lentz's continued fraction else).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace specdec::testing {

/// Q(a, x) = Γ(a, x) / Γ(a), for a > 0, x >= 0.
inline double regularized_gamma_q(double a, double x) {
  if (x <= 0.0) return 1.0;
  const double log_prefix = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1.0) {  // P by its series, Q = 1 - P
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 10000 && std::abs(term) > std::abs(sum) * 1e-16; ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return 1.0 - sum * std::exp(log_prefix);
  }
  const double tiny = 1e-300;
  double b = x + 1.0 - a, c = 1.0 / tiny, d = 1.0 / b, h = d;
  for (int n = 1; n < 10000; ++n) {
    const double an = -n * (n - a);
    b += 2.0;
    d = an * d + b;
    if (std::abs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::abs(c) < tiny) c = tiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1.0) < 1e-16) break;
  }
  return std::exp(log_prefix) * h;
}

struct ChiSquare {
  double statistic = 0;
  int degrees_of_freedom = 0;
  double p_value = 1;
};

/// Tests observed counts against expected probabilities (summing to 1). Cells expected to hold
/// fewer than 5 observations are pooled into one cell, as the test's approximation requires; an
/// observation in a cell of probability 0 gives p = 0.
inline ChiSquare chi_square(const std::vector<std::int64_t>& observed, const std::vector<double>& probability) {
  std::int64_t n = 0;
  for (auto o : observed) n += o;
  ChiSquare r;
  double pooled_expected = 0, pooled_observed = 0;
  int cells = 0;
  for (std::size_t i = 0; i < observed.size(); ++i) {
    const double expected = probability[i] * static_cast<double>(n);
    if (probability[i] == 0.0 && observed[i] > 0) return {INFINITY, 0, 0.0};
    if (expected < 5.0) {
      pooled_expected += expected;
      pooled_observed += static_cast<double>(observed[i]);
      continue;
    }
    const double diff = static_cast<double>(observed[i]) - expected;
    r.statistic += diff * diff / expected;
    ++cells;
  }
  if (pooled_expected > 0.0) {
    const double diff = pooled_observed - pooled_expected;
    r.statistic += diff * diff / pooled_expected;
    ++cells;
  }
  r.degrees_of_freedom = cells - 1;
  r.p_value = r.degrees_of_freedom > 0 ? regularized_gamma_q(0.5 * r.degrees_of_freedom, 0.5 * r.statistic) : 1.0;
  return r;
}

}  // namespace specdec::testing
