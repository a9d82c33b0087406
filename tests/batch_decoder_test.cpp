#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <specdec/batch_decoder.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/context_tree.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/testing/hash_target.hpp>

#include "support/chi_square.hpp"
#include "support/counting_oracle.hpp"

using namespace specdec;

namespace {

constexpr int kVocab = 40;

std::vector<token_t> random_prompt(std::mt19937& rng) {
  std::vector<token_t> p(1 + rng() % 9);
  for (token_t& t : p) t = static_cast<token_t>(rng() % kVocab);
  return p;
}

/// Plain greedy decoding of `options` after `prompt`: max_new_tokens tokens, cut after the first EOS.
std::vector<token_t> expected_output(const HashTarget& target, const std::vector<token_t>& prompt,
                                     const RequestOptions& options) {
  std::vector<token_t> out = target.generate(prompt, options.max_new_tokens);
  for (std::size_t i = 0; i < out.size(); ++i) {
    if (std::find(options.eos.begin(), options.eos.end(), out[i]) != options.eos.end()) {
      out.resize(i + 1);
      break;
    }
  }
  return out;
}

/// Request options: `budget` 0 turns speculation off.
RequestOptions request(int max_new_tokens, int budget = 64, std::uint64_t seed = 0, std::uint32_t stream = 0) {
  RequestOptions o;
  o.max_new_tokens = max_new_tokens;
  o.speculate = budget != 0;
  o.budget = budget;
  o.seed = seed;
  o.stream = stream;
  return o;
}
RequestOptions with_eos(RequestOptions o, token_t eos) {
  o.eos = {eos};
  return o;
}
RequestOptions with_temperature(RequestOptions o, float temperature) {
  o.sampling.temperature = temperature;
  return o;
}

/// A request of a schedule: its prompt and options, and what the batch gave it.
struct Job {
  std::vector<token_t> prompt;
  RequestOptions options;
  std::vector<token_t> output;
  bool finished = false;
  bool removed = false;
};

std::vector<Job> random_jobs(const HashTarget& target, std::mt19937& rng, int count) {
  std::vector<Job> jobs(static_cast<std::size_t>(count));
  for (Job& j : jobs) {
    j.prompt = random_prompt(rng);
    j.options.max_new_tokens = 1 + static_cast<int>(rng() % 60);
    j.options.speculate = rng() % 3 != 0;
    j.options.budget = static_cast<int>(rng() % 12);
    if (rng() % 3 == 0) {  // an EOS that greedy decoding reaches for some requests
      const auto g = target.generate(j.prompt, 30);
      j.options.eos = {g[rng() % g.size()]};
    }
  }
  return jobs;
}

/// Runs `jobs` through `batch` on a seeded schedule: between steps a job may arrive (while a
/// slot is free) and an active one may leave (remove). `add` adds job j and returns its id.
template <class Batch>
void run_schedule(Batch& batch, std::vector<Job>& jobs, std::mt19937& rng, const std::function<request_id(Job&)>& add) {
  std::map<request_id, std::size_t> job_of;
  std::size_t next = 0;
  std::int64_t steps_with_requests = 0;
  while (next < jobs.size() || batch.active() > 0) {
    while (next < jobs.size() && batch.active() < batch.capacity() && rng() % 2 == 0) {
      job_of[add(jobs[next])] = next;
      ++next;
    }
    if (batch.active() > 0 && rng() % 17 == 0) {  // a request leaves before it finished
      auto it = job_of.begin();
      std::advance(it, rng() % job_of.size());
      batch.remove(it->first);
      jobs[it->second].removed = true;
      job_of.erase(it);
    }
    if (batch.active() == 0) {
      if (next < jobs.size()) continue;
      break;
    }
    ++steps_with_requests;
    for (const RequestUpdate& u : batch.step()) {
      Job& j = jobs[job_of.at(u.id)];
      j.output.insert(j.output.end(), u.tokens.begin(), u.tokens.end());
      REQUIRE(u.stats != nullptr);
      if (u.finished) {
        j.finished = true;
        job_of.erase(u.id);
      }
    }
  }
  CHECK(batch.forwards() == steps_with_requests);  // one target forward per step, for all
}

void check_lossless(const HashTarget& target, const std::vector<Job>& jobs) {
  for (std::size_t i = 0; i < jobs.size(); ++i) {
    INFO("request " << i);
    const auto expected = expected_output(target, jobs[i].prompt, jobs[i].options);
    if (jobs[i].removed) {  // what it got before it left is a prefix of its own greedy output
      REQUIRE(jobs[i].output.size() <= expected.size());
      CHECK(std::equal(jobs[i].output.begin(), jobs[i].output.end(), expected.begin()));
    } else {
      CHECK(jobs[i].finished);
      CHECK(jobs[i].output == expected);
    }
  }
}

/// A HashTarget with a fixed number of positions (a BoundedTarget).
struct BoundedHashTarget : HashTarget {
  BoundedHashTarget(int positions, int slots) : HashTarget(kVocab, 9, 4.0f, slots), positions_(positions) {}
  int max_positions() const { return positions_; }
  int positions_;
};

}  // namespace

