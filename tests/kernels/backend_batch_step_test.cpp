// The batch's backend step on backend::cuda (BackendHashBatchTarget on the device, verification
// and KV compaction of all slots by the CUDA kernels): the schedules of
// tests/backend_batch_step_test.cpp, compared with each request's greedy decoding and with the
// host path request by request.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "kernels/device_decoder.hpp"

using namespace specdec;
using testing::BatchCase;
using testing::verifier;

// Vocab 32000 takes the kernels' row-parallel launch shapes, vocab 40 one block per tree.
TEST_CASE("GPU backend batch step: exact verification gives each request its own greedy decoding",
          "[gpu][backend_batch][lossless]") {
  for (int vocab : {40, 32000}) {
    for (unsigned schedule : {1u, 2u, 3u}) {
      BatchCase c;
      c.vocab = vocab;
      c.schedule = schedule;
      if (vocab > 1000) c.requests = 8;
      const testing::BatchRun run = testing::run_batch_on_device(c);
      INFO("vocab " << vocab << ", schedule " << schedule << ": " << run.error);
      REQUIRE(run.error.empty());
      CHECK(run.forwards == run.steps_with_requests);
      for (std::size_t i = 0; i < run.jobs.size(); ++i) {
        INFO("request " << i);
        const testing::BatchJob& job = run.jobs[i];
        const std::vector<token_t> expected = testing::greedy_output(c, job);
        if (job.removed) {
          REQUIRE(job.output.size() <= expected.size());
          CHECK(std::equal(job.output.begin(), job.output.end(), expected.begin()));
        } else {
          CHECK(job.output == expected);
        }
      }
    }
  }
}

TEST_CASE("GPU backend batch step: rejection sampling commits what the host path commits",
          "[gpu][backend_batch][rejection]") {
  for (int vocab : {40, 32000}) {
    BatchCase c;
    c.vocab = vocab;
    c.check = verifier::rejection;
    c.schedule = 5;
    if (vocab > 1000) c.requests = 8;
    testing::BoundedHashTarget host(c);
    const testing::BatchRun expected = testing::run_batch(host, c);
    const testing::BatchRun device = testing::run_batch_on_device(c);
    INFO("vocab " << vocab << ": " << device.error);
    REQUIRE(device.error.empty());
    REQUIRE(device.jobs.size() == expected.jobs.size());
    for (std::size_t i = 0; i < device.jobs.size(); ++i) {
      INFO("request " << i);
      CHECK(device.jobs[i].output == expected.jobs[i].output);
      CHECK(device.jobs[i].removed == expected.jobs[i].removed);
    }
  }
}
