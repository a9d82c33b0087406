// Batch decoding scenarios shared by the host test of the backend batch step
// (tests/backend_batch_step_test.cpp) and its GPU twin (tests/kernels/backend_batch_step_test.cpp
// via device_decoder.cpp): seeded requests that join and leave a SpeculativeBatch at random, with
// speculation on or off and their own budgets, run on any batch target, so the outputs of the
// host path, the host backend and the CUDA backend can be compared request by request.
#pragma once

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <specdec/batch_decoder.hpp>
#include <specdec/error.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/testing/hash_target.hpp>

#include "support/backend_decode.hpp"  // SampledChainDrafter, verifier

namespace specdec::testing {

struct BatchCase {
  int vocab = 40;
  int max_positions = 100;  ///< per slot; some requests run into it
  int slots = 5;
  std::uint64_t seed = 11;  ///< the hash model's
  unsigned schedule = 1;    ///< seeds the requests and when they join and leave
  int requests = 24;
  verifier check = verifier::exact;  ///< exact or rejection
};

/// A request of the schedule: its prompt and options, and what the batch gave it.
struct BatchJob {
  std::vector<token_t> prompt;
  RequestOptions options;
  int oracle_depth = 1;
  std::uint64_t oracle_seed = 1;
  std::vector<token_t> output;
  bool finished = false;
  bool removed = false;
};

struct BatchRun {
  std::vector<BatchJob> jobs;
  std::int64_t forwards = 0;             ///< the batch's target forwards
  std::int64_t steps_with_requests = 0;  ///< steps the schedule asked for
  std::string error;                     ///< what a specdec::error said, if one was thrown
};

/// The case's requests: random prompts, lengths, budgets (speculation off for a third of them),
/// EOS tokens, oracle depths, and for rejection sampling their own seeds and temperatures.
inline std::vector<BatchJob> batch_jobs(const BatchCase& c) {
  std::mt19937 rng(c.schedule);
  const HashTarget model(c.vocab, c.seed);
  std::vector<BatchJob> jobs(static_cast<std::size_t>(c.requests));
  for (BatchJob& j : jobs) {
    j.prompt.resize(1 + rng() % 9);
    for (token_t& t : j.prompt) t = static_cast<token_t>(rng() % static_cast<unsigned>(c.vocab));
    j.options.max_new_tokens = 1 + static_cast<int>(rng() % 170);
    j.options.speculate = rng() % 3 != 0;
    j.options.budget = static_cast<int>(rng() % 12);
    if (rng() % 3 == 0) {  // an EOS that greedy decoding reaches for some requests
      const auto g = model.generate(j.prompt, 30);
      j.options.eos = {g[rng() % g.size()]};
    }
    j.options.seed = rng();
    j.options.stream = static_cast<std::uint32_t>(rng());
    j.options.sampling.temperature = rng() % 2 ? 0.8f : 0.0f;  // two runs of like verifiers at most
    j.oracle_depth = 1 + static_cast<int>(rng() % 7);
    j.oracle_seed = rng();
  }
  return jobs;
}

/// The hash model's greedy output for `job` alone: max_new_tokens tokens, cut after the first
/// EOS, and cut where the slot's positions run out (the prompt and all tokens but the last fill them).
inline std::vector<token_t> greedy_output(const BatchCase& c, const BatchJob& job) {
  std::vector<token_t> out = HashTarget(c.vocab, c.seed).generate(job.prompt, job.options.max_new_tokens);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (std::find(job.options.eos.begin(), job.options.eos.end(), out[i]) != job.options.eos.end()) {
      out.resize(i + 1);
      break;
    }
  }
  const std::size_t room = static_cast<std::size_t>(c.max_positions) - job.prompt.size() + 1;
  if (out.size() > room) out.resize(room);
  return out;
}

/// The host path's batch target for a case: HashTarget's slots, bounded like a backend target's.
struct BoundedHashTarget : HashTarget {
  explicit BoundedHashTarget(const BatchCase& c) : HashTarget(c.vocab, c.seed, 4.0f, c.slots), positions(c.max_positions) {}
  int max_positions() const { return positions; }
  int positions;
};

namespace detail {
template <class Verifier, class Target>
BatchRun run_schedule(Target& target, const BatchCase& c, std::vector<BatchJob> jobs, bool leave) {
  using Batch = SpeculativeBatch<Target, OracleDrafter, SampledChainDrafter, Verifier>;
  BatchRun run;
  Batch batch(target, c.slots, OracleDrafter({}, 1), SampledChainDrafter{}, Verifier{});
  std::mt19937 rng(c.schedule + 1000);
  std::map<request_id, std::size_t> job_of;
  std::size_t next = 0;
  try {
    while (next < jobs.size() || batch.active() > 0) {
      while (next < jobs.size() && batch.active() < batch.capacity() && rng() % 2 == 0) {
        BatchJob& j = jobs[next];
        // The oracle drafts the greedy continuation, wrong 25% of the time: exact decoding accepts
        // part of it, and the sampled chain attaches draft distributions to every request's tree.
        std::vector<token_t> reference = j.prompt;
        const auto g = HashTarget(c.vocab, c.seed).generate(j.prompt, j.options.max_new_tokens + 8);
        reference.insert(reference.end(), g.begin(), g.end());
        const request_id id =
            batch.add(j.prompt, j.options, OracleDrafter(reference, j.oracle_depth, 0.25, 2, j.oracle_seed), SampledChainDrafter{});
        job_of[id] = next++;
      }
      if (leave && batch.active() > 0 && rng() % 17 == 0) {  // a request leaves before it finished
        auto it = job_of.begin();
        std::advance(it, rng() % job_of.size());
        batch.remove(it->first);
        jobs[it->second].removed = true;
        job_of.erase(it);
      }
      if (batch.active() == 0) continue;
      ++run.steps_with_requests;
      for (const RequestUpdate& u : batch.step()) {
        BatchJob& j = jobs[job_of.at(u.id)];
        j.output.insert(j.output.end(), u.tokens.begin(), u.tokens.end());
        if (u.finished) {
          j.finished = true;
          job_of.erase(u.id);
        }
      }
    }
  } catch (const specdec::error& e) {
    run.error = e.what();
  }
  run.forwards = batch.forwards();
  run.jobs = std::move(jobs);
  return run;
}
}  // namespace detail

/// Runs case `c`'s requests through a SpeculativeBatch on `target` (c.slots slots of c.vocab
/// tokens and the case's seed; for a bounded target, c.max_positions positions). With `leave`,
/// some requests are removed before they finish.
template <class Target>
BatchRun run_batch(Target& target, const BatchCase& c, bool leave = true) {
  if (c.check == verifier::exact) return detail::run_schedule<ExactVerifier>(target, c, batch_jobs(c), leave);
  return detail::run_schedule<RejectionSampling>(target, c, batch_jobs(c), leave);
}

/// Request `index` of case `c` alone in a batch on `target` (one slot in use).
template <class Target>
BatchRun run_alone(Target& target, const BatchCase& c, std::size_t index) {
  BatchCase one = c;
  one.slots = 1;
  std::vector<BatchJob> job{batch_jobs(c)[index]};
  if (c.check == verifier::exact) return detail::run_schedule<ExactVerifier>(target, one, std::move(job), false);
  return detail::run_schedule<RejectionSampling>(target, one, std::move(job), false);
}

}  // namespace specdec::testing
