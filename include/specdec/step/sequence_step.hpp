// detail::SequenceStep: one sequence's speculative state and the named phases of a step that
// touch it. The step driver (step/driver.hpp), the one step of SpeculativeDecoder (one sequence)
// and SpeculativeBatch (many), runs them for each sequence as
//
//   draft   each drafter proposes a tree below the root (the last committed token), checked;
//   merge   the trees merge into one, within the node budget and the target's room;
//   forward the target runs the merged tree(s) — the driver's business (one call for all trees);
//   verify  the sequence's verifier walks the tree against the output; check_verdict() refuses a
//           path that is not a chain from the root;
//   commit  the accepted tokens and the next token join the context (the target's commit is the
//           driver's business);
//   observe each drafter is told the committed tokens;
//   record  the step's counters join the statistics.
//
// The phases own no target and no verifier. What else the step needs for any number of
// sequences is here too, once: the bounds of a tree on a target's positions (tree_bounds), the
// step on a backend (backend_step_for, step/backend_step.hpp), the check of a prefill's features
// and the gathering of an accepted path's features; the automatic budget is step/budget.hpp's.
// Storage is reused from step to step: the phases allocate nothing once the buffers have grown.
#pragma once

#include <algorithm>
#include <array>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>
// The step timer needs only steady_clock: libstdc++'s <chrono> also brings calendars and time
// zones (about a fifth of a greedy decoder's preprocessed lines), its <bits/chrono.h> does not.
#if defined(__GLIBCXX__) && __has_include(<bits/chrono.h>)
#include <bits/chrono.h>
#else
#include <chrono>
#endif

#include <specdec/concepts.hpp>
#include <specdec/tree_merger.hpp>
#include <specdec/error.hpp>
#include <specdec/stats.hpp>
#include <specdec/type_list.hpp>

namespace specdec {

/// The clock a step times itself with (DecodeStats' seconds, the automatic budget's measured
/// pause): SpeculativeDecoder's and SpeculativeBatch's `clock` option. A test that checks what the
/// budget decides from time gives one it advances itself, so the verdict does not depend on how
/// fast the build runs (sanitizers, a busy machine).
using StepClock = std::chrono::steady_clock::time_point (*)();

}  // namespace specdec

namespace specdec::detail {

/// Whether T is defined here: a facade's backend step is, once its header was included.
template <class T>
inline constexpr bool complete = requires { sizeof(T); };

template <class Backend>
class BackendStep;  // step/backend_step.hpp

/// A facade's step state for its target: a BackendStep for a BackendTarget or BackendBatchTarget,
/// nothing otherwise (and nothing to include).
struct NoBackendStep {};
template <class Target>
struct backend_step_for {
  using type = NoBackendStep;
};
template <class Target>
  requires BackendTarget<Target> || BackendBatchTarget<Target>
struct backend_step_for<Target> {
  using type = BackendStep<typename Target::backend_type>;
};

/// The most draft nodes of a step's tree and its deepest node's depth.
struct TreeBounds {
  int nodes = 0, depth = 0;
};
/// The bounds of a tree within `budget` where `room` positions are free after the root: a backend
/// target writes every node's K/V behind its cache, so all nodes must fit; a host target places
/// each node at its depth, so the depth must (an unbounded target has room INT_MAX).
template <bool every_node_cached>
TreeBounds tree_bounds(int budget, int room) {
  const int fits = std::min(budget, std::max(room, 0));
  if constexpr (every_node_cached) return {fits, fits};
  else return {budget, fits};
}

/// The features of a prefill of `prompt_length` tokens (all but the last cached): `rows` must hold
/// `dim` floats per cached token; `who` names the call in the error.
inline TargetFeatures prefill_features(std::span<const float> rows, std::size_t prompt_length, int dim,
                                       const std::string& who) {
  const TargetFeatures features{0, static_cast<int>(prompt_length) - 1, dim, rows.data()};
  if (rows.size() != static_cast<std::size_t>(features.rows) * static_cast<std::size_t>(dim))
    throw error(who + " has " + std::to_string(rows.size()) + " floats, expected " + std::to_string(features.rows) +
                " tokens x " + std::to_string(dim));
  return features;
}

/// Throws specdec::error naming `what` (a string, or a callable that builds one: subject(),
/// error.hpp) when token `t` lies outside [0, vocab).
template <class What>
void check_token(token_t t, int vocab, const What& what) {
  if (t < 0 || t >= vocab)
    throw error(subject(what) + " is " + std::to_string(t) + ", outside the vocabulary [0, " + std::to_string(vocab) +
                ")");
}

/// verify: a user's verifier is outside our control, and a wrong path would corrupt the KV cache
/// silently: `verdict`'s path must be a chain from the root of `view`, its next token in [0, vocab).
inline void check_verdict(const Verdict& verdict, const TreeView& view, int vocab) {
  const auto& path = verdict.path;
  if (path.empty() || path[0] != 0) throw error("verifier: the accepted path must start at the root (node 0)");
  for (std::size_t k = 1; k < path.size(); ++k) {
    if (path[k] <= 0 || path[k] >= view.size || view.parent[path[k]] != path[k - 1])
      throw error("verifier: accepted path entry " + std::to_string(k) + " (node " + std::to_string(path[k]) +
                  ") is not a child of the previous node");
  }
  check_token(verdict.next_token, vocab, "verifier: the next token");
}

/// record's counting of one step in `stats`: its tokens (`committed`), the draft nodes of `view`,
/// and per drafter the accepted path's prefix it proposed (the merged `tree`'s source bits).
inline void count_step(DecodeStats& stats, const TreeView& view, const DraftTree& tree, std::span<const node_t> path,
                       std::size_t committed) {
  ++stats.steps;
  stats.tokens += static_cast<std::int64_t>(committed);
  stats.drafted_nodes += view.size - 1;
  DecodeStats::count(stats.tokens_per_step, committed);
  DecodeStats::count(stats.nodes_per_step, static_cast<std::size_t>(view.size - 1));
  for (std::size_t d = 0; d < stats.accepted_by_drafter.size(); ++d) {  // one per drafter
    std::size_t k = 1;
    while (k < path.size() && (tree.source(path[k]) >> d & 1u)) ++k;
    DecodeStats::count(stats.accepted_by_drafter[d], k - 1);
  }
}

/// Whether a drafter of the list reads the target's features (the decoders then gather them).
template <class List>
struct any_feature_drafter;
template <class... Ds>
struct any_feature_drafter<type_list<Ds...>> : std::bool_constant<(drafter_traits<Ds>::needs_target_features || ... || false)> {};

template <class DrafterList>
class SequenceStep;

template <class... Drafters>
class SequenceStep<type_list<Drafters...>> {
 public:
  static constexpr std::size_t num_drafters = sizeof...(Drafters);
  using drafters_type = std::tuple<Drafters...>;
  /// Some drafter reads the target's features: each step gathers the accepted path's rows.
  static constexpr bool reads_features = any_feature_drafter<type_list<Drafters...>>::value;

