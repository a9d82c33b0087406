// ContextTreeDrafter ("tree") and HistoryTreeDrafter ("tree_history"): model-free drafters that
// draft a tree of likely continuations from the context (and, for the second, from the outputs of
// earlier sequences).
//
// The context is indexed by a ContinuationAutomaton, which catches up with the committed tokens
// when the drafter is asked (observe() only queues them: a paused drafter costs next to nothing).
// For a text (the context, or the context followed by a draft path) the automaton gives its longest
// suffix that occurred before and every shorter one (back-off contexts), each with the tokens that
// followed it, how often and how recently. Every token that followed one of these contexts is a
// candidate child; a logistic model of that evidence (match length, counts, distinct continuations,
// how much longer the longest match is, the token's frequency and recency) estimates the
// probability that the target produces it. The weights were fitted by logistic regression on the
// next tokens of the Spec-Bench replay (see docs/drafters/context_tree.md); they give calibrated
// estimates, so a node's score, the product of the estimates along its path, estimates the
// probability that the target accepts the node. The tree grows best first: the highest-scoring
// candidate anywhere in the tree is added next, until the node budget is spent.
#pragma once

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/error.hpp>
#include <specdec/option_checks.hpp>
#include <specdec/index/continuation_automaton.hpp>

namespace specdec {

/// The outputs of earlier sequences a HistoryTreeDrafter drafts from. A drafter's copy has its
/// own copy of it, unless it share()s one: SpeculativeBatch has every request's drafter share its
/// prototype's (shared_state_type), so each request drafts from the outputs of all requests that
/// ended before it.
///
/// An ended sequence's output waits in `pending` and joins `tokens` a slice per drafting step
/// (catch_up()): appending to an automaton that the target's forward has pushed out of cache
/// costs about a microsecond per token, which only steps that draft should pay.
struct TreeHistory {
  index::ContinuationAutomaton tokens;
  std::vector<token_t> pending;     ///< outputs not in `tokens` yet, each after a separator (-1)
  std::size_t pending_joined = 0;   ///< how many of `pending` have joined `tokens`
  std::uint64_t version = 0;        ///< counts clear()s: a drafter's matches into an older history are void

  /// Tokens held: in the automaton and waiting.
  std::size_t size() const { return static_cast<std::size_t>(tokens.size()) + (pending.size() - pending_joined); }
  /// Up to `max_tokens` waiting tokens join the automaton.
  void catch_up(int max_tokens) {
    const std::size_t end = pending_joined + std::min(pending.size() - pending_joined, static_cast<std::size_t>(max_tokens));
    for (; pending_joined < end; ++pending_joined) tokens.append(pending[pending_joined]);
    if (pending_joined == pending.size()) {
      pending.clear();
      pending_joined = 0;
    }
  }
  /// Forgets every output.
  void clear() {
    tokens.clear();
    pending.clear();
    pending_joined = 0;
    ++version;
  }
};

/// Options of the tree drafters (defaults are what docs/drafters/context_tree.md reports).
struct ContextTreeOptions {
  /// Most draft nodes per step. By default only the decoder's budget (DraftContext::budget,
  /// DecoderOptions::budget = 64 unless set) caps the tree, so one setting sizes it.
  int budget = std::numeric_limits<int>::max();
  /// At the root: candidates taken from each back-off context (its most frequent continuations).
  int root_breadth = 128;
  /// HistoryTreeDrafter, at the root: candidates taken from each back-off context of the history.
  int history_breadth = 16;
  /// Below the root: candidates taken from each context, and how many contexts are consulted
  /// (longest first). Deep nodes carry small path probabilities, so few children can compete.
  int node_breadth = 4;
  int node_contexts = 2;
  /// Nodes whose estimated path probability falls below this are not drafted.
  float min_probability = 1e-4f;
  /// HistoryTreeDrafter: history size in tokens; when an output does not fit, the history is
  /// forgotten and restarts.
  int history_tokens = 1 << 22;
  /// HistoryTreeDrafter: tokens of ended outputs that join the history per drafting step (a step
  /// that asks the drafter). Under a fixed budget a new output is in after a few steps; while the
  /// automatic budget pauses drafting, the history waits and costs nothing.
  int history_catch_up = 32;
};

class ContextTreeDrafter {
 public:
  static constexpr const char* name = "tree";

