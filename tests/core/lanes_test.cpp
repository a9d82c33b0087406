#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>
#include <vector>

#include <specdec/backend.hpp>
#include <specdec/core/lanes.hpp>
#include <specdec/core/sampling.hpp>

#include "kernels/random_stochastic.hpp"
#include "support/token_list.hpp"

using namespace specdec;
using namespace specdec::core;

namespace {

// The lane order written out plainly: lane v % 256 adds entry v in increasing v, then levels of
// halving (entry i of the next level = entry i + entry i + half of this one).
float lane_order_sum(const std::vector<float>& x) {
  std::vector<float> level(sampling_lanes, 0.0f);
  for (std::size_t v = 0; v < x.size(); ++v) level[v % sampling_lanes] += x[v];
  while (level.size() > 1) {
    const std::size_t half = level.size() / 2;
    std::vector<float> next(half);
    for (std::size_t i = 0; i < half; ++i) next[i] = level[i] + level[i + half];
    level = next;
  }
  return level[0];
}

// An executor that does the order-free work (max_scan, count, histogram, for_each) in a shuffled
// order, split over 256 "threads" whose results are combined in another shuffled order, as a
// GPU may schedule it; sums keep the lane order (SerialLanes), and lane_sums computes the lanes
// one by one in a shuffled order of lanes. A walk that gives the same bits with it and with
// SerialLanes depends on the order of its integer work in no way.
class ShuffledLanes {
 public:
  explicit ShuffledLanes(std::uint64_t seed) : rng_(seed) {}
  bool leader() const { return true; }
  void sync() const {}
  template <class F>
  void for_each(int count, F&& f) {
    for (int i : order(count)) f(i);
  }
  template <class F>
  float sum(int count, F&& f) {
    return serial_.sum(count, f);
  }
  template <class F>
  float* lane_sums(int count, F&& f) {
    for (int lane : order(sampling_lanes)) {
      float s = 0.0f;
      for (int v = lane; v < count; v += sampling_lanes) s += f(v);
      lanes_[lane] = s;
    }
    return lanes_;
  }
  float* load_lanes(const float* from) {
    for (int lane : order(sampling_lanes)) lanes_[lane] = from[lane];
    return lanes_;
  }
  template <class Pred>
  std::uint64_t count(int count, Pred&& pred) {
    std::uint64_t n = 0;
    for (int v : order(count)) n += pred(v) ? 1u : 0u;
    return n;
  }
  template <class F>
  std::uint64_t max_scan(int count, F&& f) {
    std::vector<std::uint64_t> best(sampling_lanes, 0);
    for (int i : order(count)) best[static_cast<std::size_t>(i % sampling_lanes)] = f(i, best[static_cast<std::size_t>(i % sampling_lanes)]);
    std::shuffle(best.begin(), best.end(), rng_);
    return *std::max_element(best.begin(), best.end());
  }
  template <class F>
  const std::uint64_t* histogram(int count, F&& f) {
    std::fill(bins_, bins_ + 256, 0);
    for (int v : order(count)) {
      const Bin b = f(v);
      bins_[b.bin] += b.amount;
    }
    return bins_;
  }

 private:
  std::vector<int> order(int count) {
    std::vector<int> o(static_cast<std::size_t>(count));
    std::iota(o.begin(), o.end(), 0);
    std::shuffle(o.begin(), o.end(), rng_);
    return o;
  }
  std::mt19937_64 rng_;
  SerialLanes serial_;
  float lanes_[sampling_lanes];
  std::uint64_t bins_[256];
};

}  // namespace

TEST_CASE("SerialLanes sums in the lane order", "[core][lanes]") {
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<float> exponent(-20.0f, 20.0f);
  int differs_from_sequential = 0;
  for (int n : {0, 1, 5, 255, 256, 257, 1000, 32000, 32003}) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (float& e : x) e = std::exp2(exponent(rng)) * (rng() % 2 ? 1.0f : -1.0f);
    SerialLanes ex;
    const float lanes = ex.sum(n, [&](int v) { return x[static_cast<std::size_t>(v)]; });
    CHECK(lanes == lane_order_sum(x));
    differs_from_sequential += lanes != std::accumulate(x.begin(), x.end(), 0.0f);
    // lane_sums: the partials before the tree, each lane in increasing v
    const float* partials = ex.lane_sums(n, [&](int v) { return x[static_cast<std::size_t>(v)]; });
    std::vector<float> want(sampling_lanes, 0.0f), got(partials, partials + sampling_lanes);
    for (std::size_t v = 0; v < x.size(); ++v) want[v % sampling_lanes] += x[v];
    CHECK(got == want);
    CHECK(combine_lanes(got.data()) == lanes);
  }
  CHECK(differs_from_sequential > 0);  // the order matters for these inputs: the check above has teeth
}

