// NgramDrafter ("ngram"): drafts from a Katz back-off trigram model of text (index/ngram_model.hpp),
// the lowest stage of staged speculative decoding (Spector & Ré): a draft that costs a few table
// reads per node, for any target (it reads tokens only, no target features).
//
// Tree: grown best first by cumulative probability. The root's candidates are the model's top_k
// next tokens after the context's last two tokens (the root included); the likeliest candidate
// anywhere becomes the next node, and unless it is `depth` deep its own top_k next tokens (given
// its parent's token and its own) join the candidates, until `budget` nodes are drafted or no
// candidate is left. A child's probability is its parent's times the model's conditional one, so
// it never exceeds its parent's: the tree is connected, and it holds the likeliest paths the
// top_k rule reaches. Ties go to the earlier candidate (a node's children in the model's order,
// ties there to the lower id): the same context gives the same tree.
//
// Scores: a node's score is the model's probability of its path from the root, a probability
// that never grows along a path, as EAGLE's and REST's scores are, so under one budget the merger
// keeps whichever drafter's nodes are likelier.
//
// Sampling: drafting is deterministic (top-k) and no draft distribution is attached, so a
// rejection-sampling verifier treats every draft token as a one-hot proposal: the output is
// distributed as the target's whatever the model predicts.
//
// Cost per step: one NgramModel::top_k query per drafted node shallower than `depth` (plus the root's),
// each a merge of at most three sorted lists (no scan of the vocabulary), and a heap of at most
// top_k · budget candidates.
#pragma once

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/error.hpp>
#include <specdec/option_checks.hpp>
#include <specdec/index/ngram_model.hpp>

namespace specdec {

/// The n-gram drafter's parameters. Defaults: a trigram model's top guess is right less than half
/// of the time on text it was not built from, so a path's probability halves or worse with each
/// level and nodes deeper than 5 are rarely worth a verification slot; two or three children per
/// node cover most of the mass a trigram context spreads; and 16 nodes keep the draft cheap to
/// verify and leave most of the decoder's budget (64) to the drafters merged with it.
struct NgramOptions {
  int budget = 16;  ///< nodes drafted at most (also cut to the decoder's budget)
  int depth = 5;    ///< deepest node below the root (also cut to the decoder's max_depth)
  int top_k = 3;       ///< children considered per expanded node
};

class NgramDrafter {
 public:
  static constexpr const char* name = "ngram";

  /// Throws specdec::error for a null model or an option out of range.
  explicit NgramDrafter(std::shared_ptr<const NgramModel> model, NgramOptions options = {})
      : model_(std::move(model)), options_(validated(options)) {
    if (!model_) throw error("ngram: no model (null pointer)");
  }
  /// Opens the model file (see NgramModel for its errors).
  explicit NgramDrafter(const std::filesystem::path& model_file, NgramOptions options = {})
      : NgramDrafter(std::make_shared<const NgramModel>(model_file), options) {}

  const NgramOptions& options() const { return options_; }
  const std::shared_ptr<const NgramModel>& model() const { return model_; }

  void begin(std::span<const token_t>) {}
  void observe(std::span<const token_t>) {}

  void propose(const DraftContext& ctx, DraftTree& tree) {
    if (ctx.vocab_size != model_->vocab_size())
      throw error("ngram: the model " + model_->path().string() + " has a vocabulary of " +
                  std::to_string(model_->vocab_size()) + " tokens, the target's has " + std::to_string(ctx.vocab_size));
    const int keep = std::min(options_.budget, ctx.budget);
    const int max_depth = std::min(options_.depth, ctx.max_depth);
    if (keep <= 0 || max_depth <= 0 || ctx.tokens.empty()) return;
    heap_.clear();
    depth_.assign(1, 0);
    score_.assign(1, 1.0);
    sequence_ = 0;
    const std::size_t n = ctx.tokens.size();
    expand(0, std::span<const token_t>(ctx.tokens).subspan(n - std::min<std::size_t>(n, 2)));
    for (int added = 0; added < keep && !heap_.empty(); ++added) {
      std::pop_heap(heap_.begin(), heap_.end(), worse);
      const Candidate c = heap_.back();
      heap_.pop_back();
      const node_t node = tree.add(c.parent, c.token, static_cast<float>(c.score));
      depth_.push_back(depth_[static_cast<std::size_t>(c.parent)] + 1);
      score_.push_back(c.score);
      if (depth_.back() < max_depth) {
        const token_t context[2] = {tree.token(c.parent), c.token};
        expand(node, context);
      }
    }
  }

 private:
  struct Candidate {
    double score = 0.0;          // probability of the path from the root
    std::uint64_t sequence = 0;  // ties: the earlier candidate first
    node_t parent = 0;
    token_t token = 0;
  };
  // The heap's order: a candidate is worse when less likely, or as likely and later.
  static bool worse(const Candidate& a, const Candidate& b) {
    return a.score != b.score ? a.score < b.score : a.sequence > b.sequence;
  }

  static NgramOptions validated(const NgramOptions& o) {
    check_option(name, "budget", o.budget);
    check_option(name, "depth", o.depth);
    check_option(name, "top_k", o.top_k);
    return o;
  }

  // Adds the model's top_k next tokens after `context` (the node's path ends with it) as candidates.
  void expand(node_t node, std::span<const token_t> context) {
    model_->top_k(context, options_.top_k, next_);
    for (const NgramCandidate& next : next_) {
      heap_.push_back({score_[static_cast<std::size_t>(node)] * next.probability, sequence_++, node, next.token});
      std::push_heap(heap_.begin(), heap_.end(), worse);
    }
  }

  std::shared_ptr<const NgramModel> model_;
  NgramOptions options_;
  // Scratch of the last propose(): candidates, per drafted node its depth and path probability.
  std::vector<Candidate> heap_;
  std::vector<int> depth_;
  std::vector<double> score_;
  std::vector<NgramCandidate> next_;
  std::uint64_t sequence_ = 0;
};

static_assert(Drafter<NgramDrafter>);

}  // namespace specdec
