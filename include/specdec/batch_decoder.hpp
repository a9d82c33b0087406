// SpeculativeBatch<BatchTarget, Drafter..., Verifier>: speculative decoding of many requests with
// one target forward per step for all of them. Requests join (add) and leave (remove, or when they
// finish) between steps; each has its own drafters, verifier, options and statistics.
//
// A step is step/driver.hpp's — the same as SpeculativeDecoder's — over the active requests:
// draft + merge each request's tree (a request with speculation off sends its root only), one
// forward of the ragged batch of trees, verify each tree with its request's verifier, commit each
// accepted path, observe, record.
//
// A BatchTarget is accepted (concepts.hpp), or a BackendBatchTarget, whose forward, verification
// and KV compaction run on its backend for the whole batch, with one wait per step
// (step/backend_step.hpp, which its own header includes). A model that only models Target is
// batched by wrapping it in PerSlotTarget (targets/per_slot.hpp), one Target per slot and one
// forward per request: correct, but it reads the weights once per request, not once per step.
// The automatic budget is step/budget.hpp's, the same controller as SpeculativeDecoder's.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <specdec/checks.hpp>
#include <specdec/concepts.hpp>
#include <specdec/core/sampling.hpp>
#include <specdec/draft_budget.hpp>
#include <specdec/error.hpp>
#include <specdec/stats.hpp>
#include <specdec/step/budget.hpp>
#include <specdec/step/driver.hpp>
#include <specdec/step/sequence_step.hpp>
#include <specdec/type_list.hpp>

namespace specdec {

namespace detail {
/// A verifier that SpeculativeBatch makes per request from the request's sampling options: one
/// whose options() hold sampling, seed and sequence and that is constructible from them
/// (RejectionSampling).
template <class V>
concept SamplesPerRequest = requires(const V& v) {
  v.options().sampling;
  v.options().seed;
  v.options().sequence;
} && std::constructible_from<V, std::remove_cvref_t<decltype(std::declval<const V&>().options())>>;
}  // namespace detail

/// Optional, for a drafter whose copies for other requests may share state (e.g. a memory of
/// earlier outputs, HistoryTreeDrafter): it declares `using shared_state_type = S;`,
/// `std::shared_ptr<S> shared_state() const` (the state it drafts from) and
/// `void share(std::shared_ptr<S>)` (draft from this one instead). SpeculativeBatch asks its
/// prototype once per request's copy, so all requests share the prototype's state. State a
/// drafter already holds by shared_ptr (RestDrafter's and DresdDrafter's datastores) is shared by
/// the copy itself and needs none of this.
template <class D>
concept SharesStateAcrossRequests = requires { typename D::shared_state_type; } && requires(D& d, const D& cd) {
  { cd.shared_state() } -> std::convertible_to<std::shared_ptr<typename D::shared_state_type>>;
  d.share(cd.shared_state());
};

/// Optional: `void end()`, told when the drafter's request ends (finished or removed), e.g. to
/// add its output to a shared state.
template <class D>
concept EndsRequests = requires(D& d) { d.end(); };

/// Each drafter of `drafters` that shares state across requests (SharesStateAcrossRequests) draws
/// it from its counterpart in `from`, so both draft from (and add to) one state.
template <class... Ds>
void share_drafter_states(std::tuple<Ds...>& drafters, const std::tuple<Ds...>& from) {
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    [[maybe_unused]] const auto one = [](auto& drafter, const auto& source) {
      if constexpr (SharesStateAcrossRequests<std::remove_cvref_t<decltype(drafter)>>) drafter.share(source.shared_state());
    };
    (one(std::get<I>(drafters), std::get<I>(from)), ...);
  }(std::index_sequence_for<Ds...>{});
}

/// Tells each drafter of `drafters` that has an end() (EndsRequests) that its request ended.
template <class... Ds>
void end_drafters(std::tuple<Ds...>& drafters) {
  std::apply([](auto&... drafter) {
    [[maybe_unused]] const auto one = [](auto& d) {
      if constexpr (EndsRequests<std::remove_cvref_t<decltype(d)>>) d.end();
    };
    (one(drafter), ...);
  }, drafters);
}

/// A request's identity in a SpeculativeBatch: ids count up from 0 and are never reused.
using request_id = std::int64_t;

