#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>
#include <vector>

#include <specdec/core/sampling.hpp>

#include "support/chi_square.hpp"
#include "support/token_list.hpp"

using namespace specdec::core;

namespace {
struct Weights {
  std::vector<float> w;
  float mass = 0;
  sampling_status status{};
};
Weights weights_of(const std::vector<float>& logits, SamplingParams params) {
  Weights r;
  r.w.resize(logits.size());
  r.status = sampling_weights(logits.data(), static_cast<int>(logits.size()), params, r.w.data(), &r.mass);
  return r;
}
std::vector<float> probabilities(const Weights& r) {
  std::vector<float> p;
  for (float x : r.w) p.push_back(x / r.mass);
  return p;
}
// log of these probabilities: p = 0.4, 0.3, 0.15, 0.1, 0.05
const std::vector<float> logits = {std::log(0.4f), std::log(0.3f), std::log(0.15f), std::log(0.1f), std::log(0.05f)};
}  // namespace

TEST_CASE("temperature 1 is the softmax, the largest weight is exactly 1", "[core][sampling]") {
  const auto r = weights_of(logits, {});
  REQUIRE(r.status == sampling_status::ok);
  CHECK(r.w[0] == 1.0f);
  const auto p = probabilities(r);
  const float want[] = {0.4f, 0.3f, 0.15f, 0.1f, 0.05f};
  for (int v = 0; v < 5; ++v) CHECK(p[v] == Approx(want[v]).epsilon(1e-5));
}

TEST_CASE("temperature scales the logits", "[core][sampling]") {
  const auto p = probabilities(weights_of(logits, {0.5f}));
  // p ~ p^2: 0.16, 0.09, 0.0225, 0.01, 0.0025 (sum 0.285)
  CHECK(p[0] == Approx(0.16 / 0.285).epsilon(1e-5));
  CHECK(p[4] == Approx(0.0025 / 0.285).epsilon(1e-4));
}

TEST_CASE("temperature 0 is greedy, ties to the lowest id", "[core][sampling]") {
  const auto r = weights_of({1.0f, 3.0f, 3.0f, -2.0f}, {0.0f});
  CHECK(r.w == std::vector<float>{0, 1, 0, 0});
  CHECK(r.mass == 1.0f);
}

TEST_CASE("top-k keeps the k most likely tokens (and ties with the k-th)", "[core][sampling]") {
  auto p = probabilities(weights_of(logits, {1.0f, 2}));
  CHECK(p[0] == Approx(0.4 / 0.7));
  CHECK(p[1] == Approx(0.3 / 0.7));
  CHECK(p[2] == 0.0f);
  CHECK(p[4] == 0.0f);
  const auto tied = weights_of({0.0f, 1.0f, 1.0f, 2.0f, -1.0f}, {1.0f, 2});
  CHECK(tied.w[0] == 0.0f);
  CHECK(tied.w[1] > 0.0f);
  CHECK(tied.w[2] > 0.0f);
  CHECK(tied.w[4] == 0.0f);
  CHECK(weights_of(logits, {1.0f, 5}).w == weights_of(logits, {}).w);  // k = vocab: off
}

TEST_CASE("top-p keeps the fewest most likely tokens whose mass reaches p", "[core][sampling]") {
  // 0.4 + 0.3 = 0.7 < 0.75 <= 0.85: three tokens.
  auto p = probabilities(weights_of(logits, {1.0f, 0, 0.75f}));
  CHECK(p[2] == Approx(0.15 / 0.85));
  CHECK(p[3] == 0.0f);
  // exactly reaching the mass keeps no more: 0.4 + 0.3 = 0.7
  p = probabilities(weights_of(logits, {1.0f, 0, 0.69f}));
  CHECK(p[1] > 0.0f);
  CHECK(p[2] == 0.0f);
  p = probabilities(weights_of(logits, {1.0f, 0, 0.1f}));
  CHECK(p[0] == 1.0f);
  // after top-k = 3 (0.4, 0.3, 0.15 -> mass 0.85), top-p 0.8 needs 0.68: two tokens.
  p = probabilities(weights_of(logits, {1.0f, 3, 0.8f}));
  CHECK(p[1] == Approx(0.3 / 0.7));
  CHECK(p[2] == 0.0f);
}

TEST_CASE("min-p drops tokens below min_p times the most likely one", "[core][sampling]") {
  const auto p = probabilities(weights_of(logits, {1.0f, 0, 1.0f, 0.3f}));  // keeps p >= 0.12
  CHECK(p[2] == Approx(0.15 / 0.85));
  CHECK(p[3] == 0.0f);
}