TEST_CASE("HashTarget's batched forward equals its forward of each tree alone", "[batch][target]") {
  STATIC_REQUIRE(BatchTarget<HashTarget>);
  HashTarget batched(kVocab, 3, 4.0f, 3), single(kVocab, 3);
  const std::vector<std::vector<token_t>> prompts{{1, 2, 3}, {7}, {4, 4, 4, 4, 9}};
  for (int s = 0; s < 3; ++s) {  // the cache holds all but the last token, the root
    const auto& prompt = prompts[static_cast<std::size_t>(s)];
    batched.prefill(s, std::span<const token_t>(prompt).first(prompt.size() - 1));
  }
  // slot 2 then slot 0 (slot 1 sits out): each a chain of two draft tokens on its root
  std::vector<DraftTree> trees(2);
  std::vector<TreeMerger> mergers(2);
  std::vector<TreeView> views;
  const int slots[] = {2, 0};
  for (int b = 0; b < 2; ++b) {
    const auto& prompt = prompts[static_cast<std::size_t>(slots[b])];
    trees[static_cast<std::size_t>(b)].reset(prompt.back());
    const token_t chain[] = {5, 6};
    trees[static_cast<std::size_t>(b)].add_chain(0, chain);
    const DraftTree* one[] = {&trees[static_cast<std::size_t>(b)]};
    mergers[static_cast<std::size_t>(b)].merge(one, 2, 2);
    views.push_back(mergers[static_cast<std::size_t>(b)].view());
    views.back().base_position = static_cast<int>(prompt.size()) - 1;
  }
  const auto& out = batched.forward(TreeBatchView{slots, views});
  for (int b = 0; b < 2; ++b) {
    const auto& prompt = prompts[static_cast<std::size_t>(slots[b])];
    single.prefill(std::span<const token_t>(prompt).first(prompt.size() - 1));
    const auto& alone = single.forward(views[static_cast<std::size_t>(b)]);
    for (node_t n = 0; n < 3; ++n) {
      CHECK(out.tree(b).argmax(n) == alone.argmax(n));
      CHECK(std::equal(out.tree(b).logits(n).begin(), out.tree(b).logits(n).end(), alone.logits(n).begin()));
    }
  }
  const node_t path[] = {0, 1};
  batched.commit(2, path);
  CHECK(batched.cached(2) == 6);
  CHECK(batched.cached(0) == 2);
  batched.release(2);
  CHECK_THROWS_WITH(batched.forward(TreeBatchView{std::span(slots, 1), std::span(views.data(), 1)}),
                    Catch::Contains("call prefill() first"));
  const int outside[] = {3};
  CHECK_THROWS_WITH(batched.prefill(outside[0], prompts[0]), "HashTarget::prefill: slot 3 outside [0, 3)");
}

TEST_CASE("batch, oracle drafter: every request equals its own greedy decoding", "[batch][lossless]") {
  const int seed = GENERATE(1, 2, 3, 4);
  std::mt19937 rng(static_cast<unsigned>(seed));
  HashTarget target(kVocab, 11, 4.0f, 6);
  std::vector<Job> jobs = random_jobs(target, rng, 40);
  SpeculativeBatch<HashTarget, OracleDrafter, ExactVerifier> batch(target, 5, OracleDrafter({}, 1), ExactVerifier{});
  run_schedule(batch, jobs, rng, [&](Job& j) {
    std::vector<token_t> reference = j.prompt;
    const auto g = target.generate(j.prompt, 200);
    reference.insert(reference.end(), g.begin(), g.end());
    const int depth = 1 + static_cast<int>(rng() % 8);
    return batch.add(j.prompt, j.options, OracleDrafter(reference, depth, 0.25, 1 + static_cast<int>(rng() % 3), rng()));
  });
  check_lossless(target, jobs);
  const DecodeStats all = batch.stats();
  CHECK(all.tau() > 1.3);  // the oracle is right 75% of the time
  CHECK(all.drafter_names == std::vector<std::string>{"oracle"});
  std::int64_t handed_out = 0;  // the updates' tokens, cut at max_new_tokens and EOS
  for (const Job& j : jobs) handed_out += static_cast<std::int64_t>(j.output.size());
  CHECK(all.output_tokens == handed_out);
  CHECK(all.tokens > handed_out);  // steps commit past the cuts
}

