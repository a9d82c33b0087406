// `specbench model --batch` and `specbench replay --batch`: the prompts (or turns) decoded B at a
// time by SpeculativeBatch, a new request joining as soon as one finishes, plainly (roots only)
// and speculatively, side by side for each B. Defined here, instantiated once per combination in
// registry_batch.cpp. See docs/specbench.md, "--batch".
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <specdec/batch_decoder.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/targets/llama2c_batch.hpp>
#include <specdec/targets/per_slot.hpp>
#include <specdec/targets/replay_target.hpp>

#include "corpus.hpp"
#include "input_error.hpp"
#include "model.hpp"
#include "replay.hpp"
#include "rounds.hpp"

namespace specbench {

// ---- the batch target of `model --batch`: the one place to change ----------------------------

/// The BatchTarget `model --batch` decodes with: one forward per step for all requests, reading
/// each weight once for all their nodes. Another batch target replaces this alias,
/// make_model_batch_target and model_batch_target_description (batch.cpp), nothing else.
using ModelBatchTarget = specdec::Llama2cBatchTarget;
/// A ModelBatchTarget of `slots` sequences of `model`, its forward on `threads` threads.
ModelBatchTarget make_model_batch_target(std::shared_ptr<const specdec::Llama2cModel> model, int slots, int threads);
/// What ModelBatchTarget is, for the report.
extern const char* const model_batch_target_description;

// ---- the batch target of `replay --batch` ---------------------------------------------------

/// The model that times `replay --batch --timed-model M`: every prefill, batched forward, commit
/// and release of the replay also runs on it, after the replay has accepted the call. Its caches
/// hold the same tokens, so a pass's wall time is what decoding on M costs, with the recorded
/// answers' acceptance (TimedTarget's idea, for a batch). A Llama2cBatchTarget on the host
/// (host_timed_batch); a DeviceLlamaBatchTarget with `--device` (device_runs.hpp).
class TimedBatch {
 public:
  virtual ~TimedBatch() = default;
  virtual void prefill(int slot, std::span<const token_t> tokens) = 0;
  /// `batch`'s arrays are on the host.
  virtual void forward(const specdec::TreeBatchView& batch) = 0;
  virtual void commit(int slot, std::span<const specdec::node_t> path) = 0;
  virtual void release(int slot) = 0;
};
/// Makes the TimedBatch of `slots` sequences for one B.
using TimedBatchMaker = std::function<std::unique_ptr<TimedBatch>(int slots)>;

/// Thrown by the maker of a B's batch target (or TimedBatch) when the device cannot hold that B:
/// the batch table leaves that B out, its row saying why, and goes on with the others.
class batch_does_not_fit : public input_error {
 public:
  using input_error::input_error;
};

/// Llama2cBatchTarget of `model`, its forward on `threads` threads.
TimedBatchMaker host_timed_batch(std::shared_ptr<const specdec::Llama2cModel> model, int threads);

/// A BatchTarget of per-request ReplayTargets: each request's recorded answer decides its own
/// acceptance. expect(reference) names the reference of the next request to join; the batch's
/// add() prefills a slot, which then replays that reference. With `timed`, every call also runs
/// on it (TimedBatch).
class ReplayBatchTarget {
 public:
  ReplayBatchTarget(int slots, int vocab_size, token_t stop_token, std::unique_ptr<TimedBatch> timed = nullptr);

  /// The next prefill's reference: prompt, recorded answer, stop token.
  void expect(std::span<const token_t> reference) { next_.assign(reference.begin(), reference.end()); }

  int vocab_size() const { return targets_.vocab_size(); }
  int slots() const { return targets_.slots(); }
  void prefill(int slot, std::span<const token_t> tokens) {
    targets_.target(slot) = specdec::ReplayTarget(next_, vocab_size(), stop_);
    targets_.prefill(slot, tokens);
    if (timed_) timed_->prefill(slot, tokens);
  }
  decltype(auto) forward(const specdec::TreeBatchView& batch) {
    decltype(auto) out = targets_.forward(batch);
    if (timed_) timed_->forward(batch);
    return out;
  }
  void commit(int slot, std::span<const specdec::node_t> path) {
    targets_.commit(slot, path);
    if (timed_) timed_->commit(slot, path);
  }
  void release(int slot) {
    targets_.release(slot);
    if (timed_) timed_->release(slot);
  }

