// detail::StepDriver: the one step of SpeculativeDecoder (a batch of one sequence) and
// SpeculativeBatch (its requests). A step runs, for 1..B sequences,
//
//   draft    each sequence drafts and merges its tree (the pause, then ranked or plain drafting,
//            timed); the facade says which sequences step, on which slots;
//   size     under the automatic budget, StepBudget chooses the step's nodes over every ranked
//            sequence, and each lays out its share (keep);
//   forward  one call for every tree: a BackendStep on a backend target (forward, verification and
//            compaction on the backend, one wait), else the target's batched forward (a single
//            sequence's Target is presented as a batch of one slot: OneSlotTarget);
//   verify   each sequence's verifier on its tree; the verdict is checked and calibrates;
//   commit   each sequence's path joins the target's cache, then its context;
//   observe  each sequence's drafters are told what it committed;
//   record   each sequence's counters and times, the budget's measure of the step.
//
// What only one facade does is a hook (Hooks): what the sizing expected (the decoder counts it in
// its sequence's statistics, the batch in its own), how a sequence ends when the step may have
// left part of itself in its cache (the decoder stops its sequence, the batch releases the
// request), and what a sequence's committed tokens become (the batch's updates).
//
// The clock is read no more than the times need: not before the forward in a step that asks no
// drafter, nor between the forward and the commit when every tree is the root alone (the
// verification is then the target's; see DecodeStats). Host-only.
#pragma once

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <new>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/draft_budget.hpp>
#include <specdec/step/budget.hpp>
#include <specdec/step/sequence_step.hpp>

namespace specdec::detail {

/// A single-sequence Target presented as a BatchTarget of one slot, for StepDriver: the forward
/// of the batch's one tree, whose output is tree(0) of the batch's, and the commit of its slot.
template <class Target>
class OneSlotTarget {
  template <class Output>
  struct One {
    Output out;  // the target's output, held as forward() returns it (by reference or value)
    const std::remove_reference_t<Output>& tree(int) const { return out; }
  };

 public:
  explicit OneSlotTarget(Target& target) : target_(target) {}
  auto forward(const TreeBatchView& batch) {
    return One<decltype(target_.forward(batch.trees[0]))>{target_.forward(batch.trees[0])};
  }
  void commit(int, std::span<const node_t> path) { target_.commit(path); }

 private:
  Target& target_;
};

/// The step of 1..B sequences of type `Sequence` (a SequenceStep), each verified by its own
/// `Verifier`. The facade begins a step, has each stepping sequence draft (draft()), then runs
/// the rest (run()). Where `Extent` is given, every step has that many sequences, held in place
/// (a decoder's one sequence: the compiler sees one, and a step costs what a loop of one would);
/// otherwise a step has up to reserve()'s.
template <class Sequence, class Verifier, std::size_t Extent = std::dynamic_extent>
class StepDriver {
  using clock = std::chrono::steady_clock;
  using seconds = std::chrono::duration<double>;
  static constexpr bool fixed = Extent != std::dynamic_extent;
  template <class T>
  using storage = std::conditional_t<fixed, std::array<T, fixed ? Extent : 1>, std::vector<T>>;

 public:
  /// `owner` names the facade's step in errors; `clock` times the steps; a `cost` model turns the
  /// automatic budget on (see StepBudget).
  StepDriver(const char* owner, StepClock clock, const AnyCostModel& cost, bool measured_pause)
      : owner_(owner), clock_(clock) {
    if (cost) budget_.emplace(cost, measured_pause);
  }

  /// Room for steps of up to `sequences` sequences (allocated once: a step allocates nothing).
  void reserve(std::size_t sequences)
    requires(!fixed)
  {
    lanes_.resize(sequences);
    slots_.resize(sequences);
    trees_.resize(sequences);
  }

  /// The automatic budget's controller (null without a cost model).
  StepBudget* budget() { return budget_ ? &*budget_ : nullptr; }
  const StepBudget* budget() const { return budget_ ? &*budget_ : nullptr; }

  /// A step begins: no sequence in it yet.
  void begin() {
    size_ = 0;
    asked_ = false;
  }

