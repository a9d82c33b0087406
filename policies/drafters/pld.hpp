// PldDrafter ("pld"): prompt lookup decoding with Spec-Bench's semantics, the copy-drafter
// baseline that published numbers use.
//
// Rule (Spec-Bench's find_candidate_pred_tokens): for n = max_ngram down to min_ngram, take the
// context's last n tokens and look for their EARLIEST earlier occurrence, ending at p, whose whole
// continuation c[p+1 .. p+depth] lies inside the context and that does not overlap the
// query n-gram (p <= N - n - 2 for a context of N tokens); the first n that has one drafts that
// continuation as a chain. Nothing found: no draft (Spec-Bench drafts a dummy token then; an empty
// draft commits the same tokens with one fewer wasted node).
//
// Incremental: a ContextIndex of depth max_ngram gives every n-gram's earliest end position, so
// the earliest occurrence is read in O(1) per n instead of a scan of the context: if it does not
// qualify, no later one does (both conditions bound p from above).
//
// Scores: the node at depth j of a draft from an n-gram match scores (n + 1) / (n + j + 1), the
// rule CASD uses (see casd.hpp), so that merged with other drafters it ranks as a match of n.
#pragma once

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include <specdec/concepts.hpp>
#include <specdec/core/suffix_match.hpp>
#include <specdec/error.hpp>
#include <specdec/option_checks.hpp>
#include <specdec/index/context_index.hpp>

namespace specdec {

struct PldOptions {
  int max_ngram = 3;      ///< longest n-gram looked up
  int min_ngram = 1;      ///< shortest n-gram looked up
  int depth = 10;         ///< tokens drafted, a chain (a match needs this many after it)
};

class PldDrafter {
 public:
  static constexpr const char* name = "pld";

  /// Throws specdec::error unless 1 <= min_ngram <= max_ngram and depth >= 1.
  explicit PldDrafter(PldOptions options = {})
      : options_(validated(options)), index_(options.max_ngram), levels_(static_cast<std::size_t>(options.max_ngram)) {}

  const PldOptions& options() const { return options_; }
  /// The index of the searched tokens (its size and memory, for diagnostics).
  const ContextIndex& index() const { return index_; }

  void begin(std::span<const token_t>) { index_.reset(); }

  // The index catches up with the context in propose(), whatever was observed.
  void observe(std::span<const token_t>) {}

  void propose(const DraftContext& ctx, DraftTree& tree) {
    const core::SuffixMatch match = find_match(ctx.tokens);
    if (match.position < 0) return;
    const int length = std::min(options_.depth, ctx.max_depth);
    node_t node = 0;
    for (int j = 1; j <= length; ++j)
      node = tree.add(node, ctx.tokens[static_cast<std::size_t>(match.position + j)], core::copy_score(match.length, j));
  }

  /// The occurrence propose() drafts from: its end position and the n-gram size, or position -1
  /// when there is none.
  core::SuffixMatch find_match(std::span<const token_t> tokens) {
    const int n = static_cast<int>(tokens.size());
    if (n < 2) return {};
    const int longest = index_.match_suffix(tokens, levels_);  // occurrences ending at <= n - 2
    for (int g = std::min(longest, options_.max_ngram); g >= options_.min_ngram; --g) {
      const int earliest = levels_[static_cast<std::size_t>(g - 1)].earliest;
      if (options_.depth <= n - 1 - earliest && earliest <= n - g - 2) return {earliest, g};
    }
    return {};
  }

 private:
  static PldOptions validated(const PldOptions& o) {
    check_option(name, "max_ngram", o.max_ngram);
    if (o.max_ngram > ContextIndex::max_depth_limit)
      throw error("pld: max_ngram must be <= " + std::to_string(ContextIndex::max_depth_limit) + ", got " +
                  std::to_string(o.max_ngram));
    if (o.min_ngram < 1 || o.min_ngram > o.max_ngram)
      throw error("pld: min_ngram must be in [1, max_ngram = " + std::to_string(o.max_ngram) + "], got " +
                  std::to_string(o.min_ngram));
    check_option(name, "depth", o.depth);
    return o;
  }

  PldOptions options_;
  ContextIndex index_;
  std::vector<Occurrences> levels_;
};

static_assert(Drafter<PldDrafter>);

}  // namespace specdec
