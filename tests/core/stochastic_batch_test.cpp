#include <catch2/catch.hpp>

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
