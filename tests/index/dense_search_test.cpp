// The host-side pieces of the GPU flat search and of its parity test: the rank keys the device
// sorts order (score, key) exactly like ranks_before, and dense_ranking_difference accepts what
// another summation order may change and nothing else.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <specdec/index/dense_search.hpp>

#include "dense_parity.hpp"

using namespace specdec;

TEST_CASE("dense rank keys order (score, key) like ranks_before", "[dense][search]") {
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> scores = {0.0f, -0.0f, 1.0f, -1.0f, inf, -inf, std::numeric_limits<float>::denorm_min(),
                               -std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max()};
  for (int i = 0; i < 200; ++i) scores.push_back(normal(rng));
  std::vector<DenseNeighbour> all;
  for (const float s : scores)
    for (const std::uint64_t key : {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{77}, std::uint64_t{0xfffffffe}})
      all.push_back({s, key});
  for (const auto& a : all) {
    const std::uint64_t ka = detail::dense_rank_key(a.score, static_cast<std::uint32_t>(a.key));
    const DenseNeighbour back = detail::dense_rank_neighbour(ka);
    CHECK(back.key == a.key);
    CHECK(back.score == a.score);  // -0 comes back as +0, which compares equal
    CHECK(ka > 0);                 // 0 is the device's empty slot
    for (const auto& b : all) {
      const std::uint64_t kb = detail::dense_rank_key(b.score, static_cast<std::uint32_t>(b.key));
      INFO("(" << a.score << ", " << a.key << ") against (" << b.score << ", " << b.key << ")");
      CHECK((ka > kb) == ranks_before(a, b));
    }
  }
  // A NaN score ranks below every number, the lower key first, and comes back as NaN.
  const float nan = std::numeric_limits<float>::quiet_NaN();
  CHECK(detail::dense_rank_key(nan, 3) < detail::dense_rank_key(-inf, 4000));
  CHECK(detail::dense_rank_key(nan, 3) > detail::dense_rank_key(nan, 4));
  CHECK(std::isnan(detail::dense_rank_neighbour(detail::dense_rank_key(nan, 3)).score));
}

TEST_CASE("dense_ranking_difference: near ties may swap, nothing else may differ", "[dense][search]") {
  // Host scores of keys 0..5 for some query.
  const std::vector<float> host = {0.9f, 0.5f, 0.5f + 4e-6f, 0.2f, 0.1f, 0.5f};
  const auto score = [&](std::uint64_t key) { return host[key]; };
  const std::vector<DenseNeighbour> want = {{0.9f, 0}, {0.5f + 4e-6f, 2}, {0.5f, 1}, {0.5f, 5}};
  using testing::dense_ranking_difference;
  CHECK(dense_ranking_difference(want, want, score) == "");
  // Another summation order: the scores differ by 2e-6, keys 1, 2 and 5 come in another order.
  const std::vector<DenseNeighbour> swapped = {{0.9f + 2e-6f, 0}, {0.5f + 1e-6f, 1}, {0.5f + 1e-6f, 5}, {0.5f, 2}};
  CHECK(dense_ranking_difference(want, swapped, score) == "");
  // A key past a near tie (key 3 scores 0.2, not 0.5).
  CHECK(dense_ranking_difference(want, std::vector<DenseNeighbour>{{0.9f, 0}, want[1], want[2], {0.2f, 3}}, score) ==
        "rank 3: key 3 (host score 0.2), the exact search has key 5 (score 0.5)");
  // A score the host does not give that key.
  CHECK(dense_ranking_difference(want, std::vector<DenseNeighbour>{{0.9f, 0}, want[1], want[2], {0.49f, 5}}, score) ==
        "rank 3: key 5 scored 0.49, the host scores it 0.5");
  // Out of order, a key twice, a neighbour missing.
  CHECK(dense_ranking_difference(want, std::vector<DenseNeighbour>{{0.9f, 0}, {0.5f, 5}, {0.5f, 1}, {0.5f, 2}},
                                 score) == "rank 2: (0.5, key 1) does not rank after (0.5, key 5)");
  CHECK(dense_ranking_difference(want, std::vector<DenseNeighbour>{{0.9f, 0}, {0.5f, 1}, {0.5f, 1}, {0.5f, 5}},
                                 score) == "rank 2: key 1 twice");
  CHECK(dense_ranking_difference(want, std::span(want).first(3), score) == "3 neighbours, the exact search has 4");
}
