// The batch's backend step (step/backend_step.hpp) on the host backend: a SpeculativeBatch on a
// BackendBatchTarget gives every request what it would get alone, bit for bit, whoever shares its
// steps; verification runs once per run of like verifiers; failures surface as specdec::error.
// tests/kernels/backend_batch_step_test.cpp runs the same schedules on backend::cuda.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstddef>
#include <limits>
#include <map>
#include <span>
#include <string>
#include <vector>

#include <specdec/backend.hpp>

// The host backend, counting the copies and waits the step asks of it. Declared before the
// step's header: its qualified calls (backend::copy, backend::synchronize) see only what precedes it.
namespace specdec::backend {
struct counting : host {
  static inline int copies = 0, waits = 0;
};
inline status copy(counting, void* destination, const void* source, std::size_t bytes) {
  ++counting::copies;
  return copy(host{}, destination, source, bytes);
}
inline status synchronize(counting) {
  ++counting::waits;
  return status::ok;
}
}  // namespace specdec::backend

#include <specdec/batch_decoder.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/testing/backend_hash_target.hpp>

#include "support/backend_batch_decode.hpp"

using namespace specdec;
using testing::BatchCase;
using testing::verifier;

namespace {

using HostBatchTarget = BackendHashBatchTarget<>;

HostBatchTarget target_for(const BatchCase& c) { return HostBatchTarget(c.vocab, c.max_positions, c.slots, c.seed); }

/// ExactVerifier counting its verify_on calls and the trees they verified (still stateless, so
/// the batch verifies all trees of a step with one call).
struct CountingExact : ExactVerifier {
  static inline int calls = 0, trees = 0;
  template <class Backend, class Job = backend::VerifyJob>
  backend::status verify_on(const Backend& tag, const Job& job) const {
    ++calls;
    trees += job.greedy.batch;
    return ExactVerifier::verify_on(tag, job);
  }
};

/// RejectionSampling recording the size of each verify_on call.
struct CountingRejection : RejectionSampling {
  using RejectionSampling::RejectionSampling;
  static inline std::vector<int> sizes;
  template <class Backend>
  backend::status verify_on(const Backend& tag, const backend::VerifyJob& job) const {
    sizes.push_back(job.stochastic.batch);
    return RejectionSampling::verify_on(tag, job);
  }
};

/// Slot 1's logits rows are NaN.
struct NanInSlotOne : HostBatchTarget {
  using HostBatchTarget::HostBatchTarget;
  LogitsRows forward(const TreeBatchView& batch) {
    const LogitsRows rows = HostBatchTarget::forward(batch);
    long long row = 0;
    for (std::size_t b = 0; b < batch.trees.size(); ++b) {
      if (batch.slots[b] == 1)
        for (long long i = 0; i < batch.trees[b].size * rows.row_stride; ++i)
          const_cast<float*>(rows.data)[row * rows.row_stride + i] = std::numeric_limits<float>::quiet_NaN();
      row += batch.trees[b].size;
    }
    return rows;
  }
};

/// BackendHashBatchTarget<backend::host> run by a step on the counting backend.
struct CountedTarget {
  using backend_type = backend::counting;
  explicit CountedTarget(int slots) : model(40, 200, slots, 3) {}
  backend_type backend() const { return {}; }
  int vocab_size() const { return model.vocab_size(); }
  int slots() const { return model.slots(); }
  void prefill(int slot, std::span<const token_t> tokens) { model.prefill(slot, tokens); }
  void release(int slot) { model.release(slot); }
  LogitsRows forward(const TreeBatchView& batch) { return model.forward(batch); }
  core::KvCacheView kv_cache() { return model.kv_cache(); }
  HostBatchTarget model;
};

RequestOptions request(int max_new_tokens, int budget = 8) {
  RequestOptions o;
  o.max_new_tokens = max_new_tokens;
  o.budget = budget;
  return o;
}

}  // namespace