  ContextTreeDrafter() : ContextTreeDrafter(ContextTreeOptions{}) {}

  /// Throws specdec::error for an option out of range.
  explicit ContextTreeDrafter(ContextTreeOptions options) : ContextTreeDrafter(options, false) {}

  void begin(std::span<const token_t> prompt) {
    if (with_history_) remember_output();
    index_.clear();
    unindexed_.clear();
    forget_history_match();
    prompt_length_ = static_cast<int>(prompt.size());
    for (token_t t : prompt) append(t);
  }

  // The index catches up with the committed tokens in propose(): a drafter that is not asked (the
  // automatic budget's pause, budget 0) costs next to nothing per step.
  void observe(std::span<const token_t> committed) { unindexed_.insert(unindexed_.end(), committed.begin(), committed.end()); }

  void propose(const DraftContext& ctx, DraftTree& tree) {
    catch_up();
    if (!in_sync(ctx.tokens)) resync(ctx);
    const int budget = std::min(options_.budget, ctx.budget);
    if (budget <= 0 || ctx.max_depth <= 0) return;
    match_history();
    ++step_;
    nodes_.assign(1, Node{index_.suffix_match(), history_match_, 0, 0, 1.0f});
    frontier_.clear();
    expand(0, ctx.max_depth);
    for (int added = 0; added < budget && !frontier_.empty(); ++added) {
      std::pop_heap(frontier_.begin(), frontier_.end());
      const Child child = frontier_.back();
      frontier_.pop_back();
      const Node& parent = nodes_[child.parent];
      const node_t in_tree = tree.add(parent.in_tree, child.token, child.probability);
      nodes_.push_back(Node{index_.extend(parent.context, child.token),
                            with_history_ ? history_->tokens.extend(parent.history, child.token) : Match{},
                            in_tree, parent.depth + 1, child.probability});
      expand(static_cast<int>(nodes_.size()) - 1, ctx.max_depth);
    }
  }

  const ContextTreeOptions& options() const { return options_; }

 protected:
  const auto& history() const { return history_; }
  void share_history(std::shared_ptr<TreeHistory> history) { history_.share(std::move(history)); }
  void end_sequence() {
    remember_output();
    prompt_length_ = context_size();  // remembered: the next begin() adds nothing more
  }

  /// `history`: also draft from the outputs of earlier sequences (HistoryTreeDrafter).
  ContextTreeDrafter(ContextTreeOptions options, bool history) : options_(options), with_history_(history) {
    check_option("ContextTreeDrafter", "budget", options.budget);
    check_option("ContextTreeDrafter", "root_breadth", options.root_breadth);
    check_option("ContextTreeDrafter", "history_breadth", options.history_breadth);
    check_option("ContextTreeDrafter", "node_breadth", options.node_breadth);
    check_option("ContextTreeDrafter", "node_contexts", options.node_contexts);
    check_option("ContextTreeDrafter", "history_tokens", options.history_tokens);
    check_option("ContextTreeDrafter", "history_catch_up", options.history_catch_up);
    if (!(options.min_probability >= 0.0f && options.min_probability < 1.0f)) {
      std::ostringstream value;
      value << options.min_probability;
      throw error("ContextTreeDrafter: min_probability must be in [0, 1), got " + value.str());
    }
  }

 private:
  using Match = index::ContinuationAutomaton::Match;