/// What a request asks for.
struct RequestOptions {
  /// The request finishes after this many new tokens (>= 1).
  int max_new_tokens = 256;
  /// The request finishes after the first of these tokens (it is included in the output).
  std::vector<token_t> eos;
  /// Speculation on: drafters propose up to `budget` draft nodes a step. Off: the request sends
  /// its root only (plain decoding; its drafters still observe what it commits).
  bool speculate = true;
  int budget = 64;
  /// For a sampling verifier (one with options() holding sampling, seed and sequence, such as
  /// RejectionSampling): the request's own sampling parameters and random stream, keyed by
  /// (seed, stream) only, so that its tokens do not depend on who shares its batch. Other
  /// verifiers are copied from the batch's and ignore these.
  core::SamplingParams sampling{};
  std::uint64_t seed = 0;
  std::uint32_t stream = 0;
};

/// How a SpeculativeBatch sizes its steps.
struct BatchOptions {
  /// The automatic budget, on when a cost model is given (see DecoderOptions::cost and
  /// docs/budget.md). Each step every speculating request ranks up to its `budget` nodes (at most
  /// twice the most its recent steps sent, at least 4: DraftingPause::ask_nodes) by calibrated
  /// path probability (one AcceptanceModel for the whole batch, learning from every request's
  /// verdicts), and the batch sends the best nodes of all requests together, as many as maximise
  /// expected tokens per second: (requests + the nodes' probabilities) /
  /// (cost.step_seconds(requests + nodes, the requests' mean cached tokens) + the drafting time
  /// of a step). A request's share is its nodes among them, none included; each request's
  /// drafters pause while they do not pay (DraftingPause). The cost model must answer for every
  /// size up to the requests plus the sum of their budgets.
  AnyCostModel cost{};
  AcceptanceModelOptions acceptance{};
  /// As DecoderOptions::measured_pause: the pause weighs a request's drafting by the step's
  /// measured time (its nodes' share of the measured growth over the measured plain steps, those
  /// that sent no node) or, false, by the cost model's times.
  bool measured_pause = true;
  /// As DecoderOptions::clock.
  StepClock clock = &std::chrono::steady_clock::now;
};

/// What one request committed in a step (see SpeculativeBatch::step).
struct RequestUpdate {
  request_id id = -1;
  /// The new tokens, cut at max_new_tokens and after the first EOS token.
  std::span<const token_t> tokens;
  /// The request is done (this step reached max_new_tokens or an EOS token, or the target is
  /// full); its slot is free from the next add() or step() on.
  bool finished = false;
  /// The request's statistics, this step included.
  const DecodeStats* stats = nullptr;
};

/// Speculative decoding of up to `capacity` requests at once on a BatchTarget, with drafts from
/// every `Drafter` (per request: its own instances) merged into one tree per request and checked
/// by the last policy, the `Verifier` (per request: its own instance).
///
/// The target is held by reference and must outlive the batch. add(), remove() and the accessors
/// validate their input first and throw specdec::error without changing the batch; step() throws
/// only what a drafter, the verifier or the target throws, and says what that leaves.
template <class Target, class... Policies>
class SpeculativeBatch {
  static_assert(sizeof...(Policies) >= 1,
                "SpeculativeBatch<BatchTarget, Drafter..., Verifier>: the last template argument must be a "
                "verifier (e.g. specdec::ExactVerifier), and none was given.");
  using split = detail::split_last<Policies...>;
  using drafter_list = typename split::init;
  using sequence_type = detail::SequenceStep<drafter_list>;

 public:
  using target_type = Target;
  using verifier_type = typename split::last;
  using drafters_type = typename drafter_list::template apply<std::tuple>;
  static constexpr std::size_t num_drafters = drafter_list::size;