TEST_CASE("backend batch step: exact verification gives each request its own greedy decoding",
          "[backend_batch][lossless]") {
  STATIC_REQUIRE(BackendBatchTarget<HostBatchTarget>);
  BatchCase c;
  c.schedule = static_cast<unsigned>(GENERATE(1, 2, 3, 4));
  HostBatchTarget target = target_for(c);
  const testing::BatchRun run = testing::run_batch(target, c);
  REQUIRE(run.error.empty());
  CHECK(run.forwards == run.steps_with_requests);  // one forward per step for all requests
  int removed = 0, long_outputs = 0;
  for (std::size_t i = 0; i < run.jobs.size(); ++i) {
    const testing::BatchJob& job = run.jobs[i];
    INFO("request " << i);
    const std::vector<token_t> expected = testing::greedy_output(c, job);
    if (job.removed) {  // what it got before it left is a prefix of its own greedy output
      ++removed;
      REQUIRE(job.output.size() <= expected.size());
      CHECK(std::equal(job.output.begin(), job.output.end(), expected.begin()));
    } else {
      CHECK(job.finished);
      CHECK(job.output == expected);
      long_outputs += job.output.size() + job.prompt.size() > static_cast<std::size_t>(c.max_positions);
    }
  }
  CHECK(removed < static_cast<int>(run.jobs.size()));
  if (c.schedule == 1) CHECK(long_outputs > 0);  // some request filled its slot's positions
}

TEST_CASE("backend batch step: rejection sampling, a request's tokens depend only on its own seed",
          "[backend_batch][rejection]") {
  BatchCase c;
  c.check = verifier::rejection;
  c.schedule = static_cast<unsigned>(GENERATE(5, 6));
  HostBatchTarget target = target_for(c);
  const testing::BatchRun batched = testing::run_batch(target, c, /*leave=*/false);
  REQUIRE(batched.error.empty());
  // The host path (HashTarget, verify on the host) commits the same tokens.
  testing::BoundedHashTarget host(c);
  const testing::BatchRun host_path = testing::run_batch(host, c, /*leave=*/false);
  REQUIRE(host_path.error.empty());
  int sampled_away = 0;
  for (std::size_t i = 0; i < batched.jobs.size(); ++i) {
    INFO("request " << i);
    const testing::BatchJob& job = batched.jobs[i];
    CHECK(job.finished);
    CHECK(job.output == host_path.jobs[i].output);
    HostBatchTarget own = target_for(c);
    const testing::BatchRun alone = testing::run_alone(own, c, i);
    REQUIRE(alone.error.empty());
    CHECK(job.output == alone.jobs[0].output);
    sampled_away += job.output != testing::greedy_output(c, job);
  }
  CHECK(sampled_away > 0);  // temperature 0.8 left greedy decoding somewhere
}

TEST_CASE("backend batch step: one verify_on call for each run of like verifiers", "[backend_batch]") {
  HostBatchTarget target(40, 200, 4, 3);
  SECTION("ExactVerifier: the whole batch at once") {
    SpeculativeBatch<HostBatchTarget, CasdDrafter, CountingExact> batch(target, 4);
    for (token_t t = 0; t < 4; ++t) batch.add(std::vector<token_t>{1, t, 2}, request(50));
    CountingExact::calls = CountingExact::trees = 0;
    for (int s = 0; s < 5; ++s) batch.step();
    CHECK(CountingExact::calls == 5);
    CHECK(CountingExact::trees == 20);
  }
  SECTION("RejectionSampling: requests with equal sampling parameters together") {
    SpeculativeBatch<HostBatchTarget, CasdDrafter, CountingRejection> batch(target, 4);
    for (float temperature : {0.8f, 0.0f, 0.8f, 0.8f}) {
      RequestOptions o = request(50);
      o.sampling.temperature = temperature;
      o.seed = 7;
      batch.add(std::vector<token_t>{1, 2, 3}, o);
    }
    CountingRejection::sizes.clear();
    batch.step();
    CHECK(CountingRejection::sizes == std::vector<int>{1, 1, 2});
  }
}

TEST_CASE("backend batch step: one copy to the backend, one copy back and one wait per step", "[backend_batch]") {
  CountedTarget target(4);
  SpeculativeBatch<CountedTarget, CasdDrafter, RejectionSampling> batch(target, 4);
  for (token_t t = 0; t < 4; ++t) {
    RequestOptions o = request(40, 6);
    o.sampling.temperature = t % 2 ? 0.8f : 0.0f;  // two runs of like verifiers: still one wait
    batch.add(std::vector<token_t>{1, t, 2}, o);
  }
  for (int s = 0; s < 6; ++s) {
    backend::counting::copies = backend::counting::waits = 0;
    CHECK(batch.step().size() == 4);
    CHECK(backend::counting::copies == 2);
    CHECK(backend::counting::waits == 1);
  }
}