  /// draft + merge of `seq`'s tree on the target's `slot`, within `bounds`: its drafters are asked
  /// unless there is no room or the automatic budget's pause skips the step (the root alone,
  /// then); its part in the budget is `s`, at most `most` nodes a step. Under the automatic budget
  /// its merged nodes are ranked by its own `calibration` for the step's sizing (s.ranked: its tree
  /// is laid out after it), which learns from its verdicts, and so does `shared` where given (a
  /// batch's calibration of all its requests); otherwise they are merged within `bounds`. The
  /// drafting is timed (s.draft_seconds; no clock read when no drafter is asked).
  void draft(int slot, Sequence& seq, SequenceBudget& s, int most, TreeBounds bounds, Verifier& verifier,
             AcceptanceModel* calibration, AcceptanceModel* shared) {
    const std::size_t b = size_;
    Lane& lane = lanes_[b];
    lane = {&seq, &s, &verifier, calibration, shared, {}, 0.0, {}, false};
    slots_[b] = slot;
    s.budget = most;
    s.draft_seconds = 0;
    s.asked = false;
    s.ranked = bounds.nodes > 0 && bounds.depth > 0 && calibration;
    if (s.ranked && s.pause.skip_step()) {
      seq.record_pause();
      s.ranked = false;
      bounds = {};
    }
    if (bounds.nodes <= 0 || bounds.depth <= 0) make_tree(b, [&] { return seq.root_only(); });
    else ask(b, bounds);
    ++size_;
  }

  /// The step's sequences, in the order they drafted; b indexes them.
  int size() const { return static_cast<int>(size_); }
  int slot(int b) const { return slots_[static_cast<std::size_t>(b)]; }
  /// The tokens sequence b committed this step (once it committed), valid until its next step.
  std::span<const token_t> committed(int b) const { return lanes_[static_cast<std::size_t>(b)].committed; }
  /// Steps that ran their forward and committed (whether or not each sequence's commit held).
  std::int64_t forwards() const { return forwards_; }

  /// The rest of the step on `target` (a BatchTarget; a BackendTarget or BackendBatchTarget, run
  /// by `backend`; a Target wrapped in OneSlotTarget): size, forward, verify, commit, observe,
  /// record. `feature_dim` is the width of the target's features where the sequences read them.
  /// `hooks` holds what only the facade does:
  ///   sized(const DraftSizeChoice&)  the automatic budget sized the step;
  ///   end(int b)                     sequence b's cache may hold part of this step (a backend
  ///                                  step or its commit threw): only a new prefill can go on;
  ///   recorded(int b)                sequence b committed and recorded its step.
  /// Throws what a drafter, the target or a verifier throws. A throw before the commit leaves no
  /// sequence committed, but a backend step's ends every sequence (end). A sequence whose commit
  /// throws ends; the others commit, observe and record, and the first error is then rethrown.
  template <class Target, class Backend, class Hooks>
  void run(Target&& target, Backend& backend, int feature_dim, Hooks&& hooks) {
    using target_type = std::remove_cvref_t<Target>;
    if (budget_) size(hooks);
    Times times;
    times.forward = times.verified = times.verifying = clock_();
    std::exception_ptr failed;  // the first commit that threw
    if constexpr (BackendTarget<target_type> || BackendBatchTarget<target_type>)
      on_backend(target, backend, hooks, times);
    else
      failed = on_host(target, feature_dim, times);
    times.committed = clock_();
    ++forwards_;
    commit_contexts(hooks);
    record(feature_dim, hooks, times, !failed);
    if (failed) std::rethrow_exception(failed);
  }

 private:
  // When the step's phases began and ended.
  struct Times {
    clock::time_point forward;    // the forward began (the drafting and sizing ended)
    clock::time_point verifying;  // the forward ended: the verifiers began (where timed)
    clock::time_point verified;   // the verifiers ended
    clock::time_point committed;  // the target's commits ended
    BackendPhases backend;        // a backend step's parts, timed there
  };