TEST_CASE("batch, casd and context tree drafters copied per request: lossless", "[batch][lossless]") {
  const int seed = GENERATE(5, 6, 7);
  std::mt19937 rng(static_cast<unsigned>(seed));
  HashTarget target(kVocab, 12, 4.0f, 8);
  std::vector<Job> jobs = random_jobs(target, rng, 40);
  SpeculativeBatch<HashTarget, CasdDrafter, ContextTreeDrafter, ExactVerifier> batch(target, 8);
  run_schedule(batch, jobs, rng, [&](Job& j) { return batch.add(j.prompt, j.options); });
  check_lossless(target, jobs);
}

TEST_CASE("batch, history tree drafter: lossless", "[batch][lossless]") {
  std::mt19937 rng(8);
  HashTarget target(kVocab, 13, 4.0f, 3);
  std::vector<Job> jobs = random_jobs(target, rng, 25);
  SpeculativeBatch<HashTarget, HistoryTreeDrafter, ExactVerifier> batch(target, 3);
  run_schedule(batch, jobs, rng, [&](Job& j) { return batch.add(j.prompt, j.options); });
  check_lossless(target, jobs);
}

TEST_CASE("batch: tree_history drafters share one history across requests", "[batch][drafters]") {
  STATIC_REQUIRE(SharesStateAcrossRequests<HistoryTreeDrafter>);
  STATIC_REQUIRE(!SharesStateAcrossRequests<ContextTreeDrafter>);
  HashTarget target(kVocab, 17, 4.0f, 2);
  SpeculativeBatch<HashTarget, HistoryTreeDrafter, ExactVerifier> batch(target, 2);
  const std::vector<token_t> prompt{11, 22, 33, 4};
  auto decode = [&](const std::vector<token_t>& p) {
    const request_id id = batch.add(p, request(120, 16));
    std::vector<token_t> out;
    double tau = 0;
    while (batch.active() > 0) {
      for (const RequestUpdate& u : batch.step()) {
        if (u.id != id) continue;
        out.insert(out.end(), u.tokens.begin(), u.tokens.end());
        tau = u.stats->tau();
      }
    }
    CHECK(out == target.generate(p, 120));
    return tau;
  };
  const double first = decode(prompt);
  const double again = decode(prompt);  // a new request, drafting from the first one's output
  CHECK(again > first + 3.0);
}

TEST_CASE("batch, shared tree history forgotten while others match into it: lossless", "[batch][lossless][drafters]") {
  std::mt19937 rng(9);
  HashTarget target(kVocab, 18, 4.0f, 4);
  std::vector<Job> jobs = random_jobs(target, rng, 40);
  ContextTreeOptions small;
  small.history_tokens = 90;  // outputs overflow it often: the history restarts under the others
  SpeculativeBatch<HashTarget, HistoryTreeDrafter, ExactVerifier> batch(target, 4, HistoryTreeDrafter(small), ExactVerifier{});
  run_schedule(batch, jobs, rng, [&](Job& j) { return batch.add(j.prompt, j.options); });
  check_lossless(target, jobs);
}

TEST_CASE("batch: tau and the histogram per request and overall", "[batch][stats]") {
  HashTarget target(kVocab, 14, 4.0f, 2);
  const std::vector<token_t> prompt{3, 1, 4};
  std::vector<token_t> reference = prompt;
  const auto g = target.generate(prompt, 100);
  reference.insert(reference.end(), g.begin(), g.end());
  SpeculativeBatch<HashTarget, OracleDrafter, ExactVerifier> batch(target, 2, OracleDrafter({}, 0), ExactVerifier{});
  const request_id fast = batch.add(prompt, request(40, 3), OracleDrafter(reference, 3));
  const request_id plain = batch.add(prompt, request(40, 0), OracleDrafter(reference, 3));
  CHECK(batch.stats(fast).tau() == 0.0);
  std::vector<DecodeStats> last(2);
  while (batch.active() > 0) {
    for (const RequestUpdate& u : batch.step()) last[static_cast<std::size_t>(u.id)] = *u.stats;
  }
  CHECK(last[static_cast<std::size_t>(fast)].tau() == 4.0);  // chain of 3, all accepted, plus the bonus token
  CHECK(last[static_cast<std::size_t>(fast)].tokens_per_step[4] == 10);
  CHECK(last[static_cast<std::size_t>(plain)].tau() == 1.0);
  CHECK(last[static_cast<std::size_t>(plain)].drafted_nodes == 0);
  const DecodeStats all = batch.stats();
  CHECK(all.steps == 50);
  CHECK(all.tokens == 80);
  CHECK(all.tokens_per_step[1] == 40);
  CHECK(batch.forwards() == 40);
  CHECK_THROWS_WITH(batch.stats(fast), "SpeculativeBatch::stats: request 0 has finished or was removed");
}

