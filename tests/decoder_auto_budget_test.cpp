// The automatic budget (DecoderOptions::cost): lossless whatever it chooses, nothing drafted when
// drafting cannot pay, everything useful drafted when nodes are nearly free, and calibrated.
#include <catch2/catch.hpp>

#include <chrono>
#include <memory>
#include <numeric>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

#include "support/counting_oracle.hpp"

using namespace specdec;

namespace {

constexpr int kVocab = 50;
constexpr int kNew = 400;

// A forward that costs `fixed` plus `per_node` per node, whatever the context.
struct LinearCost {
  double fixed, per_node;
  double step_seconds(int nodes, int) const { return fixed + per_node * nodes; }
};

std::vector<token_t> reference(const HashTarget& target, const std::vector<token_t>& prompt) {
  std::vector<token_t> r = prompt;
  const auto g = target.generate(prompt, kNew + 80);
  r.insert(r.end(), g.begin(), g.end());
  return r;
}

template <class Decoder>
std::vector<token_t> decode(Decoder& decoder, const std::vector<token_t>& prompt) {
  decoder.prefill(prompt);
  std::vector<token_t> out = prompt;
  const std::vector<token_t> generated = decoder.generate(kNew);
  out.insert(out.end(), generated.begin(), generated.end());
  return out;
}

std::vector<token_t> first(const std::vector<token_t>& v, std::size_t n) { return {v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n)}; }

}  // namespace

TEST_CASE("the automatic budget is lossless whatever it chooses", "[decoder][budget]") {
  HashTarget target(kVocab);
  for (int seed = 0; seed < 6; ++seed) {
    const std::vector<token_t> prompt{static_cast<token_t>(seed), 7, static_cast<token_t>(3 * seed % kVocab), 11};
    const std::vector<token_t> truth = reference(target, prompt);
    for (const LinearCost cost : {LinearCost{1.0, 0.001}, LinearCost{1.0, 0.3}, LinearCost{0.0, 1.0}}) {
      SpeculativeDecoder<HashTarget, OracleDrafter, CasdDrafter, ExactVerifier> decoder(
          target, DecoderOptions{.budget = 24, .cost = cost},
          OracleDrafter(truth, 8, 0.25, 2, static_cast<std::uint64_t>(seed) + 1), CasdDrafter{}, ExactVerifier{});
      const std::vector<token_t> out = decode(decoder, prompt);
      CHECK(out == first(truth, out.size()));
      CHECK(decoder.stats().sized_steps == decoder.stats().steps);
    }
  }
}

using testing::CountingOracle;

TEST_CASE("the automatic budget drafts nothing when a node costs a forward, and stops asking", "[decoder][budget]") {
  HashTarget target(kVocab);
  const std::vector<token_t> prompt{1, 2, 3};
  const std::vector<token_t> truth = reference(target, prompt);
  CountingOracle oracle(truth, 8, 0.0);
  const std::shared_ptr<int> proposals = oracle.proposals;
  SpeculativeDecoder<HashTarget, CountingOracle, ExactVerifier> decoder(
      target, DecoderOptions{.budget = 16, .cost = LinearCost{0.0, 1.0}}, std::move(oracle), ExactVerifier{});
  const std::vector<token_t> out = decode(decoder, prompt);
  CHECK(out == first(truth, out.size()));
  const DecodeStats& s = decoder.stats();
  REQUIRE(s.nodes_per_step.size() == 1);  // every step sent 0 nodes
  CHECK(s.nodes_per_step[0] == s.steps);
  CHECK(s.tau() == 1.0);
  CHECK(s.sized_steps == s.steps);
  // Pauses of 1, 2, 4, ..., 32 steps between probes: 400 steps ask the drafter 17 times.
  CHECK(*proposals < s.steps / 10);
  CHECK(*proposals > 5);
}

TEST_CASE("the drafters pause when their drafting costs more than their nodes save, though every node is accepted",
          "[decoder][budget]") {
  HashTarget target(kVocab);
  const std::vector<token_t> prompt{1, 2, 3};
  const std::vector<token_t> truth = reference(target, prompt);
  // A forward of 10 us + 1 us a node: the oracle's 8 nodes, all accepted, make a step of 9 tokens
  // for 19 us against 9 plain steps' 99 us. Drafting them for 300 us does not pay; for ~1 us it does.
  // (The pause weighs the model's times here: the hash target's own take far less.)
  const LinearCost cost{10e-6, 1e-6};
  for (const auto spin : {std::chrono::microseconds(300), std::chrono::microseconds(0)}) {
    CountingOracle oracle(truth, 8, 0.0);
    oracle.spin = spin;
    const std::shared_ptr<int> proposals = oracle.proposals;
    SpeculativeDecoder<HashTarget, CountingOracle, ExactVerifier> decoder(
        target, DecoderOptions{.budget = 16, .cost = cost, .measured_pause = false, .clock = testing::TestClock::now}, std::move(oracle), ExactVerifier{});
    const std::vector<token_t> out = decode(decoder, prompt);
    CHECK(out == first(truth, out.size()));
    const DecodeStats& s = decoder.stats();
    CHECK(s.paused_steps == s.steps - *proposals);
    if (spin.count() > 0) {
      // Steps send all 8 nodes whenever the drafter is asked, yet it is asked in pauses of up to 32.
      CHECK(*proposals < 20);
      CHECK(s.steps > 200);
    } else {
      CHECK(s.paused_steps < s.steps / 10);
      CHECK(s.tau() > 6.0);
    }
  }
}