  explicit SequenceStep(drafters_type drafters) : drafters_(std::move(drafters)) {}

  /// Display names of the drafters, in template order.
  static std::vector<std::string> names() { return {std::string(drafter_name<Drafters>())...}; }

  /// begin: a new sequence starts with `prompt` (already checked against `vocab`; all but its
  /// last token are in the target's cache); every drafter begins on it and the statistics restart.
  void begin(std::span<const token_t> prompt, int vocab, const TargetFeatures& features) {
    context_.clear();  // a drafter that throws leaves no sequence to step
    vocab_ = vocab;
    std::apply([&](auto&... d) { (begin_one(d, prompt, features), ...); }, drafters_);
    context_.assign(prompt.begin(), prompt.end());
    prompt_length_ = static_cast<int>(prompt.size());
    cached_ = prompt_length_ - 1;
    stats_ = DecodeStats{};
    stats_.accepted_by_drafter.assign(num_drafters, {});
    stats_.drafter_names = names();
  }

  /// The sequence can no longer be stepped (only a new begin() can go on).
  void stop() { context_.clear(); }
  bool started() const { return !context_.empty(); }

  /// draft + merge: every drafter proposes below the root, and the trees merge into one of at
  /// most `budget` draft nodes and depth `max_depth` (no drafter is asked when either is 0). The
  /// view's base_position is the cache size.
  TreeView draft(int budget, int max_depth) {
    if (budget == 0 || max_depth == 0) return root_only();
    rank(budget, max_depth, nullptr);
    return keep(merger_.ranked());
  }

  /// The root alone, laid out on the cache, no drafter asked: a step that sends no draft node
  /// (plain decoding's step, a paused step) without the merge's work.
  TreeView root_only() {
    merger_.root_only(context_.back());
    TreeView view = merger_.view();
    view.base_position = cached_;
    return view;
  }

  /// draft + merge in two halves, for a size chosen from the ranking (draft_budget.hpp): every
  /// drafter proposes up to `most` nodes, the trees merge and the best `most` nodes are ranked,
  /// by calibrated path probability when `model` is given (else as draft() ranks them); then
  /// keep(k) lays out the best k.
  void rank(int most, int max_depth, const AcceptanceModel* model) {
    const DraftContext ctx{context_, prompt_length_, most, max_depth, vocab_};
    std::array<const DraftTree*, tree_count> trees{};
    for (std::size_t i = 0; i < tree_count; ++i) trees[i] = &trees_[i];
    if constexpr (num_drafters == 0) trees_[0].reset(context_.back());
    std::size_t d = 0;
    std::apply([&](auto&... drafter) { (propose_one(drafter, d++, ctx), ...); }, drafters_);
    merger_.rank(trees, most, max_depth, model);
  }
  const TreeMerger& ranking() const { return merger_; }
  TreeView keep(int nodes) {
    merger_.keep(nodes);
    TreeView view = merger_.view();
    view.base_position = cached_;
    return view;
  }

