#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdio>
#include <random>
#include <vector>

#include <specdec/backend.hpp>

#include "kernels/device_launch.hpp"
#include "kernels/random_stochastic.hpp"

using namespace specdec;

// The kernels run the host's walks with a block of 256 threads per tree (core/lanes.hpp): float
// sums in the lane order, integer reductions, portable exp/log. So every output must be EQUAL to
// the host backend's, at every temperature and with every filter: one differing tree is a bug.

namespace {

const core::SamplingParams sampling_cases[] = {
    {0.0f},                    // greedy
    {1.0f},                    // plain softmax
    {0.7f, 0, 0.9f},           // top-p (fixed-point masses)
    {1.0f, 10},                // top-k (ties in edge rows)
    {0.8f, 0, 1.0f, 0.05f},    // min-p alone (the row-parallel lane masses apply)
    {1.3f, 40, 0.8f, 0.02f},   // all filters
};

// Both launch shapes (and the automatic choice) must give the host's bits.
const testing::stochastic_shape shapes[] = {testing::stochastic_shape::per_tree,
                                            testing::stochastic_shape::row_parallel,
                                            testing::stochastic_shape::automatic};
const char* const shape_names[] = {"per tree", "row-parallel", "automatic"};

// Rows laid out `stride` floats apart (0: vocab), and trees beyond `capacity` nodes (0: none)
// refused as over capacity.
struct Layout {
  long long stride = 0;
  int capacity = 0;
};

testing::StochasticData laid_out(testing::StochasticData d, Layout layout) {
  if (layout.stride > 0) testing::pad_rows(d, layout.stride);
  if (layout.capacity > 0) d.max_nodes = layout.capacity;
  return d;  // moved: the mergers its views point into stay where they are
}

void check_rejection(std::mt19937_64& rng, int batch, int nodes, int vocab, bool edge_rows, Layout layout = {}) {
  for (const core::SamplingParams& params : sampling_cases) {
    testing::StochasticData host =
        laid_out(testing::random_stochastic_batch(rng, batch, nodes, vocab, true, true, edge_rows), layout);
    const testing::StochasticData input = host;
    REQUIRE(backend::rejection_verify(backend::host{}, host.batch(), params) == backend::status::ok);
    int depth = 0, bad = 0;
    for (int t = 0; t < host.size(); ++t) {
      depth += std::max(host.length[t], 0);
      bad += host.status[t] != core::stochastic_status::ok;
    }
    for (int s = 0; s < 3; ++s) {
      testing::StochasticData device = input;
      REQUIRE(testing::run_rejection_on_device(device.batch(), params, shapes[s]) == backend::status::ok);
      const int differ = testing::differing_trees(host, device);
      std::printf("rejection (%s) T=%.1f top-k %d top-p %.1f min-p %.2f, vocab %d%s: %d of %d trees differ (%d bad "
                  "rows, mean path %.2f)\n",
                  shape_names[s], params.temperature, params.top_k, params.top_p, params.min_p, vocab,
                  edge_rows ? ", edge rows" : "", differ, host.size(), bad, static_cast<double>(depth) / host.size());
      CHECK(differ == 0);
    }
  }
}

void check_conditional(std::mt19937_64& rng, int batch, int nodes, int vocab, bool edge_rows, Layout layout = {}) {
  for (int top_k : {0, 5}) {
    for (const core::SamplingParams& next :
         {core::SamplingParams{0.0f}, core::SamplingParams{1.0f}, core::SamplingParams{1.0f, 0, 0.9f}}) {
      testing::StochasticData host =
          laid_out(testing::random_stochastic_batch(rng, batch, nodes, vocab, false, true, edge_rows), layout);
      const testing::StochasticData input = host;
      const core::ConditionalParams params{0.02f, top_k, 3};
      REQUIRE(backend::conditional_verify(backend::host{}, host.batch(), params, next) == backend::status::ok);
      for (int s = 0; s < 3; ++s) {
        testing::StochasticData device = input;
        REQUIRE(testing::run_conditional_on_device(device.batch(), params, next, shapes[s]) == backend::status::ok);
        const int differ = testing::differing_trees(host, device);
        std::printf("conditional (%s) top_k %d, next T=%.1f top-p %.1f, vocab %d%s: %d of %d trees differ (outputs or "
                    "accepted flags)\n",
                    shape_names[s], top_k, next.temperature, next.top_p, vocab, edge_rows ? ", edge rows" : "", differ,
                    host.size());
        CHECK(differ == 0);
      }
    }
  }
}

}  // namespace

TEST_CASE("GPU rejection sampling equals the host walk bit for bit", "[gpu][stochastic]") {
  std::mt19937_64 rng(13);
  check_rejection(rng, 64, 32, 20, false);
  check_rejection(rng, 64, 32, 1000, false);
  check_rejection(rng, 64, 32, 1000, true);
}

TEST_CASE("GPU rejection sampling equals the host walk at vocab 32000 and 128256", "[gpu][stochastic]") {
  std::mt19937_64 rng(15);
  check_rejection(rng, 6, 12, 32000, false);
  check_rejection(rng, 4, 8, 128256, true);
}

TEST_CASE("GPU conditional verification equals the host walk bit for bit", "[gpu][stochastic]") {
  std::mt19937_64 rng(14);
  check_conditional(rng, 64, 32, 500, false);
  check_conditional(rng, 64, 32, 500, true);
  check_conditional(rng, 4, 12, 128256, true);
}

TEST_CASE("GPU stochastic verification handles padded and unaligned rows and trees over capacity",
          "[gpu][stochastic]") {
  std::mt19937_64 rng(16);
  check_rejection(rng, 6, 12, 32001, true);                // rows not 16-byte aligned: scalar loads
  check_rejection(rng, 6, 12, 32001, true, {32004, 0});    // aligned padded rows, an uneven float4 tail
  check_rejection(rng, 16, 12, 1000, false, {0, 6});       // a tree of more than 6 nodes is refused
  check_conditional(rng, 6, 12, 32001, true, {32004, 0});
  check_conditional(rng, 16, 12, 1000, true, {1003, 6});
}