namespace {

// The hash target, but its forward takes `per_node` for every tree node on the TestClock: a
// compute-bound target, whatever its cost model says.
struct SpinningTarget : HashTarget {
  using HashTarget::HashTarget;
  const Output& forward(const TreeView& tree) {
    testing::TestClock::advance(per_node * tree.size);
    return HashTarget::forward(tree);
  }
  std::chrono::microseconds per_node{100};
};

}  // namespace

TEST_CASE("the pause weighs measured steps: a cost model that says nodes are cheap does not make drafting last",
          "[decoder][budget]") {
  SpinningTarget target(kVocab);
  const std::vector<token_t> prompt{1, 2, 3};
  const std::vector<token_t> truth = reference(target, prompt);
  // The model says a node costs 1% of a forward; each really costs a whole one. The oracle's
  // 8-node chains are half wrong per node: about 2 tokens a step, for 9 forwards' time.
  const LinearCost optimistic{100e-6, 1e-6};
  for (const bool measured : {true, false}) {
    CountingOracle oracle(truth, 8, 0.5, 1, 7);
    const std::shared_ptr<int> proposals = oracle.proposals;
    SpeculativeDecoder<SpinningTarget, CountingOracle, ExactVerifier> decoder(
        target, DecoderOptions{.budget = 8, .cost = optimistic, .measured_pause = measured, .clock = testing::TestClock::now}, std::move(oracle),
        ExactVerifier{});
    const std::vector<token_t> out = decode(decoder, prompt);
    CHECK(out == first(truth, out.size()));
    const DecodeStats& s = decoder.stats();
    if (measured) {
      CHECK(s.paused_steps > s.steps * 8 / 10);  // probes only: each loses 7 forwards' time
    } else {
      CHECK(s.paused_steps < s.steps / 10);  // the model's word: every step pays
    }
  }
}

TEST_CASE("the automatic budget drafts what pays when nodes are nearly free, and learns calibrated estimates",
          "[decoder][budget]") {
  HashTarget target(kVocab);
  const std::vector<token_t> prompt{4, 5, 6};
  const std::vector<token_t> truth = reference(target, prompt);
  // Each chain node is wrong with probability 0.3: given its parent, a node is accepted with
  // probability 0.7, whatever the oracle's scores claim (0.9 per level).
  SpeculativeDecoder<HashTarget, OracleDrafter, ExactVerifier> decoder(
      target, DecoderOptions{.budget = 16, .cost = LinearCost{1.0, 1e-3}}, OracleDrafter(truth, 10, 0.3), ExactVerifier{});
  for (int round = 0; round < 4; ++round) decode(decoder, prompt);  // the model keeps learning across sequences
  const DecodeStats& s = decoder.stats();
  const AcceptanceModel* model = decoder.acceptance_model();
  REQUIRE(model != nullptr);
  CHECK(model->probability(0, 1, 0.9) == Approx(0.7).margin(0.06));
  CHECK(model->calibration_error() < 0.1);
  // Nearly free nodes: the whole chain goes (0.7^10 still adds more than its cost).
  CHECK(s.draft_nodes_per_step() > 9.0);
  // The expected tokens per step match the observed τ.
  CHECK(s.expected_tokens / static_cast<double>(s.sized_steps) == Approx(s.tau()).epsilon(0.1));

  // Each further node costs 0.1 forwards: deep nodes (path probability 0.7^k) stop paying.
  SpeculativeDecoder<HashTarget, OracleDrafter, ExactVerifier> careful(
      target, DecoderOptions{.budget = 16, .cost = LinearCost{1.0, 0.1}}, OracleDrafter(truth, 10, 0.3), ExactVerifier{});
  for (int round = 0; round < 4; ++round) decode(careful, prompt);
  CHECK(careful.stats().draft_nodes_per_step() < 6.0);
  CHECK(careful.stats().draft_nodes_per_step() > 1.0);
}

TEST_CASE("without a cost model the budget is fixed and no acceptance model is kept", "[decoder][budget]") {
  HashTarget target(kVocab);
  SpeculativeDecoder<HashTarget, CasdDrafter, ExactVerifier> decoder(target, DecoderOptions{.budget = 8});
  CHECK(decoder.acceptance_model() == nullptr);
  decoder.prefill(std::vector<token_t>{1, 2, 3});
  decoder.generate(20);
  CHECK(decoder.stats().sized_steps == 0);
}
