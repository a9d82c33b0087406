#include <catch2/catch.hpp>

#include <memory>
#include <random>

#include <specdec/acceptance_model.hpp>

using namespace specdec;

TEST_CASE("AcceptanceModel starts at the drafter's own conditional score", "[acceptance_model]") {
  const AcceptanceModel m(2);
  // Bucket midpoints: a conditional score of 0.93 falls in [0.9, 1.0), prior 0.95.
  CHECK(m.probability(0, 1, 0.93) == Approx(0.95));
  CHECK(m.probability(1, 5, 0.02) == Approx(0.05));
  CHECK(m.probability(1, 500, 1.0) == Approx(0.95));  // deep nodes share the last depth; 1.0 is the top bucket
}

TEST_CASE("AcceptanceModel learns the acceptance rate of each drafter, depth and bucket", "[acceptance_model]") {
  AcceptanceModel m(2, {.buckets = 4, .depths = 3, .prior_strength = 2.0});
  std::mt19937 rng(7);
  std::bernoulli_distribution first(0.2), second(0.7);
  for (int i = 0; i < 20000; ++i) {
    m.record(0, 1, 0.9, first(rng));   // drafter 0 claims 0.9 at depth 1, is right 20% of the time
    m.record(1, 2, 0.1, second(rng));  // drafter 1 claims 0.1 at depth 2, is right 70% of the time
  }
  CHECK(m.probability(0, 1, 0.9) == Approx(0.2).margin(0.02));
  CHECK(m.probability(1, 2, 0.1) == Approx(0.7).margin(0.02));
  // Cells without verdicts keep their prior.
  CHECK(m.probability(0, 2, 0.9) == Approx(0.875));
  CHECK(m.probability(1, 1, 0.1) == Approx(0.125));
  CHECK(m.tested(0, 1, 3) == 20000);
  CHECK(m.accepted(0, 1, 3) < 20000);
}

TEST_CASE("AcceptanceModel's conditional score divides by the parent's", "[acceptance_model]") {
  CHECK(AcceptanceModel::conditional(0.25f, 0.5f) == Approx(0.5));
  CHECK(AcceptanceModel::conditional(0.5f, INFINITY) == Approx(0.5));  // the root's score is +inf
  CHECK(AcceptanceModel::conditional(0.9f, 0.5f) == 1.0);              // a score above its parent's
  CHECK(AcceptanceModel::conditional(NAN, 0.5f) == 0.0);
  CHECK(AcceptanceModel::conditional(0.5f, 0.0f) == 0.0);
}

TEST_CASE("AcceptanceModel refuses bad options", "[acceptance_model]") {
  CHECK_THROWS_WITH(AcceptanceModel(0), Catch::Contains("drafters must be in [1, 32], got 0"));
  CHECK_THROWS_WITH(AcceptanceModel(1, {.buckets = 0}), Catch::Contains("buckets"));
  CHECK_THROWS_WITH(AcceptanceModel(1, {.depths = -1}), Catch::Contains("depths"));
  CHECK_THROWS_WITH(AcceptanceModel(1, {.prior_strength = 0.0}), Catch::Contains("prior_strength"));
}

TEST_CASE("AcceptanceModel with another model as its prior starts from that model's estimates", "[acceptance_model]") {
  auto batch = std::make_shared<AcceptanceModel>(1, AcceptanceModelOptions{.buckets = 10, .depths = 4, .prior_strength = 4.0});
  for (int i = 0; i < 96; ++i) batch->record(0, 1, 0.95, i % 4 == 0);  // the batch saw 25% accepted
  AcceptanceModel request(1, {.buckets = 10, .depths = 4, .prior_strength = 4.0});
  request.set_prior(batch);
  CHECK(request.probability(0, 1, 0.95) == Approx(batch->probability(0, 1, 0.95)));
  for (int i = 0; i < 4; ++i) request.record(0, 1, 0.95, true);  // this request: all accepted
  CHECK(request.probability(0, 1, 0.95) == Approx((4 + 4 * batch->probability(0, 1, 0.95)) / 8));
  CHECK_THROWS_WITH(request.set_prior(std::make_shared<AcceptanceModel>(1, AcceptanceModelOptions{.buckets = 5})),
                    Catch::Contains("other drafters, buckets or depths"));
}