 private:
  static constexpr bool composition_checked = [] {
    if constexpr (sizeof...(Policies) == 0) return false;  // said above
    else return detail::check_batch_decoder<Target>(drafter_list{}, static_cast<verifier_type*>(nullptr));
  }();
  using backend_step_type = typename detail::backend_step_for<Target>::type;
  // A BackendBatchTarget's step is defined in step/backend_step.hpp, which a host batch does not include.
  static constexpr bool step_defined = detail::complete<backend_step_type>;
  static_assert(!composition_checked || step_defined,
                "This target is a BackendBatchTarget: include <specdec/step/backend_step.hpp> (the batch's "
                "step on its backend) before using SpeculativeBatch with it.");
  static constexpr bool checked = composition_checked && step_defined;
  // Every slot's cache holds at most max_positions() tokens.
  static constexpr bool bounded = BoundedTarget<Target> || BackendBatchTarget<Target>;
  // Feature drafters are told each request's features (the target is then a FeatureBatchTarget).
  static constexpr bool gathers_features = checked && detail::any_feature_drafter<drafter_list>::value;
  static_assert(num_drafters <= 32, "SpeculativeBatch: at most 32 drafters (one source bit each).");
  template <class... Ds>
  static constexpr bool shared_states_ok(detail::type_list<Ds...>) {
    return ((!requires { typename Ds::shared_state_type; } || SharesStateAcrossRequests<Ds>) && ... && true);
  }
  static_assert(shared_states_ok(drafter_list{}),
                "In your drafter: it declares shared_state_type, so it also needs `std::shared_ptr<shared_state_type> "
                "shared_state() const` and `void share(std::shared_ptr<shared_state_type>)` (see "
                "specdec::SharesStateAcrossRequests).");

 public:
  /// `capacity`: requests held at once (at most target.slots()). The policies given are the
  /// prototypes each request's own drafters and verifier are copied from.
  SpeculativeBatch(Target& target, int capacity, Policies... policies)
      : SpeculativeBatch(target, capacity, BatchOptions{}, std::move(policies)...) {}

  /// With options (the automatic budget: BatchOptions::cost).
  SpeculativeBatch(Target& target, int capacity, BatchOptions options, Policies... policies)
      : SpeculativeBatch(target, capacity, std::move(options), std::forward_as_tuple(std::move(policies)...),
                         std::make_index_sequence<num_drafters>{}) {}

  /// All prototypes default-constructed.
  SpeculativeBatch(Target& target, int capacity)
    requires(std::default_initializable<Policies> && ...)
      : SpeculativeBatch(target, capacity, Policies{}...) {}

  /// Adds a request whose drafters are copies of the batch's. Returns its id.
  request_id add(std::span<const token_t> prompt, const RequestOptions& options = {})
    requires std::copy_constructible<drafters_type>
  {
    if constexpr (!checked) {
      return -1;  // the composition failed a check: its sentence is the error
    } else {
      check_request(prompt, options);
      return admit(prompt, options, drafters_type(prototype_));
    }
  }

  /// Adds a request with its own drafter instances (e.g. an oracle that knows this request's answer).
  template <class... Ds>
    requires(sizeof...(Ds) == num_drafters && sizeof...(Ds) > 0)
  request_id add(std::span<const token_t> prompt, const RequestOptions& options, Ds&&... drafters) {
    if constexpr (!checked) {
      return -1;  // the composition failed a check: its sentence is the error
    } else {
      check_request(prompt, options);
      return admit(prompt, options, drafters_type(std::forward<Ds>(drafters)...));
    }
  }

  /// Removes an active request (its output so far stays with the caller); its slot is free at once.
  void remove(request_id id) {
    release(slot_of(id, "remove"));
  }

  /// One step for every active request: one target forward for all. Returns one entry per request
  /// that was active, in slot order, valid until the next add(), remove() or step().
  /// If a drafter, the forward or a verifier throws, no request has committed anything (their
  /// drafters may have been asked and their pauses counted the step): the next step drafts again.
  /// If the target's commit throws for a request, that request ends (its slot is freed, as by
  /// remove()); the others commit, and their entries are in last_updates(), then the error is
  /// rethrown. On a backend target, a throw ends the step's requests:
  /// their caches may be partly compacted.
  std::span<const RequestUpdate> step() {
    if constexpr (!checked) {
      return {};  // the composition failed a check: its sentence is the error
    } else {
      free_finished();
      updates_.clear();
      driver_.begin();
      // draft + merge: one tree per active request (its root only when it does not speculate)
      for (std::size_t s = 0; s < requests_.size(); ++s) {
        if (!requests_[s] || requests_[s]->finished) continue;
        Request& r = *requests_[s];
        driver_.draft(static_cast<int>(s), r.seq, r.budget, r.options.budget, tree_bounds(r), r.verifier,
                      r.acceptance ? &*r.acceptance : nullptr, acceptance_.get());
      }
      if (driver_.size() == 0) return {};
      driver_.run(target_, backend_step_, feature_dim(), StepHooks{*this});
      return updates_;
    }
  }

