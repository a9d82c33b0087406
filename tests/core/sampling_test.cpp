#include <catch2/catch.hpp>

#include <cmath>
#include <algorithm>
#include <limits>
#include <random>
#include <vector>

#include <specdec/core/sampling.hpp>

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

TEST_CASE("temperature 1 is the softmax; the largest weight is exactly 1", "[core][sampling]") {
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

TEST_CASE("a draw of exactly 0 never picks a token of weight 0", "[core][sampling][edge]") {
  const std::vector<float> w = {0.0f, 0.0f, 0.5f, 0.5f};
  CHECK(sample_from_weights(w.data(), 1.0f, 4, 0.0f) == 2);
  CHECK(sample_from_weights(w.data(), 1.0f, 4, 0.5f) == 3);
  CHECK(sample_from_weights(w.data(), 1.0f, 4, 0.49999f) == 2);
  // u * mass rounding past the sum still returns a token of positive weight
  CHECK(sample_from_weights(w.data(), 1.0001f, 4, 0.99999994f) == 3);
}

TEST_CASE("rejection tests: acceptance rule and residuals", "[core][sampling]") {
  SECTION("one-hot proposal: accept iff u < p(x); rejection removes x") {
    std::vector<float> w = {2.0f, 1.0f, 1.0f};  // p = 0.5, 0.25, 0.25
    float mass = 4.0f;
    CHECK(rejection_test(w.data(), &mass, 3, nullptr, 1, 0.2499f));
    CHECK_FALSE(rejection_test(w.data(), &mass, 3, nullptr, 1, 0.25f));
    CHECK(w[1] == 0.0f);
    CHECK(mass == 3.0f);
    // a token of probability 0 is rejected even by u = 0
    CHECK_FALSE(rejection_test(w.data(), &mass, 3, nullptr, 1, 0.0f));
    CHECK(rejection_test(w.data(), &mass, 3, nullptr, 0, 0.0f));
  }
  SECTION("proposal drawn from q: accept iff u < p(x)/q(x); residual norm(max(0, p - q))") {
    std::vector<float> w = {5.0f, 3.0f, 2.0f};  // p = 0.5, 0.3, 0.2
    const std::vector<float> q = {0.2f, 0.6f, 0.2f};
    float mass = 10.0f;
    CHECK(rejection_test(w.data(), &mass, 3, q.data(), 0, 0.999f));  // p/q > 1: always
    CHECK(rejection_test(w.data(), &mass, 3, q.data(), 1, 0.4999f));
    CHECK_FALSE(rejection_test(w.data(), &mass, 3, q.data(), 1, 0.5f));
    CHECK(mass == Approx(0.3f));  // max(0, p - q) = 0.3, 0, 0
    CHECK(w[0] / mass == Approx(1.0f));
    CHECK(w[1] == 0.0f);
    CHECK(w[2] == 0.0f);
  }
  SECTION("p == q: rounding rejection keeps p") {
    std::vector<float> w = {0.5f, 0.5f};
    const std::vector<float> q = {0.5f, 0.5f};
    float mass = 1.0f;
    CHECK(rejection_test(w.data(), &mass, 2, q.data(), 0, 0.9f));
    w[0] = 0.5f * (1 - 1e-7f);  // p(0) a hair below q(0)
    const bool accepted = rejection_test(w.data(), &mass, 2, q.data(), 0, 0.9999999f);
    CHECK_FALSE(accepted);
    CHECK(mass > 0.0f);
    CHECK(w[1] > 0.0f);
  }
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