TEST_CASE("bad rows and parameters are reported, -inf masks a token", "[core][sampling][errors]") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(weights_of({0.0f, std::nanf(""), 1.0f}, {}).status == sampling_status::nan_logit);
  CHECK(weights_of({0.0f, inf, 1.0f}, {}).status == sampling_status::infinite_logit);
  CHECK(weights_of({-inf, -inf}, {}).status == sampling_status::no_finite_logit);
  CHECK(weights_of({0.0f, std::nanf("")}, {0.0f}).status == sampling_status::nan_logit);
  const auto masked = weights_of({-inf, 0.0f, 0.0f}, {});
  REQUIRE(masked.status == sampling_status::ok);
  CHECK(masked.w[0] == 0.0f);
  CHECK(masked.mass == 2.0f);
  CHECK(weights_of(logits, {-1.0f}).status == sampling_status::bad_parameters);
  CHECK(weights_of(logits, {1.0f, -1}).status == sampling_status::bad_parameters);
  CHECK(weights_of(logits, {1.0f, 0, 0.0f}).status == sampling_status::bad_parameters);
  CHECK(weights_of(logits, {1.0f, 0, 1.0f, 1.5f}).status == sampling_status::bad_parameters);
}

using specdec::testing::TokenList;

namespace {
// Draws `n` tokens from w without the excluded ones by the race (one position per draw) and
// tests the counts by chi-square against w / Σ w, excluded tokens counted as 0.
specdec::testing::ChiSquare race_chi_square(const std::vector<float>& w, int n, const char* name,
                                            const TokenList& excluded = {}) {
  std::vector<std::int64_t> counts(w.size(), 0);
  SerialLanes ex;
  for (int position = 0; position < n; ++position) {
    const int token = race(ex, static_cast<int>(w.size()), [&](int v) { return w[static_cast<std::size_t>(v)]; },
                           excluded, RandomKey{17, 3}, position);
    REQUIRE(token >= 0);
    REQUIRE(w[static_cast<std::size_t>(token)] > 0.0f);  // a weight of 0 never wins
    REQUIRE(!excluded.contains(token));
    ++counts[static_cast<std::size_t>(token)];
  }
  double total = 0;
  for (std::size_t v = 0; v < w.size(); ++v) total += excluded.contains(static_cast<int>(v)) ? 0.0 : w[v];
  std::vector<double> p;
  for (std::size_t v = 0; v < w.size(); ++v) p.push_back(excluded.contains(static_cast<int>(v)) ? 0.0 : w[v] / total);
  const auto r = specdec::testing::chi_square(counts, p);
  std::printf("chi-square [race: %s] X2 = %.2f, df = %d, p = %.3g\n", name, r.statistic, r.degrees_of_freedom, r.p_value);
  return r;
}

std::vector<float> random_weights(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<float> w(count);
  for (float& x : w) x = rng() % 4 == 0 ? 0.0f : static_cast<float>(rng() % 1000) / 1000.0f;
  return w;
}
}  // namespace

TEST_CASE("the exponential race draws tokens in proportion to their weights", "[core][sampling][statistical]") {
  const std::vector<float> random37 = random_weights(37, 5);  // not a multiple of 4: the last quad is partial
  std::vector<float> peaked(300, 1e-3f);  // one token holds most of the mass, many share the rest
  peaked[123] = 1.0f;
  // 1000 tokens: lanes of 4 entries (3 for lanes >= 232), the in-lane race has a partial quad
  const std::vector<float> random1000 = random_weights(1000, 6);
  // a softmax-like row over 3000 tokens: lane masses differ, most entries are tiny
  std::vector<float> decaying(3000);
  for (std::size_t v = 0; v < decaying.size(); ++v) decaying[v] = std::exp(-static_cast<float>((v * 7919) % 3000) / 300.0f);
  CHECK(race_chi_square({1.0f, 2.0f, 3.0f, 4.0f}, 100000, "1 2 3 4").p_value > 0.001);
  CHECK(race_chi_square({0.0f, 0.0f, 0.5f, 0.5f, 0.0f}, 100000, "zeros around two halves").p_value > 0.001);
  CHECK(race_chi_square(random37, 200000, "37 random weights, a quarter 0").p_value > 0.001);
  CHECK(race_chi_square(peaked, 200000, "one 1 among 299 x 1e-3").p_value > 0.001);
  CHECK(race_chi_square({1e-30f, 3e-30f}, 100000, "tiny weights").p_value > 0.001);
  CHECK(race_chi_square(random1000, 200000, "1000 random weights, a quarter 0").p_value > 0.001);
  CHECK(race_chi_square(decaying, 200000, "3000 decaying weights").p_value > 0.001);
}