  /// What the last step() returned, or had made for the requests that committed when it threw;
  /// valid as step()'s result.
  std::span<const RequestUpdate> last_updates() const { return updates_; }

  /// Requests being decoded (not finished, not removed).
  int active() const {
    return static_cast<int>(std::count_if(requests_.begin(), requests_.end(),
                                          [](const auto& r) { return r && !r->finished; }));
  }
  int capacity() const { return static_cast<int>(requests_.size()); }
  /// Target forwards so far (one per step that had an active request).
  std::int64_t forwards() const { return driver_.forwards(); }

  /// An active request's statistics (τ: tokens per target call, bonus token included).
  const DecodeStats& stats(request_id id) const { return requests_[slot_of(id, "stats")]->seq.stats(); }
  /// An active request's prompt and committed tokens (past a cut at max_new_tokens or EOS too).
  std::span<const token_t> context(request_id id) const { return requests_[slot_of(id, "context")]->seq.context(); }

  /// Statistics summed over every request so far, finished, removed and active: τ over all
  /// request steps, the histogram of tokens per request step. Each request's target_seconds
  /// counts the whole shared forward, so this sum counts a forward once per request in it.
  DecodeStats stats() const {
    DecodeStats all = retired_stats_;
    for (const auto& r : requests_)
      if (r) all.add(r->seq.stats());
    if (all.drafter_names.empty()) {
      all.drafter_names = sequence_type::names();
      all.accepted_by_drafter.resize(num_drafters);
    }
    // The automatic budget sizes batch steps, not request steps: its sums are the batch's.
    all.sized_steps = sized_steps_;
    all.expected_tokens = expected_tokens_;
    all.expected_seconds = expected_seconds_;
    return all;
  }

  /// The automatic budget's calibration over all requests (null without BatchOptions::cost): each
  /// request ranks its nodes with its own counts on top of it (AcceptanceModel::set_prior).
  const AcceptanceModel* acceptance_model() const { return acceptance_.get(); }

  Target& target() { return target_; }

  /// Display names of the drafters, in template order.
  static std::vector<std::string> names() { return sequence_type::names(); }

 private:
  struct Request {
    Request(request_id id_, const RequestOptions& options_, drafters_type drafters, verifier_type verifier_)
        : id(id_), options(options_), seq(std::move(drafters)), verifier(std::move(verifier_)) {}
    request_id id;
    RequestOptions options;
    sequence_type seq;
    verifier_type verifier;
    int produced = 0;        // new tokens given to the caller
    bool finished = false;   // reported finished; the slot is freed by the next add() or step()
    // The automatic budget: this request's part (its drafters' pause, this step's drafting and
    // nodes) and its calibration, with the batch's as its prior.
    detail::SequenceBudget budget;
    std::optional<AcceptanceModel> acceptance;
  };

  int feature_dim() const {
    if constexpr (gathers_features) return static_cast<int>(target_.feature_dim());
    else return 0;
  }

  // The request of the step's tree b.
  Request& in_batch(int b) { return *requests_[static_cast<std::size_t>(driver_.slot(b))]; }

  // What the step driver leaves to a batch: its sizing is the batch's, a request whose cache may
  // hold part of the step ends (as if removed), and each request's committed tokens are cut into
  // its update.
  struct StepHooks {
    SpeculativeBatch& batch;
    void sized(const DraftSizeChoice& choice) {
      ++batch.sized_steps_;
      batch.expected_tokens_ += choice.expected_tokens;
      batch.expected_seconds_ += choice.seconds;
    }
    void end(int b) { batch.release(static_cast<std::size_t>(batch.driver_.slot(b))); }
    void recorded(int b) { batch.updates_.push_back(batch.emit(batch.in_batch(b), batch.driver_.committed(b))); }
  };

  int max_positions() const {
    if constexpr (BackendBatchTarget<Target>) return target_.kv_cache().layout.max_positions;
    else return static_cast<int>(target_.max_positions());
  }

  // The bounds of request `r`'s tree this step (see tree_bounds; none when it does not speculate).
  // The root always fits: a request finishes when its cache is full.
  detail::TreeBounds tree_bounds(const Request& r) const {
    const int budget = r.options.speculate ? r.options.budget : 0;
    if constexpr (bounded)
      return detail::tree_bounds<BackendBatchTarget<Target>>(budget, max_positions() - r.seq.cached() - 1);
    else
      return {budget, budget};
  }

