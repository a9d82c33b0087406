// Batched step operations on caller-owned arrays: the descriptors both backends take, and the
// per-item functions (one tree, one sequence) that the host backend loops over and that the CUDA
// kernels agree with bit for bit. Descriptors are trivially copyable bundles of raw pointers
// (host pointers for backend::host, device pointers for backend::cuda) plus the few host-known
// bounds a launch needs (max_nodes, max_context), so no kernel launch needs a device->host copy.
#pragma once

#include <cstdint>

#include <specdec/config.hpp>
#include <specdec/core/kv_compaction.hpp>
#include <specdec/core/suffix_match.hpp>
#include <specdec/core/tree.hpp>

namespace specdec::core {

// ---- tree build -------------------------------------------------------------------------------

/// A batch of trees stored back to back: tree b owns nodes [offsets[b], offsets[b + 1]) of
/// parent/token (parents are indices local to the tree). Mask rows have `words` words; row i of
/// tree b starts at (offsets[b] + i) * words.
struct TreeBatch {
  int batch = 0;
  int words = 0;      ///< words per mask row; trees above 32 * words nodes are rejected
  int max_nodes = 0;  ///< trees above this are rejected (over_capacity)
  int vocab_size = 0;
  const int* offsets = nullptr;  ///< batch + 1 entries
  const node_t* parent = nullptr;
  const token_t* token = nullptr;
  int* depth = nullptr;
  std::uint32_t* mask = nullptr;
  node_t* first_child = nullptr;
  node_t* next_sibling = nullptr;
  int* max_depth = nullptr;       ///< per tree
  tree_status* status = nullptr;  ///< per tree; a malformed tree is flagged and not laid out
  // Optional index arrays for a target that runs the batch's nodes as one flat token list (all
  // three null, or base_position and at least one output set):
  const int* base_position = nullptr;  ///< per tree: tokens in its KV cache (the root's position)
  int* position = nullptr;             ///< per node: base_position[tree] + depth (RoPE, causal order)
  int* sequence = nullptr;             ///< per node: the index of its tree in the batch
};

/// The per-node index arrays of node i of tree `tree` (a no-op for the outputs left null).
SPECDEC_HD inline void write_node_indices(const TreeBatch& b, int tree, int i, int depth) {
  const long g = static_cast<long>(b.offsets[tree]) + i;
  if (b.position && b.base_position) b.position[g] = b.base_position[tree] + depth;
  if (b.sequence) b.sequence[g] = tree;
}

/// The node limit a tree of `b` must respect: max_nodes, and what a mask row can hold.
SPECDEC_HD constexpr int node_limit(const TreeBatch& b) {
  return b.max_nodes < 32 * b.words ? b.max_nodes : 32 * b.words;
}

/// Validates and lays out tree `tree` of the batch (core::validate_tree, core::build_tree_layout).
SPECDEC_HD inline tree_status build_tree_in_batch(const TreeBatch& b, int tree) {
  const int begin = b.offsets[tree];
  const int n = b.offsets[tree + 1] - begin;
  const tree_status s = validate_tree(b.parent + begin, b.token + begin, n, b.vocab_size, node_limit(b), nullptr);
  b.status[tree] = s;
  if (s == tree_status::ok) {
    b.max_depth[tree] = build_tree_layout(b.parent + begin, n, b.words, b.depth + begin,
                                          b.mask + static_cast<long>(begin) * b.words, b.first_child + begin,
                                          b.next_sibling + begin);
    for (int i = 0; i < n; ++i) write_node_indices(b, tree, i, b.depth[begin + i]);
  }
  return s;
}

// ---- greedy verification ------------------------------------------------------------------------

enum class verify_status : int {
  ok = 0,
  invalid_tree,   ///< the tree's build status was not ok (nothing verified)
  over_capacity,  ///< the tree has more than max_nodes nodes
  nan_logits,     ///< the walk reached a node whose logits row holds NaN; path is up to it
};

SPECDEC_HD constexpr const char* to_string(verify_status s) {
  switch (s) {
    case verify_status::ok: return "ok";
    case verify_status::invalid_tree: return "the tree failed validation";
    case verify_status::over_capacity: return "more nodes than max_nodes";
    case verify_status::nan_logits: return "a logits row on the accepted path contains NaN";
  }
  return "unknown verify status";
}

/// Greedy (exact) verification of a batch of laid-out trees (same node numbering as TreeBatch)
/// from the target's logits: row of global node g at logits + g * row_stride, vocab_size floats.
struct GreedyVerifyBatch {
  int batch = 0;
  int max_nodes = 0;  ///< bound on every tree's size; path holds max_nodes entries per tree
  int vocab_size = 0;
  long long row_stride = 0;  ///< floats between consecutive logits rows (>= vocab_size)
  const int* offsets = nullptr;
  const token_t* token = nullptr;
  const node_t* first_child = nullptr;   ///< from the tree build (valid layout)
  const node_t* next_sibling = nullptr;  ///< from the tree build (valid layout)
  const tree_status* build_status = nullptr;  ///< optional: trees whose build failed are skipped
  const float* logits = nullptr;
  token_t* argmax = nullptr;     ///< per node: the row's argmax (ties to the lowest id), -1 for NaN
  node_t* path = nullptr;        ///< tree b's accepted path at path + b * max_nodes, root first
  int* length = nullptr;         ///< per tree: entries of path (>= 1 when status is ok)
  token_t* next_token = nullptr; ///< per tree: the argmax after the path (the bonus token)
  verify_status* status = nullptr;
};

/// Walks tree `tree` with argmax[] already filled for its nodes (core::greedy_walk). Shared by the
/// host backend and the CUDA walk kernel, which passes its own copy of the argmaxes.
SPECDEC_HD inline verify_status greedy_walk_in_batch(const GreedyVerifyBatch& b, int tree, const token_t* argmax) {
  const int begin = b.offsets[tree];
  const int n = b.offsets[tree + 1] - begin;
  b.length[tree] = 0;
  b.next_token[tree] = -1;
  verify_status s = verify_status::ok;
  if (b.build_status && b.build_status[tree] != tree_status::ok) s = verify_status::invalid_tree;
  else if (n < 1 || n > b.max_nodes) s = verify_status::over_capacity;
  if (s == verify_status::ok) {
    token_t next = -1;
    // In a valid layout children have larger indices than parents, so the walk has at most n
    // entries, which path (max_nodes >= n entries) holds.
    b.length[tree] = greedy_walk(b.token + begin, b.first_child + begin, b.next_sibling + begin,
                                 [&](node_t node) { return argmax[node]; },
                                 b.path + static_cast<long>(tree) * b.max_nodes, &next);
    b.next_token[tree] = next;
    if (next < 0) s = verify_status::nan_logits;
  }
  b.status[tree] = s;
  return s;
}

/// Host reference for one tree: argmax of each row (core::argmax_row), then the walk.
SPECDEC_HD inline verify_status greedy_verify_in_batch(const GreedyVerifyBatch& b, int tree) {
  const int begin = b.offsets[tree];
  const int n = b.offsets[tree + 1] - begin;
  if (n >= 1 && n <= b.max_nodes) {
    for (int i = 0; i < n; ++i) {
      const long long g = begin + i;
      b.argmax[g] = argmax_row(b.logits + g * b.row_stride, b.vocab_size);
    }
  }
  return greedy_walk_in_batch(b, tree, b.argmax + begin);
}

// ---- suffix matching (the CASD rule) --------------------------------------------------------

/// A batch of contexts stored back to back: sequence b is context[offsets[b] .. offsets[b + 1]),
/// its last token the root. For each, the k best occurrences (core::find_suffix_matches) and their
/// continuations, drafted as chains below the root.
struct SuffixMatchBatch {
  int batch = 0;
  int max_context = 0;  ///< bound on every context length (sizes the launch)
  int max_match = 10;   ///< L (at most 16 on the GPU)
  int min_match = 1;
  int k = 2;            ///< occurrences per sequence (at most 8 on the GPU)
  int depth = 10;       ///< D: tokens drafted per occurrence (CasdOptions::depth)
  const int* offsets = nullptr;       ///< batch + 1 entries
  const token_t* context = nullptr;
  const int* search_limit = nullptr;  ///< per sequence S; nullptr: S = context length (CASD)
  SuffixMatch* matches = nullptr;     ///< batch * k, best first
  int* match_count = nullptr;         ///< per sequence, <= k; -1 when longer than max_context
  token_t* drafts = nullptr;          ///< batch * k * depth: draft j of b at (b * k + j) * depth
  int* draft_length = nullptr;        ///< batch * k; 0 for slots past match_count
};

SPECDEC_HD inline int search_limit_of(const SuffixMatchBatch& b, int seq, int n) {
  return b.search_limit ? b.search_limit[seq] : n;
}

/// Copies occurrence j's continuation of sequence `seq` into its draft slot (matches must be set).
SPECDEC_HD inline void gather_continuation(const SuffixMatchBatch& b, int seq, int j, int n) {
  const long long slot = static_cast<long long>(seq) * b.k + j;
  int length = 0;
  if (j < b.match_count[seq]) {
    const token_t* c = b.context + b.offsets[seq];
    const int p = b.matches[slot].position;
    const int end = continuation_end(p, b.depth, n, search_limit_of(b, seq, n));
    for (int t = p + 1; t < end; ++t) b.drafts[slot * b.depth + length++] = c[t];
  }
  b.draft_length[slot] = length;
}

/// Host reference for one sequence. A context longer than max_context (the bound the GPU launch
/// is sized by) gets match_count -1 and no drafts, on both backends.
SPECDEC_HD inline int suffix_match_in_batch(const SuffixMatchBatch& b, int seq) {
  const int begin = b.offsets[seq];
  const int n = b.offsets[seq + 1] - begin;
  if (n > b.max_context) {
    b.match_count[seq] = -1;
    for (int j = 0; j < b.k; ++j) b.draft_length[static_cast<long long>(seq) * b.k + j] = 0;
    return -1;
  }
  const int found = find_suffix_matches(b.context + begin, n, search_limit_of(b, seq, n), b.max_match,
                                        b.min_match, b.k, b.matches + static_cast<long long>(seq) * b.k);
  b.match_count[seq] = found;
  for (int j = 0; j < b.k; ++j) gather_continuation(b, seq, j, n);
  return found;
}

// ---- KV compaction ------------------------------------------------------------------------------

/// Compacts the accepted paths of a batch in K and V caches of the same layout: sequence b's
/// tree node i was written at position base[b] + i; after the call path entry k is at base[b] + k.
struct KvCompactionBatch {
  int batch = 0;
  int max_nodes = 0;  ///< path holds max_nodes entries per sequence (as GreedyVerifyBatch::path)
  KvCacheLayout layout;
  unsigned char* k_cache = nullptr;
  unsigned char* v_cache = nullptr;  ///< may be null (e.g. MLA caches with one tensor)
  const int* base = nullptr;         ///< per sequence: the root's position
  const node_t* path = nullptr;      ///< per sequence at path + b * max_nodes
  const int* length = nullptr;       ///< per sequence (e.g. GreedyVerifyBatch::length)
  compaction_status* status = nullptr;
  /// Optional: entry b's sequence of the layout (a batch of some of a target's slots); entry b
  /// is sequence b when null.
  const int* sequence = nullptr;
};

/// The layout sequence that entry `entry` of the batch compacts.
SPECDEC_HD inline int layout_sequence(const KvCompactionBatch& b, int entry) {
  return b.sequence ? b.sequence[entry] : entry;
}

SPECDEC_HD inline compaction_status validate_compaction_in_batch(const KvCompactionBatch& b, int seq) {
  const int length = b.length[seq];
  if (length > b.max_nodes) return compaction_status::past_the_tree;
  return validate_compaction_path(b.path + static_cast<long long>(seq) * b.max_nodes, length, b.max_nodes,
                                  b.base[seq], b.layout.max_positions);
}

/// Host reference for one sequence: validate, then the sequential in-place move on K and V.
SPECDEC_HD inline compaction_status compact_kv_in_batch(const KvCompactionBatch& b, int seq) {
  const compaction_status s = validate_compaction_in_batch(b, seq);
  b.status[seq] = s;
  if (s != compaction_status::ok) return s;
  const node_t* path = b.path + static_cast<long long>(seq) * b.max_nodes;
  const int sequence = layout_sequence(b, seq);
  compact_kv_rows(b.k_cache, b.layout, sequence, b.base[seq], path, b.length[seq]);
  if (b.v_cache) compact_kv_rows(b.v_cache, b.layout, sequence, b.base[seq], path, b.length[seq]);
  return s;
}

}  // namespace specdec::core
