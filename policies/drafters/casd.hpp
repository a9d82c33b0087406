// CASD drafters: copy continuations of the earlier occurrences of the context's last tokens
// (the CASD paper's retrieval drafter), over prompt + generated (CasdDrafter, "casd") or the
// prompt only (CasdPromptDrafter, "casd_prompt").
//
// Rule (exactly core::find_suffix_matches, which the CUDA backend's kernel also implements):
// an occurrence is an end position p <= S - 2 (S = the context length, or the prompt length for
// casd_prompt) whose last m(p) >= min_match tokens equal the context's last tokens (m capped at
// max_match); the k occurrences with the longest match are kept, ties going to the most recent;
// each drafts its continuation c[p+1 ..] of up to `depth` tokens, cut at S.
//
// Why this choice among occurrences: a longer match is more specific evidence that the context
// is repeating that passage, so its continuation is the likeliest to be accepted; among equally
// long matches the most recent wins because text repeats locally (the passage being quoted or
// rewritten, the list being continued, the code being edited).
//
// Scores: occurrence chains merge into one tree (shared prefixes are one path). The node at
// depth j of a chain whose match has length m scores (m + 1) / (m + j + 1): the chance, by
// Laplace's rule of succession, that a copy which has held for m tokens holds for j more. Longer
// matches score higher, scores fall with depth, so a node budget keeps the likeliest nodes.
//
// Cost per step: indexing the new tokens and one query of a ContextIndex, O(max_match) each, plus
// O(k · max_match) to rank occurrences and O(k · depth) to draft: independent of the
// context's length (casd_prompt indexes the prompt once per sequence, at the first step).
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

/// Where a CASD drafter looks for occurrences.
enum class casd_scope {
  context,  ///< the prompt and everything generated so far
  prompt,   ///< the prompt only (CASD_prompt)
};

struct CasdOptions {
  int k = 2;              ///< occurrences drafted from (top-k by match length, then recency)
  int max_match = 10;     ///< match lengths are capped here
  int min_match = 1;      ///< shorter matches are ignored
  int depth = 10;         ///< tokens drafted after each occurrence (the chain's depth)
};

template <casd_scope Scope>
class BasicCasdDrafter {
 public:
  static constexpr const char* name = Scope == casd_scope::context ? "casd" : "casd_prompt";

  /// Throws specdec::error unless k >= 1, 1 <= min_match <= max_match and depth >= 1.
  explicit BasicCasdDrafter(CasdOptions options = {})
      : options_(validated(options)),
        index_(options.max_match),
        levels_(static_cast<std::size_t>(options.max_match)) {}

  const CasdOptions& options() const { return options_; }
  /// The index of the searched tokens (its size and memory, for diagnostics).
  const ContextIndex& index() const { return index_; }

  void begin(std::span<const token_t>) { index_.reset(); }

  // The index catches up with the context in propose(), whatever was observed.
  void observe(std::span<const token_t>) {}

  void propose(const DraftContext& ctx, DraftTree& tree) {
    const auto tokens = ctx.tokens;
    const int n = static_cast<int>(tokens.size());
    const int limit = search_limit(n, ctx.prompt_length);
    for (const core::SuffixMatch& match : find_matches(tokens, ctx.prompt_length)) {
      const int length = std::min(options_.depth, ctx.max_depth);
      const int end = core::continuation_end(match.position, length, n, limit);
      node_t node = 0;
      for (int i = match.position + 1; i < end; ++i) {
        const token_t t = tokens[static_cast<std::size_t>(i)];
        const node_t child = tree.find_child(node, t);
        node = child >= 0 ? child : tree.add(node, t, core::copy_score(match.length, i - match.position));
      }
    }
  }

  /// The occurrences propose() drafts from for this context, best first: the same as
  /// core::find_suffix_matches(tokens, n, S, max_match, min_match, k), found through the index.
  /// Valid until the next call.
  std::span<const core::SuffixMatch> find_matches(std::span<const token_t> tokens, int prompt_length) {
    const int n = static_cast<int>(tokens.size());
    const int limit = search_limit(n, prompt_length);
    if (limit < 2) return {};
    int longest = 0;
    if constexpr (Scope == casd_scope::context) {
      longest = index_.match_suffix(tokens, levels_);  // positions <= n - 2 = S - 2
    } else {
      index_.catch_up(tokens.first(static_cast<std::size_t>(limit - 1)));  // positions <= S - 2
      longest = index_.match(tokens, levels_);
    }
    const token_t* back = tokens.data() + n - 1;  // back[-j]: the j-th token from the end
    const auto indexed = index_.tokens();
    int found = 0;
    matches_.clear();  // grows to the occurrences found, not to k (which may be INT_MAX)
    int above = 0;  // occurrences one level deeper, all taken already
    for (int m = longest; m >= options_.min_match && found < options_.k; --m) {
      const Occurrences& level = levels_[static_cast<std::size_t>(m - 1)];
      if (level.count == above) continue;  // the same positions as the level above
      for (int p = level.latest; p >= 0 && found < options_.k; p = index_.previous(p, m)) {
        const bool longer = m < longest && p - m >= 0 && indexed[static_cast<std::size_t>(p - m)] == back[-m];
        if (!longer) {
          matches_.push_back({p, m});
          ++found;
        }
      }
      above = level.count;
    }
    return matches_;
  }

 private:
  static CasdOptions validated(const CasdOptions& o) {
    const std::string who = std::string(name) + ": ";
    check_option(name, "k", o.k);
    check_option(name, "max_match", o.max_match);
    if (o.max_match > ContextIndex::max_depth_limit)
      throw error(who + "max_match must be <= " + std::to_string(ContextIndex::max_depth_limit) + ", got " +
                  std::to_string(o.max_match));
    if (o.min_match < 1 || o.min_match > o.max_match)
      throw error(who + "min_match must be in [1, max_match = " + std::to_string(o.max_match) + "], got " +
                  std::to_string(o.min_match));
    check_option(name, "depth", o.depth);
    return o;
  }

  static int search_limit(int n, int prompt_length) {
    return Scope == casd_scope::context ? n : std::clamp(prompt_length, 0, n);
  }

  CasdOptions options_;
  ContextIndex index_;
  std::vector<Occurrences> levels_;
  std::vector<core::SuffixMatch> matches_;
};

/// CASD over the prompt and everything generated so far.
using CasdDrafter = BasicCasdDrafter<casd_scope::context>;
/// CASD over the prompt only (the CASD paper's CASD_prompt ablation).
using CasdPromptDrafter = BasicCasdDrafter<casd_scope::prompt>;

static_assert(Drafter<CasdDrafter>);
static_assert(Drafter<CasdPromptDrafter>);

}  // namespace specdec