 private:
  specdec::PerSlotTarget<specdec::ReplayTarget> targets_;
  std::unique_ptr<TimedBatch> timed_;
  std::vector<token_t> next_;
  token_t stop_;
};

// ---- what a batch run measures ---------------------------------------------------------------

/// Batch sizes at most this large (a sanity cap on --batch).
inline constexpr int max_batch_size = 1024;

/// "1,2,4" (or "1, 2, 4,": specdec::tools::list_items and whole_number): whole numbers in
/// [1, max_batch_size], comma-separated, none twice; returned in increasing order. Throws
/// input_error ("expected ..., got '...'") otherwise.
std::vector<int> parse_batch_sizes(std::string_view text);

struct BatchOptions {
  std::vector<int> sizes;  ///< the B values, increasing
  int budget = 64;         ///< draft nodes per request per step (speculative pass); with `cost`, its cap
  /// `--budget auto`: the cost model of the speculative pass's automatic budget (none: fixed).
  specdec::AnyCostModel cost;
  int threads = 1;         ///< the model's forward threads (`model --batch`)
  /// `replay --batch --timed-model`: makes the model every step also runs on (empty: none).
  TimedBatchMaker timed;
  DrafterResources resources;
  RoundRule rounds;        ///< how many plain and speculative passes alternate per B (default one each)
};

/// One pass over every request, B at a time.
struct BatchPass {
  std::int64_t tokens = 0;            ///< new tokens of all requests (cut at max_new_tokens and the stop)
  std::int64_t forwards = 0;          ///< batched target forwards (steps)
  std::int64_t request_steps = 0;     ///< forwards each request took part in, summed over requests
  double seconds = 0;                 ///< wall time of the pass (prefills, drafting, forwards, verification)
  double prefill_seconds = 0;         ///< of which in add(): the prompts' prefills, the same in both passes
  double latency_seconds = 0;         ///< summed over requests: add() to finished
  std::int64_t latency_forwards = 0;  ///< summed over requests: forwards from add() to finished
  std::int64_t drafted_nodes = 0;     ///< non-root nodes sent to the target, all requests
  std::vector<std::vector<token_t>> outputs;  ///< per request, in input order