TEST_CASE("batch, rejection sampling: a request's tokens depend only on its own seed", "[batch][sampling]") {
  HashTarget target(kVocab, 15, 1.5f, 8);
  std::mt19937 rng(21);
  using Batch = SpeculativeBatch<HashTarget, ContextTreeDrafter, RejectionSampling>;
  const std::vector<token_t> prompt{2, 7, 1, 8};
  RequestOptions mine = request(50, 6, 77, 3);
  mine.sampling = {0.8f, 0, 0.95f, 0.0f};
  auto run_mine = [&](Batch& batch, int others) {
    for (int i = 0; i < others; ++i)
      batch.add(random_prompt(rng), request(1 + static_cast<int>(rng() % 70), static_cast<int>(rng() % 9), rng(), static_cast<std::uint32_t>(rng())));
    const request_id id = batch.add(prompt, mine);
    std::vector<token_t> out;
    while (batch.active() > 0) {
      for (const RequestUpdate& u : batch.step())
        if (u.id == id) out.insert(out.end(), u.tokens.begin(), u.tokens.end());
      if (batch.active() < batch.capacity() && rng() % 3 == 0) batch.add(random_prompt(rng), request(5, 64, rng()));
    }
    return out;
  };
  Batch alone(target, 8);
  const std::vector<token_t> expected = run_mine(alone, 0);
  REQUIRE(expected.size() == 50);
  for (int others : {1, 4, 7}) {
    Batch shared(target, 8);
    CHECK(run_mine(shared, others) == expected);
  }
}

TEST_CASE("batch, rejection sampling: each request's tokens follow the target's distribution",
          "[batch][sampling][lossless][statistical]") {
  // Many requests with the same prompt and different seeds: their first two tokens must follow
  // the target's sampling distribution p(a) p(b | a) (temperature 1), whatever shares their batch.
  constexpr int vocab = 6;
  HashTarget target(vocab, 16, 2.0f, 16);
  const std::vector<token_t> prompt{1, 2, 3};
  auto softmax = [&](std::uint64_t h) {
    std::vector<double> p(vocab);
    double sum = 0;
    for (int v = 0; v < vocab; ++v) sum += p[static_cast<std::size_t>(v)] = std::exp(static_cast<double>(hash_model::logit(h, v, 2.0f)));
    for (double& x : p) x /= sum;
    return p;
  };
  const std::uint64_t h = hash_model::running_hashes(prompt, 16).back();
  const auto p1 = softmax(h);
  std::vector<double> expected(vocab * vocab);
  for (int a = 0; a < vocab; ++a) {
    const auto p2 = softmax(hash_model::mix(h, a, static_cast<int>(prompt.size())));
    for (int b = 0; b < vocab; ++b) expected[static_cast<std::size_t>(a * vocab + b)] = p1[static_cast<std::size_t>(a)] * p2[static_cast<std::size_t>(b)];
  }
  // The oracle drafts the greedy continuation (one-hot proposals), accepted or not by sampling.
  std::vector<token_t> reference = prompt;
  const auto g = target.generate(prompt, 10);
  reference.insert(reference.end(), g.begin(), g.end());
  SpeculativeBatch<HashTarget, OracleDrafter, RejectionSampling> batch(target, 16, OracleDrafter(reference, 2), RejectionSampling{});
  std::vector<std::int64_t> counts(vocab * vocab, 0);
  std::map<request_id, std::vector<token_t>> outputs;
  std::mt19937 rng(5);
  constexpr int kRequests = 6000;
  int added = 0;
  while (added < kRequests || batch.active() > 0) {
    while (added < kRequests && batch.active() < batch.capacity()) {
      const bool mine = rng() % 2 == 0;  // every other request is a bystander with other options
      const request_id id = batch.add(mine ? std::span<const token_t>(prompt) : std::span<const token_t>(reference).first(5),
                                      request(mine ? 2 : 1 + static_cast<int>(rng() % 4), rng() % 4 != 0 ? 2 : 0, static_cast<std::uint64_t>(added), 1),
                                      OracleDrafter(reference, 2));
      if (mine) outputs[id];
      ++added;
    }
    for (const RequestUpdate& u : batch.step()) {
      auto it = outputs.find(u.id);
      if (it == outputs.end()) continue;
      it->second.insert(it->second.end(), u.tokens.begin(), u.tokens.end());
      if (u.finished) {
        REQUIRE(it->second.size() == 2);
        ++counts[static_cast<std::size_t>(it->second[0] * vocab + it->second[1])];
        outputs.erase(it);
      }
    }
  }
  const auto result = specdec::testing::chi_square(counts, expected);
  INFO("X2 = " << result.statistic);
  CHECK(result.p_value > 0.001);
}

