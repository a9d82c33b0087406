// Random inputs for the batched operations (core/batch.hpp), owning their arrays, with the edge
// cases that matter: malformed and empty trees, ties, NaN and signed-zero logits rows, contexts
// shorter than the match length, overlapping KV moves. Output arrays start filled with sentinels,
// so entries an operation must leave alone are compared too.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <specdec/core/batch.hpp>

#include "support/random_tree.hpp"

namespace specdec::testing {

inline int uniform(std::mt19937_64& rng, int lo, int hi) {  // [lo, hi]
  return lo + static_cast<int>(rng() % static_cast<std::uint64_t>(hi - lo + 1));
}

// ---- trees --------------------------------------------------------------------------------------

struct TreeBatchData {
  int words = 1, max_nodes = 32, vocab = 100;
  std::vector<int> offsets{0};
  std::vector<node_t> parent;
  std::vector<token_t> token;
  std::vector<int> depth;
  std::vector<std::uint32_t> mask;
  std::vector<node_t> first_child, next_sibling;
  std::vector<int> max_depth;
  std::vector<core::tree_status> status;
  std::vector<int> base_position;  ///< empty: no index arrays asked for
  std::vector<int> position, sequence;

  int size() const { return static_cast<int>(offsets.size()) - 1; }

  void add(const std::vector<node_t>& p, const std::vector<token_t>& t) {
    parent.insert(parent.end(), p.begin(), p.end());
    token.insert(token.end(), t.begin(), t.end());
    offsets.push_back(static_cast<int>(parent.size()));
  }

  core::TreeBatch batch() {
    const std::size_t nodes = parent.size();
    depth.assign(nodes, -7);
    mask.assign(nodes * words, 0xdeadbeefu);
    first_child.assign(nodes, -7);
    next_sibling.assign(nodes, -7);
    max_depth.assign(size(), -7);
    status.assign(size(), static_cast<core::tree_status>(-1));
    core::TreeBatch b;
    b.batch = size();
    b.words = words;
    b.max_nodes = max_nodes;
    b.vocab_size = vocab;
    b.offsets = offsets.data();
    b.parent = parent.data();
    b.token = token.data();
    b.depth = depth.data();
    b.mask = mask.data();
    b.first_child = first_child.data();
    b.next_sibling = next_sibling.data();
    b.max_depth = max_depth.data();
    b.status = status.data();
    if (!base_position.empty()) {
      position.assign(nodes, -7);
      sequence.assign(nodes, -7);
      b.base_position = base_position.data();
      b.position = position.data();
      b.sequence = sequence.data();
    }
    return b;
  }
};

/// Breaks a valid tree in one of the ways validate_tree reports.
inline void corrupt(std::mt19937_64& rng, std::vector<node_t>& parent, std::vector<token_t>& token, int vocab) {
  const int n = static_cast<int>(parent.size());
  const int i = uniform(rng, 0, n - 1);
  switch (rng() % 6) {
    case 0: parent[0] = static_cast<node_t>(rng() % 3); break;       // root with a parent (maybe 0: a self loop)
    case 1: if (i > 0) parent[i] = i; break;                          // self loop
    case 2: if (i > 0) parent[i] = i + 1 + uniform(rng, 0, 5); break; // forward edge, maybe past the tree
    case 3: if (i > 0) parent[i] = -1 - uniform(rng, 0, 3); break;    // a second root, or garbage
    case 4: token[i] = vocab + uniform(rng, 0, 3); break;
    default: token[i] = -1 - uniform(rng, 0, 3); break;
  }
}

/// `batch` trees of 1..max_size nodes (a few empty or over max_nodes, a few corrupted).
inline TreeBatchData random_tree_batch(std::mt19937_64& rng, int batch, int max_size, int max_nodes, int words,
                                       int vocab, bool with_faults) {
  TreeBatchData d;
  d.words = words;
  d.max_nodes = max_nodes;
  d.vocab = vocab;
  for (int b = 0; b < batch; ++b) {
    const int kind = with_faults ? static_cast<int>(rng() % 10) : 9;
    if (kind == 0) {
      d.add({}, {});  // empty
      continue;
    }
    const int n = kind == 1 ? max_nodes + uniform(rng, 1, 8) : uniform(rng, 1, max_size);
    RandomTree t = random_tree(rng, n, vocab);
    if (kind == 2 || kind == 3) corrupt(rng, t.parent, t.token, vocab);
    d.add(t.parent, t.token);
  }
  if (rng() % 2) {
    for (int b = 0; b < batch; ++b) d.base_position.push_back(uniform(rng, 0, 100000));
  }
  return d;
}

// ---- greedy verification ------------------------------------------------------------------------

struct GreedyData {
  int max_nodes = 0, vocab = 0;
  long long row_stride = 0;
  std::vector<int> offsets;
  std::vector<token_t> token;
  std::vector<node_t> first_child, next_sibling;
  std::vector<core::tree_status> build_status;
  std::vector<float> logits;
  std::vector<token_t> argmax;
  std::vector<node_t> path;
  std::vector<int> length;
  std::vector<token_t> next_token;
  std::vector<core::verify_status> status;

