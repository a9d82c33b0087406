// DresdDrafter ("dresd"): DReSD (dense retrieval for speculative decoding), drafts retrieved by
// the target's own hidden state instead of REST's exact token match (docs/drafters/dresd.md).
//
// Rule: the query is the feature of the last position the target has read (the last row
// observe() was told), the state from which the target chose the root; it is projected as the
// datastore's keys were (z-normalise, PCA, L2-normalise) and its `neighbours` nearest keys are
// retrieved (inner product = cosine). A neighbour's value is the text after its token; only values
// whose first token equals the root are kept (the target has already chosen that token, so a
// value starting otherwise is wrong from its first token), and the first `drafts` of them, best
// first, give their next `depth` tokens as drafts. The drafts are merged into one tree.
//
// Scores: a node's score is the share of the kept drafts that pass through it, a probability-like
// score that never grows along a path, as REST's (count / occurrences read): nodes that several
// neighbours agree on outrank one neighbour's tail, and among equal shares the merger keeps the
// earlier (nearer) neighbour's nodes.
//
// Cost per step: one projection (feature_dim · key_dim), one search (the backend's; exact:
// keys · key_dim), then O(drafts · depth).
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/error.hpp>
#include <specdec/option_checks.hpp>
#include <specdec/index/dense_datastore.hpp>
#include <specdec/index/dense_search.hpp>

namespace specdec {

/// DReSD's parameters. The defaults are the paper's best shape for greedy decoding (3 drafts × 20
/// tokens); sampling() is its best for nucleus sampling (10 × 10).
struct DresdOptions {
  int neighbours = 32;     ///< keys retrieved per step (before the first-token filter)
  int drafts = 3;          ///< drafts kept after the filter, nearest first
  int depth = 20;          ///< tokens per draft below the root

  static DresdOptions greedy() { return {}; }
  static DresdOptions sampling() { return {.neighbours = 64, .drafts = 10, .depth = 10}; }
};

class DresdDrafter {
 public:
  static constexpr const char* name = "dresd";
  static constexpr bool needs_target_features = true;

  /// What the last propose() did.
  struct Retrieval {
    int neighbours = 0;  ///< keys retrieved
    int drafts = 0;      ///< kept after the first-token filter
  };

  /// Searches `datastore` with `search` (null: ExactDenseSearch). Throws specdec::error for a null
  /// datastore or an option out of range.
  explicit DresdDrafter(std::shared_ptr<const DenseDatastore> datastore, DresdOptions options = {},
                        std::shared_ptr<const DenseSearch> search = nullptr)
      : datastore_(std::move(datastore)), options_(validated(options)), search_(std::move(search)) {
    if (!datastore_) throw error("dresd: no datastore (null pointer)");
    if (!search_) search_ = std::make_shared<const ExactDenseSearch>(datastore_);
    key_.resize(static_cast<std::size_t>(datastore_->key_dim()));
  }

  const DresdOptions& options() const { return options_; }
  const std::shared_ptr<const DenseDatastore>& datastore() const { return datastore_; }
  const DenseSearch& search() const { return *search_; }
  const Retrieval& last_retrieval() const { return retrieval_; }

  void begin(std::span<const token_t>, const TargetFeatures& features) {
    has_query_ = false;
    remember_last_row(features);
  }
  void observe(std::span<const token_t>, const TargetFeatures& features) { remember_last_row(features); }

  void propose(const DraftContext& ctx, DraftTree& tree) {
    if (datastore_->vocab_size() > ctx.vocab_size)
      throw error("dresd: the datastore's vocabulary (" + std::to_string(datastore_->vocab_size()) +
                  " tokens) is larger than the target's (" + std::to_string(ctx.vocab_size) + ")");
    retrieval_ = {};
    const int depth = std::min(options_.depth, ctx.max_depth);
    if (!has_query_ || depth <= 0 || ctx.budget <= 0) return;
    datastore_->projection().project(query_, key_, scratch_);
    search_->search(key_, options_.neighbours, neighbours_);
    retrieval_.neighbours = static_cast<int>(neighbours_.size());
    const auto root = static_cast<std::uint32_t>(ctx.tokens.back());
    token_.assign(1, 0);
    parent_.assign(1, -1);
    count_.assign(1, 0);
    for (const DenseNeighbour& n : neighbours_) {
      const auto value = datastore_->continuation(n.key, static_cast<std::size_t>(depth) + 1);
      if (value.size() < 2 || value[0] != root) continue;
      insert(value.subspan(1));
      if (++retrieval_.drafts == options_.drafts) break;
    }
    remap_.assign(token_.size(), 0);
    for (std::size_t i = 1; i < token_.size(); ++i)
      remap_[i] = tree.add(remap_[static_cast<std::size_t>(parent_[i])], static_cast<token_t>(token_[i]),
                           static_cast<float>(count_[i]) / static_cast<float>(retrieval_.drafts));
  }

 private:
  static DresdOptions validated(const DresdOptions& o) {
    check_option(name, "neighbours", o.neighbours);
    check_option(name, "drafts", o.drafts);
    check_option(name, "depth", o.depth);
    return o;
  }

  void remember_last_row(const TargetFeatures& features) {
    if (features.dim != datastore_->feature_dim())
      throw error("dresd: the target's features have " + std::to_string(features.dim) + " floats, the datastore " +
                  datastore_->path().string() + " was built from features of " +
                  std::to_string(datastore_->feature_dim()) + " (another model?)");
    if (features.rows <= 0) return;  // a one-token prompt: nothing read yet, no query
    const auto last = features.row(features.rows - 1);
    query_.assign(last.begin(), last.end());
    has_query_ = true;
  }

  // Adds a draft to the trie of this step's drafts (node 0: the root), counting shared prefixes.
  void insert(std::span<const std::uint32_t> draft) {
    int node = 0;
    for (const std::uint32_t t : draft) {
      int child = -1;
      for (std::size_t c = static_cast<std::size_t>(node) + 1; c < token_.size() && child < 0; ++c)
        if (parent_[c] == node && token_[c] == t) child = static_cast<int>(c);
      if (child < 0) {
        child = static_cast<int>(token_.size());
        token_.push_back(t);
        parent_.push_back(node);
        count_.push_back(0);
      }
      ++count_[static_cast<std::size_t>(child)];
      node = child;
    }
  }

  std::shared_ptr<const DenseDatastore> datastore_;
  DresdOptions options_;
  std::shared_ptr<const DenseSearch> search_;
  bool has_query_ = false;
  std::vector<float> query_, key_, scratch_;
  std::vector<DenseNeighbour> neighbours_;
  Retrieval retrieval_;
  // The trie of the last propose(): per node its token, parent and the drafts through it.
  std::vector<std::uint32_t> token_;
  std::vector<int> parent_, count_;
  std::vector<node_t> remap_;
};

static_assert(Drafter<DresdDrafter>);
static_assert(drafter_traits<DresdDrafter>::needs_target_features);

}  // namespace specdec