  // forward, verify, commit on a backend: forward, verification and compaction run behind each
  // other there (their time is the target's, see DecodeStats); a throw ends every sequence.
  template <class Target, class Backend, class Hooks>
  void on_backend(Target& target, Backend& backend, Hooks& hooks, Times& times) {
    const std::size_t trees = count();
    try {
      backend.run(
          target, batch(), [&](int b) -> Verifier& { return *lanes_[static_cast<std::size_t>(b)].verifier; },
          [&](int b) -> Verdict& { return lanes_[static_cast<std::size_t>(b)].seq->verdict(); });
      for (std::size_t b = 0; b < trees; ++b) verified(b);
      times.backend = backend.phases();
    } catch (...) {
      for (std::size_t b = 0; b < trees; ++b) hooks.end(static_cast<int>(b));
      throw;
    }
  }

  // forward, verify, commit on the host: one forward, each sequence's verifier (timed where a
  // tree has draft nodes), then each target commit. Returns the first commit's error, if one threw
  // (its sequence is then `ended`; the others go on).
  template <class Target>
  std::exception_ptr on_host(Target& target, int feature_dim, Times& times) {
    const std::size_t trees = count();
    decltype(auto) out = target.forward(batch());
    const bool timed =
        std::any_of(trees_.begin(), trees_.begin() + static_cast<std::ptrdiff_t>(trees), [](const TreeView& t) { return t.size > 1; });
    if (timed) times.verifying = times.verified = clock_();
    for (std::size_t b = 0; b < trees; ++b) {
      Lane& lane = lanes_[b];
      lane.verifier->verify(trees_[b], out.tree(static_cast<int>(b)), lane.seq->verdict());
      verified(b);
      if (timed) {
        const auto t = clock_();
        lane.verify_seconds = seconds(t - times.verified).count();
        times.verified = t;
      }
    }
    if constexpr (Sequence::reads_features) {
      for (std::size_t b = 0; b < trees; ++b)  // before commit: it ends the output's life
        lanes_[b].seq->gather_features(out.tree(static_cast<int>(b)), feature_dim, owner_);
    }
    std::exception_ptr failed;
    for (std::size_t b = 0; b < trees; ++b) {
      try {
        target.commit(slots_[b], std::span<const node_t>(lanes_[b].seq->verdict().path));
      } catch (...) {
        if (!failed) failed = std::current_exception();
        lanes_[b].ended = true;
      }
    }
    return failed;
  }

  // commit, after the target's: each sequence's context takes the tokens its cache took, every
  // one before a drafter is told or a sequence ends, so that nothing leaves a sequence with the
  // two apart; then a sequence whose target commit threw ends.
  template <class Hooks>
  void commit_contexts(Hooks& hooks) {
    for (std::size_t b = 0; b < count(); ++b)
      if (!lanes_[b].ended) lanes_[b].committed = lanes_[b].seq->commit(trees_[b]);
    for (std::size_t b = 0; b < count(); ++b)
      if (lanes_[b].ended) hooks.end(static_cast<int>(b));
  }

  // observe, record: each sequence's drafters and statistics. A sequence's host time is its
  // drafting with the step's sizing (as each counts the shared forward) and its observe; the
  // contexts' commits, a copy of a few tokens each, count in the first sequence's. Then the
  // budget's measure of the step, where every commit held (`all`).
  template <class Hooks>
  void record(int feature_dim, Hooks& hooks, const Times& times, bool all) {
    const double target_seconds =
        seconds(times.verifying - times.forward).count() + seconds(times.committed - times.verified).count();
    const clock::duration sizing = asked_ ? times.forward - last_draft_ : clock::duration{};
    auto t = times.committed;
    for (std::size_t b = 0; b < count(); ++b) {
      Lane& lane = lanes_[b];
      if (lane.ended) continue;
      Sequence& seq = *lane.seq;
      seq.observe(seq.path_features(trees_[b].base_position, static_cast<int>(seq.verdict().path.size()), feature_dim));
      const auto begin = t;
      t = clock_();
      const clock::duration drafting = lane.budget->asked ? lane.drafting + sizing : clock::duration{};
      seq.record(trees_[b], seconds(drafting).count() + seconds(t - begin).count(), target_seconds, lane.verify_seconds,
                 times.backend);
      hooks.recorded(static_cast<int>(b));
    }
    // The step's time for the automatic budget: from its first drafting, or from its forward when
    // no sequence drafted (no clock read before it).
    if (budget_ && all) budget_->weigh(seconds(t - (asked_ ? first_draft_ : times.forward)).count());
  }