  /// Decoding throughput: new tokens / the pass's wall time without the prefills.
  double tokens_per_second() const {
    const double decoding = seconds - prefill_seconds;
    return decoding > 0 ? static_cast<double>(tokens) / decoding : 0.0;
  }
  /// τ: tokens per request step (bonus token included): 1 for the plain pass.
  double tau() const { return request_steps ? static_cast<double>(tokens) / static_cast<double>(request_steps) : 0.0; }
};

struct BatchRow {
  int batch = 0;          ///< B
  /// Why this B did not run (batch_does_not_fit: the device cannot hold it); empty when it ran.
  std::string refused{};
  BatchPass plain{};        ///< speculation off: every request sends its root only (the first round)
  BatchPass speculative{};  ///< the combination's drafters at the budget (the first round)
  /// Requests whose speculative output equals the first plain output in every round (and whose
  /// plain output does too).
  int equal_to_plain = 0;
  Rounds rounds{};          ///< per round, each arm's tokens/s without the prefills
};

struct BatchRun {
  std::vector<std::string> drafters;
  int requests = 0;
  std::vector<BatchRow> rows;  ///< one per B, increasing
};

/// What the report says besides the run.
struct BatchReport {
  BatchRun run;
  std::string command;  ///< "model" or "replay"
  std::string source;   ///< the model's shape, or the replay's data
  std::string target;   ///< the batch target
  int budget = 0;       ///< fixed, or the automatic budget's cap
  std::string auto_budget;  ///< `--budget auto`: the cost model (empty: a fixed budget)
  bool fixed_by_default = false;  ///< a fixed budget for want of a cost model, not from --budget N
  bool lossless() const;
};

/// The largest tree a batch's start-up calibration measures: the largest step (B requests of
/// cap + 1 nodes), at most half the model's `seq_len` positions (a chain of it must fit after a
/// context) and at most the `most` nodes the target's forward takes (a device target's
/// max_tree_nodes); BatchCostModel extends the table beyond.
int batch_calibration_size(const std::vector<int>& sizes, int cap, int seq_len, int most);

/// The table, one row per B, and the lossless line.
void print_batch_report(std::ostream& out, const BatchReport& report);
nlohmann::ordered_json to_json(const BatchReport& report);
/// Throughput of plain and speculative batched decoding against B (log2 axis).
std::string batch_svg(const BatchReport& report);

namespace detail {

/// Decodes `requests` requests through `batch`, `batch.capacity()` at a time, in input order: a
/// request joins as soon as a slot is free. `add(i)` adds request i and returns its id (ids count
/// from 0 in order of add(), so request i has id i).
template <class Batch, class Add>
BatchPass run_pass(Batch& batch, std::size_t requests, Add&& add) {
  using clock = std::chrono::steady_clock;
  BatchPass pass;
  pass.outputs.resize(requests);
  std::vector<clock::time_point> joined(requests);
  std::vector<std::int64_t> joined_forward(requests);
  const auto start = clock::now();
  std::size_t next = 0;
  while (next < requests || batch.active() > 0) {
    while (next < requests && batch.active() < batch.capacity()) {
      joined[next] = clock::now();
      joined_forward[next] = batch.forwards();
      if (add(next) != static_cast<specdec::request_id>(next))
        throw std::logic_error("SpeculativeBatch gave request " + std::to_string(next) + " another id");
      pass.prefill_seconds += std::chrono::duration<double>(clock::now() - joined[next]).count();
      ++next;
    }
    for (const specdec::RequestUpdate& u : batch.step()) {
      const auto i = static_cast<std::size_t>(u.id);
      pass.outputs[i].insert(pass.outputs[i].end(), u.tokens.begin(), u.tokens.end());
      if (u.finished) {
        pass.latency_seconds += std::chrono::duration<double>(clock::now() - joined[i]).count();
        pass.latency_forwards += batch.forwards() - joined_forward[i];
        pass.request_steps += u.stats->steps;
        pass.drafted_nodes += u.stats->drafted_nodes;
        pass.tokens += static_cast<std::int64_t>(pass.outputs[i].size());
      }
    }
  }
  pass.seconds = std::chrono::duration<double>(clock::now() - start).count();
  pass.forwards = batch.forwards();
  return pass;
}

/// Runs `measure(row)` for B = `batch` and adds the row to `run`; a B whose batch target does not
/// fit the device (batch_does_not_fit) gets a row that says so instead. Throws that refusal when it
/// is the last B and no B has run: a table with nothing measured is an error.
template <class Measure>
void add_row(BatchRun& run, int batch, bool last, Measure&& measure) {
  BatchRow row{.batch = batch};
  try {
    measure(row);
  } catch (const batch_does_not_fit& e) {
    const bool none_ran = std::all_of(run.rows.begin(), run.rows.end(), [](const BatchRow& r) { return !r.refused.empty(); });
    if (last && none_ran) throw;
    row = BatchRow{.batch = batch, .refused = e.what()};
  }
  run.rows.push_back(std::move(row));
}

/// Alternates `plain_pass()` and `speculative_pass()` (each returns a BatchPass) into `row` until
/// `rule` is met. The first round's passes stay as row.plain and row.speculative; every later
/// round's outputs are compared with the first plain pass's.
template <class PlainPass, class SpeculativePass>
void run_rounds(BatchRow& row, const RoundRule& rule, PlainPass&& plain_pass, SpeculativePass&& speculative_pass) {
  std::vector<char> differs;
  do {
    BatchPass plain = plain_pass();
    BatchPass speculative = speculative_pass();
    row.rounds.add({plain.tokens_per_second(), plain.seconds, speculative.tokens_per_second(), speculative.seconds});
    const bool first = row.rounds.count() == 1;
    const BatchPass& reference = first ? plain : row.plain;
    differs.resize(reference.outputs.size(), 0);
    for (std::size_t i = 0; i < differs.size(); ++i)
      differs[i] |= speculative.outputs[i] != reference.outputs[i] || plain.outputs[i] != reference.outputs[i];
    if (first) {
      row.plain = std::move(plain);
      row.speculative = std::move(speculative);
    }
  } while (rule.more(row.rounds.count(), row.rounds.plain_seconds(), row.rounds.speculative_seconds()));
  row.equal_to_plain = static_cast<int>(std::count(differs.begin(), differs.end(), 0));
}

}  // namespace detail

/// `model --batch`: every prompt of `bench`, for each B plainly then speculatively (exact verifier),
/// in rounds as options.rounds asks, on the batch target `make_target(slots)` makes for each B
/// (a BatchTarget or a BackendBatchTarget).
template <class... Drafters, class MakeTarget>
BatchRun decode_batch(const ModelBench& bench, const BatchOptions& options, MakeTarget&& make_target) {
  using Target = std::invoke_result_t<MakeTarget&, int>;
  using Plain = specdec::SpeculativeBatch<Target, specdec::ExactVerifier>;
  using Speculative = specdec::SpeculativeBatch<Target, Drafters..., specdec::ExactVerifier>;
  const TargetInfo info{bench.model->config().vocab_size, bench.model};
  const std::size_t n = bench.prompts.size();
  BatchRun run;
  run.drafters = Speculative::names();
  run.requests = static_cast<int>(n);
  specdec::RequestOptions request;
  request.eos = bench.stop_tokens;
  request.budget = options.budget;
  for (const int b : options.sizes) detail::add_row(run, b, b == options.sizes.back(), [&](BatchRow& row) {
    const int slots = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(b), std::max<std::size_t>(n, 1)));
    Target target = make_target(slots);
    const auto plain_pass = [&] {
      Plain plain(target, slots, specdec::ExactVerifier{});
      request.speculate = false;
      return detail::run_pass(plain, n, [&](std::size_t i) {
        request.max_new_tokens = bench.prompts[i].max_new_tokens;
        return plain.add(bench.prompts[i].tokens, request);
      });
    };
    const auto speculative_pass = [&] {
      Speculative speculative(target, slots, specdec::BatchOptions{.cost = options.cost},
                              make_drafter<Drafters>(options.resources, info)..., specdec::ExactVerifier{});
      request.speculate = true;
      return detail::run_pass(speculative, n, [&](std::size_t i) {
        request.max_new_tokens = bench.prompts[i].max_new_tokens;
        return speculative.add(bench.prompts[i].tokens, request, make_drafter<Drafters>(options.resources, info)...);
      });
    };
    detail::run_rounds(row, options.rounds, plain_pass, speculative_pass);
  });
  return run;
}