TEST_CASE("backend batch step: bad input is one sentence and leaves the batch as it was", "[backend_batch][errors]") {
  // The same requests twice, the second time with a bad call before each step: the outputs must match.
  auto run = [](bool bad_calls) {
    HostBatchTarget target(40, 30, 3, 5);
    SpeculativeBatch<HostBatchTarget, CasdDrafter, ExactVerifier> batch(target, 3);
    batch.add(std::vector<token_t>{1, 2, 3}, request(40));
    batch.add(std::vector<token_t>{4, 5}, request(12, 0));
    std::map<request_id, std::vector<token_t>> out;
    int step = 0;
    while (batch.active() > 0) {
      if (bad_calls) {
        switch (step % 3) {
          case 0:
            CHECK_THROWS_WITH(batch.add(std::vector<token_t>{1}, request(5, 2048)),
                              "SpeculativeBatch::add: budget 2048 is above what a backend step verifies and "
                              "compacts (2047 draft nodes)");
            break;
          case 1:
            CHECK_THROWS_WITH(batch.add(std::vector<token_t>(31, 1)),
                              "SpeculativeBatch::add: the prompt has 31 tokens, more than the target's 30 positions");
            break;
          default:
            CHECK_THROWS_WITH(batch.add(std::vector<token_t>{1, 40}),
                              "SpeculativeBatch::add: prompt token 1 is 40, outside the vocabulary [0, 40)");
        }
      }
      for (const RequestUpdate& u : batch.step()) out[u.id].insert(out[u.id].end(), u.tokens.begin(), u.tokens.end());
      ++step;
    }
    CHECK(out[0].size() == 30 - 3 + 1);  // request 0 stopped when its slot's 30 positions were full
    return out;
  };
  const auto clean = run(false);
  CHECK(run(true) == clean);
  HostBatchTarget target(40, 30, 2);
  CHECK_THROWS_WITH((SpeculativeBatch<HostBatchTarget, ExactVerifier>(target, 3)),
                    "SpeculativeBatch: capacity 3 exceeds the target's 2 slots");
}

TEST_CASE("backend batch step: a bad logits row is an error naming the slot, and the step's requests end",
          "[backend_batch][errors]") {
  NanInSlotOne target(40, 100, 3);
  SpeculativeBatch<NanInSlotOne, CasdDrafter, ExactVerifier> batch(target, 3);
  for (token_t t = 0; t < 3; ++t) batch.add(std::vector<token_t>{t, 1}, request(20));
  CHECK_THROWS_WITH(batch.step(), "SpeculativeBatch: the tree of slot 1 failed verification on the backend: a logits "
                                  "row on the accepted path contains NaN");
  CHECK(batch.active() == 0);
  CHECK_THROWS_WITH(batch.stats(1), "SpeculativeBatch::stats: request 1 has finished or was removed");
  // The batch goes on with new requests (this one in slot 0, whose rows are fine).
  const std::vector<token_t> prompt{3, 1};
  batch.add(prompt, request(20));
  std::vector<token_t> out;
  while (batch.active() > 0)
    for (const RequestUpdate& u : batch.step()) out.insert(out.end(), u.tokens.begin(), u.tokens.end());
  CHECK(out == HashTarget(40, 1).generate(prompt, 20));
}

TEST_CASE("backend batch step: the use docs/batching.md shows", "[backend_batch][docs]") {
// [backend_batch]
  // A model holding 4 sequences on a backend (BackendHashBatchTarget<backend::cuda>, in a .cu
  // file compiled by nvcc, holds them on the GPU).
  using Model = BackendHashBatchTarget<backend::host>;
  Model model(/*vocab_size=*/64, /*max_positions=*/256, /*slots=*/4);
  SpeculativeBatch<Model, CasdDrafter, RejectionSampling> batch(model, /*capacity=*/4);
  for (std::uint64_t seed = 0; seed < 4; ++seed) {
    RequestOptions options;
    options.max_new_tokens = 64;
    options.sampling.temperature = 0.8f;  // the same for all: one verification call per step
    options.seed = seed;                  // the request's own random stream
    batch.add(std::vector<token_t>{1, 2, 3}, options);
  }
  std::map<request_id, std::vector<token_t>> outputs;
  while (batch.active() > 0)
    for (const RequestUpdate& u : batch.step())  // one copy in, forward, verify, compact, one copy out
      outputs[u.id].insert(outputs[u.id].end(), u.tokens.begin(), u.tokens.end());
// [backend_batch]
  REQUIRE(outputs.size() == 4);
  for (const auto& [id, out] : outputs) CHECK(out.size() == 64);
  CHECK(outputs[0] != outputs[1]);  // different seeds
}
