// StagedDrafter ("staged"; "draft_model" without a second stage): staged speculative decoding
// (Spector & Ré, ../shared/papers-digest.md §4). A small draft model with the target's vocabulary
// drafts a tree, and the draft model is itself decoded speculatively: the drafter owns a
// SpeculativeDecoder<draft model, Drafters..., ExactVerifier> of its own (e.g. with an n-gram
// drafter as the second stage), which makes the draft model's greedy tokens in fewer forwards.
//
// Tree: the draft model's greedy continuation of the root (the spine, `depth` tokens), and at each
// spine node its top_k children by draft probability (the greedy one, which continues the spine,
// and top_k - 1 alternatives, which are leaves). Nodes are ranked by cumulative draft probability
// (the product of the draft's probabilities along the path) and the best `budget` kept: a
// best-first growth under the node budget in which the nodes the draft model expands are the
// spine's, the ones the inner decoder computes anyway. The paper leaves the tree's shape open; its
// first author's advice (many short branches rather than one long path, for a fixed batch) is
// what the alternatives at every level give. Every node's distribution comes from the draft
// model's logits, bit for bit the same however the inner decoder grouped its forwards
// (Llama2cTarget's tree forward equals a one-token-at-a-time forward), so the tree, and with it
// the target's τ, does not depend on the inner drafters: only the draft model's forwards do.
//
// Scores: a node's score is its cumulative draft probability, which never grows along a path,
// like EAGLE's, CASD's and REST's scores, so under one budget the merger keeps the likelier nodes.
//
// Sampling: drafting is deterministic (greedy spine, top-k alternatives) and no draft distribution
// is attached: a rejection-sampling verifier treats each draft token as a one-hot proposal and the
// output distribution is the target's, whatever the draft model predicts.
//
// Draft model's KV cache: after each target step the inner decoder goes on from the committed
// tokens (SpeculativeDecoder::resume): its cache is kept up to where the target's accepted path
// leaves the draft's spine, and tokens the draft did not make (an accepted alternative) are fed in
// one forward. When the target's next token is the draft's, nothing is redone: the inner decoder
// may already have run past it.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/core/top_k.hpp>
#include <specdec/decoder.hpp>
#include <specdec/error.hpp>
#include <specdec/option_checks.hpp>
#include <specdec/policies/verifiers/exact.hpp>

namespace specdec {

struct StagedOptions {
  int depth = 8;          ///< spine tokens below the root (cut to the decoder's max_depth)
  int top_k = 3;          ///< children per spine node: the greedy one and top_k - 1 alternatives
  int budget = 48;        ///< nodes kept at most (cut to the decoder's budget)
  int inner_budget = 16;  ///< the inner decoder's budget: its drafters' nodes per draft-model forward
};

/// The draft model as the inner decoder's target: forwards and commits go through to it, and
/// every committed node's top_k next tokens and their probabilities are kept, by position.
template <class DraftTarget>
class DraftModelRecorder {
 public:
  using output_type = target_output_t<DraftTarget>;

  DraftModelRecorder(DraftTarget model, int top_k) : model_(std::move(model)), top_k_(top_k) {}

  int vocab_size() const { return static_cast<int>(model_.vocab_size()); }
  int max_positions() const
    requires BoundedTarget<DraftTarget>
  {
    return static_cast<int>(model_.max_positions());
  }
  void prefill(std::span<const token_t> tokens) {
    model_.prefill(tokens);
    cached_ = static_cast<int>(tokens.size());
  }
  const output_type& forward(const TreeView& tree) {
    ++forwards_;
    nodes_ += tree.size;
    if constexpr (std::is_reference_v<decltype(model_.forward(tree))>) {
      last_ = &model_.forward(tree);
    } else {  // an output returned by value lives here until the next forward
      held_.emplace(model_.forward(tree));
      last_ = &*held_;
    }
    return *last_;
  }
  void commit(std::span<const node_t> path) {
    for (std::size_t k = 0; k < path.size(); ++k) record(cached_ + static_cast<int>(k), last_->logits(path[k]));
    model_.commit(path);
    cached_ += static_cast<int>(path.size());
  }
  void rewind(int tokens) {
    model_.rewind(tokens);
    cached_ = tokens;
  }

  /// The draft's top_k next tokens after the token at `position` (committed through forward),
  /// most likely first (ties to the lower id), and their probabilities.
  std::span<const token_t> top_tokens(int position) const {
    return {tokens_.data() + static_cast<std::size_t>(position) * top_k_, static_cast<std::size_t>(top_k_)};
  }
  std::span<const float> top_probabilities(int position) const {
    return {probabilities_.data() + static_cast<std::size_t>(position) * top_k_, static_cast<std::size_t>(top_k_)};
  }
  std::int64_t forwards() const { return forwards_; }
  std::int64_t nodes() const { return nodes_; }