TEST_CASE("SerialLanes' integer primitives", "[core][lanes]") {
  SerialLanes ex;
  CHECK(ex.count(1000, [](int v) { return v % 7 == 0; }) == 143);
  CHECK(ex.max_scan(1000, [](int i, std::uint64_t best) { return std::max<std::uint64_t>(best, (i * 37) % 1000); }) == 999);
  const std::uint64_t* bins = ex.histogram(600, [](int v) { return Bin{v % 3, 2}; });
  CHECK(bins[0] == 400);
  CHECK(bins[2] == 400);
  CHECK(bins[3] == 0);
}

TEST_CASE("the walks depend on the order of their integer work in no way", "[core][lanes][stochastic]") {
  std::mt19937_64 rng(71);
  for (int vocab : {30, 700}) {
    for (const SamplingParams& params : {SamplingParams{0.0f}, SamplingParams{1.0f}, SamplingParams{0.7f, 5, 0.8f, 0.0f},
                                          SamplingParams{1.3f, 0, 0.9f, 0.02f}}) {
      testing::StochasticData serial = testing::random_stochastic_batch(rng, 24, 16, vocab, true, true, vocab == 700);
      testing::StochasticData shuffled = serial;
      const StochasticVerifyBatch a = serial.batch(), b = shuffled.batch();
      for (int t = 0; t < serial.size(); ++t) {
        SerialLanes one;
        ShuffledLanes other(static_cast<std::uint64_t>(t));
        rejection_verify_in_batch(one, a, t, params);
        rejection_verify_in_batch(other, b, t, params);
        CHECK(serial.status[static_cast<std::size_t>(t)] == shuffled.status[static_cast<std::size_t>(t)]);
        CHECK(serial.length[static_cast<std::size_t>(t)] == shuffled.length[static_cast<std::size_t>(t)]);
        CHECK(serial.next_token[static_cast<std::size_t>(t)] == shuffled.next_token[static_cast<std::size_t>(t)]);
        CHECK(serial.path == shuffled.path);
      }
      for (int t = 0; t < serial.size(); ++t) {
        SerialLanes one;
        ShuffledLanes other(static_cast<std::uint64_t>(t) + 100);
        const ConditionalParams conditional{0.02f, params.top_k, 3};
        conditional_verify_in_batch(one, a, t, conditional, params);
        conditional_verify_in_batch(other, b, t, conditional, params);
        CHECK(serial.next_token[static_cast<std::size_t>(t)] == shuffled.next_token[static_cast<std::size_t>(t)]);
        CHECK(serial.length[static_cast<std::size_t>(t)] == shuffled.length[static_cast<std::size_t>(t)]);
      }
      CHECK(serial.path == shuffled.path);
      CHECK(serial.accepted == shuffled.accepted);
    }
  }
}

using testing::TokenList;

TEST_CASE("the race's winner depends on the order of its work in no way", "[core][lanes][stochastic]") {
  std::mt19937_64 rng(72);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (int vocab : {100, 1000, 32003}) {
    std::vector<float> w(static_cast<std::size_t>(vocab));
    for (float& x : w) x = rng() % 3 == 0 ? 0.0f : std::exp(normal(rng));
    TokenList excluded;
    for (int k = 0; k < 6; ++k) excluded.tokens.push_back(static_cast<int>(rng() % static_cast<std::uint64_t>(vocab)));
    const auto weight = [&](int v) { return w[static_cast<std::size_t>(v)]; };
    int differs = 0;
    for (int position = 0; position < 300; ++position) {
      SerialLanes one;
      ShuffledLanes other(static_cast<std::uint64_t>(position));
      const token_t a = race(one, vocab, weight, excluded, RandomKey{9, 4}, position);
      CHECK(a == race(other, vocab, weight, excluded, RandomKey{9, 4}, position));
      CHECK(race(one, vocab, weight, NoExclusion{}, RandomKey{9, 4}, position) ==
            race(other, vocab, weight, NoExclusion{}, RandomKey{9, 4}, position));
      differs += a != race(one, vocab, weight, excluded, RandomKey{9, 4}, position + 1);
      // Lane masses known beforehand (RowStats) give the same winner, in any order of the lanes.
      std::vector<float> known(sampling_lanes);
      for (int lane = 0; lane < sampling_lanes; ++lane) {
        for (int v = lane; v < vocab; v += sampling_lanes) known[lane] += w[v];
      }
      CHECK(race(other, vocab, weight, excluded, RandomKey{9, 4}, position, known.data()) == a);
    }
    CHECK(differs > 0);  // the positions really draw different tokens
  }
}