  // ---- the scoring model -------------------------------------------------------------------
  // Features of a candidate token. Its "context" is the longest matched context it followed.
  enum Feature {
    kLength,           // log(1 + match length of its context); 0 at the empty context
    kCount,            // log(times it followed its context)
    kContinued,        // log(continued occurrences of its context)
    kDistinct,         // log(distinct continuations of its context)
    kShorterBy,        // log(1 + how much longer the longest match is): it never followed that
    kFrequency,        // log(1 + occurrences of the token in the context)
    kAge,              // log(1 + tokens since the token last occurred)
    kMostFrequent,     // it is its context's most frequent continuation
    kLongest,          // its context is the longest match
    kUnmatched,        // its context is the empty one (only its frequency speaks for it)
    kDeterministic,    // log(1 + match length) when its context was always followed by one token
    kHistory,          // it followed a context of the history
    kHistoryLength,    // as above, for its longest matched context in the history
    kHistoryCount,
    kHistoryContinued,
    kHistoryDistinct,
    kHistoryShorterBy,
    kHistoryMostFrequent,
    kHistoryFrequency,  // log(1 + occurrences of the token in the history)
    kHistoryOnly,       // no consulted context of the sequence itself was followed by it
    kHistoryDeterministic,  // log(1 + history match length) when that context had one continuation
    kHistoryOnlyLength,     // log(1 + history match length) for a token only the history proposes
    kFeatures
  };
  using Weights = std::array<float, kFeatures + 1>;  // bias first