  int size() const { return static_cast<int>(offsets.size()) - 1; }

  core::GreedyVerifyBatch batch() {
    argmax.assign(token.size(), -7);
    path.assign(static_cast<std::size_t>(size()) * max_nodes, -7);
    length.assign(size(), -7);
    next_token.assign(size(), -7);
    status.assign(size(), static_cast<core::verify_status>(-1));
    core::GreedyVerifyBatch b;
    b.batch = size();
    b.max_nodes = max_nodes;
    b.vocab_size = vocab;
    b.row_stride = row_stride;
    b.offsets = offsets.data();
    b.token = token.data();
    b.first_child = first_child.data();
    b.next_sibling = next_sibling.data();
    b.build_status = build_status.data();
    b.logits = logits.data();
    b.argmax = argmax.data();
    b.path = path.data();
    b.length = length.data();
    b.next_token = next_token.data();
    b.status = status.data();
    return b;
  }
};

/// Logits for laid-out trees (node g's row at g * row_stride) that often agree with a child's
/// token (long accepted paths), with frequent ties (small integer values), some NaN rows, rows of
/// signed zeros and infinities. Rows are padded to `row_stride` with values that must be ignored.
inline std::vector<float> random_logits(std::mt19937_64& rng, const TreeBatchData& trees, int vocab,
                                        long long row_stride) {
  const std::size_t nodes = trees.token.size();
  std::vector<float> logits(nodes * row_stride, 0.0f);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (std::size_t g = 0; g < nodes; ++g) {
    float* row = logits.data() + g * row_stride;
    for (long long v = vocab; v < row_stride; ++v) row[v] = 1e30f;  // padding: never read
    const int kind = static_cast<int>(rng() % 20);
    if (kind == 0) {  // signed zeros: whichever comes first must win the tie (argmax_row compares with >)
      for (int v = 0; v < vocab; ++v) row[v] = -1.0f;
      row[uniform(rng, 0, vocab - 1)] = -0.0f;
      row[uniform(rng, 0, vocab - 1)] = 0.0f;
      continue;
    }
    for (int v = 0; v < vocab; ++v) row[v] = static_cast<float>(rng() % 4);
    if (kind == 1) row[uniform(rng, 0, vocab - 1)] = nan;
    if (kind == 2) row[uniform(rng, 0, vocab - 1)] = inf;
    if (kind == 3) {
      for (int v = 0; v < vocab; ++v) row[v] = -inf;
    }
    // Point the argmax at a child's token most of the time, so paths get long.
    const int t = static_cast<int>(std::upper_bound(trees.offsets.begin(), trees.offsets.end(), static_cast<int>(g)) -
                                   trees.offsets.begin()) - 1;
    if (kind > 3 && trees.status[t] == core::tree_status::ok && trees.first_child[g] >= 0 && rng() % 4 != 0)
      row[trees.token[trees.offsets[t] + trees.first_child[g]]] = 5.0f + static_cast<float>(rng() % 2);
  }
  return logits;
}

/// Trees laid out by the host build (some malformed), with random_logits().
inline GreedyData random_greedy_batch(std::mt19937_64& rng, int batch, int max_size, int vocab, long long row_stride,
                                      bool with_faults) {
  const int max_nodes = max_size + 4;
  TreeBatchData trees = random_tree_batch(rng, batch, max_size, max_nodes, core::mask_words(max_nodes), vocab, with_faults);
  const core::TreeBatch tb = trees.batch();
  for (int t = 0; t < tb.batch; ++t) core::build_tree_in_batch(tb, t);
  GreedyData d;
  d.max_nodes = max_nodes;
  d.vocab = vocab;
  d.row_stride = row_stride;
  d.offsets = trees.offsets;
  d.token = trees.token;
  d.first_child = trees.first_child;
  d.next_sibling = trees.next_sibling;
  d.build_status = trees.status;
  d.logits = random_logits(rng, trees, vocab, row_stride);
  return d;
}

// ---- suffix matching ----------------------------------------------------------------------------

struct SuffixData {
  int max_context = 0, max_match = 10, min_match = 1, k = 2, depth = 10;
  std::vector<int> offsets{0};
  std::vector<token_t> context;
  std::vector<int> search_limit;  ///< empty: S = n
  std::vector<core::SuffixMatch> matches;
  std::vector<int> match_count;
  std::vector<token_t> drafts;
  std::vector<int> draft_length;

  int size() const { return static_cast<int>(offsets.size()) - 1; }

  void add(const std::vector<token_t>& c) {
    context.insert(context.end(), c.begin(), c.end());
    offsets.push_back(static_cast<int>(context.size()));
  }