 private:
  void record(int position, std::span<const float> logits) {
    const std::size_t need = static_cast<std::size_t>(position + 1) * top_k_;
    if (tokens_.size() < need) {
      tokens_.resize(need);
      probabilities_.resize(need);
    }
    for (float l : logits)  // before ranking: a NaN would break the sort's ordering
      if (!std::isfinite(l)) throw error("the draft model's logits are not finite (NaN or inf)");
    // Ranked by logit, as the exact verifier's argmax (ties to the lowest id): rank 0 is the token
    // the inner decoder commits.
    const std::size_t k = std::min(logits.size(), static_cast<std::size_t>(top_k_));
    ids_.resize(k);
    const core::SoftmaxStats stats = core::softmax_top_k(logits.data(), static_cast<int>(logits.size()),
                                                         static_cast<int>(k), ids_.data());
    const std::size_t at = static_cast<std::size_t>(position) * top_k_;
    for (std::size_t j = 0; j < static_cast<std::size_t>(top_k_); ++j) {
      tokens_[at + j] = j < k ? ids_[j] : ids_[0];
      probabilities_[at + j] =
          j < k ? static_cast<float>(std::exp(static_cast<double>(logits[ids_[j]] - stats.best)) / stats.sum) : 0.0f;
    }
  }

  DraftTarget model_;
  int top_k_;
  int cached_ = 0;
  const output_type* last_ = nullptr;
  std::optional<output_type> held_;
  std::int64_t forwards_ = 0, nodes_ = 0;
  std::vector<token_t> tokens_, ids_;  // tokens_: top_k per position
  std::vector<float> probabilities_;
};

template <class DraftTarget, class... Drafters>
class StagedDrafter {
  static_assert(RewindableTarget<DraftTarget>,
                "StagedDrafter<DraftTarget, Drafters...>: the draft model must model specdec::RewindableTarget "
                "(a Target with rewind(tokens)): its KV cache is cut back to the accepted path after each step.");
  static_assert(!RewindableTarget<DraftTarget> || LogitsOutput<target_output_t<DraftTarget>>,
                "StagedDrafter<DraftTarget, Drafters...>: the draft model's forward() output must give "
                "logits(node): the tree is ranked by the draft's probabilities.");
  static_assert((!drafter_traits<Drafters>::needs_target_features && ...),
                "StagedDrafter<DraftTarget, Drafters...>: the inner drafters must not read the target's features "
                "(the inner decoder is resumed on each step's committed tokens, without features).");

  using recorder_type = DraftModelRecorder<DraftTarget>;
  using inner_decoder = SpeculativeDecoder<recorder_type, Drafters..., ExactVerifier>;

 public:
  static constexpr const char* name = sizeof...(Drafters) > 0 ? "staged" : "draft_model";

  /// `draft`: the draft model (owned), with the target's vocabulary; `inner`: the drafters that
  /// speed the draft model up (none: one-stage drafting with the draft model alone). Throws
  /// specdec::error for an option out of range.
  explicit StagedDrafter(DraftTarget draft, StagedOptions options = {}, Drafters... inner)
      : options_(validated(options)),
        stage_(std::make_unique<Stage>(std::move(draft), options_, std::move(inner)...)) {}

  const StagedOptions& options() const { return options_; }
  /// Draft-model forwards so far (the inner decoder's steps and the feeds of resume()), and the
  /// tree nodes they ran.
  std::int64_t draft_forwards() const { return stage_->recorder.forwards(); }
  std::int64_t draft_nodes() const { return stage_->recorder.nodes(); }
  /// The inner decoder (its stats(): the draft model's τ under the second stage).
  const inner_decoder& inner() const { return stage_->decoder; }

  /// Throws specdec::error when the prompt has more tokens than the draft model's positions.
  void begin(std::span<const token_t> prompt) {
    if constexpr (BoundedTarget<DraftTarget>) {
      const int positions = stage_->recorder.max_positions();
      if (prompt.size() > static_cast<std::size_t>(positions))
        throw error(std::string(name) + ": the prompt has " + std::to_string(prompt.size()) +
                    " tokens, more than the draft model's " + std::to_string(positions) + " positions");
    }
    context_.assign(prompt.begin(), prompt.end());
    synced_ = 0;  // the draft model reads the prompt at the first propose()
  }

  // The draft model catches up with the committed tokens in propose(): a drafter that the
  // automatic budget does not ask costs nothing per step (a draft model's forward per step would
  // be a large part of a small target's).
  void observe(std::span<const token_t> committed) { context_.insert(context_.end(), committed.begin(), committed.end()); }