  // Fitted by logistic regression (Newton's method) on every next token of the 560 Spec-Bench
  // turns (Vicuna-7B replay): the candidates collect() finds for the context at that point, with
  // the root's settings (k...Weights) and with a deeper node's (k...NodeWeights).
  // bench/fit_tree_weights regenerates them (docs/drafters/context_tree.md). Without history the
  // history features are 0 and their weights unused.
  static constexpr Weights kContextWeights = {
      -1.2502f, 0.3935f, 0.9703f, -0.5845f, -0.374f, -0.9042f, 0.2099f, -0.0768f, 0.0188f, 0.0938f,
      0.0689f, 0.7735f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  static constexpr Weights kContextNodeWeights = {
      -2.1202f, 0.3569f, 0.759f, -0.1339f, -0.7579f, -0.5753f, 0.2526f, -0.0084f, 0.11f, 0.4727f, 0.3491f,
      0.8178f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  static constexpr Weights kHistoryWeights = {
      -1.5984f, 0.4007f, 1.036f, -0.4985f, -0.3512f, -0.8373f, -0.1804f, -0.0412f, -0.1133f, 0.0813f,
      -0.0548f, 0.9815f, 2.1218f, -0.4887f, 0.3644f, -0.1549f, -0.3842f, -0.7801f, -0.0911f, 0.1902f,
      -5.4238f, 0.3608f, 1.6159f};
  static constexpr Weights kHistoryNodeWeights = {
      -2.2067f, 0.4351f, 0.8578f, -0.1744f, -0.7212f, -0.5291f, 0.0552f, 0.0187f, 0.0219f, 0.4547f,
      0.4885f, 0.8014f, 1.0618f, -0.3567f, 0.7453f, -0.4349f, -0.3227f, -0.6135f, -0.2639f, 0.1945f,
      -2.7203f, 0.2795f, 1.1517f};

  struct Node {
    Match context;
    Match history;
    node_t in_tree;  // its index in the DraftTree
    int depth;
    float probability;
  };
  struct Child {
    float probability;
    node_t parent;
    token_t token;
    // Max-heap order: most probable first; ties to the earlier parent, then the smaller token.
    bool operator<(const Child& o) const {
      if (probability != o.probability) return probability < o.probability;
      if (parent != o.parent) return parent > o.parent;
      return token > o.token;
    }
  };

 public:
  // ---- for fitting the weights (bench/fit_tree_weights.cpp) ---------------------------------
  static constexpr int feature_count = kFeatures;
  /// A candidate next token, its features (in the order of the enum Feature above) and the
  /// drafter's estimate that the target produces it.
  struct Candidate {
    token_t token;
    float probability;
    std::array<float, kFeatures> features;
  };

  /// The candidates for the token after the context that begin() and observe() gave, collected
  /// and scored as propose() does at the root (`root`), or with a deeper node's settings and
  /// weights for that same context. Drafts nothing (but, like propose(), lets a slice of the
  /// waiting outputs join the history); valid until the next non-const call.
  std::span<const Candidate> candidates(bool root) {
    catch_up();
    match_history();
    ++step_;
    collect(Node{index_.suffix_match(), history_match_, 0, root ? 0 : 1, 1.0f});
    score(root);
    return candidates_;
  }

 private:
  // Per token, valid during one propose(): its occurrences and age in the context.
  struct TokenInfo {
    std::uint64_t step = 0;
    float frequency = 0, age = 0;
  };

  void append(token_t t) {
    if (t < 0) throw error("ContextTreeDrafter: token " + std::to_string(t) + " is negative");
    index_.append(t);
  }

  void forget_history_match() {
    history_match_ = {};
    history_matched_ = 0;
    history_version_ = history_->version;
  }

  // A drafting step: a slice of the waiting outputs joins the history, and the context's match in
  // it is brought up to date (a paused drafter, or a long prompt, costs no lookups in a history
  // out of cache). The match follows the context token by token, the state it is in following
  // the history's growth; the last max_context tokens decide it, so after a longer gap, or a
  // clear()ed history, it is matched afresh from there.
  void match_history() {
    if (!with_history_) return;
    history_->catch_up(options_.history_catch_up);
    const index::ContinuationAutomaton& history = history_->tokens;
    if (history_version_ != history_->version) forget_history_match();
    history_match_ = history.current(history_match_);
    const auto tokens = index_.tokens();
    std::size_t from = history_matched_;
    if (tokens.size() - from > static_cast<std::size_t>(history.max_context())) {
      history_match_ = {};
      from = tokens.size() - static_cast<std::size_t>(history.max_context());
    }
    for (std::size_t i = from; i < tokens.size(); ++i) history_match_ = history.extend(history_match_, tokens[i]);
    history_matched_ = tokens.size();
  }

  bool in_sync(std::span<const token_t> tokens) const {
    return index_.size() == static_cast<int>(tokens.size()) &&
           (tokens.empty() || index_.tokens().back() == tokens.back());
  }

  // propose() without the begin()/observe() protocol: index the context afresh.
  void resync(const DraftContext& ctx) {
    index_.clear();
    forget_history_match();
    prompt_length_ = ctx.prompt_length;
    for (token_t t : ctx.tokens) append(t);
  }

  // The committed tokens not in the index yet join it.
  void catch_up() {
    for (token_t t : unindexed_) append(t);
    unindexed_.clear();
  }

  // Tokens of the sequence: the index's and those it has not caught up with.
  int context_size() const { return index_.size() + static_cast<int>(unindexed_.size()); }

  // The finished sequence's output waits to join the history (after a separator that is no token).
  void remember_output() {
    const int output = context_size() - prompt_length_;
    if (output <= 0) return;
    // history + separator + output must fit; compared without the sum, which can pass INT_MAX
    TreeHistory& history = *history_.get();
    if (output >= options_.history_tokens - static_cast<int>(history.size())) history.clear();
    if (output >= options_.history_tokens) return;
    history.pending.push_back(-1);
    const auto indexed = index_.tokens();
    const auto from_index = indexed.subspan(std::min<std::size_t>(indexed.size(), static_cast<std::size_t>(prompt_length_)));
    const auto from_queue = std::span<const token_t>(unindexed_).subspan(
        static_cast<std::size_t>(std::max(0, prompt_length_ - static_cast<int>(indexed.size()))));
    history.pending.insert(history.pending.end(), from_index.begin(), from_index.end());
    history.pending.insert(history.pending.end(), from_queue.begin(), from_queue.end());
  }

  // Scores the candidate children of `node` and queues those that can enter the tree.
  void expand(int node, int max_depth) {
    if (nodes_[node].depth >= max_depth) return;
    collect(nodes_[node]);
    score(nodes_[node].depth == 0);
    const float base = nodes_[node].probability;
    for (const Candidate& c : candidates_) {
      const float p = base * c.probability;
      if (p < options_.min_probability) continue;
      frontier_.push_back(Child{p, node, c.token});
      std::push_heap(frontier_.begin(), frontier_.end());
    }
  }

  Candidate* candidate(token_t t, bool& fresh) {
    if (static_cast<std::size_t>(t) >= slot_stamp_.size()) {
      slot_stamp_.resize(static_cast<std::size_t>(t) + 1, 0);
      slot_.resize(static_cast<std::size_t>(t) + 1, 0);
    }
    fresh = slot_stamp_[t] != collect_stamp_;
    if (fresh) {
      slot_stamp_[t] = collect_stamp_;
      slot_[t] = static_cast<int>(candidates_.size());
      candidates_.push_back(Candidate{t, 0.0f, {}});
    }
    return &candidates_[slot_[t]];
  }

  const TokenInfo& token_info(token_t t) {
    if (static_cast<std::size_t>(t) >= token_info_.size()) token_info_.resize(static_cast<std::size_t>(t) + 1);
    TokenInfo& info = token_info_[t];
    if (info.step != step_) {
      info.step = step_;
      const auto* c = index_.continuation(0, t);
      const int seen = c ? index_.recent_continuation(c->target) : -1;
      info.frequency = c ? log1p_of(c->count) : 0.0f;
      info.age = log1p_of(seen >= 0 ? index_.size() - seen + 1 : index_.size());
    }
    return info;
  }

  void collect(const Node& node) {
    candidates_.clear();
    ++collect_stamp_;
    const bool root = node.depth == 0;
    const int breadth = root ? options_.root_breadth : options_.node_breadth;
    const int max_contexts = root ? INT32_MAX : options_.node_contexts;
    const int longest = node.context.length;
    int contexts = 0;
    for (Match m = node.context; m.state >= 0 && contexts < max_contexts; m = index_.shorter(m)) {
      const int continued = index_.continued(m.state);
      if (continued == 0) continue;
      ++contexts;
      const auto conts = index_.continuations(m.state);
      const float length = log1p_of(m.length);
      const bool deterministic = conts.size() == 1;
      int taken = 0;
      for (std::size_t i = 0; i < conts.size() && taken < breadth; ++i) {
        bool fresh;
        Candidate* c = candidate(conts[i].token, fresh);
        if (!fresh) continue;  // a longer context already spoke for it
        ++taken;
        const TokenInfo& info = token_info(conts[i].token);
        auto& x = c->features;
        x[kLength] = length;
        x[kCount] = log_of(conts[i].count);
        x[kContinued] = log_of(continued);
        x[kDistinct] = log_of(static_cast<int>(conts.size()));
        x[kShorterBy] = log1p_of(longest - m.length);
        x[kFrequency] = info.frequency;
        x[kAge] = info.age;
        x[kMostFrequent] = i == 0;
        x[kLongest] = m.length == longest;
        x[kUnmatched] = m.length == 0;
        x[kDeterministic] = deterministic ? length : 0.0f;
      }
    }
    if (!with_history_ || history_->tokens.size() == 0) return;
    const index::ContinuationAutomaton& history = history_->tokens;
    const int history_longest = node.history.length;
    contexts = 0;
    const int history_breadth = root ? options_.history_breadth : options_.node_breadth;
    for (Match m = node.history; m.state >= 0 && contexts < max_contexts; m = history.shorter(m)) {
      const int continued = history.continued(m.state);
      if (continued == 0) continue;
      ++contexts;
      const auto conts = history.continuations(m.state);
      int taken = 0;
      for (std::size_t i = 0; i < conts.size() && taken < history_breadth; ++i) {
        if (conts[i].token < 0) continue;  // the separator between outputs
        bool fresh;
        Candidate* c = candidate(conts[i].token, fresh);
        auto& x = c->features;
        if (x[kHistory] != 0.0f) continue;  // a longer history context already spoke for it
        ++taken;
        x[kHistory] = 1.0f;
        x[kHistoryLength] = log1p_of(m.length);
        x[kHistoryCount] = log_of(conts[i].count);
        x[kHistoryContinued] = log_of(continued);
        x[kHistoryDistinct] = log_of(static_cast<int>(conts.size()));
        x[kHistoryShorterBy] = log1p_of(history_longest - m.length);
        x[kHistoryMostFrequent] = i == 0;
        const auto* u = history.continuation(0, conts[i].token);
        x[kHistoryFrequency] = log1p_of(u ? u->count : 0);
        x[kHistoryOnly] = fresh;
        x[kHistoryDeterministic] = conts.size() == 1 ? x[kHistoryLength] : 0.0f;
        x[kHistoryOnlyLength] = fresh ? x[kHistoryLength] : 0.0f;
      }
    }
  }

  // Logistic estimates; scaled down together when siblings' estimates add up to more than 1.
  void score(bool root) {
    const Weights& w = with_history_ ? (root ? kHistoryWeights : kHistoryNodeWeights)
                                        : (root ? kContextWeights : kContextNodeWeights);
    float sum = 0.0f;
    for (Candidate& c : candidates_) {
      float z = w[0];
      for (int j = 0; j < kFeatures; ++j) z += w[j + 1] * c.features[j];
      c.probability = 1.0f / (1.0f + std::exp(-z));
      sum += c.probability;
    }
    if (sum > 1.0f)
      for (Candidate& c : candidates_) c.probability /= sum;
  }

  static float log_of(int n) { return log1p_of(n - 1); }
  static float log1p_of(int n) {
    static const std::array<float, 1024> table = [] {
      std::array<float, 1024> t{};
      for (std::size_t i = 0; i < t.size(); ++i) t[i] = static_cast<float>(std::log1p(static_cast<double>(i)));
      return t;
    }();
    return n < static_cast<int>(table.size()) ? table[n] : std::log(static_cast<float>(n) + 1.0f);
  }

  ContextTreeOptions options_;
  // The history: the drafter's own (a copy of the drafter copies it) or shared (share()).
  class HistoryRef {
   public:
    HistoryRef() : history_(std::make_shared<TreeHistory>()) {}
    HistoryRef(const HistoryRef& o)
        : history_(o.shared_ ? o.history_ : std::make_shared<TreeHistory>(*o.history_)), shared_(o.shared_) {}
    HistoryRef(HistoryRef&&) noexcept = default;
    HistoryRef& operator=(const HistoryRef& o) { return *this = HistoryRef(o); }
    HistoryRef& operator=(HistoryRef&&) noexcept = default;
    ~HistoryRef() = default;
    TreeHistory* operator->() const { return history_.get(); }
    const std::shared_ptr<TreeHistory>& get() const { return history_; }
    void share(std::shared_ptr<TreeHistory> history) {
      history_ = std::move(history);
      shared_ = true;
    }

   private:
    std::shared_ptr<TreeHistory> history_;
    bool shared_ = false;
  };
  bool with_history_;  // HistoryTreeDrafter
  index::ContinuationAutomaton index_;
  std::vector<token_t> unindexed_;  // committed since the index last caught up (observe)
  HistoryRef history_;
  std::uint64_t history_version_ = 0;  // history_->version when history_match_ was computed
  Match history_match_;
  std::size_t history_matched_ = 0;  // tokens of the index that history_match_ has read
  int prompt_length_ = 0;
  std::uint64_t step_ = 0;
  // Scratch storage of propose(), reused across steps.
  std::vector<Node> nodes_;
  std::vector<Child> frontier_;
  std::vector<Candidate> candidates_;
  std::vector<std::uint64_t> slot_stamp_;
  std::vector<int> slot_;
  std::uint64_t collect_stamp_ = 0;
  std::vector<TokenInfo> token_info_;
};

/// ContextTreeDrafter that also drafts from the outputs of the sequences it decoded before
/// (SuffixDecoding-style memory). Its τ depends on which requests came before.
///
/// In a SpeculativeBatch, every request's drafter shares one history (shared_state_type): a
/// request's output joins it when the request ends (end()), and the other requests draft from it
/// from their next step on.
class HistoryTreeDrafter : public ContextTreeDrafter {
 public:
  static constexpr const char* name = "tree_history";
  using shared_state_type = TreeHistory;

  HistoryTreeDrafter() : HistoryTreeDrafter(ContextTreeOptions{}) {}
  /// Throws specdec::error for an option out of range.
  explicit HistoryTreeDrafter(ContextTreeOptions options) : ContextTreeDrafter(options, true) {}

  /// The history this drafter drafts from, for other drafters to share.
  std::shared_ptr<TreeHistory> shared_state() const { return history().get(); }
  /// Drafts from, and adds its outputs to, `history` from now on (and so do its copies).
  void share(std::shared_ptr<TreeHistory> history) { share_history(std::move(history)); }
  /// The sequence has ended: its output joins the history now rather than at the next begin().
  void end() { end_sequence(); }
};

static_assert(Drafter<ContextTreeDrafter>);
static_assert(Drafter<HistoryTreeDrafter>);

}  // namespace specdec