  template <class Tuple, std::size_t... I>
  SpeculativeBatch(Target& target, int capacity, BatchOptions options, Tuple&& all, std::index_sequence<I...>)
      : target_(target),
        options_(std::move(options)),
        prototype_(std::move(std::get<I>(all))...),
        verifier_(std::move(std::get<num_drafters>(all))),
        driver_("SpeculativeBatch::step", options_.clock, options_.cost, options_.measured_pause) {
    if constexpr (checked) {
      if (options_.cost)
        acceptance_ = std::make_shared<AcceptanceModel>(static_cast<int>(std::max<std::size_t>(num_drafters, 1)),
                                                        options_.acceptance);
      if (capacity < 1) throw error("SpeculativeBatch: capacity must be >= 1, got " + std::to_string(capacity));
      if (capacity > static_cast<int>(target_.slots()))
        throw error("SpeculativeBatch: capacity " + std::to_string(capacity) + " exceeds the target's " +
                    std::to_string(target_.slots()) + " slots");
      if constexpr (BackendBatchTarget<Target>) {
        if (capacity > backend_step_type::max_trees)
          throw error("SpeculativeBatch: capacity " + std::to_string(capacity) + " is above the " +
                      std::to_string(backend_step_type::max_trees) + " trees a backend step takes");
        backend_step_.prepare(target_.backend(), static_cast<int>(target_.vocab_size()), "SpeculativeBatch", true);
      }
      requests_.resize(static_cast<std::size_t>(capacity));
      updates_.reserve(requests_.size());
      driver_.reserve(requests_.size());
    }
  }

  // Every check of add(), before anything changes.
  void check_request(std::span<const token_t> prompt, const RequestOptions& options) const {
    const int vocab = static_cast<int>(target_.vocab_size());
    if (prompt.empty()) throw error("SpeculativeBatch::add: the prompt is empty (it needs at least one token)");
    for (std::size_t i = 0; i < prompt.size(); ++i)
      detail::check_token(prompt[i], vocab, [i] { return "SpeculativeBatch::add: prompt token " + std::to_string(i); });
    if constexpr (bounded) {
      if (prompt.size() > static_cast<std::size_t>(max_positions()))
        throw error("SpeculativeBatch::add: the prompt has " + std::to_string(prompt.size()) +
                    " tokens, more than the target's " + std::to_string(max_positions()) + " positions");
    }
    if (options.max_new_tokens < 1)
      throw error("SpeculativeBatch::add: max_new_tokens must be >= 1, got " + std::to_string(options.max_new_tokens));
    if (options.budget < 0) throw error("SpeculativeBatch::add: budget must be >= 0, got " + std::to_string(options.budget));
    if constexpr (BackendBatchTarget<Target>) {
      if (options.budget > backend_step_type::max_budget)
        throw error("SpeculativeBatch::add: budget " + std::to_string(options.budget) + " is above what a backend " +
                    "step verifies and compacts (" + std::to_string(backend_step_type::max_budget) + " draft nodes)");
    }
    for (std::size_t i = 0; i < options.eos.size(); ++i)
      detail::check_token(options.eos[i], vocab, [i] { return "SpeculativeBatch::add: eos token " + std::to_string(i); });
    if (!core::valid(options.sampling)) {
      throw error("SpeculativeBatch::add: bad sampling parameters: temperature " +
                  std::to_string(options.sampling.temperature) + " (>= 0), top_k " + std::to_string(options.sampling.top_k) +
                  " (>= 0), top_p " + std::to_string(options.sampling.top_p) + " (in (0, 1]), min_p " +
                  std::to_string(options.sampling.min_p) + " (in [0, 1])");
    }
    if (free_slot() == requests_.size())
      throw error("SpeculativeBatch::add: all " + std::to_string(requests_.size()) +
                  " slots are taken (the capacity); remove a request or step until one finishes");
  }

