// EagleDrafter ("eagle"): EAGLE-2 (Li et al.), a trained feature-level draft head
// (models/eagle_head.hpp) that extrapolates the target's features, with EAGLE-2's dynamic tree.
//
// Tree (EAGLE-2's topK_genrate): the head's distribution after the root gives the top_k children
// of the root; then, for each further level, the top_k frontier nodes are fed to the head (each
// with the feature the head predicted for its parent) and each proposes its top_k children;
// the top_k of those, by cumulative log-probability, are the next frontier. Every scored candidate
// is kept, and the best `budget` of them overall form the draft, a connected tree (a child's
// cumulative log-probability never exceeds its parent's; ties go to the earlier candidate, and a
// parent is always earlier). Levels: `depth`, cut to the decoder's max_depth; `budget` is
// cut to the decoder's budget.
//
// Scores: a node's score is exp(cumulative log-probability), the head's probability of its
// path — a probability that never grows along a path, as CASD's (Laplace) and REST's (empirical)
// scores are, so under one budget the merger keeps whichever drafter's nodes are likelier.
//
// Sampling: drafting is deterministic (top-k), and no draft distribution is attached, so a
// rejection-sampling verifier treats every draft token as a one-hot proposal (accepted with the
// target's probability, residual updated per rejected sibling): the output distribution is the
// target's whatever the head predicts. (Attaching the head's q to tokens that were not sampled
// from it would be wrong: tests/policies/drafters/eagle_test.cpp shows the chi-square test fails.)
//
// KV cache: the head keeps one K/V entry per committed token (element k = (t_k, f_{k-1})). Draft
// elements are written in scratch slots behind them, computed from predicted features. After each
// step the scratch is dropped (rolled back to the committed tokens) and the committed tokens are
// re-fed with the target's true features, exactly as a fresh head fed the same prefix would hold.
//
// Cost per step: one head forward per level after the first, all its frontier elements (up to
// top_k) in one weights-once call (models/llama_layer.hpp), then the classifier once for all their
// rows and a partial top-k per row (core/top_k.hpp); and one element per committed token to
// re-feed.
#pragma once

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <numeric>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/core/top_k.hpp>
#include <specdec/error.hpp>
#include <specdec/option_checks.hpp>
#include <specdec/models/eagle_head.hpp>
#include <specdec/models/llama_layer.hpp>
#include <specdec/models/llama2c_model.hpp>

namespace specdec {

/// EAGLE-2's parameters; the defaults are its public code's (60 nodes, depth 5, top-k 10, where its
/// depth counts the expansions after the root's, so its trees are 5 + 1 = 6 levels deep).
struct EagleOptions {
  int budget = 60;  ///< nodes kept after the global rerank (cut to the decoder's budget)
  int depth = 6;    ///< deepest node below the root (cut to the decoder's max_depth)
  int top_k = 10;   ///< children per expanded node, and the frontier's width
};

class EagleDrafter {
 public:
  static constexpr const char* name = "eagle";
  static constexpr bool needs_target_features = true;

  /// `target`: the model the decoder verifies with; its embedding and classifier are the head's.
  /// Throws specdec::error for a null pointer, a head trained for another shape (see
  /// EagleHead::check_fits) or an option out of range.
  EagleDrafter(std::shared_ptr<const EagleHead> head, std::shared_ptr<const Llama2cModel> target,
               EagleOptions options = {})
      : head_(std::move(head)), target_(std::move(target)), options_(validated(options)) {
    if (!head_) throw error("eagle: no head (null pointer)");
    if (!target_) throw error("eagle: no target model (null pointer)");
    head_->check_fits(target_->config(), "the target");
  }
  /// Loads the head from a file (see EagleHead::load for its errors), once its header is known to
  /// fit the target: a head for another model is refused before its weights are read.
  EagleDrafter(const std::filesystem::path& head_file, const std::shared_ptr<const Llama2cModel>& target,
               EagleOptions options = {})
      : EagleDrafter(load_fitting(head_file, target.get()), target, options) {}

