// RestDrafter ("rest"): REST (He et al.), retrieval from a static datastore of text.
//
// Rule: the query is the context's last m tokens, the root (the token just committed) included,
// for the longest m in [min_suffix, max_suffix] that occurs in the datastore; no such m gives an
// empty draft. Each occurrence's continuation (up to `depth` tokens, cut at the end of its
// document) is read, every prefix of every continuation is counted, and the `budget` most
// frequent prefixes form the draft tree.
//
// Which occurrences, when more than max_occurrences match: evenly spaced positions of the
// suffix-array range (i * count / cap for i < cap). The range is sorted by what follows the
// match, so every continuation prefix keeps its share of the occurrences to within one per
// prefix: an unbiased, deterministic sample. (REST's code takes the first ones the search
// returns, which in suffix order favours continuations that start with small token ids.)
//
// Tree and scores: a node's score is its prefix's count / occurrences read: the empirical
// probability that the target continues this way, a probability-like score that never grows
// along a path, as the other drafters' scores. Ties in count go to the shallower prefix, then to
// the earlier one in suffix order; a prefix ranks strictly before its extensions, so the kept
// nodes are prefix-closed.
//
// Cost per step: at most 1 + log2(max_suffix - min_suffix + 1) suffix-array searches (the
// longest matching m is found by bisection: if the last m + 1 tokens occur, so do the last m),
// each O(m log N), then O(max_occurrences · depth) to read and count continuations, which
// are random reads into the text. docs/performance.md has the measurements.
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
#include <specdec/index/token_datastore.hpp>

namespace specdec {

/// REST's parameters; the defaults are REST's.
struct RestOptions {
  int max_suffix = 16;          ///< longest query (tokens, the root included)
  int min_suffix = 2;           ///< shortest query
  int max_occurrences = 5000;   ///< occurrences read at most (evenly spaced when more match)
  int depth = 10;               ///< tokens read after each occurrence (the trie's depth)
  int budget = 64;              ///< draft nodes kept (the most frequent prefixes)
};

class RestDrafter {
 public:
  static constexpr const char* name = "rest";

  /// The query that matched: its length and its range in the datastore's suffix array.
  struct Match {
    int length = 0;  ///< 0: nothing matched
    SuffixRange range;
  };

  /// Throws specdec::error for a null datastore or an option out of range.
  explicit RestDrafter(std::shared_ptr<const TokenDatastore> datastore, RestOptions options = {})
      : datastore_(std::move(datastore)), options_(validated(options)) {
    if (!datastore_) throw error("rest: no datastore (null pointer)");
  }

  const RestOptions& options() const { return options_; }
  const std::shared_ptr<const TokenDatastore>& datastore() const { return datastore_; }
  /// The match of the last propose().
  const Match& last_match() const { return match_; }

  void begin(std::span<const token_t>) {}
  void observe(std::span<const token_t>) {}

  void propose(const DraftContext& ctx, DraftTree& tree) {
    if (datastore_->vocab_size() > ctx.vocab_size)
      throw error("rest: the datastore's vocabulary (" + std::to_string(datastore_->vocab_size()) +
                  " tokens) is larger than the target's (" + std::to_string(ctx.vocab_size) + ")");
    match_ = {};
    const int keep = std::min(options_.budget, ctx.budget);
    const int depth = std::min(options_.depth, ctx.max_depth);
    if (keep <= 0 || depth <= 0) return;
    match_ = find_longest(ctx.tokens);
    if (match_.length == 0) return;
    const int occurrences = count_prefixes(depth);
    keep_most_frequent(keep);
    remap_.assign(token_.size(), 0);
    for (const int i : kept_) {
      remap_[static_cast<std::size_t>(i)] =
          tree.add(remap_[static_cast<std::size_t>(parent_[static_cast<std::size_t>(i)])],
                   static_cast<token_t>(token_[static_cast<std::size_t>(i)]),
                   static_cast<float>(count_[static_cast<std::size_t>(i)]) / static_cast<float>(occurrences));
    }
  }

  /// The longest query of `context` (its last m tokens, min_suffix <= m <= max_suffix) that occurs
  /// in the datastore, or length 0.
  Match find_longest(std::span<const token_t> context) {
    const int n = static_cast<int>(context.size());
    int high = std::min(options_.max_suffix, n);
    if (high < options_.min_suffix) return {};
    query_.assign(context.end() - high, context.end());
    const auto search = [&](int m) { return datastore_->find(std::span<const std::uint32_t>(query_).last(m)); };
    Match best{options_.min_suffix, search(options_.min_suffix)};
    if (best.range.empty()) return {};
    int low = options_.min_suffix;  // occurs; high: the longest that may
    while (low < high) {
      const int mid = (low + high + 1) / 2;
      const SuffixRange r = search(mid);
      if (r.empty()) {
        high = mid - 1;
      } else {
        low = mid;
        best = {mid, r};
      }
    }
    return best;
  }

