// ContextIndex: an incremental index of where every short n-gram of a token sequence ends, so that
// copy drafters (CASD, PLD, tree drafters) find earlier occurrences of the context's last tokens
// without rescanning the context each step.
//
// Structure: a trie of *reversed* n-grams up to depth D = max_depth. The node at depth m for
// position p is the sequence c[p], c[p-1], ..., c[p-m+1]; it holds every end position whose last m
// tokens are that n-gram, as a chain linked newest first (links_[p][m]) with its count, newest and
// oldest position. A query walks the trie with the query's last tokens backwards and reads, for
// every m, the occurrences of its last m tokens.
//
// Leaves are kept lazy: a node with one position q has no children; the deeper n-grams ending at q
// are implied by the tokens before q (one comparison each at query time). A node's children are
// created when its second position arrives (q moves one level down, the new position continues).
// Exact: nodes are found by (parent node, token) in an open-addressing hash table whose keys are
// compared in full, so a hash collision costs a probe, never a wrong answer.
//
// Costs (D = max_depth, N = tokens indexed):
//  - append: O(D) expected (at most D lookups and D node creations);
//  - match:  O(D) expected; previous(): O(1); reset: O(memory held);
//  - match_suffix (a copy drafter's query each step): the appends of the new tokens, nothing
//    more: the walk that indexes the last token also answers the query.
//  - memory: 4 + 4·D bytes per token (the token, one link per depth), plus a 24-byte hash slot per
//    node at a load between 3/8 and 3/4 (32 to 64 bytes per node). Lazy leaves keep the node count
//    near the number of distinct repeated n-grams: about 2 per token on Zipf text with repeats
//    (bench/drafters_bench.cpp), at most D per token (e.g. a random text written twice).
//  - limits: positions and node ids are 32-bit (at most 2^31 - 1 of each); append() throws
//    specdec::error when either would overflow.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <specdec/config.hpp>
#include <specdec/error.hpp>

namespace specdec {

/// The occurrences of one n-gram in an indexed sequence: end positions, newest first through
/// ContextIndex::previous().
struct Occurrences {
  int count = 0;      ///< how many end positions
  int latest = -1;    ///< the newest (largest) end position
  int earliest = -1;  ///< the oldest (smallest) end position
};

/// The index of one sequence's n-grams (see the top of this file). Not thread-safe to modify.
class ContextIndex {
 public:
  /// Largest max_depth: every token costs 4 bytes per level, so the depth bounds the memory.
  static constexpr int max_depth_limit = 1024;

  /// Indexes n-grams of up to `max_depth` tokens. Throws specdec::error unless 1 <= max_depth <=
  /// max_depth_limit.
  explicit ContextIndex(int max_depth = 10) : depth_(max_depth) {
    if (max_depth < 1) throw error("ContextIndex: max_depth must be >= 1, got " + std::to_string(max_depth));
    if (max_depth > max_depth_limit)
      throw error("ContextIndex: max_depth must be <= " + std::to_string(max_depth_limit) + ", got " +
                  std::to_string(max_depth));
    reset();
  }

  int max_depth() const { return depth_; }
  /// Number of tokens indexed: end positions 0 .. size() - 1.
  int size() const { return static_cast<int>(tokens_.size()); }
  std::span<const token_t> tokens() const { return tokens_; }

  /// Forgets every token (a new sequence starts). The hash table keeps its size, so a sequence
  /// of similar length does not grow it again.
  void reset() {
    tokens_.clear();
    links_.clear();
    slots_.assign(std::max(slots_.size(), kInitialSlots), Slot{});
    nodes_ = 0;
    suffix_matched_ = -1;
  }

  /// Reserves memory for `tokens` tokens (the per-token part; nodes grow as needed).
  void reserve(int tokens) {
    tokens_.reserve(static_cast<std::size_t>(std::max(tokens, 0)));
    links_.reserve(static_cast<std::size_t>(std::max(tokens, 0)) * static_cast<std::size_t>(depth_));
  }

  /// Appends a token as end position size(). O(max_depth).
  void append(token_t token) { walk(token, nullptr); }

  void append(std::span<const token_t> tokens) {
    for (token_t t : tokens) append(t);
  }

  /// Appends a token as end position p = size() and, with the same walk, writes to levels[m - 1]
  /// the occurrences among positions before p of the last m tokens ending at p, for m = 1 ..
  /// returned value (what match(tokens()) says just before the append, with `token` as the
  /// query's last token). Throws specdec::error when `levels` is shorter than min(max_depth, p + 1).
  int append_and_match(token_t token, std::span<Occurrences> levels) {
    const std::size_t deepest = std::min<std::size_t>(static_cast<std::size_t>(depth_), tokens_.size() + 1);
    if (levels.size() < deepest)
      throw error("ContextIndex::append_and_match: levels holds " + std::to_string(levels.size()) +
                  " entries, needs " + std::to_string(deepest));
    return walk(token, levels.data());
  }

