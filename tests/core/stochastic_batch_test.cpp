#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>
#include <span>
#include <vector>

#include <specdec/backend.hpp>
#include <specdec/policies/verifiers/conditional.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>

#include "kernels/random_stochastic.hpp"

using namespace specdec;

namespace {

// A target output over one tree's rows of the batch's logits.
struct RowsOutput {
  const float* rows;
  int vocab;
  std::span<const float> logits(node_t node) const {
    return {rows + static_cast<std::size_t>(node) * vocab, static_cast<std::size_t>(vocab)};
  }
};

bool has_bad_row(const testing::StochasticData& d, int tree) {
  for (int i = 0; i < d.views[tree].size; ++i) {
    const float* row = d.logits.data() + static_cast<std::size_t>(d.row_offset[tree] + i) * d.vocab;
    bool finite = false;
    for (int v = 0; v < d.vocab; ++v) {
      if (row[v] != row[v] || row[v] == INFINITY) return true;
      finite = finite || row[v] > -INFINITY;
    }
    if (!finite) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("rejection_verify_in_batch is RejectionSampling::verify, tree by tree", "[core][stochastic]") {
  std::mt19937_64 rng(61);
  for (float temperature : {0.0f, 0.7f, 1.0f}) {
    testing::StochasticData d = testing::random_stochastic_batch(rng, 40, 24, 30, true, false);
    const core::SamplingParams params{temperature, temperature > 0.9f ? 5 : 0, temperature == 0.7f ? 0.9f : 1.0f, 0.0f};
    REQUIRE(backend::rejection_verify(backend::host{}, d.batch(), params) == backend::status::ok);
    for (int t = 0; t < d.size(); ++t) {
      RejectionSampling verifier(SamplingOptions{params, d.keys[t].seed, d.keys[t].sequence});
      Verdict verdict;
      verifier.verify(d.views[t], RowsOutput{d.logits.data() + static_cast<std::size_t>(d.row_offset[t]) * d.vocab, d.vocab},
                      verdict);
      REQUIRE(d.status[t] == core::stochastic_status::ok);
      REQUIRE(d.length[t] == static_cast<int>(verdict.path.size()));
      CHECK(std::equal(verdict.path.begin(), verdict.path.end(), d.path.begin() + t * 24));
      CHECK(d.next_token[t] == verdict.next_token);
    }
  }
}

TEST_CASE("conditional_verify_in_batch is ConditionalVerifier::verify, tree by tree", "[core][stochastic]") {
  std::mt19937_64 rng(62);
  for (int top_k : {0, 3}) {
    testing::StochasticData d = testing::random_stochastic_batch(rng, 40, 24, 30, false, false);
    const core::ConditionalParams params{0.05f, top_k, 2};
    const core::SamplingParams next{top_k == 0 ? 0.0f : 1.0f};
    REQUIRE(backend::conditional_verify(backend::host{}, d.batch(), params, next) == backend::status::ok);
    for (int t = 0; t < d.size(); ++t) {
      ConditionalVerifier verifier(params, SamplingOptions{next, d.keys[t].seed, d.keys[t].sequence});
      Verdict verdict;
      verifier.verify(d.views[t], RowsOutput{d.logits.data() + static_cast<std::size_t>(d.row_offset[t]) * d.vocab, d.vocab},
                      verdict);
      REQUIRE(d.status[t] == core::stochastic_status::ok);
      REQUIRE(d.length[t] == static_cast<int>(verdict.path.size()));
      CHECK(std::equal(verdict.path.begin(), verdict.path.end(), d.path.begin() + t * 24));
      CHECK(d.next_token[t] == verdict.next_token);
    }
  }
}

TEST_CASE("unusable rows are reported per tree, not thrown", "[core][stochastic]") {
  std::mt19937_64 rng(63);
  testing::StochasticData d = testing::random_stochastic_batch(rng, 60, 16, 20, true, true);
  REQUIRE(backend::rejection_verify(backend::host{}, d.batch(), core::SamplingParams{}) == backend::status::ok);
  int bad = 0;
  for (int t = 0; t < d.size(); ++t) {
    if (d.status[t] == core::stochastic_status::bad_row) {
      ++bad;
      CHECK(has_bad_row(d, t));
      CHECK(d.bad_node[t] >= 0);
      CHECK(d.row_status[t] != core::sampling_status::ok);
      CHECK(d.next_token[t] == -1);
    }
  }
  CHECK(bad > 0);
}

TEST_CASE("stochastic verification refuses bad parameters and oversized trees", "[core][stochastic]") {
  std::mt19937_64 rng(64);
  testing::StochasticData d = testing::random_stochastic_batch(rng, 4, 16, 20, false, false);
  CHECK(backend::rejection_verify(backend::host{}, d.batch(), core::SamplingParams{-1.0f}) ==
        backend::status::invalid_argument);
  CHECK(backend::conditional_verify(backend::host{}, d.batch(), core::ConditionalParams{0.1f, 0, 20},
                                    core::SamplingParams{}) == backend::status::invalid_argument);  // eos outside
  d.max_nodes = 1;  // every tree with a draft is now too big
  REQUIRE(backend::rejection_verify(backend::host{}, d.batch(), core::SamplingParams{}) == backend::status::ok);
  for (int t = 0; t < d.size(); ++t)
    CHECK(d.status[t] == (d.views[t].size > 1 ? core::stochastic_status::over_capacity : core::stochastic_status::ok));
}

TEST_CASE("padded logits rows (row_stride > vocab) give the unpadded rows' results", "[core][stochastic]") {
  std::mt19937_64 rng(65);
  for (int vocab : {21, 1001}) {
    testing::StochasticData plain = testing::random_stochastic_batch(rng, 8, 12, vocab, true, true, true);
    testing::StochasticData padded = plain;
    testing::pad_rows(padded, vocab + 3);
    const core::SamplingParams params{0.9f, 0, 0.9f};
    REQUIRE(backend::rejection_verify(backend::host{}, plain.batch(), params) == backend::status::ok);
    REQUIRE(backend::rejection_verify(backend::host{}, padded.batch(), params) == backend::status::ok);
    INFO("vocab " << vocab);
    CHECK(testing::differing_trees(plain, padded) == 0);
    // The NaN padding is what a walk that strays past the vocabulary reads: unpadded rows differ.
    testing::StochasticData strayed = padded;
    strayed.vocab = vocab + 1;
    REQUIRE(backend::rejection_verify(backend::host{}, strayed.batch(), params) == backend::status::ok);
    CHECK(testing::differing_trees(plain, strayed) > 0);
  }
}

namespace {

const core::SamplingParams stats_cases[] = {
    {0.0f}, {1.0f}, {0.8f, 0, 1.0f, 0.05f}, {0.7f, 0, 0.9f}, {1.0f, 10}, {1.3f, 40, 0.8f, 0.02f},
};

}  // namespace

TEST_CASE("RowStats computed beforehand change no bit of rejection sampling", "[core][stochastic]") {
  std::mt19937_64 rng(65);
  for (int vocab : {20, 300, 1000}) {
    for (bool sampled : {false, true}) {
      for (const core::SamplingParams& params : stats_cases) {
        testing::StochasticData lazy = testing::random_stochastic_batch(rng, 30, 24, vocab, sampled, true, true);
        testing::StochasticData known = lazy;
        REQUIRE(backend::rejection_verify(backend::host{}, lazy.batch(), params) == backend::status::ok);
        const std::vector<core::RowStats> stats = testing::row_stats(known, params);
        core::StochasticVerifyBatch b = known.batch();
        b.row_stats = stats.data();
        REQUIRE(backend::rejection_verify(backend::host{}, b, params) == backend::status::ok);
        INFO("vocab " << vocab << ", sampled " << sampled << ", T " << params.temperature << ", top-k "
                      << params.top_k << ", top-p " << params.top_p << ", min-p " << params.min_p);
        CHECK(testing::differing_trees(lazy, known) == 0);
      }
    }
  }
}

TEST_CASE("RowStats computed beforehand change no bit of conditional verification", "[core][stochastic]") {
  std::mt19937_64 rng(66);
  for (int vocab : {20, 300}) {
    for (int top_k : {0, 4}) {
      for (const core::SamplingParams& next : stats_cases) {
        testing::StochasticData lazy = testing::random_stochastic_batch(rng, 30, 24, vocab, false, true, true);
        testing::StochasticData known = lazy;
        const core::ConditionalParams params{0.02f, top_k, 3};
        REQUIRE(backend::conditional_verify(backend::host{}, lazy.batch(), params, next) == backend::status::ok);
        const std::vector<core::RowStats> stats = testing::row_stats(known, core::conditional_softmax());
        core::StochasticVerifyBatch b = known.batch();
        b.row_stats = stats.data();
        REQUIRE(backend::conditional_verify(backend::host{}, b, params, next) == backend::status::ok);
        INFO("vocab " << vocab << ", top_k " << top_k << ", next T " << next.temperature);
        CHECK(testing::differing_trees(lazy, known) == 0);
      }
    }
  }
}

TEST_CASE("RowStats for other parameters give only their argmax, and the walks read them", "[core][stochastic]") {
  std::mt19937_64 rng(67);
  testing::StochasticData lazy = testing::random_stochastic_batch(rng, 60, 24, 300, false, true, true);
  testing::StochasticData other = lazy, tampered = lazy;
  const core::SamplingParams params{1.0f};
  REQUIRE(backend::rejection_verify(backend::host{}, lazy.batch(), params) == backend::status::ok);

  // Lane masses summed at another temperature are ignored: the same bits.
  const std::vector<core::RowStats> at_half = testing::row_stats(other, core::SamplingParams{0.5f});
  core::StochasticVerifyBatch b = other.batch();
  b.row_stats = at_half.data();
  REQUIRE(backend::rejection_verify(backend::host{}, b, params) == backend::status::ok);
  CHECK(testing::differing_trees(lazy, other) == 0);

  // Lane masses for these parameters are used: wrong ones (lanes 128.. emptied) change the draws.
  std::vector<core::RowStats> wrong = testing::row_stats(tampered, params);
  int with_masses = 0;
  for (core::RowStats& s : wrong) {
    if (s.temperature != params.temperature) continue;
    ++with_masses;
    for (int lane = 128; lane < core::sampling_lanes; ++lane) s.lane_mass[lane] = 0.0f;
  }
  CHECK(with_masses > 100);
  core::StochasticVerifyBatch t = tampered.batch();
  t.row_stats = wrong.data();
  REQUIRE(backend::rejection_verify(backend::host{}, t, params) == backend::status::ok);
  CHECK(testing::differing_trees(lazy, tampered) > 5);
}

TEST_CASE("the pre-pass's threads (row_stats_thread over split argmax keys) give fill_row_stats_in_batch's RowStats",
          "[core][stochastic]") {
  std::mt19937_64 rng(68);
  for (int vocab : {20, 1000}) {
    for (const core::SamplingParams& params : {core::SamplingParams{0.8f, 0, 1.0f, 0.05f}, core::SamplingParams{0.0f},
                                               core::SamplingParams{1.0f, 5}}) {
      testing::StochasticData d = testing::random_stochastic_batch(rng, 7, 20, vocab, false, true, true);
      const core::StochasticVerifyBatch b = d.batch();
      const std::vector<core::RowStats> want = testing::row_stats(d, params);
      // The first kernel: each row's argmax keys over 3 slices (as the grid splits the vocabulary).
      const int splits = 3, chunk = (vocab + splits - 1) / splits;
      const long long rows = static_cast<long long>(b.batch) * b.max_nodes;
      std::vector<std::uint64_t> partial(static_cast<std::size_t>(rows * splits), 0);
      for (int t = 0; t < b.batch; ++t)
        for (int i = 0; i < b.trees[t].size; ++i)
          for (int s = 0; s < splits; ++s)
            partial[static_cast<std::size_t>((t * b.max_nodes + i) * splits + s)] = core::top_key_of(
                b.logits + (static_cast<long long>(b.row_offset[t]) + i) * b.row_stride, s * chunk,
                std::min(vocab, (s + 1) * chunk));
      // The second kernel: every thread of its grid, in a scrambled order.
      std::vector<core::RowStats> got(want.size());
      std::vector<long long> threads(static_cast<std::size_t>(rows * core::row_stats_warps_per_row * 32 + 100));
      std::iota(threads.begin(), threads.end(), 0);
      std::shuffle(threads.begin(), threads.end(), rng);
      for (long long thread : threads) core::row_stats_thread(b, params, splits, partial.data(), got.data(), thread);
      int compared = 0, with_masses = 0;
      for (int t = 0; t < b.batch; ++t) {
        for (int i = 0; i < b.trees[t].size; ++i) {
          const core::RowStats& w = want[static_cast<std::size_t>(t * b.max_nodes + i)];
          const core::RowStats& g = got[static_cast<std::size_t>(t * b.max_nodes + i)];
          CHECK(g.top_key == w.top_key);
          CHECK(g.temperature == w.temperature);
          CHECK(g.min_p == w.min_p);
          if (w.temperature > 0.0f) {
            ++with_masses;
            CHECK(std::equal(w.lane_mass, w.lane_mass + core::sampling_lanes, g.lane_mass));
          }
          ++compared;
        }
      }
      CHECK(compared > 20);
      if (params.temperature > 0.0f && params.top_k == 0) CHECK(with_masses > 20);
    }
  }
}