  TreeBatchView batch() const {
    return {std::span<const int>(slots_.data(), count()), std::span<const TreeView>(trees_.data(), count())};
  }

  // One sequence's part in the step.
  struct Lane {
    Sequence* seq = nullptr;
    SequenceBudget* budget = nullptr;
    Verifier* verifier = nullptr;
    AcceptanceModel* calibration = nullptr;  // its own (null without the automatic budget)
    AcceptanceModel* shared = nullptr;       // another that learns from its verdicts, or null
    clock::duration drafting{};              // its drafting (zero when no drafter was asked)
    double verify_seconds = 0;
    std::span<const token_t> committed;
    bool ended = false;  // its commit threw: the facade ended it
  };

  // The sequences drafted this step: size_, which is Extent when a fixed-size step runs (known to
  // the compiler: no loop over one sequence).
  std::size_t count() const {
    if constexpr (fixed) return Extent;
    else return size_;
  }

  // size: the ranked sequences' nodes compete for the step's size; each keeps its nodes among the
  // best.
  template <class Hooks>
  void size(Hooks& hooks) {
    budget_->begin();
    for (std::size_t b = 0; b < count(); ++b) {
      const Lane& lane = lanes_[b];
      budget_->join(*lane.budget, &lane.seq->ranking(), lane.seq->cached());
    }
    const DraftSizeChoice choice = budget_->size();
    for (std::size_t b = 0; b < count(); ++b) {
      const Lane& lane = lanes_[b];
      if (lane.budget->ranked) make_tree(b, [&] { return lane.seq->keep(lane.budget->nodes); });
    }
    hooks.sized(choice);
  }

  // draft + merge of sequence b's tree, its drafters asked within `bounds`, timed.
  void ask(std::size_t b, TreeBounds bounds) {
    Lane& lane = lanes_[b];
    Sequence& seq = *lane.seq;
    SequenceBudget& s = *lane.budget;
    s.asked = true;
    const auto began = clock_();
    if (s.ranked) {
      seq.rank(s.pause.ask_nodes(bounds.nodes), bounds.depth, lane.calibration);
      make_tree(b, [] { return TreeView{}; });  // laid out by size()
    } else {
      make_tree(b, [&] { return seq.draft(bounds.nodes, bounds.depth); });
    }
    const auto ended = clock_();
    lane.drafting = ended - began;
    s.draft_seconds = seconds(lane.drafting).count();
    if (!asked_) first_draft_ = began;
    asked_ = true;
    last_draft_ = ended;
  }

  // Tree b's view, made by `make` in place: a view is 128 bytes, whose copy would show in a plain
  // step's cost (a view is trivially destructible, and this one replaces the last).
  template <class Make>
  void make_tree(std::size_t b, Make&& make) {
    ::new (static_cast<void*>(&trees_[b])) TreeView(make());
  }

  // verify, after the verifier: the path is checked and the calibrations learn from it.
  void verified(std::size_t b) {
    const Lane& lane = lanes_[b];
    lane.seq->check_verdict(trees_[b]);
    if (lane.budget->ranked) {
      lane.seq->record_verdict(*lane.calibration);
      if (lane.shared) lane.seq->record_verdict(*lane.shared);
    }
  }

  const char* owner_;
  StepClock clock_;
  std::optional<StepBudget> budget_;
  // The step's sequences, their slots and trees (what the forward reads): the first size_ of each.
  storage<Lane> lanes_{};
  storage<int> slots_{};
  storage<TreeView> trees_{};
  std::size_t size_ = 0;
  bool asked_ = false;                        // some sequence asked its drafters this step
  clock::time_point first_draft_, last_draft_;  // the first's drafting began, the last's ended
  std::int64_t forwards_ = 0;
};

}  // namespace specdec::detail