TEST_CASE("batch: bad calls throw one sentence and leave the other requests as they were", "[batch][errors]") {
  // The same schedule twice, the second time with a bad call before each step: the outputs must match.
  auto run = [](bool bad_calls) {
    BoundedHashTarget target(/*positions=*/40, /*slots=*/3);
    SpeculativeBatch<BoundedHashTarget, CasdDrafter, ExactVerifier> batch(target, 3);
    std::vector<request_id> ids{batch.add(std::vector<token_t>{1, 2, 3}, request(30)),
                                batch.add(std::vector<token_t>{4, 5}, with_eos(request(12, 4), 7))};
    std::map<request_id, std::vector<token_t>> out;
    int step = 0;
    while (batch.active() > 0) {
      if (bad_calls) {
        const std::vector<token_t> ok{1, 2};
        switch (step % 9) {
          case 0: CHECK_THROWS_WITH(batch.remove(99), "SpeculativeBatch::remove: request 99 is unknown (no request with this id was added)"); break;
          case 1: CHECK_THROWS_WITH(batch.add(ok, request(0)), "SpeculativeBatch::add: max_new_tokens must be >= 1, got 0"); break;
          case 2: CHECK_THROWS_WITH(batch.add(ok, request(256, -1)), "SpeculativeBatch::add: budget must be >= 0, got -1"); break;
          case 3: CHECK_THROWS_WITH(batch.add(ok, with_eos(request(256), kVocab)), "SpeculativeBatch::add: eos token 0 is 40, outside the vocabulary [0, 40)"); break;
          case 4: CHECK_THROWS_WITH(batch.add(ok, with_temperature(request(256), -1.0f)), Catch::StartsWith("SpeculativeBatch::add: bad sampling parameters: temperature -1")); break;
          case 5: CHECK_THROWS_WITH(batch.add(std::vector<token_t>(41, 1)), "SpeculativeBatch::add: the prompt has 41 tokens, more than the target's 40 positions"); break;
          case 6: CHECK_THROWS_WITH(batch.add(std::vector<token_t>{}), "SpeculativeBatch::add: the prompt is empty (it needs at least one token)"); break;
          case 7: CHECK_THROWS_WITH(batch.add(std::vector<token_t>{1, -2}), "SpeculativeBatch::add: prompt token 1 is -2, outside the vocabulary [0, 40)"); break;
          default: CHECK_THROWS_WITH(batch.stats(-1), "SpeculativeBatch::stats: request -1 is unknown (no request with this id was added)");
        }
      }
      if (step == 3) ids.push_back(batch.add(std::vector<token_t>{9, 9, 9}, request(50, 0)));
      if (step == 4 && bad_calls && batch.active() == batch.capacity()) {  // the batch is full
        CHECK_THROWS_WITH(batch.add(std::vector<token_t>{1}),
                          "SpeculativeBatch::add: all 3 slots are taken (the capacity); remove a request or step until one finishes");
      }
      for (const RequestUpdate& u : batch.step()) {
        out[u.id].insert(out[u.id].end(), u.tokens.begin(), u.tokens.end());
        if (u.finished && bad_calls) {
          CHECK_THROWS_WITH(batch.remove(u.id), "SpeculativeBatch::remove: request " + std::to_string(u.id) +
                                                    " has finished or was removed");
        }
      }
      ++step;
    }
    // request 2 (prompt of 3, 50 wanted) stopped when the target's 40 positions were full
    CHECK(out[ids[2]].size() == 40 - 3 + 1);
    return out;
  };
  const auto clean = run(false);
  CHECK(run(true) == clean);
  BoundedHashTarget target(40, 2);
  CHECK_THROWS_WITH((SpeculativeBatch<BoundedHashTarget, ExactVerifier>(target, 3)),
                    "SpeculativeBatch: capacity 3 exceeds the target's 2 slots");
  CHECK_THROWS_WITH((SpeculativeBatch<BoundedHashTarget, ExactVerifier>(target, 0)),
                    "SpeculativeBatch: capacity must be >= 1, got 0");
}