 private:
  static RestOptions validated(const RestOptions& o) {
    check_option(name, "min_suffix", o.min_suffix);
    check_option(name, "max_occurrences", o.max_occurrences);
    check_option(name, "depth", o.depth);
    check_option(name, "budget", o.budget);
    if (o.max_suffix < o.min_suffix)
      throw error("rest: max_suffix must be >= min_suffix = " + std::to_string(o.min_suffix) + ", got " +
                  std::to_string(o.max_suffix));
    return o;
  }

  // Reads the continuations of the sampled occurrences (in suffix order, so continuations that
  // share a prefix are adjacent) into a trie of prefix counts; node 0 is the root. Returns the
  // number of occurrences read.
  int count_prefixes(int depth) {
    const auto text = datastore_->text();
    const auto sa = datastore_->suffixes();
    const auto vocab = static_cast<std::uint32_t>(datastore_->vocab_size());
    const std::uint64_t count = match_.range.size();
    const std::uint64_t take = std::min<std::uint64_t>(count, static_cast<std::uint64_t>(options_.max_occurrences));
    token_.assign(1, 0);
    parent_.assign(1, -1);
    count_.assign(1, 0);
    depth_.assign(1, 0);
    path_.resize(static_cast<std::size_t>(depth));
    const auto at = [&](std::uint64_t i) { return match_.range.begin + i * count / take; };
    int previous = 0;  // length of the previous continuation; path_ holds its nodes
    for (std::uint64_t i = 0; i < take; ++i) {
      // Each occurrence costs two cache misses in a large datastore (its suffix-array entry, then
      // its text): fetch them ahead, so that the misses of several occurrences overlap.
      if (i + 2 * kAhead < take) prefetch(&sa[at(i + 2 * kAhead)]);
      if (i + kAhead < take) prefetch(text.data() + sa[at(i + kAhead)] + match_.length);
      const std::uint64_t start = std::uint64_t{sa[at(i)]} + static_cast<std::uint64_t>(match_.length);
      if (start >= text.size()) continue;  // only in a damaged file opened without the full check
      const std::uint32_t* c = text.data() + start;
      int length = 0;
      // Up to the separator (kDocumentEnd >= vocab; the text ends with one), or a token outside
      // the vocabulary (only in a damaged file opened without the full check).
      while (length < depth && c[length] < vocab) ++length;
      int common = 0;
      while (common < std::min(length, previous) && token_[static_cast<std::size_t>(path_[common])] == c[common])
        ++common;
      for (int d = 0; d < common; ++d) ++count_[static_cast<std::size_t>(path_[d])];
      for (int d = common; d < length; ++d) {
        path_[d] = static_cast<int>(token_.size());
        token_.push_back(c[d]);
        parent_.push_back(d == 0 ? 0 : path_[d - 1]);
        count_.push_back(1);
        depth_.push_back(d + 1);
      }
      previous = length;
    }
    return static_cast<int>(take);
  }

  static constexpr std::uint64_t kAhead = 8;
  static void prefetch(const void* p) {
#if defined(__GNUC__)
    __builtin_prefetch(p);
#else
    (void)p;
#endif
  }

  // kept_: the `keep` nodes of highest count (then shallower, then earlier), in index order,
  // which puts every parent before its children.
  void keep_most_frequent(int keep) {
    const int nodes = static_cast<int>(token_.size()) - 1;
    kept_.resize(static_cast<std::size_t>(nodes));
    for (int i = 0; i < nodes; ++i) kept_[static_cast<std::size_t>(i)] = i + 1;
    keep = std::min(keep, nodes);
    const auto better = [&](int a, int b) {
      const auto ua = static_cast<std::size_t>(a), ub = static_cast<std::size_t>(b);
      if (count_[ua] != count_[ub]) return count_[ua] > count_[ub];
      if (depth_[ua] != depth_[ub]) return depth_[ua] < depth_[ub];
      return a < b;
    };
    std::nth_element(kept_.begin(), kept_.begin() + keep, kept_.end(), better);
    kept_.resize(static_cast<std::size_t>(keep));
    std::sort(kept_.begin(), kept_.end());
  }

  std::shared_ptr<const TokenDatastore> datastore_;
  RestOptions options_;
  Match match_;
  std::vector<std::uint32_t> query_;
  // The trie of the last propose(): per node its token, parent, count and depth.
  std::vector<std::uint32_t> token_;
  std::vector<int> parent_, count_, depth_;
  std::vector<int> path_, kept_;
  std::vector<node_t> remap_;
};

static_assert(Drafter<RestDrafter>);

}  // namespace specdec
