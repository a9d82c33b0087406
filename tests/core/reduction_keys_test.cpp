#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <specdec/core/reduction_keys.hpp>
#include <specdec/core/tree.hpp>

#include "kernels/random_batches.hpp"

using namespace specdec;

namespace {

// Reduces a row's keys the way the GPU does: split into `splits` slices, each slice strided over
// `threads` lanes, lanes and slices combined by max in a shuffled order.
token_t reduced_argmax(const std::vector<float>& row, int splits, int threads, std::mt19937_64& rng) {
  const int n = static_cast<int>(row.size());
  const int chunk = (n + splits - 1) / splits;
  std::vector<std::uint64_t> partial;
  for (int s = 0; s < splits; ++s) {
    std::vector<std::uint64_t> lanes(threads, 0u);
    for (int v = s * chunk; v < std::min(n, (s + 1) * chunk); ++v)
      lanes[(v - s * chunk) % threads] = core::max_key(lanes[(v - s * chunk) % threads], core::argmax_key(row[v], v));
    std::shuffle(lanes.begin(), lanes.end(), rng);
    std::uint64_t block = 0u;
    for (std::uint64_t k : lanes) block = core::max_key(block, k);
    partial.push_back(block);
  }
  std::shuffle(partial.begin(), partial.end(), rng);
  std::uint64_t key = 0u;
  for (std::uint64_t k : partial) key = core::max_key(key, k);
  return core::argmax_key_token(key);
}

}  // namespace

TEST_CASE("argmax keys reduce to argmax_row over any split (ties, NaN, signed zeros, infinities)", "[core][keys]") {
  std::mt19937_64 rng(51);
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  const std::vector<float> specials{0.0f, -0.0f, inf, -inf, nan, std::numeric_limits<float>::denorm_min(),
                                    -std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
                                    std::numeric_limits<float>::lowest(), 1.0f, -1.0f};
  for (int trial = 0; trial < 3000; ++trial) {
    const int n = testing::uniform(rng, 1, 300);
    std::vector<float> row(n);
    const int kind = trial % 4;
    for (float& x : row) {
      if (kind == 0) x = static_cast<float>(rng() % 3) - 1.0f;                  // many ties
      else if (kind == 1) x = specials[rng() % (specials.size() - 1)];         // specials, no NaN
      else if (kind == 2) x = specials[rng() % specials.size()];               // specials with NaN
      else x = std::ldexp(static_cast<float>(rng() % 1000) - 500.0f, -static_cast<int>(rng() % 20));
    }
    const int splits = testing::uniform(rng, 1, 9), threads = testing::uniform(rng, 1, 64);
    REQUIRE(reduced_argmax(row, splits, threads, rng) == core::argmax_row(row.data(), n));
  }
}

TEST_CASE("signed zeros tie, so the first one wins as in argmax_row", "[core][keys]") {
  CHECK(core::argmax_key(-0.0f, 3) > core::argmax_key(0.0f, 4));
  CHECK(core::argmax_key(0.0f, 3) > core::argmax_key(-0.0f, 4));
  CHECK(core::argmax_key(-1.0f, 0) < core::argmax_key(-0.0f, 9));
  CHECK(core::argmax_key(std::numeric_limits<float>::infinity(), 0) < core::nan_argmax_key);
  CHECK(core::argmax_key_token(0u) == -1);
}

TEST_CASE("merged top-k match keys equal find_suffix_matches over any split of the positions", "[core][keys]") {
  std::mt19937_64 rng(52);
  for (int trial = 0; trial < 500; ++trial) {
    const int n = testing::uniform(rng, 0, 400);
    const auto c = testing::repetitive_context(rng, n, testing::uniform(rng, 2, 6));
    const int max_match = testing::uniform(rng, 1, 16), min_match = testing::uniform(rng, 1, 3);
    const int k = testing::uniform(rng, 1, 8);
    core::SuffixMatch expected[8];
    const int found = core::find_suffix_matches(c.data(), n, n, max_match, min_match, k, expected);

    // Each "thread" keeps a top-8 of its positions; threads merge in a random tree order.
    const int threads = testing::uniform(rng, 1, 40);
    std::vector<core::TopKeys<8>> lists(threads, core::TopKeys<8>::none());
    for (int p = 0; p + 2 <= n; ++p) {
      int m = 0;
      while (m < std::min(p + 1, max_match) && c[p - m] == c[n - 1 - m]) ++m;
      if (m >= min_match) lists[p % threads].insert(core::match_key(m, p));
    }
    std::shuffle(lists.begin(), lists.end(), rng);
    while (lists.size() > 1) {
      const std::size_t i = rng() % (lists.size() - 1);
      lists[i] = core::MergeTopKeys{}(lists[i], lists[i + 1]);
      lists.erase(lists.begin() + static_cast<long>(i) + 1);
    }
    int got = 0;
    while (got < k && lists[0].key[got] != 0u) ++got;
    REQUIRE(got == found);
    for (int j = 0; j < found; ++j) {
      CHECK(core::match_of(lists[0].key[j]).position == expected[j].position);
      CHECK(core::match_of(lists[0].key[j]).length == expected[j].length);
    }
  }
}