  /// The head in `head_file`, read after its header is checked against `target` (when not null).
  static std::shared_ptr<const EagleHead> load_fitting(const std::filesystem::path& head_file,
                                                       const Llama2cModel* target) {
    if (target) EagleHead::check_fits(EagleHead::read_config(head_file), target->config(), "the target");
    return std::make_shared<const EagleHead>(EagleHead::load(head_file));
  }

  const EagleOptions& options() const { return options_; }
  const EagleHead& head() const { return *head_; }
  /// Tokens the head has read: its KV cache holds one entry for each.
  int cached() const { return fed_; }
  /// Tokens the head was told of (begin() and observe()): it reads those it has not yet, with
  /// their features, in one forward at the next propose(), so that a drafter the automatic
  /// budget does not ask costs no forward of the head per step.
  int told() const { return fed_ + static_cast<int>(waiting_tokens_.size()); }

  void begin(std::span<const token_t> prompt, const TargetFeatures& features) {
    fed_ = 0;
    waiting_tokens_.clear();
    waiting_features_.clear();
    if (prompt.empty()) throw error("eagle: begin() with an empty prompt");
    check_features(features, 0, static_cast<int>(prompt.size()) - 1);
    // Element 0 reads the first token with a zero feature, element k the feature of position k - 1.
    wait(prompt.first(1), nullptr);
    wait(prompt.subspan(1), features.data);
  }

  void observe(std::span<const token_t> committed, const TargetFeatures& features) {
    check_features(features, told() - 1, static_cast<int>(committed.size()));
    wait(committed, features.data);
  }

  void propose(const DraftContext& ctx, DraftTree& tree) {
    if (ctx.tokens.size() != static_cast<std::size_t>(told()) || (told() > 0 && ctx.tokens.back() != last_token_))
      throw error("eagle: the context has " + std::to_string(ctx.tokens.size()) + " tokens but the head was told " +
                  std::to_string(told()) + " (begin() and observe() must see every committed token)");
    if (ctx.vocab_size != head_->config().vocab_size)
      throw error("eagle: the target's vocabulary has " + std::to_string(ctx.vocab_size) + " tokens, the head's " +
                  std::to_string(head_->config().vocab_size));
    const int levels = std::min(options_.depth, ctx.max_depth);
    const int keep = std::min(options_.budget, ctx.budget);
    if (levels < 1 || keep < 1) return;
    read_waiting();  // overwrites the last draft's scratch slots: the rollback
    candidates_.clear();
    drafted_features_.clear();
    up_.clear();
    classify(root_feature_.data(), 1);
    add_children(-1, 0);
    frontier_.resize(candidates_.size());
    std::iota(frontier_.begin(), frontier_.end(), 0);
    for (int level = 2; level <= levels; ++level) {
      forward_frontier();
      classify(feature_of(frontier_[0]), static_cast<int>(frontier_.size()));  // the frontier's rows are consecutive
      const int first = static_cast<int>(candidates_.size());
      for (std::size_t r = 0; r < frontier_.size(); ++r) add_children(frontier_[r], static_cast<int>(r));
      frontier_.resize(candidates_.size() - static_cast<std::size_t>(first));
      std::iota(frontier_.begin(), frontier_.end(), first);
      const std::size_t width = std::min(frontier_.size(), static_cast<std::size_t>(options_.top_k));
      std::partial_sort(frontier_.begin(), frontier_.begin() + static_cast<std::ptrdiff_t>(width), frontier_.end(),
                        [&](int a, int b) { return better(a, b); });
      frontier_.resize(width);
    }
    emit(keep, tree);
  }

 private:
  struct Candidate {
    int parent = -1;     // candidate index; -1: the root
    token_t token = 0;
    float logp = 0.0f;   // cumulative log-probability of the path from the root
    int depth = 1;
    int slot = -1;       // the head's cache slot once fed (frontier nodes only)
  };

  static EagleOptions validated(const EagleOptions& o) {
    check_option(name, "budget", o.budget);
    check_option(name, "depth", o.depth);
    check_option(name, "top_k", o.top_k);
    return o;
  }