  request_id admit(std::span<const token_t> prompt, const RequestOptions& options, drafters_type drafters) {
    const std::size_t s = free_slot();
    if (requests_[s]) release(s);  // a finished request reported by the last step
    share_drafter_states(drafters, prototype_);
    target_.prefill(static_cast<int>(s), prompt.first(prompt.size() - 1));
    auto& r = requests_[s].emplace(next_id_, options, std::move(drafters), make_verifier(options));
    if (acceptance_) {
      r.acceptance.emplace(acceptance_->drafters(), acceptance_->options());
      r.acceptance->set_prior(acceptance_);
      r.budget.pause = last_pause_;  // what the last request to end learnt: as a decoder's next sequence
      r.budget.pause.restart();
    }
    try {
      TargetFeatures features{};
      if constexpr (gathers_features)
        features = detail::prefill_features(target_.prefill_features(static_cast<int>(s)), prompt.size(), feature_dim(),
                                            "SpeculativeBatch::add: the target's prefill_features(" +
                                                std::to_string(s) + ")");
      r.seq.begin(prompt, static_cast<int>(target_.vocab_size()), features);
    } catch (...) {
      requests_[s].reset();
      target_.release(static_cast<int>(s));
      throw;
    }
    return next_id_++;
  }

  verifier_type make_verifier(const RequestOptions& options) const {
    if constexpr (detail::SamplesPerRequest<verifier_type>) {
      auto sampling = verifier_.options();
      sampling.sampling = options.sampling;
      sampling.seed = options.seed;
      sampling.sequence = options.stream;
      return verifier_type(sampling);
    } else {
      return verifier_;
    }
  }

  // The update of request `r` for the tokens its step committed: cut at max_new_tokens and after
  // the first EOS; the request finishes there, or when the target has no room for another root.
  RequestUpdate emit(Request& r, std::span<const token_t> committed) {
    std::size_t n = 0;
    while (n < committed.size() && r.produced < r.options.max_new_tokens) {
      ++r.produced;
      const token_t t = committed[n++];
      if (std::find(r.options.eos.begin(), r.options.eos.end(), t) != r.options.eos.end()) {
        r.finished = true;
        break;
      }
    }
    if (r.produced == r.options.max_new_tokens) r.finished = true;
    if constexpr (bounded) {
      if (r.seq.cached() >= max_positions()) r.finished = true;
    }
    r.seq.record_output(n);
    return {r.id, committed.first(n), r.finished, &r.seq.stats()};
  }

  std::size_t slot_of(request_id id, const char* what) const {
    if (id < 0 || id >= next_id_)
      throw error(std::string("SpeculativeBatch::") + what + ": request " + std::to_string(id) +
                  " is unknown (no request with this id was added)");
    for (std::size_t s = 0; s < requests_.size(); ++s)
      if (requests_[s] && requests_[s]->id == id && !requests_[s]->finished) return s;
    throw error(std::string("SpeculativeBatch::") + what + ": request " + std::to_string(id) +
                " has finished or was removed");
  }

  std::size_t free_slot() const {
    for (std::size_t s = 0; s < requests_.size(); ++s)
      if (!requests_[s] || requests_[s]->finished) return s;
    return requests_.size();
  }

  void free_finished() {
    for (std::size_t s = 0; s < requests_.size(); ++s)
      if (requests_[s] && requests_[s]->finished) release(s);
  }

  void release(std::size_t s) {
    last_pause_ = requests_[s]->budget.pause;
    end_drafters(requests_[s]->seq.drafters());
    retired_stats_.add(requests_[s]->seq.stats());
    requests_[s].reset();
    target_.release(static_cast<int>(s));
  }

  Target& target_;
  BatchOptions options_;
  drafters_type prototype_;
  verifier_type verifier_;
  std::vector<std::optional<Request>> requests_;  // per slot
  [[no_unique_address]] std::conditional_t<step_defined, backend_step_type, detail::NoBackendStep> backend_step_;
  detail::StepDriver<sequence_type, verifier_type> driver_;  // the step, and the automatic budget's controller
  request_id next_id_ = 0;
  DecodeStats retired_stats_;
  std::vector<RequestUpdate> updates_;
  // The automatic budget (BatchOptions::cost): the calibration and the batch's sums over the
  // steps it sized.
  std::shared_ptr<AcceptanceModel> acceptance_;  // the whole batch's: each request's prior
  DraftingPause last_pause_;  // the pause of the last request to end, a new request's start
  std::int64_t sized_steps_ = 0;
  double expected_tokens_ = 0, expected_seconds_ = 0;
};

}  // namespace specdec