  void propose(const DraftContext& ctx, DraftTree& tree) {
    recorder_type& draft = stage_->recorder;
    if (ctx.vocab_size != draft.vocab_size())
      throw error(std::string(name) + ": the target's vocabulary has " + std::to_string(ctx.vocab_size) +
                  " tokens, the draft model's " + std::to_string(draft.vocab_size()));
    if (ctx.tokens.size() != context_.size() || ctx.tokens.back() != context_.back())
      throw error(std::string(name) + ": the context has " + std::to_string(ctx.tokens.size()) +
                  " tokens, but begin() and observe() were told " + std::to_string(context_.size()));
    const int root = static_cast<int>(ctx.tokens.size()) - 1;  // the root's position
    int depth = std::min(options_.depth, ctx.max_depth);
    if constexpr (BoundedTarget<DraftTarget>) depth = std::min(depth, draft.max_positions() - 1 - root);
    const int keep = std::min(options_.budget, ctx.budget);
    if (depth < 1 || keep < 1) return;
    sync();

    // The spine: the inner decoder's cache must hold positions root .. root + depth - 1.
    const std::size_t needed = static_cast<std::size_t>(root + depth + 1);
    guarded([&] {
      while (stage_->decoder.context().size() < needed) stage_->decoder.step();
    });
    const std::span<const token_t> spine = stage_->decoder.context().subspan(static_cast<std::size_t>(root));

    // Level j's candidates: the top_k children of spine node j - 1 (the root for j = 1).
    candidates_.clear();
    double path_probability = 1.0;  // of the spine down to level j - 1
    for (int j = 1; j <= depth; ++j) {
      const auto tokens = draft.top_tokens(root + j - 1);
      const auto probabilities = draft.top_probabilities(root + j - 1);
      double spine_probability = 0.0;
      for (std::size_t r = 0; r < tokens.size(); ++r) {
        if (probabilities[r] <= 0.0f) continue;  // vocabulary smaller than top_k
        const bool on_spine = tokens[r] == spine[static_cast<std::size_t>(j)];
        candidates_.push_back({j, static_cast<int>(r), tokens[r], static_cast<float>(path_probability * probabilities[r]),
                               on_spine});
        if (on_spine) spine_probability = probabilities[r];
      }
      path_probability *= spine_probability;
      if (spine_probability == 0.0) break;  // cannot happen: the spine token is the draft's rank 0
    }
    emit(keep, tree);
  }

 private:
  struct Stage {
    recorder_type recorder;
    inner_decoder decoder;
    Stage(DraftTarget draft, const StagedOptions& options, Drafters... inner)
        : recorder(std::move(draft), options.top_k),
          decoder(recorder, DecoderOptions{.budget = options.inner_budget}, std::move(inner)..., ExactVerifier{}) {}
  };

  struct Candidate {
    int level = 0, rank = 0;
    token_t token = 0;
    float score = 0.0f;  // cumulative draft probability
    bool on_spine = false;
  };

  static StagedOptions validated(const StagedOptions& o) {
    check_option(name, "depth", o.depth, 0);
    check_option(name, "top_k", o.top_k);
    check_option(name, "budget", o.budget, 0);
    check_option(name, "inner_budget", o.inner_budget, 0);
    return o;
  }

  // The inner decoder goes on from context_: prefilled on it after begin(), resumed where the
  // committed tokens are not what it decoded ahead (its context starts with context_[0, synced_)).
  void sync() {
    if (synced_ == context_.size()) return;
    const std::span<const token_t> drafted = stage_->decoder.context();
    if (synced_ == 0) {
      guarded([&] { stage_->decoder.prefill(context_); });
    } else if (drafted.size() < context_.size() ||
               !std::equal(context_.begin() + static_cast<std::ptrdiff_t>(synced_), context_.end(),
                           drafted.begin() + static_cast<std::ptrdiff_t>(synced_))) {
      guarded([&] { stage_->decoder.resume(context_); });
    }
    synced_ = context_.size();
  }

  // The inner decoder's errors, as this drafter's.
  template <class F>
  void guarded(F&& f) {
    try {
      f();
    } catch (const error& e) {
      throw error(std::string(name) + ": the draft model's decoder: " + e.what());
    }
  }

  // The best `keep` candidates (score, then level, then rank), added level by level. A spine node
  // ranks before everything below it, so every kept node's parent is kept.
  void emit(int keep, DraftTree& tree) {
    const auto better = [](const Candidate& a, const Candidate& b) {
      if (a.score != b.score) return a.score > b.score;
      return a.level != b.level ? a.level < b.level : a.rank < b.rank;
    };
    const std::size_t n = std::min(candidates_.size(), static_cast<std::size_t>(keep));
    std::partial_sort(candidates_.begin(), candidates_.begin() + static_cast<std::ptrdiff_t>(n), candidates_.end(), better);
    candidates_.resize(n);
    std::sort(candidates_.begin(), candidates_.end(), [](const Candidate& a, const Candidate& b) {
      return a.level != b.level ? a.level < b.level : a.rank < b.rank;
    });
    spine_nodes_.assign(1, 0);  // spine_nodes_[j]: the tree node of level j's spine token
    for (const Candidate& c : candidates_) {
      if (static_cast<std::size_t>(c.level) > spine_nodes_.size()) break;  // parent not kept: cannot happen
      const node_t node = tree.add(spine_nodes_[static_cast<std::size_t>(c.level - 1)], c.token, c.score);
      if (c.on_spine) spine_nodes_.push_back(node);
    }
  }

  StagedOptions options_;
  std::unique_ptr<Stage> stage_;  // the inner decoder holds the recorder by reference: it must not move
  std::vector<token_t> context_;  // the target's committed tokens
  std::size_t synced_ = 0;        // tokens of context_ the inner decoder's context starts with (0: not begun)
  std::vector<Candidate> candidates_;
  std::vector<node_t> spine_nodes_;
};

}  // namespace specdec
