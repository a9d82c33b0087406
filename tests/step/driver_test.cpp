// The one step of both facades (include/specdec/step/driver.hpp): a decoder's step is a batch of
// one's, down to its times; where a step reads the clock; what a throwing commit leaves.
#include <catch2/catch.hpp>

#include <chrono>
#include <span>
#include <vector>

#include <specdec/batch_decoder.hpp>
#include <specdec/decoder.hpp>
#include <specdec/error.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

#include "support/counting_oracle.hpp"
#include "support/test_clock.hpp"

namespace {

using namespace specdec;
using std::chrono::microseconds;
using testing::CountingOracle;
using testing::TestClock;

constexpr int kVocab = 64;
constexpr double us = 1e-6;

// The hash target, whose forward (of one tree or a batch) takes 10 us and each commit 2 us on the
// TestClock.
struct TimedTarget : HashTarget {
  using HashTarget::HashTarget;
  const Output& forward(const TreeView& tree) {
    TestClock::advance(microseconds(10));
    return HashTarget::forward(tree);
  }
  const BatchOutput& forward(const TreeBatchView& batch) {
    TestClock::advance(microseconds(10));
    return HashTarget::forward(batch);
  }
  void commit(std::span<const node_t> path) {
    TestClock::advance(microseconds(2));
    HashTarget::commit(path);
  }
  void commit(int slot, std::span<const node_t> path) {
    TestClock::advance(microseconds(2));
    HashTarget::commit(slot, path);
  }
};

// ExactVerifier, taking 1 us a tree on the TestClock.
struct TimedVerifier : ExactVerifier {
  template <class Out>
  void verify(const TreeView& tree, const Out& out, Verdict& verdict) const {
    TestClock::advance(microseconds(1));
    ExactVerifier::verify(tree, out, verdict);
  }
};

// An oracle of `prompt`'s greedy continuation on the hash target that drafts 4 nodes in 3 us.
CountingOracle oracle(std::vector<token_t> prompt) {
  HashTarget reference(kVocab, 11);
  const std::vector<token_t> more = reference.generate(prompt, 200);
  prompt.insert(prompt.end(), more.begin(), more.end());
  CountingOracle drafter(prompt, 4);
  drafter.spin = microseconds(3);
  return drafter;
}

RequestOptions request(bool speculate) {
  RequestOptions options;
  options.max_new_tokens = 150;
  options.speculate = speculate;
  options.budget = 4;
  return options;
}

}  // namespace

TEST_CASE("driver: a decoder's step is a batch of one's, down to its times", "[step][driver]") {
  const std::vector<token_t> prompt{1, 2, 3};
  TimedTarget single(kVocab, 11), batched(kVocab, 11);
  SpeculativeDecoder<TimedTarget, CountingOracle, TimedVerifier> decoder(
      single, DecoderOptions{.budget = 4, .clock = TestClock::now}, oracle(prompt), TimedVerifier{});
  SpeculativeBatch<TimedTarget, CountingOracle, TimedVerifier> batch(batched, 1, BatchOptions{.clock = TestClock::now},
                                                                     oracle(prompt), TimedVerifier{});
  decoder.prefill(prompt);
  const request_id id = batch.add(prompt, request(true));
  for (int i = 0; i < 10; ++i) {
    const std::span<const token_t> one = decoder.step();
    const std::span<const RequestUpdate> many = batch.step();
    REQUIRE(many.size() == 1);
    CHECK(std::vector<token_t>(one.begin(), one.end()) == std::vector<token_t>(many[0].tokens.begin(), many[0].tokens.end()));
  }
  for (const DecodeStats* stats : {&decoder.stats(), &batch.stats(id)}) {
    CHECK(stats->steps == 10);
    CHECK(stats->tokens == 50);  // every oracle node accepted, and the next token
    // Each step drafts (3 us), verifies (1 us: its tree has draft nodes) and forwards and commits (12 us).
    CHECK(stats->draft_seconds == Approx(10 * 3 * us));
    CHECK(stats->verify_seconds == Approx(10 * 1 * us));
    CHECK(stats->target_seconds == Approx(10 * 12 * us));
  }
}

TEST_CASE("driver: a batch step whose trees are the roots alone counts their verification as the target's",
          "[step][driver]") {
  TimedTarget target(kVocab, 11, 4.0f, 2);
  SpeculativeBatch<TimedTarget, CountingOracle, TimedVerifier> batch(target, 2, BatchOptions{.clock = TestClock::now},
                                                                     CountingOracle({}, 1), TimedVerifier{});
  SECTION("no request speculates: no clock read between the forward and the commits") {
    const request_id a = batch.add(std::vector<token_t>{1, 2, 3}, request(false));
    const request_id b = batch.add(std::vector<token_t>{4, 5}, request(false));
    for (int i = 0; i < 5; ++i) batch.step();
    for (const request_id id : {a, b}) {
      const DecodeStats& stats = batch.stats(id);
      CHECK(stats.draft_seconds == 0);
      CHECK(stats.verify_seconds == 0);
      CHECK(stats.target_seconds == Approx(5 * (10 + 2 * 1 + 2 * 2) * us));  // the forward, two verifications, two commits
    }
  }
  SECTION("one request drafts: every tree's verification is timed, each its own") {
    const std::vector<token_t> prompt{1, 2, 3};
    const request_id a = batch.add(prompt, request(true), oracle(prompt));
    const request_id b = batch.add(std::vector<token_t>{4, 5}, request(false), CountingOracle({}, 1));
    for (int i = 0; i < 5; ++i) batch.step();
    CHECK(batch.stats(a).draft_seconds == Approx(5 * 3 * us));
    CHECK(batch.stats(b).draft_seconds == 0);
    for (const request_id id : {a, b}) {
      const DecodeStats& stats = batch.stats(id);
      CHECK(stats.verify_seconds == Approx(5 * 1 * us));
      CHECK(stats.target_seconds == Approx(5 * (10 + 2 * 2) * us));  // the shared forward, both commits
    }
  }
}

namespace {

// The hash target, whose commit throws while `fail` is set.
struct CommitFails : HashTarget {
  using HashTarget::HashTarget;
  void commit(std::span<const node_t> path) {
    if (fail) throw error("CommitFails: the commit failed");
    HashTarget::commit(path);
  }
  bool fail = false;
};

}  // namespace

TEST_CASE("driver: a target commit that throws ends a decoder's sequence, as a batch's request", "[step][driver][errors]") {
  const std::vector<token_t> prompt{1, 2, 3};
  CommitFails target(kVocab, 11);
  SpeculativeDecoder<CommitFails, ExactVerifier> decoder(target);
  decoder.prefill(prompt);
  decoder.step();
  target.fail = true;
  CHECK_THROWS_WITH(decoder.step(), "CommitFails: the commit failed");
  target.fail = false;
  CHECK_THROWS_WITH(decoder.step(), Catch::Contains("call prefill() first"));
  decoder.prefill(prompt);  // a new sequence goes on
  HashTarget reference(kVocab, 11);
  CHECK(decoder.generate(20) == reference.generate(prompt, 20));
}