  int dim() const { return head_->config().dim; }

  void check_features(const TargetFeatures& f, int first_position, int rows) const {
    if (f.dim != dim() || f.first_position != first_position || f.rows != rows || (rows > 0 && !f.data))
      throw error("eagle: told feature rows [" + std::to_string(f.first_position) + ", +" + std::to_string(f.rows) +
                  ") of dim " + std::to_string(f.dim) + ", expected [" + std::to_string(first_position) + ", +" +
                  std::to_string(rows) + ") of dim " + std::to_string(dim()));
  }

  // Queues tokens[i] with feature row i of `rows` (zeros when null) for the head to read.
  void wait(std::span<const token_t> tokens, const float* rows) {
    const int vocab = head_->config().vocab_size;
    const std::size_t d = static_cast<std::size_t>(dim());
    for (std::size_t i = 0; i < tokens.size(); ++i) {
      const token_t t = tokens[i];
      if (t < 0 || t >= vocab)
        throw error("eagle: token " + std::to_string(t) + " is outside the vocabulary [0, " + std::to_string(vocab) + ")");
      waiting_tokens_.push_back(t);
      if (rows) waiting_features_.insert(waiting_features_.end(), rows + i * d, rows + (i + 1) * d);
      else waiting_features_.resize(waiting_features_.size() + d, 0.0f);
      last_token_ = t;
    }
  }

  // The head reads the waiting tokens at positions fed_, fed_ + 1, ... in one forward (a chain:
  // each attends to the cache and the waiting tokens before it) and keeps the last one's
  // predicted feature for the next draft.
  void read_waiting() {
    const int n = static_cast<int>(waiting_tokens_.size());
    if (n == 0) return;
    const std::size_t d = static_cast<std::size_t>(dim());
    batch_positions_.resize(static_cast<std::size_t>(n));
    up_.resize(static_cast<std::size_t>(n));
    for (int i = 0; i < n; ++i) {
      batch_positions_[static_cast<std::size_t>(i)] = fed_ + i;
      up_[static_cast<std::size_t>(i)] = i == 0 ? -1 : fed_ + i - 1;
    }
    read_features_.resize(static_cast<std::size_t>(n) * d);
    head_->run(cache_, fed_, fed_, n, waiting_tokens_.data(), waiting_features_.data(), batch_positions_.data(),
               up_.data(), n, target_->embedding().data(), read_features_.data());
    root_feature_.assign(read_features_.end() - static_cast<std::ptrdiff_t>(d), read_features_.end());
    fed_ += n;
    waiting_tokens_.clear();
    waiting_features_.clear();
  }

  // Feeds the frontier's tokens as one batch of draft elements in scratch slots behind the
  // committed ones, each attending to the cache and to its draft ancestors (up_, by slot - fed_).
  void forward_frontier() {
    const std::size_t n = frontier_.size();
    const int first_slot = fed_ + static_cast<int>(drafted_features_.size()) / dim();
    batch_tokens_.clear();
    batch_features_.clear();
    batch_positions_.clear();
    int depth = 1;
    for (std::size_t i = 0; i < n; ++i) {
      Candidate& c = candidates_[static_cast<std::size_t>(frontier_[i])];
      c.slot = first_slot + static_cast<int>(i);
      batch_tokens_.push_back(c.token);
      batch_positions_.push_back(fed_ - 1 + c.depth);
      const float* parent_feature = c.parent < 0 ? root_feature_.data() : feature_of(c.parent);
      batch_features_.insert(batch_features_.end(), parent_feature, parent_feature + dim());
      up_.push_back(c.parent < 0 ? -1 : candidates_[static_cast<std::size_t>(c.parent)].slot);
      depth = std::max(depth, c.depth);
    }
    drafted_features_.resize(drafted_features_.size() + n * static_cast<std::size_t>(dim()));
    head_->run(cache_, fed_, first_slot, static_cast<int>(n), batch_tokens_.data(), batch_features_.data(),
               batch_positions_.data(), up_.data(), depth, target_->embedding().data(),
               drafted_features_.data() + static_cast<std::size_t>(first_slot - fed_) * dim());
  }

