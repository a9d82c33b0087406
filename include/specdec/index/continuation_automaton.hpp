// ContinuationAutomaton: an incremental suffix automaton of a token sequence that also records,
// for every state (a set of substrings with the same end positions), which tokens followed its
// occurrences, how often, and where most recently.
//
// Contexts are at most max_context tokens long (256 unless told): matches are the longest suffix
// of at most that length, and counts are kept for those. Appending a token costs amortised O(1)
// automaton work plus one step per state on the suffix chain of the sequence's last max_context
// tokens (a handful in natural text; in periodic text, a token run or a repeated line, one per
// repetition, which the bound keeps from growing with the sequence: counting every suffix made
// appends quadratic). Looking up the continuations of any matched text is O(1) per token of it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <specdec/config.hpp>
#include <specdec/error.hpp>

namespace specdec::index {

class ContinuationAutomaton {
 public:
  /// A token that followed the occurrences of a state, `count` times; `target` is the state of the
  /// text extended by it (whose own counts are kept only while that text is at most max_context
  /// tokens: extend() follows a text within the bound).
  struct Continuation {
    token_t token;
    std::int32_t target;
    std::int32_t count;
  };

  /// Where a text is matched: the automaton state holding its longest suffix that occurs in the
  /// sequence, and that suffix's length.
  struct Match {
    std::int32_t state = 0;
    std::int32_t length = 0;
  };

  static constexpr int kDefaultMaxContext = 256;

  /// Matches contexts of up to `max_context` tokens. Throws specdec::error when it is < 1.
  explicit ContinuationAutomaton(int max_context = kDefaultMaxContext) : max_context_(max_context) {
    if (max_context < 1)
      throw error("ContinuationAutomaton: max_context must be >= 1, got " + std::to_string(max_context));
    clear();
  }

  /// Forgets the sequence (keeps the storage).
  void clear() {
    tokens_.clear();
    states_.assign(1, State{0, -1, -2, 0, 0, 0, 0});
    edges_.clear();
    slots_.assign(kInitialSlots, Slot{kEmpty, 0});
    used_slots_ = 0;
    last_ = 0;
    tail_ = Match{};
  }

  /// The longest context a match holds.
  int max_context() const { return max_context_; }

  /// Appends one token to the sequence.
  void append(token_t token) {
    if (tokens_.size() >= static_cast<std::size_t>(INT32_MAX / 2))
      throw error("ContinuationAutomaton: the sequence is full (" + std::to_string(tokens_.size()) + " tokens)");
    const std::int32_t position = static_cast<std::int32_t>(tokens_.size());
    tokens_.push_back(token);
    Match before = tail_;  // the last min(position, max_context) tokens before this one
    const std::int32_t previous = last_;
    const std::int32_t current = new_state(states_[previous].length + 1, -1);
    std::int32_t p = previous;
    while (p >= 0 && find(p, token) < 0) {
      add_edge(p, token, current);
      p = states_[p].link;
    }
    if (p < 0) {
      states_[current].link = 0;
    } else {
      const std::int32_t q = edge(p, find(p, token)).target;
      if (states_[p].length + 1 == states_[q].length) {
        states_[current].link = q;
      } else {
        const std::int32_t clone = split(q, states_[p].length + 1);
        for (; p >= 0; p = states_[p].link) {
          Continuation& e = edge(p, find(p, token));
          if (e.target != q) break;
          e.target = clone;
        }
        states_[current].link = clone;
        if (before.state == q && before.length <= states_[clone].length) before.state = clone;
      }
    }
    // Every suffix of the sequence before this token, up to max_context tokens, is now followed
    // by it once more. (Longer ones are in states no match reaches: their counts are not kept.)
    for (std::int32_t s = before.state; s >= 0; s = states_[s].link) {
      count_continuation(s, token);
      states_[s].recent_end = position - 1;
    }
    tail_ = capped({edge(before.state, find(before.state, token)).target, before.length + 1});
    last_ = current;
  }

  /// Number of tokens appended.
  int size() const { return static_cast<int>(tokens_.size()); }
  std::span<const token_t> tokens() const { return tokens_; }

  /// The longest suffix of the sequence, of at most max_context tokens, that also ends earlier in
  /// it (so its earlier occurrences have continuations); the root (length 0) when there is none.
  Match suffix_match() const {
    if (tail_.state != last_) return tail_;  // another state than the whole sequence's: it occurred before
    return {states_[last_].link < 0 ? 0 : states_[last_].link, link_length(last_)};
  }