TEST_CASE("the race with excluded tokens draws the others in proportion", "[core][sampling][statistical]") {
  std::vector<float> w = random_weights(1000, 7);
  for (int v : {5, 261, 517, 773}) w[static_cast<std::size_t>(v)] = 0.0f;  // lane 5 ...
  w[261] = w[773] = 0.5f;  // ... holds only the excluded positive entries 261 and 773
  for (int v : {3, 259, 515, 771}) w[static_cast<std::size_t>(v)] = 0.25f;  // lane 3 is all excluded
  const TokenList children{{773, 3, 259, 515, 771, 261, 42, 999, 600}};
  CHECK(race_chi_square(w, 200000, "1000 weights, 9 excluded, two lanes emptied", children).p_value > 0.001);
  CHECK(race_chi_square({1.0f, 1.0f, 1.0f, 1.0f, 1.0f}, 50000, "5 equal weights, 1 and 3 excluded", TokenList{{1, 3}})
            .p_value > 0.001);
  // a lane whose positive entries are all excluded has mass 0 exactly: its only other entry,
  // weighing 1e-30, takes every draw
  std::vector<float> sparse(600, 0.0f);
  sparse[7] = 1e-30f;
  sparse[263] = sparse[519] = 1.0f;
  SerialLanes ex;
  for (int position = 0; position < 200; ++position)
    CHECK(race(ex, 600, [&](int v) { return sparse[static_cast<std::size_t>(v)]; }, TokenList{{263, 519}}, RandomKey{4, 1},
               position) == 7);
  CHECK(race(ex, 600, [&](int v) { return sparse[static_cast<std::size_t>(v)]; }, TokenList{{7, 263, 519}}, RandomKey{4, 1},
             0) == -1);
}

TEST_CASE("race edge cases: nothing positive, one positive weight, the uniforms' range", "[core][sampling][edge]") {
  const std::vector<float> zeros(9, 0.0f);
  CHECK(sample_from_weights(zeros.data(), 9, RandomKey{1, 0}, 0) == -1);
  const std::vector<float> one = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 2.5f};
  for (int position = 0; position < 100; ++position)
    CHECK(sample_from_weights(one.data(), 6, RandomKey{1, 0}, position) == 5);
  std::vector<float> far(70000, 0.0f);  // one positive entry deep in its lane
  far[69999] = 1e-20f;
  for (int position = 0; position < 20; ++position)
    CHECK(sample_from_weights(far.data(), 70000, RandomKey{1, 2}, position) == 69999);
  // the race's uniforms are strictly inside (0, 1), so E = -log2 U is finite and positive
  CHECK(open_uniform_from_bits(0u) > 0.0f);
  CHECK(open_uniform_from_bits(0xffffffffu) < 1.0f);
  CHECK(-log2_portable(open_uniform_from_bits(0xffffffffu)) > 0.0f);
  CHECK(-log2_portable(open_uniform_from_bits(0u)) == 24.0f);
}

TEST_CASE("top-k and top-p agree with a sort on large random rows", "[core][sampling]") {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  const int vocab = 5000;
  std::vector<float> row(vocab), w(vocab);
  int exact = 0;
  for (int round = 0; round < 40; ++round) {
    for (float& x : row) x = normal(rng);
    const SamplingParams params{0.5f + 0.05f * (round % 20), static_cast<int>(rng() % 300),
                                round % 3 == 0 ? 1.0f : 0.05f + 0.9f * static_cast<float>(rng() % 1000) / 1000.0f};
    float mass = 0;
    REQUIRE(sampling_weights(row.data(), vocab, params, w.data(), &mass) == sampling_status::ok);
    // reference: sort the temperature weights, cut at k, then at the fewest reaching top_p
    std::vector<double> sorted;
    for (float x : row) sorted.push_back(std::exp((x - *std::max_element(row.begin(), row.end())) / params.temperature));
    std::sort(sorted.rbegin(), sorted.rend());
    std::size_t keep = params.top_k > 0 ? static_cast<std::size_t>(params.top_k) : sorted.size();
    double kept_mass = 0;
    for (std::size_t i = 0; i < keep; ++i) kept_mass += sorted[i];
    if (params.top_p < 1.0f) {
      double running = 0;
      std::size_t n = 0;
      while (n < keep && running < params.top_p * kept_mass) running += sorted[n++];
      keep = n;
    }
    const auto kept = static_cast<std::size_t>(std::count_if(w.begin(), w.end(), [](float x) { return x > 0.0f; }));
    // float sums may move the top-p boundary by a token whose weight is at the rounding level
    exact += kept == keep;
    CHECK(kept <= keep + 1);
    CHECK(kept + 1 >= keep);
    double total = 0;
    for (float x : w) total += x;
    CHECK(mass == Approx(total).epsilon(1e-5));
  }
  CHECK(exact >= 36);  // off by one only where float and double sums disagree at the boundary
}