  /// Tells `model` this step's verdict on the kept tree (after check_verdict).
  void record_verdict(AcceptanceModel& model) const { merger_.record_verdict(model, verdict_.path); }

  /// A chain of the root and `tokens` (no drafter asked), laid out on the cache: what a target
  /// forwards to take `tokens` into its cache.
  TreeView chain(std::span<const token_t> tokens) {
    DraftTree& chain = trees_[0];
    chain.reset(context_.back());
    chain.add_chain(0, tokens);
    const DraftTree* one[] = {&chain};
    const int nodes = static_cast<int>(tokens.size());
    merger_.merge(one, nodes, nodes);
    TreeView view = merger_.view();
    view.base_position = cached_;
    return view;
  }

  /// verify: a user's verifier is outside our control, and a wrong path would corrupt the KV
  /// cache silently: the path must be a chain from the root, the next token in the vocabulary.
  void check_verdict(const TreeView& view) const { detail::check_verdict(verdict_, view, vocab_); }

  /// commit: the verdict's accepted tokens and next token join the context; the accepted path's
  /// nodes (root included) join the cache. Returns the committed tokens, valid until the next step.
  std::span<const token_t> commit(const TreeView& view) {
    committed_.clear();
    for (std::size_t k = 1; k < verdict_.path.size(); ++k) committed_.push_back(view.token[verdict_.path[k]]);
    committed_.push_back(verdict_.next_token);
    context_.insert(context_.end(), committed_.begin(), committed_.end());
    cached_ += static_cast<int>(verdict_.path.size());
    return committed_;
  }

  /// commit of a plain run: `tokens` were committed by as many steps that sent the root alone
  /// (the target's own decoding loop, SpeculativeDecoder::generate); they join the context, all
  /// but the last the cache. The last step's tree and verdict are left as that step's.
  std::span<const token_t> commit_plain(std::span<const token_t> tokens) {
    committed_.assign(tokens.begin(), tokens.end());
    context_.insert(context_.end(), tokens.begin(), tokens.end());
    cached_ += static_cast<int>(tokens.size());
    merger_.root_only(context_[context_.size() - 2]);
    verdict_.path.assign(1, 0);
    verdict_.next_token = tokens.back();
    return committed_;
  }

  /// Copies the features of the accepted path's nodes (root first) from the forward's output
  /// (`out.features(node)`, `dim` floats each), before the target's commit ends its life; `who`
  /// names the facade in the error.
  template <class Out>
  void gather_features(const Out& out, int dim, const char* who) {
    const std::size_t width = static_cast<std::size_t>(dim);
    const auto& path = verdict_.path;
    feature_rows_.resize(path.size() * width);
    for (std::size_t k = 0; k < path.size(); ++k) {
      const std::span<const float> row = out.features(path[k]);
      if (row.size() != width)
        throw error(std::string(who) + ": the target's features(" + std::to_string(path[k]) + ") has " +
                    std::to_string(row.size()) + " floats, but its feature_dim() is " + std::to_string(dim));
      std::copy(row.begin(), row.end(), feature_rows_.begin() + static_cast<std::ptrdiff_t>(k * width));
    }
  }
  /// The rows gather_features() (or a plain run) left: `rows` tokens from position `base`.
  TargetFeatures path_features(int base, int rows, int dim) const { return {base, rows, dim, feature_rows_.data()}; }
  /// Where a plain run writes its tokens' features (SpeculativeDecoder::generate).
  std::vector<float>& feature_rows() { return feature_rows_; }

  /// observe: every drafter is told the committed tokens (and, for a feature drafter, `features`).
  void observe(const TargetFeatures& features) {
    std::apply([&](auto&... drafter) { (observe_one(drafter, features), ...); }, drafters_);
  }

  /// record: the step's counters, and its time split into drafting (draft, merge, commit,
  /// observe), the target (forward and commit) and the verifier, in seconds, and a backend step's
  /// parts on the backend (zero on the host).
  void record(const TreeView& view, double draft_seconds, double target_seconds, double verify_seconds,
              const BackendPhases& backend_phases) {
    count_step(stats_, view, merger_.tree(), verdict_.path, committed_.size());
    stats_.draft_seconds += draft_seconds;
    stats_.target_seconds += target_seconds;
    stats_.verify_seconds += verify_seconds;
    stats_.backend_phases.add(backend_phases);
  }