  /// Indexes the tokens of `sequence` past size(), so a drafter can index lazily what it has not
  /// seen yet. `sequence` must extend the indexed tokens; when it is shorter, or its token at the
  /// last indexed position differs (a new sequence started without reset()), the index starts
  /// over. Only that one token is compared: a caller that rewrites earlier tokens must reset().
  void catch_up(std::span<const token_t> sequence) {
    const std::size_t have = tokens_.size();
    if (sequence.size() < have || (have > 0 && sequence[have - 1] != tokens_[have - 1])) reset();
    for (std::size_t i = tokens_.size(); i < sequence.size(); ++i) append(sequence[i]);
    suffix_matched_ = -1;
  }

  /// A copy drafter's query each step: indexes all of `sequence` (as catch_up) and writes to
  /// levels[m - 1] the occurrences of its last m tokens that end before its last token, for
  /// m = 1 .. returned value. The last token is indexed by append_and_match(), so the query costs
  /// no walk of its own; asked again for the same sequence, the answer is remembered. Throws
  /// specdec::error when `levels` is shorter than min(max_depth, sequence.size()).
  int match_suffix(std::span<const token_t> sequence, std::span<Occurrences> levels) {
    const std::size_t n = sequence.size();
    const std::size_t deepest = std::min<std::size_t>(static_cast<std::size_t>(depth_), n);
    if (levels.size() < deepest)
      throw error("ContextIndex::match_suffix: levels holds " + std::to_string(levels.size()) + " entries, needs " +
                  std::to_string(deepest));
    if (n == 0) return 0;
    if (suffix_matched_ < 0 || tokens_.size() != n || tokens_.back() != sequence.back()) {
      catch_up(sequence.first(n - 1));
      suffix_levels_.resize(deepest);
      suffix_matched_ = walk(sequence.back(), suffix_levels_.data());
    }
    std::copy_n(suffix_levels_.begin(), suffix_matched_, levels.begin());
    return suffix_matched_;
  }