  /// The match of (matched text + token): the longest suffix of it, of at most max_context
  /// tokens, that occurs in the sequence, falling back to shorter suffixes of the matched text
  /// when the token never followed it. The root with length 0 when the token never occurs.
  Match extend(Match match, token_t token) const {
    std::int32_t s = match.state;
    std::int32_t length = match.length;
    for (;;) {
      const int i = find(s, token);
      if (i >= 0) return capped({edge(s, i).target, length + 1});
      if (s == 0) return {0, 0};
      s = states_[s].link;
      length = states_[s].length;
    }
  }

  /// A match taken before later append()s, in the state that holds its text now (an append can
  /// move a state's shorter texts to a new state between it and its suffix link).
  Match current(Match match) const {
    while (match.state > 0 && match.length <= link_length(match.state)) match.state = states_[match.state].link;
    return match;
  }

  /// The next shorter context of a match (one back-off step), or a match with state -1 after the root.
  Match shorter(Match match) const {
    const std::int32_t link = states_[match.state].link;
    return {link, link < 0 ? 0 : states_[link].length};
  }

  /// Continuations of a state, most frequent first (ties in no particular order).
  std::span<const Continuation> continuations(std::int32_t state) const {
    const State& s = states_[state];
    return {edges_.data() + s.edges_begin, static_cast<std::size_t>(s.edges_size)};
  }

  /// How many occurrences of the state's text have a continuation (sum of the counts).
  std::int32_t continued(std::int32_t state) const { return states_[state].continued; }

  /// Position in tokens() of the token that followed the state's most recent occurrence that has a
  /// continuation, or -1 when none has.
  std::int32_t recent_continuation(std::int32_t state) const {
    const std::int32_t end = states_[state].recent_end;
    return end < -1 ? -1 : end + 1;
  }

  /// The continuation of the state by `token`, or nullptr when it never followed.
  const Continuation* continuation(std::int32_t state, token_t token) const {
    const int i = find(state, token);
    return i < 0 ? nullptr : &edge(state, i);
  }

  /// Number of continuations of `token` after the state's occurrences (0 when it never followed).
  std::int32_t count(std::int32_t state, token_t token) const {
    const Continuation* c = continuation(state, token);
    return c ? c->count : 0;
  }

 private:
  struct State {
    std::int32_t length;      // longest text of the state
    std::int32_t link;        // state of the longest suffix in another class; -1 for the root
    std::int32_t recent_end;  // end of the most recent occurrence that has a continuation (-2: none)
    std::int32_t continued;   // sum of continuation counts
    std::int32_t edges_begin, edges_size, edges_capacity;
  };
  struct Slot {
    std::uint64_t key;
    std::int32_t index;  // position of the edge within its state's block
  };
  static constexpr std::uint64_t kEmpty = ~0ull;
  static constexpr std::size_t kInitialSlots = 1024;

  // A match one token longer than max_context, cut to max_context tokens: at most one step to a
  // shorter state, whose longest text is then exactly max_context tokens.
  Match capped(Match m) const {
    if (m.length <= max_context_) return m;
    m.length = max_context_;
    if (link_length(m.state) >= max_context_) m.state = states_[m.state].link;
    return m;
  }

  std::int32_t link_length(std::int32_t state) const {
    const std::int32_t link = states_[state].link;
    return link < 0 ? 0 : states_[link].length;
  }

  std::int32_t new_state(std::int32_t length, std::int32_t link) {
    states_.push_back(State{length, link, -2, 0, static_cast<std::int32_t>(edges_.size()), 0, 0});
    return static_cast<std::int32_t>(states_.size()) - 1;
  }

  // A copy of q (same continuations: the shorter texts moved to it end at q's positions and at
  // the new end, which has no continuation yet) holding q's texts up to `length`.
  std::int32_t split(std::int32_t q, std::int32_t length) {
    const std::int32_t clone = new_state(length, states_[q].link);
    states_[clone].recent_end = states_[q].recent_end;
    states_[clone].continued = states_[q].continued;
    reserve_edges(clone, states_[q].edges_size);
    std::copy_n(edges_.begin() + states_[q].edges_begin, states_[q].edges_size,
                edges_.begin() + states_[clone].edges_begin);
    states_[clone].edges_size = states_[q].edges_size;
    if (hashed(clone)) index_edges(clone);
    states_[q].link = clone;
    return clone;
  }

  void add_edge(std::int32_t state, token_t token, std::int32_t target) {
    State& s = states_[state];
    if (s.edges_size == s.edges_capacity) reserve_edges(state, std::max(2, 2 * s.edges_capacity));
    edges_[s.edges_begin + s.edges_size] = Continuation{token, target, 0};
    ++s.edges_size;
    // A state is hashed once it has more edges than a linear scan should read.
    if (s.edges_size == kLinearEdges + 1) index_edges(state);
    else if (s.edges_size > kLinearEdges + 1) insert_slot(key(state, token), s.edges_size - 1);
  }