TEST_CASE("batch: BatchOptions as docs/batching.md shows them", "[batch][budget][docs]") {
  HashTarget target(kVocab, 11, 4.0f, 8);
// [batch options]
  struct MyCost {  // any type with step_seconds(nodes, context): a specbench calibrate table, or yours
    double step_seconds(int nodes, int /*context*/) const { return 1e-3 + 2e-6 * nodes; }
  };
  SpeculativeBatch<HashTarget, CasdDrafter, ExactVerifier> batch(
      target, /*capacity=*/8, BatchOptions{.cost = MyCost{}, .measured_pause = false}, CasdDrafter{}, ExactVerifier{});
// [batch options]
  const std::vector<token_t> prompt{1, 2, 3, 1, 2, 3, 1, 2};
  batch.add(prompt, request(30));
  std::vector<token_t> out;
  while (batch.active() > 0)
    for (const RequestUpdate& u : batch.step()) out.insert(out.end(), u.tokens.begin(), u.tokens.end());
  CHECK(out == target.generate(prompt, 30));
  CHECK(batch.stats().sized_steps > 0);  // the automatic budget sized the steps
}

namespace {
/// A HashTarget whose commit of `slot` throws once, at that slot's `nth` commit.
struct CommitFailsOnce : HashTarget {
  CommitFailsOnce(int slot, int nth) : HashTarget(kVocab, 11, 4.0f, 3), slot_(slot), left_(nth) {}
  void commit(int slot, std::span<const node_t> path) {
    if (slot == slot_ && --left_ == 0) throw error("CommitFailsOnce: the commit failed");
    HashTarget::commit(slot, path);
  }
  int slot_, left_;
};
}  // namespace

// The batch committed every request's target cache before any request's context: a commit that
// threw left the requests before it with their caches ahead of their contexts, and every later
// step threw (issue 49, defect g). Now the failing request ends and the others decode on.
TEST_CASE("batch: a target commit that throws ends its request, the others commit and decode on", "[batch][errors]") {
  CommitFailsOnce target(/*slot=*/1, /*nth=*/3);
  SpeculativeBatch<CommitFailsOnce, CasdDrafter, ExactVerifier> batch(target, 3);
  const std::vector<std::vector<token_t>> prompts{{1, 2, 3, 1, 2}, {4, 5, 4, 5}, {6, 7, 8}};
  std::map<request_id, std::vector<token_t>> out;
  for (const auto& p : prompts) out[batch.add(p, request(40))];
  int steps = 0, throws = 0;
  while (batch.active() > 0) {
    REQUIRE(++steps < 200);
    std::span<const RequestUpdate> updates;
    try {
      updates = batch.step();
    } catch (const error& e) {
      CHECK(std::string(e.what()) == "CommitFailsOnce: the commit failed");
      ++throws;
      CHECK(batch.active() == 2);
      CHECK_THROWS_WITH(batch.stats(1), "SpeculativeBatch::stats: request 1 has finished or was removed");
      updates = batch.last_updates();
      CHECK(updates.size() == 2);  // requests 0 and 2 committed in the step that threw
    }
    for (const RequestUpdate& u : updates) out[u.id].insert(out[u.id].end(), u.tokens.begin(), u.tokens.end());
  }
  CHECK(throws == 1);
  CHECK(out[0] == target.generate(prompts[0], 40));
  CHECK(out[2] == target.generate(prompts[2], 40));
  const auto one = target.generate(prompts[1], 40);  // what request 1 got before it ended: a prefix
  REQUIRE(out[1].size() < one.size());
  CHECK(std::equal(out[1].begin(), out[1].end(), one.begin()));
}

namespace {
// A forward that costs `fixed` plus `per_node` per node, whatever the context.
struct LinearCost {
  double fixed, per_node;
  double step_seconds(int nodes, int) const { return fixed + per_node * nodes; }
};
}  // namespace