  // The target's classifier over `rows` consecutive features, in one weights-once product.
  void classify(const float* features, int rows) {
    const llama::Matrix& cls = target_->classifier();
    if (logits_.size() < static_cast<std::size_t>(rows) * cls.stride) logits_.resize(static_cast<std::size_t>(rows) * cls.stride);
    llama::detail::matmul(nullptr, cls, features, dim(), rows, logits_.data(), cls.stride);
  }

  const float* feature_of(int candidate) const {
    const int slot = candidates_[static_cast<std::size_t>(candidate)].slot;
    return drafted_features_.data() + static_cast<std::size_t>(slot - fed_) * dim();
  }

  // Adds the top_k tokens of the head's distribution in row `row` of the last classify() as
  // children of `parent`.
  void add_children(int parent, int row) {
    const int vocab = head_->config().vocab_size;
    const float* logits = logits_.data() + static_cast<std::size_t>(row) * target_->classifier().stride;
    const int k = std::min(vocab, options_.top_k);
    ids_.resize(static_cast<std::size_t>(k));
    const core::SoftmaxStats stats = core::softmax_top_k(logits, vocab, k, ids_.data());
    const float log_z = stats.best + static_cast<float>(std::log(stats.sum));
    if (!std::isfinite(log_z)) throw error("eagle: the head's logits are not finite (NaN or inf in the head's weights?)");
    const Candidate* up = parent < 0 ? nullptr : &candidates_[static_cast<std::size_t>(parent)];
    const float base = up ? up->logp : 0.0f;
    const int depth = up ? up->depth + 1 : 1;
    for (int id : ids_) candidates_.push_back({parent, id, base + (logits[id] - log_z), depth, -1});
  }

  bool better(int a, int b) const {
    const float la = candidates_[static_cast<std::size_t>(a)].logp, lb = candidates_[static_cast<std::size_t>(b)].logp;
    return la != lb ? la > lb : a < b;
  }

  // The best `keep` candidates overall, in candidate order (parents first), into the tree.
  void emit(int keep, DraftTree& tree) {
    order_.resize(candidates_.size());
    std::iota(order_.begin(), order_.end(), 0);
    const std::size_t n = std::min(order_.size(), static_cast<std::size_t>(keep));
    std::partial_sort(order_.begin(), order_.begin() + static_cast<std::ptrdiff_t>(n), order_.end(),
                      [&](int a, int b) { return better(a, b); });
    order_.resize(n);
    std::sort(order_.begin(), order_.end());
    node_of_.assign(candidates_.size(), -1);
    for (int i : order_) {
      const Candidate& c = candidates_[static_cast<std::size_t>(i)];
      const node_t parent = c.parent < 0 ? 0 : node_of_[static_cast<std::size_t>(c.parent)];
      if (parent < 0) continue;  // cannot happen: a parent ranks before its children
      node_of_[static_cast<std::size_t>(i)] = tree.add(parent, c.token, std::exp(c.logp));
    }
  }

  std::shared_ptr<const EagleHead> head_;
  std::shared_ptr<const Llama2cModel> target_;
  EagleOptions options_;
  EagleHead::Cache cache_;
  int fed_ = 0;                      // committed tokens the head has read (its cache's entries)
  token_t last_token_ = 0;           // the last token it was told of
  std::vector<token_t> waiting_tokens_;   // told, not read yet, and their feature rows
  std::vector<float> waiting_features_, read_features_;
  std::vector<float> root_feature_;  // the head's predicted feature after the last committed token
  // This draft's candidates and the predicted features of its fed elements, by slot - fed_.
  std::vector<Candidate> candidates_;
  std::vector<int> frontier_, ids_, order_, node_of_;
  std::vector<float> drafted_features_, logits_;
  std::vector<token_t> batch_tokens_;
  std::vector<float> batch_features_;
  std::vector<int> batch_positions_, up_;
};

static_assert(Drafter<EagleDrafter>);

}  // namespace specdec
