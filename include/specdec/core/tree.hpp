// Core draft-tree functions shared by the host backend and the CUDA kernels.
//
// A tree of n nodes is a parent array in topological order: parent[0] == -1 (the root, the last
// committed token that the target has not seen yet) and 0 <= parent[i] < i for every other node.
// Everything here works on raw, caller-owned arrays and never allocates or throws, so the same
// code runs in a CUDA thread.
#pragma once

#include <specdec/config.hpp>

namespace specdec::core {

enum class tree_status : int {
  ok = 0,
  empty,                    ///< n < 1: a tree has at least its root
  over_capacity,            ///< n exceeds the caller's node limit
  root_has_parent,          ///< parent[0] != -1
  parent_not_before_child,  ///< parent[i] < 0 or parent[i] >= i (forward edge or cycle)
  token_out_of_vocabulary,  ///< token[i] < 0 or token[i] >= vocab
};

SPECDEC_HD constexpr const char* to_string(tree_status s) {
  switch (s) {
    case tree_status::ok: return "ok";
    case tree_status::empty: return "empty tree (a tree needs at least its root)";
    case tree_status::over_capacity: return "more nodes than the node limit";
    case tree_status::root_has_parent: return "node 0 (the root) must have parent -1";
    case tree_status::parent_not_before_child:
      return "a parent must come before its child (0 <= parent[i] < i)";
    case tree_status::token_out_of_vocabulary: return "token id outside the vocabulary";
  }
  return "unknown tree status";
}

/// Number of 32-bit words in one row of the packed ancestor mask of an n-node tree.
SPECDEC_HD constexpr int mask_words(int n) { return (n + 31) / 32; }

/// Checks a tree in one bounded pass. On failure *bad_node (if given) is the first offending node.
SPECDEC_HD inline tree_status validate_tree(const node_t* parent, const token_t* token, int n,
                                            int vocab_size, int max_nodes, int* bad_node) {
  if (bad_node) *bad_node = -1;
  if (n < 1) return tree_status::empty;
  if (n > max_nodes) return tree_status::over_capacity;
  if (parent[0] != -1) {
    if (bad_node) *bad_node = 0;
    return tree_status::root_has_parent;
  }
  for (int i = 0; i < n; ++i) {
    if (i > 0 && (parent[i] < 0 || parent[i] >= i)) {
      if (bad_node) *bad_node = i;
      return tree_status::parent_not_before_child;
    }
    if (token[i] < 0 || token[i] >= vocab_size) {
      if (bad_node) *bad_node = i;
      return tree_status::token_out_of_vocabulary;
    }
  }
  return tree_status::ok;
}

/// From a validated tree, builds in one pass: depth (root = 0), the packed ancestor mask
/// (row i, `words` words, has bit j set iff j is i or an ancestor of i), and child lists
/// (first_child / next_sibling, children in increasing index order, -1 terminated).
/// Returns the maximum depth.
SPECDEC_HD inline int build_tree_layout(const node_t* parent, int n, int words, int* depth,
                                        std::uint32_t* mask, node_t* first_child,
                                        node_t* next_sibling) {
  int max_depth = 0;
  for (int i = 0; i < n; ++i) {
    first_child[i] = -1;
    next_sibling[i] = -1;
    std::uint32_t* row = mask + static_cast<long>(i) * words;
    if (i == 0) {
      depth[0] = 0;
      for (int w = 0; w < words; ++w) row[w] = 0u;
    } else {
      const std::uint32_t* up = mask + static_cast<long>(parent[i]) * words;
      depth[i] = depth[parent[i]] + 1;
      for (int w = 0; w < words; ++w) row[w] = up[w];
      if (depth[i] > max_depth) max_depth = depth[i];
    }
    row[i / 32] |= 1u << (i % 32);
  }
  // Walking backwards and pushing to the front leaves each child list in increasing order.
  for (int i = n - 1; i > 0; --i) {
    next_sibling[i] = first_child[parent[i]];
    first_child[parent[i]] = i;
  }
  return max_depth;
}

/// True iff `ancestor` is `node` or one of its ancestors, read from the packed mask.
SPECDEC_HD inline bool is_ancestor(const std::uint32_t* mask, int words, int ancestor, int node) {
  return (mask[static_cast<long>(node) * words + ancestor / 32] >> (ancestor % 32)) & 1u;
}

/// Index of the largest value of row[0..n); ties go to the lowest index. Returns -1 when the row
/// holds a NaN (a target that produced NaN must not silently pick a token).
SPECDEC_HD inline int argmax_row(const float* row, int n) {
  int best = -1;
  float best_value = 0.0f;
  for (int v = 0; v < n; ++v) {
    const float x = row[v];
    if (x != x) return -1;
    if (best < 0 || x > best_value) {
      best = v;
      best_value = x;
    }
  }
  return best;
}

/// Greedy (exact) verification: from the root, follow the child whose token equals the target's
/// argmax at the current node; stop when no child matches. Writes the accepted path (path[0] = 0,
/// the root) and returns its length; *next_token is the argmax after the path (the bonus token).
/// `argmax_at(node)` gives the target's choice after `node`; a negative value aborts the walk and
/// is returned through *next_token so the caller can report it.
SPECDEC_NO_EXEC_CHECK
template <class ArgmaxAt>
SPECDEC_HD int greedy_walk(const token_t* token, const node_t* first_child, const node_t* next_sibling,
                           ArgmaxAt&& argmax_at, node_t* path, token_t* next_token) {
  int length = 0;
  node_t node = 0;
  path[length++] = 0;
  for (;;) {
    const token_t want = argmax_at(node);
    if (want < 0) {
      *next_token = want;
      return length;
    }
    node_t child = first_child[node];
    while (child >= 0 && token[child] != want) child = next_sibling[child];
    if (child < 0) {
      *next_token = want;
      return length;
    }
    path[length++] = child;
    node = child;
  }
}

}  // namespace specdec::core