TEST_CASE("batch, automatic budget: lossless per request whatever the joint sizes", "[batch][lossless][budget]") {
  const int seed = GENERATE(21, 22, 23);
  std::mt19937 rng(static_cast<unsigned>(seed));
  HashTarget target(kVocab, 11, 4.0f, 6);
  std::vector<Job> jobs = random_jobs(target, rng, 40);
  for (Job& j : jobs) j.options.budget = 1 + j.options.budget;  // ranked up to 1..12 nodes each
  const LinearCost cost = seed == 21 ? LinearCost{1.0, 0.01} : seed == 22 ? LinearCost{1.0, 0.2} : LinearCost{0.0, 1.0};
  SpeculativeBatch<HashTarget, OracleDrafter, ExactVerifier> batch(target, 5, BatchOptions{.cost = cost},
                                                                   OracleDrafter({}, 1), ExactVerifier{});
  run_schedule(batch, jobs, rng, [&](Job& j) {
    std::vector<token_t> reference = j.prompt;
    const auto g = target.generate(j.prompt, 200);
    reference.insert(reference.end(), g.begin(), g.end());
    return batch.add(j.prompt, j.options, OracleDrafter(reference, 8, 0.25, 2, rng()));
  });
  check_lossless(target, jobs);
  const DecodeStats all = batch.stats();
  CHECK(all.sized_steps == batch.forwards());
  if (seed == 23) CHECK(all.drafted_nodes == 0);  // a node costs a forward: nothing pays
  if (seed == 21) CHECK(all.tau() > 1.5);          // nodes nearly free: the oracle's chains go
}

TEST_CASE("batch, automatic budget: a step's nodes go to the requests whose drafts are likelier",
          "[batch][budget]") {
  HashTarget target(kVocab, 11, 4.0f, 2);
  const std::vector<token_t> good_prompt{1, 2, 3}, bad_prompt{4, 5, 6};
  auto reference = [&](const std::vector<token_t>& prompt) {
    std::vector<token_t> r = prompt;
    const auto g = target.generate(prompt, 600);
    r.insert(r.end(), g.begin(), g.end());
    return r;
  };
  // Each extra node costs a fifth of the weights' read: only likely nodes pay. One request's
  // oracle is right 95% of the time, the other's 20%: the first gets the nodes.
  // (The pause weighs the model's times here: the hash target's own are far less.)
  SpeculativeBatch<HashTarget, OracleDrafter, ExactVerifier> batch(
      target, 2, BatchOptions{.cost = LinearCost{1.0, 0.2}, .measured_pause = false}, OracleDrafter({}, 1), ExactVerifier{});
  const request_id good = batch.add(good_prompt, request(500, 8), OracleDrafter(reference(good_prompt), 8, 0.05, 1, 3));
  const request_id bad = batch.add(bad_prompt, request(500, 8), OracleDrafter(reference(bad_prompt), 8, 0.8, 1, 4));
  for (int i = 0; i < 40; ++i) batch.step();  // both requests still run (40 steps of at most 9 tokens)
  CHECK(batch.stats(good).draft_nodes_per_step() > 2.0);
  CHECK(batch.stats(bad).draft_nodes_per_step() < 1.0);
  REQUIRE(batch.acceptance_model() != nullptr);
  CHECK(batch.acceptance_model()->calibration_error() < 0.15);
}

TEST_CASE("batch, automatic budget: a request whose share is no node stops being asked to draft", "[batch][budget]") {
  HashTarget target(kVocab, 11, 4.0f, 3);
  using testing::CountingOracle;
  // A node costs as much as a forward: no share ever pays.
  SpeculativeBatch<HashTarget, CountingOracle, ExactVerifier> batch(target, 3, BatchOptions{.cost = LinearCost{0.0, 1.0}, .measured_pause = false},
                                                                    CountingOracle({}, 1), ExactVerifier{});
  std::vector<std::shared_ptr<int>> counts;
  std::vector<request_id> ids;
  for (const std::vector<token_t>& prompt : {std::vector<token_t>{1, 2, 3}, std::vector<token_t>{7, 8}}) {
    std::vector<token_t> truth = prompt;
    const auto g = target.generate(prompt, 500);
    truth.insert(truth.end(), g.begin(), g.end());
    CountingOracle oracle(truth, 8, 0.0);
    counts.push_back(oracle.proposals);
    ids.push_back(batch.add(prompt, request(400, 8), std::move(oracle)));
  }
  for (int i = 0; i < 300; ++i) batch.step();
  for (std::size_t r = 0; r < ids.size(); ++r) {
    CHECK(batch.stats(ids[r]).drafted_nodes == 0);
    // Pauses of 1, 2, 4, ..., 32 steps between probes: 300 steps ask each drafter 14 times.
    CHECK(*counts[r] < 30);
    CHECK(*counts[r] > 5);
  }
}