/// `model --batch` on the host: decode_batch on ModelBatchTarget.
template <class... Drafters>
BatchRun decode_model_batch(const ModelBench& bench, const BatchOptions& options) {
  return decode_batch<Drafters...>(
      bench, options, [&](int slots) { return make_model_batch_target(bench.model, slots, options.threads); });
}

/// `replay --batch`: every turn of `corpus`, for each B plainly then speculatively, in rounds as
/// options.rounds asks. Throws
/// std::logic_error when a plain output differs from its recorded answer.
template <class... Drafters>
BatchRun replay_batch(const Corpus& corpus, const BatchOptions& options) {
  using Plain = specdec::SpeculativeBatch<ReplayBatchTarget, specdec::ExactVerifier>;
  using Speculative = specdec::SpeculativeBatch<ReplayBatchTarget, Drafters..., specdec::ExactVerifier>;
  const TargetInfo info{corpus.vocab_size, nullptr};
  const std::size_t n = corpus.turns.size();
  std::vector<std::vector<token_t>> references;  // prompt, answer, stop
  for (const Turn& turn : corpus.turns) {
    std::vector<token_t>& r = references.emplace_back(turn.prompt.begin(), turn.prompt.end());
    r.insert(r.end(), turn.answer.begin(), turn.answer.end());
    r.push_back(corpus.stop_token);
  }
  BatchRun run;
  run.drafters = Speculative::names();
  run.requests = static_cast<int>(n);
  specdec::RequestOptions request;
  request.eos = {corpus.stop_token};
  request.budget = options.budget;
  const auto join = [&](auto& batch, std::size_t i, auto&&... drafters) {
    batch.target().expect(references[i]);
    request.max_new_tokens = static_cast<int>(corpus.turns[i].answer.size()) + 1;
    return batch.add(corpus.turns[i].prompt, request, std::forward<decltype(drafters)>(drafters)...);
  };
  for (const int b : options.sizes) detail::add_row(run, b, b == options.sizes.back(), [&](BatchRow& row) {
    const int slots = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(b), std::max<std::size_t>(n, 1)));
    ReplayBatchTarget target(slots, corpus.vocab_size, corpus.stop_token, options.timed ? options.timed(slots) : nullptr);
    const auto plain_pass = [&] {
      Plain plain(target, slots, specdec::ExactVerifier{});
      request.speculate = false;
      BatchPass pass = detail::run_pass(plain, n, [&](std::size_t i) { return join(plain, i); });
      for (std::size_t i = 0; i < n; ++i) {
        const std::span<const token_t> expected = std::span(references[i]).subspan(corpus.turns[i].prompt.size());
        if (!std::ranges::equal(pass.outputs[i], expected))
          throw std::logic_error("question " + std::to_string(corpus.turns[i].question_id) + " turn " +
                                 std::to_string(corpus.turns[i].index + 1) + ", batch " + std::to_string(b) +
                                 ": plain batched decoding differs from the recorded answer");
      }
      return pass;
    };
    const auto speculative_pass = [&] {
      // Without a timed model the replay's steps take no time of their own: the pause weighs the model's.
      Speculative speculative(target, slots,
                              specdec::BatchOptions{.cost = options.cost, .measured_pause = static_cast<bool>(options.timed)},
                              make_drafter<Drafters>(options.resources, info)..., specdec::ExactVerifier{});
      request.speculate = true;
      return detail::run_pass(speculative, n, [&](std::size_t i) {
        return join(speculative, i, make_drafter<Drafters>(options.resources, info)...);
      });
    };
    detail::run_rounds(row, options.rounds, plain_pass, speculative_pass);
  });
  return run;
}

}  // namespace specbench