  /// record of a plain run (commit_plain): its steps' counters, `paused` of them in a pause, and
  /// its time split into the target's (the decoding loop) and the host's (commit, observe).
  void record_plain(int paused, double target_seconds, double host_seconds) {
    const auto steps = static_cast<std::int64_t>(committed_.size());
    stats_.steps += steps;
    stats_.tokens += steps;
    stats_.paused_steps += paused;
    DecodeStats::count(stats_.tokens_per_step, 1, steps);
    DecodeStats::count(stats_.nodes_per_step, 0, steps);
    for (auto& accepted : stats_.accepted_by_drafter) DecodeStats::count(accepted, 0, steps);
    stats_.draft_seconds += host_seconds;
    stats_.target_seconds += target_seconds;
  }

  /// Goes back to the first `keep` tokens of the cache with `root` as the next root (resume()).
  void rewind(int keep, std::span<const token_t> context) {
    cached_ = keep;
    context_.assign(context.begin(), context.begin() + static_cast<std::ptrdiff_t>(keep + 1));
  }
  /// `tokens` more tokens are in the cache (a fed chain).
  void cache(int tokens) { cached_ += tokens; }
  /// Replaces the context (the cache is left as it is) and begins every drafter on it again.
  void restart(std::span<const token_t> context) {
    context_.assign(context.begin(), context.end());
    prompt_length_ = std::min(prompt_length_, static_cast<int>(context.size()));
    std::apply([&](auto&... d) { (begin_one(d, context, TargetFeatures{}), ...); }, drafters_);
  }

  std::span<const token_t> context() const { return context_; }
  int prompt_length() const { return prompt_length_; }
  /// Tokens in the target's KV cache: the context but its last token (the next root).
  int cached() const { return cached_; }
  int vocab() const { return vocab_; }
  const DecodeStats& stats() const { return stats_; }
  /// The drafters were not asked this step (DraftingPause).
  void record_pause() { ++stats_.paused_steps; }
  /// `n` committed tokens were handed to the caller (DecodeStats::output_tokens).
  void record_output(std::size_t n) { stats_.output_tokens += static_cast<std::int64_t>(n); }
  /// The automatic budget sized this step (or `steps` steps): it expected these tokens and seconds.
  void record_sizing(double expected_tokens, double expected_seconds, std::int64_t steps = 1) {
    stats_.sized_steps += steps;
    stats_.expected_tokens += expected_tokens;
    stats_.expected_seconds += expected_seconds;
  }
  const DraftTree& tree() const { return merger_.tree(); }
  const Verdict& verdict() const { return verdict_; }
  Verdict& verdict() { return verdict_; }
  drafters_type& drafters() { return drafters_; }

 private:
  static constexpr std::size_t tree_count = std::max<std::size_t>(num_drafters, 1);

  template <class D>
  static void begin_one(D& drafter, std::span<const token_t> prompt, const TargetFeatures& features) {
    if constexpr (drafter_traits<D>::needs_target_features) drafter.begin(prompt, features);
    else drafter.begin(prompt);
  }

  template <class D>
  void observe_one(D& drafter, const TargetFeatures& features) {
    const std::span<const token_t> committed(committed_);
    if constexpr (drafter_traits<D>::needs_target_features) drafter.observe(committed, features);
    else drafter.observe(committed);
  }

  template <class D>
  void propose_one(D& drafter, std::size_t index, const DraftContext& ctx) {
    DraftTree& tree = trees_[index];
    tree.reset(context_.back());
    drafter.propose(ctx, tree);
    if (tree.root_token() != context_.back()) throw error(who(index) + ": changed the root token of its draft tree");
    const auto author = [index] { return who(index); };  // built only for a message
    check_tree(tree, vocab_, author);
    if (tree.distributions() > 0) {
      if constexpr (!drafter_traits<D>::emits_draft_probabilities)
        throw error(who(index) + ": attached draft distributions (add_sampled) but does not declare "
                    "`static constexpr bool emits_draft_probabilities = true`");
      check_distributions(tree, vocab_, author);
    }
  }

  static std::string who(std::size_t index) { return "drafter " + std::to_string(index) + " (" + names()[index] + ")"; }

  drafters_type drafters_;
  std::vector<token_t> context_;
  int prompt_length_ = 0;
  int cached_ = 0;
  int vocab_ = 0;
  std::array<DraftTree, tree_count> trees_;
  TreeMerger merger_;
  Verdict verdict_;
  std::vector<token_t> committed_;
  std::vector<float> feature_rows_;  // the accepted path's features, for feature drafters
  DecodeStats stats_;
};

}  // namespace specdec::detail