  /// Matches the end of `query` (any sequence; it need not be indexed) against the index: for
  /// m = 1 .. returned value, levels[m - 1] receives the occurrences of query's last m tokens among
  /// the indexed end positions. The returned value is the longest m <= max_depth with at least one
  /// occurrence (0 when even the last token never occurs). O(max_depth). Throws specdec::error when
  /// `levels` is shorter than min(max_depth, query.size()).
  int match(std::span<const token_t> query, std::span<Occurrences> levels) const {
    const int deepest = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(depth_), query.size()));
    if (levels.size() < static_cast<std::size_t>(deepest))
      throw error("ContextIndex::match: levels holds " + std::to_string(levels.size()) + " entries, needs " +
                  std::to_string(deepest));
    if (deepest == 0) return 0;
    const token_t* back = query.data() + query.size() - 1;  // back[-j]: the j-th token from the end
    std::int32_t node = kRoot;
    int m = 0;
    while (m < deepest) {
      const Slot& n = slots_[slot_of(key(node, back[-m]))];
      if (n.key == kEmptyKey) break;
      levels[static_cast<std::size_t>(m++)] = {n.count, n.latest, n.earliest};
      if (n.count == 1) {  // a lazy leaf: its one position continues alone, token by token
        const int q = n.latest;
        while (m < deepest && q - m >= 0 && tokens_[static_cast<std::size_t>(q - m)] == back[-m])
          levels[static_cast<std::size_t>(m++)] = {1, q, q};
        break;
      }
      node = n.node;
    }
    return m;
  }

  /// The newest end position before `position` whose last m tokens equal those ending at
  /// `position`, or -1. `position` must be an occurrence at depth m (from match() or a previous
  /// call); throws specdec::error when position or m is out of range.
  int previous(int position, int m) const {
    if (position < 0 || position >= size() || m < 1 || m > depth_ || m > position + 1)
      throw error("ContextIndex::previous: no n-gram of " + std::to_string(m) + " tokens ends at position " +
                  std::to_string(position) + " (" + std::to_string(size()) + " tokens indexed, max_depth " +
                  std::to_string(depth_) + ")");
    return links_[static_cast<std::size_t>(position) * static_cast<std::size_t>(depth_) +
                  static_cast<std::size_t>(m - 1)];
  }

  /// Trie nodes, the root excluded.
  std::size_t node_count() const { return static_cast<std::size_t>(nodes_); }
  /// Bytes held by the index's arrays (capacity, not size).
  std::size_t memory_bytes() const {
    return tokens_.capacity() * sizeof(token_t) + links_.capacity() * sizeof(std::int32_t) +
           slots_.capacity() * sizeof(Slot);
  }

 private:
  static constexpr std::uint64_t kEmptyKey = ~std::uint64_t{0};  // parent 0xFFFFFFFF never exists

  // A trie node, stored in the hash table slot of its key (parent node, token): one cache line
  // visit per level. `node` is the node's own id, the parent part of its children's keys.
  struct Slot {
    std::uint64_t key = kEmptyKey;
    std::int32_t node = -1;
    std::int32_t count = 0;
    std::int32_t latest = -1;
    std::int32_t earliest = -1;
  };

  static constexpr int kRoot = 0;
  static constexpr std::size_t kInitialSlots = 1024;

  // Indexes `token` at position p = size(); with `levels`, also records what each level held
  // before p joined it (see append_and_match) and returns how many levels had an occurrence.
  int walk(token_t token, Occurrences* levels) {
    const int p = size();
    // Checked before anything changes: a walk creates at most depth_ nodes.
    if (p == std::numeric_limits<int>::max())
      throw error("ContextIndex: cannot index more than " + std::to_string(p) + " tokens");
    if (nodes_ > std::numeric_limits<std::int32_t>::max() - depth_)
      throw error("ContextIndex: more than 2^31 - 1 trie nodes (" + std::to_string(p) + " tokens indexed)");
    tokens_.push_back(token);
    links_.resize(links_.size() + static_cast<std::size_t>(depth_), -1);
    suffix_matched_ = -1;
    std::int32_t node = kRoot;
    const int deepest = std::min(depth_, p + 1);
    for (int m = 1; m <= deepest; ++m) {
      const std::uint64_t k = key(node, tokens_[p - m + 1]);
      std::size_t s = slot_of(k);
      if (slots_[s].key == kEmptyKey) {  // a new n-gram: p becomes a leaf, deeper levels stay implied
        add_child(k, p);
        return m - 1;
      }
      if (levels) levels[m - 1] = {slots_[s].count, slots_[s].latest, slots_[s].earliest};
      if (slots_[s].count == 1) {
        // The leaf gets its second position: its first one, q, moves down a level so that the
        // node's children are complete before p descends.
        const int q = slots_[s].latest;
        if (m < depth_ && q - m >= 0 && add_child(key(slots_[s].node, tokens_[q - m]), q)) s = slot_of(k);
      }
      Slot& n = slots_[s];
      link(p, m) = n.latest;
      n.latest = p;
      ++n.count;
      node = n.node;
    }
    return deepest;
  }

  std::int32_t& link(int position, int m) {
    return links_[static_cast<std::size_t>(position) * static_cast<std::size_t>(depth_) +
                  static_cast<std::size_t>(m - 1)];
  }

  static std::uint64_t key(std::int32_t parent, token_t token) {
    return static_cast<std::uint64_t>(static_cast<std::uint32_t>(parent)) << 32 |
           static_cast<std::uint32_t>(token);
  }

  // The splitmix64 finaliser: parents and tokens are small, clustered integers.
  static std::uint64_t mix(std::uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }

  // The slot holding `k`, or the empty slot where it would go (linear probing).
  std::size_t slot_of(std::uint64_t k) const {
    const std::size_t mask = slots_.size() - 1;
    std::size_t s = static_cast<std::size_t>(mix(k)) & mask;
    while (slots_[s].key != k && slots_[s].key != kEmptyKey) s = (s + 1) & mask;
    return s;
  }

  // Creates the node for key `k` (absent) with its first position, a leaf. Returns true when the
  // table grew, which moves every slot.
  bool add_child(std::uint64_t k, int position) {
    const bool grows = (static_cast<std::size_t>(nodes_) + 1) * 4 > slots_.size() * 3;  // load <= 3/4
    if (grows) grow();
    slots_[slot_of(k)] = Slot{k, ++nodes_, 1, position, position};
    return grows;
  }

  void grow() {
    std::vector<Slot> old(slots_.size() * 2);
    old.swap(slots_);
    for (const Slot& s : old)
      if (s.key != kEmptyKey) slots_[slot_of(s.key)] = s;
  }

  int depth_;
  std::vector<token_t> tokens_;
  std::vector<std::int32_t> links_;  // links_[p * depth_ + m - 1]: previous position, same m-gram
  std::vector<Slot> slots_;          // the trie's nodes, by (parent, token); power-of-2 size
  std::int32_t nodes_ = 0;           // nodes created; ids 1 .. nodes_ (0 is the root)
  // match_suffix()'s last answer, valid while nothing else is appended (-1: none).
  std::vector<Occurrences> suffix_levels_;
  int suffix_matched_ = -1;
};

}  // namespace specdec