  core::SuffixMatchBatch batch() {
    const std::size_t slots = static_cast<std::size_t>(size()) * (k > 0 ? k : 0);
    matches.assign(slots, core::SuffixMatch{-7, -7});
    match_count.assign(size(), -7);
    drafts.assign(slots * (depth > 0 ? depth : 0), -7);
    draft_length.assign(slots, -7);
    core::SuffixMatchBatch b;
    b.batch = size();
    b.max_context = max_context;
    b.max_match = max_match;
    b.min_match = min_match;
    b.k = k;
    b.depth = depth;
    b.offsets = offsets.data();
    b.context = context.data();
    b.search_limit = search_limit.empty() ? nullptr : search_limit.data();
    b.matches = matches.data();
    b.match_count = match_count.data();
    b.drafts = drafts.data();
    b.draft_length = draft_length.data();
    return b;
  }
};

/// A context of n tokens over a small alphabet with copied spans (so long matches exist).
inline std::vector<token_t> repetitive_context(std::mt19937_64& rng, int n, int alphabet) {
  std::vector<token_t> c;
  c.reserve(n);
  while (static_cast<int>(c.size()) < n) {
    if (c.size() > 20 && rng() % 3 == 0) {  // copy an earlier span
      const int from = uniform(rng, 0, static_cast<int>(c.size()) - 10);
      const int len = uniform(rng, 1, 24);
      for (int i = 0; i < len && static_cast<int>(c.size()) < n; ++i) c.push_back(c[from + i]);
    } else {
      c.push_back(static_cast<token_t>(rng() % alphabet));
    }
  }
  return c;
}

// ---- KV compaction ------------------------------------------------------------------------------

struct KvData {
  int max_nodes = 0;
  core::KvCacheLayout layout;
  std::vector<unsigned char> k_cache, v_cache;
  std::vector<int> base;
  std::vector<node_t> path;
  std::vector<int> length;
  std::vector<core::compaction_status> status;
  std::vector<int> sequence;  ///< entry b's sequence of the cache; empty: entry b is sequence b
  bool with_v = true;

  int size() const { return static_cast<int>(base.size()); }

  core::KvCompactionBatch batch() {
    status.assign(size(), static_cast<core::compaction_status>(-1));
    core::KvCompactionBatch b;
    b.batch = size();
    b.max_nodes = max_nodes;
    b.layout = layout;
    b.k_cache = k_cache.data();
    b.v_cache = with_v ? v_cache.data() : nullptr;
    b.base = base.data();
    b.path = path.data();
    b.length = length.data();
    b.status = status.data();
    b.sequence = sequence.empty() ? nullptr : sequence.data();
    return b;
  }
};

/// A random increasing path from the root through a tree of n nodes (what a verifier accepts).
inline std::vector<node_t> random_path(std::mt19937_64& rng, int n) {
  std::vector<node_t> path{0};
  for (int i = 1; i < n; ++i)
    if (rng() % 3 == 0) path.push_back(i);
  return path;
}

/// A cache of random bytes, packed or with `padding` bytes after every row, position, layer and
/// sequence; per sequence a tree of up to max_nodes nodes at a random base, a random accepted
/// path (a few invalid: not increasing, not from the root, past the tree, past the cache).
inline KvData random_kv_batch(std::mt19937_64& rng, int batch, int layers, int kv_heads, int head_dim,
                              int element_bytes, int max_nodes, bool with_faults, int padding = 0) {
  KvData d;
  d.max_nodes = max_nodes;
  const int max_positions = 3 * max_nodes;
  d.layout = core::kv_layout(layers, max_positions, kv_heads, head_dim, element_bytes);
  if (padding > 0) {
    core::KvCacheLayout& l = d.layout;
    l.head_stride = l.row_bytes + padding;
    l.position_stride = kv_heads * l.head_stride + padding;
    l.layer_stride = max_positions * l.position_stride + padding;
    l.sequence_stride = layers * l.layer_stride + padding;
  }
  const std::size_t bytes = static_cast<std::size_t>(batch) * d.layout.sequence_stride;
  d.k_cache.resize(bytes);
  d.v_cache.resize(bytes);
  for (auto& x : d.k_cache) x = static_cast<unsigned char>(rng());
  for (auto& x : d.v_cache) x = static_cast<unsigned char>(rng());
  d.path.assign(static_cast<std::size_t>(batch) * max_nodes, 0);
  for (int s = 0; s < batch; ++s) {
    const int n = uniform(rng, 1, max_nodes);
    d.base.push_back(uniform(rng, 0, max_positions - n));
    std::vector<node_t> p = random_path(rng, n);
    const int fault = with_faults ? static_cast<int>(rng() % 8) : 7;
    if (fault == 0 && p.size() > 2) std::swap(p[1], p[2]);  // not increasing
    if (fault == 1) p[0] = 1;                               // not from the root
    if (fault == 2) d.base.back() = max_positions - 1;      // past the cache (when the path moves)
    if (fault == 3) p.clear();                              // empty path
    if (fault == 4 && static_cast<int>(p.size()) < max_nodes) p.push_back(static_cast<node_t>(max_nodes));  // past the tree
    std::copy(p.begin(), p.end(), d.path.begin() + static_cast<long>(s) * max_nodes);
    d.length.push_back(static_cast<int>(p.size()));
  }
  return d;
}

}  // namespace specdec::testing