  // Moves the state's block to the end of the edge arena with room for `capacity` edges (the old
  // block is abandoned: at most as much space as is in use is ever wasted).
  void reserve_edges(std::int32_t state, std::int32_t capacity) {
    const std::int32_t begin = static_cast<std::int32_t>(edges_.size());
    edges_.resize(edges_.size() + static_cast<std::size_t>(capacity));
    State& s = states_[state];
    std::copy_n(edges_.begin() + s.edges_begin, s.edges_size, edges_.begin() + begin);
    s.edges_begin = begin;
    s.edges_capacity = capacity;
  }

  // One more continuation by `token`; the block stays sorted by count, descending: the edge
  // swaps with the first edge of its count before the increment.
  void count_continuation(std::int32_t state, token_t token) {
    State& s = states_[state];
    const std::int32_t i = find(state, token);
    Continuation* block = edges_.data() + s.edges_begin;
    const std::int32_t old = block[i].count;
    const std::int32_t first =
        static_cast<std::int32_t>(std::partition_point(block, block + i, [&](const Continuation& e) {
                                    return e.count > old;
                                  }) - block);
    if (first != i) {
      std::swap(block[first], block[i]);
      if (hashed(state)) {
        slot(key(state, block[first].token)).index = first;
        slot(key(state, block[i].token)).index = i;
      }
    }
    ++block[first].count;
    ++s.continued;
  }

  const Continuation& edge(std::int32_t state, int i) const { return edges_[states_[state].edges_begin + i]; }
  Continuation& edge(std::int32_t state, int i) { return edges_[states_[state].edges_begin + i]; }

  // ---- (state, token) -> edge index ------------------------------------------------------------
  // Most states have a few edges, read by a linear scan of their block (one cache line); states
  // with more are indexed in a hash table (open addressing, linear probing).
  static constexpr std::int32_t kLinearEdges = 8;

  bool hashed(std::int32_t state) const { return states_[state].edges_size > kLinearEdges; }

  void index_edges(std::int32_t state) {
    for (std::int32_t i = 0; i < states_[state].edges_size; ++i) insert_slot(key(state, edge(state, i).token), i);
  }

  static std::uint64_t key(std::int32_t state, token_t token) {
    return (static_cast<std::uint64_t>(static_cast<std::uint32_t>(state)) << 32) | static_cast<std::uint32_t>(token);
  }
  static std::size_t hash(std::uint64_t k) {
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return static_cast<std::size_t>(k);
  }
  int find(std::int32_t state, token_t token) const {
    const State& s = states_[state];
    if (s.edges_size <= kLinearEdges) {
      const Continuation* block = edges_.data() + s.edges_begin;
      for (std::int32_t i = 0; i < s.edges_size; ++i)
        if (block[i].token == token) return i;
      return -1;
    }
    const std::uint64_t k = key(state, token);
    const std::size_t mask = slots_.size() - 1;
    for (std::size_t i = hash(k) & mask;; i = (i + 1) & mask) {
      if (slots_[i].key == k) return slots_[i].index;
      if (slots_[i].key == kEmpty) return -1;
    }
  }
  Slot& slot(std::uint64_t k) {
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = hash(k) & mask;
    while (slots_[i].key != k) i = (i + 1) & mask;
    return slots_[i];
  }
  void insert_slot(std::uint64_t k, std::int32_t index) {
    if (2 * (used_slots_ + 1) > slots_.size()) grow_slots();
    const std::size_t mask = slots_.size() - 1;
    std::size_t i = hash(k) & mask;
    while (slots_[i].key != kEmpty) i = (i + 1) & mask;
    slots_[i] = Slot{k, index};
    ++used_slots_;
  }
  void grow_slots() {
    std::vector<Slot> old(2 * slots_.size(), Slot{kEmpty, 0});
    old.swap(slots_);
    const std::size_t mask = slots_.size() - 1;
    for (const Slot& s : old) {
      if (s.key == kEmpty) continue;
      std::size_t i = hash(s.key) & mask;
      while (slots_[i].key != kEmpty) i = (i + 1) & mask;
      slots_[i] = s;
    }
  }

  std::vector<token_t> tokens_;
  std::vector<State> states_;
  std::vector<Continuation> edges_;
  std::vector<Slot> slots_;
  std::size_t used_slots_ = 0;
  std::int32_t last_ = 0;
  int max_context_;
  Match tail_;  // the sequence's last min(size, max_context) tokens
};

}  // namespace specdec::index
