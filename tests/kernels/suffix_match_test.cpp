#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include <specdec/backend.hpp>

#include "kernels/device_launch.hpp"
#include "kernels/random_batches.hpp"

using namespace specdec;

namespace {

void require_same_on_both(testing::SuffixData host) {
  testing::SuffixData device = host;
  REQUIRE(backend::suffix_match(backend::host{}, host.batch()) == backend::status::ok);
  REQUIRE(testing::run_on_device(device.batch()) == backend::status::ok);
  REQUIRE(device.match_count == host.match_count);
  for (int s = 0; s < host.size(); ++s)
    for (int j = 0; j < host.match_count[s]; ++j) {  // entries past the count are unspecified
      CHECK(device.matches[s * host.k + j].position == host.matches[s * host.k + j].position);
      CHECK(device.matches[s * host.k + j].length == host.matches[s * host.k + j].length);
    }
  CHECK(device.draft_length == host.draft_length);
  // Whole slots: entries past a draft's length keep their sentinel on both, so a kernel that
  // writes past the length fails here.
  CHECK(device.drafts == host.drafts);
}

}  // namespace

TEST_CASE("GPU suffix matching equals the CASD reference on random contexts and parameters", "[gpu][suffix]") {
  std::mt19937_64 rng(8);
  for (int trial = 0; trial < 60; ++trial) {
    testing::SuffixData d;
    d.max_match = trial % 10 == 9 ? testing::uniform(rng, -1, 0) : testing::uniform(rng, 1, 16);  // <= 0: none
    d.min_match = testing::uniform(rng, 0, 4);
    d.k = testing::uniform(rng, 0, 8);
    d.depth = testing::uniform(rng, 0, 12);
    d.max_context = testing::uniform(rng, 1, 20000);
    const int batch = testing::uniform(rng, 1, 9);
    const int alphabet = testing::uniform(rng, 2, 40);
    for (int s = 0; s < batch; ++s) {
      // Includes empty contexts, a lone root, and contexts shorter than max_match.
      const int n = rng() % 4 == 0 ? testing::uniform(rng, 0, 17) : testing::uniform(rng, 0, d.max_context);
      d.add(testing::repetitive_context(rng, n, alphabet));
    }
    if (rng() % 8 == 0) d.add(std::vector<token_t>(d.max_context + 1, 3));  // too long: flagged on both
    if (rng() % 2) {  // CASD_prompt: search only a prefix (sometimes past the end)
      for (int s = 0; s < d.size(); ++s)
        d.search_limit.push_back(testing::uniform(rng, -1, d.offsets[s + 1] - d.offsets[s] + 2));
    }
    require_same_on_both(d);
  }
}

TEST_CASE("GPU suffix matching on long contexts (1M and 4M tokens)", "[gpu][suffix]") {
  std::mt19937_64 rng(9);
  for (int n : {1 << 20, 4 << 20}) {
    testing::SuffixData d;
    d.max_context = n;
    d.max_match = 16;
    d.k = 8;
    d.add(testing::repetitive_context(rng, n, 8));
    d.add(testing::repetitive_context(rng, n / 3, 1000));
    require_same_on_both(d);
  }
}

TEST_CASE("GPU suffix matching: ties go to the most recent occurrence", "[gpu][suffix]") {
  testing::SuffixData d;
  d.max_context = 64;
  d.max_match = 4;
  d.k = 3;
  d.depth = 2;
  d.add({5, 1, 2, 7, 1, 2, 8, 1, 2, 9, 1, 2});  // "1 2" at ends 2, 5, 8 (and the query at 11)
  REQUIRE(testing::run_on_device(d.batch()) == backend::status::ok);
  REQUIRE(d.match_count[0] == 3);
  CHECK(d.matches[0].position == 8);
  CHECK(d.matches[1].position == 5);
  CHECK(d.matches[2].position == 2);
  CHECK(d.matches[0].length == 2);
  CHECK(d.draft_length[0] == 2);
  CHECK(d.drafts[0] == 9);
  CHECK(d.drafts[1] == 1);
}

TEST_CASE("the CUDA backend refuses the same arguments as the host backend", "[gpu][suffix]") {
  testing::SuffixData d;
  d.max_context = 16;
  d.add({1, 2, 1, 2});
  d.k = backend::max_suffix_k + 1;
  CHECK(testing::run_on_device(d.batch()) == backend::status::invalid_argument);
  d.k = 2;
  d.max_match = backend::max_suffix_match + 1;
  CHECK(testing::run_on_device(d.batch()) == backend::status::invalid_argument);
  d.max_match = 10;
  CHECK(testing::run_on_device(d.batch()) == backend::status::ok);
  CHECK(d.match_count[0] == 1);
}