TEST_CASE("batch, automatic budget: a request whose drafting costs more than its nodes save pauses", "[batch][budget]") {
  HashTarget target(kVocab, 11, 4.0f, 3);
  using testing::CountingOracle;
  // A forward of 10 us + 1 us a node: every oracle node is accepted, and a request's 8 nodes save
  // about 8 root shares (5 us each) of a plain batch step; drafting them for 300 us does not pay.
  SpeculativeBatch<HashTarget, CountingOracle, ExactVerifier> batch(
      target, 2, BatchOptions{.cost = LinearCost{10e-6, 1e-6}, .measured_pause = false, .clock = testing::TestClock::now},
      CountingOracle({}, 1), ExactVerifier{});
  std::vector<std::shared_ptr<int>> counts;
  std::vector<request_id> ids;
  std::vector<std::vector<token_t>> truths;
  for (const int spin : {300, 0}) {
    const std::vector<token_t> prompt{static_cast<token_t>(1 + spin % 7), 2, 3};
    std::vector<token_t>& truth = truths.emplace_back(prompt);
    const auto g = target.generate(prompt, 3000);
    truth.insert(truth.end(), g.begin(), g.end());
    CountingOracle oracle(truth, 8, 0.0);
    oracle.spin = std::chrono::microseconds(spin);
    counts.push_back(oracle.proposals);
    ids.push_back(batch.add(prompt, request(2500, 8), std::move(oracle)));
  }
  for (int i = 0; i < 200; ++i) batch.step();
  const DecodeStats& slow = batch.stats(ids[0]);
  const DecodeStats& fast = batch.stats(ids[1]);
  CHECK(*counts[0] < 20);  // asked in pauses of up to 32 steps
  CHECK(slow.paused_steps == slow.steps - *counts[0]);
  CHECK(fast.paused_steps < fast.steps / 10);  // its drafting is cheap: asked nearly every step
  CHECK(fast.tau() > 6.0);
  for (std::size_t r = 0; r < ids.size(); ++r) {  // lossless
    const std::span<const token_t> context = batch.context(ids[r]);
    CHECK(std::equal(context.begin(), context.end(), truths[r].begin()));
  }
}

namespace {

// The hash target, but its batched forward takes `per_node` for every node of every tree on the
// TestClock: a compute-bound target, whatever its cost model says.
struct SpinningTarget : HashTarget {
  using HashTarget::HashTarget;
  const BatchOutput& forward(const TreeBatchView& batch) {
    int nodes = 0;
    for (const TreeView& tree : batch.trees) nodes += tree.size;
    testing::TestClock::advance(per_node * nodes);
    return HashTarget::forward(batch);
  }
  std::chrono::microseconds per_node{50};
};

}  // namespace

TEST_CASE("batch, automatic budget: the pause weighs measured steps, not an optimistic cost model", "[batch][budget]") {
  using testing::CountingOracle;
  // The model says a node costs 1 % of a plain step; each really costs a root's forward. The
  // oracles' 8-node chains are half wrong per node: about one token more per request and step,
  // for 8 roots' time.
  for (const bool measured : {true, false}) {
    SpinningTarget target(kVocab, 11, 4.0f, 2);
    SpeculativeBatch<SpinningTarget, CountingOracle, ExactVerifier> batch(
        target, 2, BatchOptions{.cost = LinearCost{100e-6, 1e-6}, .measured_pause = measured, .clock = testing::TestClock::now},
        CountingOracle({}, 1),
        ExactVerifier{});
    std::vector<request_id> ids;
    std::vector<std::vector<token_t>> truths;
    for (const token_t first : {1, 7}) {
      const std::vector<token_t> prompt{first, 2, 3};
      std::vector<token_t>& truth = truths.emplace_back(prompt);
      const auto g = target.generate(prompt, 600);
      truth.insert(truth.end(), g.begin(), g.end());
      ids.push_back(batch.add(prompt, request(500, 8), CountingOracle(truth, 8, 0.5, 1, static_cast<std::uint64_t>(first))));
    }
    for (int i = 0; i < 150; ++i) batch.step();
    for (std::size_t r = 0; r < ids.size(); ++r) {
      const DecodeStats& s = batch.stats(ids[r]);
      if (measured) CHECK(s.paused_steps > s.steps * 7 / 10);  // probes only
      else CHECK(s.paused_steps < s.steps / 10);                // the model's word: every step pays
      const std::span<const token_t> context = batch.context(ids[r]);
      CHECK(std::equal(context.begin(), context.end(), truths[r].begin()));  // lossless
    }
  }
}
