// The tree build split into independent per-node pieces, so a CUDA block can give each node its
// own thread. Each piece agrees with core::validate_tree / core::build_tree_layout (tests compare
// them on the host); every loop is bounded by the node count even on a malformed tree.
#pragma once

#include <cstdint>

#include <specdec/config.hpp>
#include <specdec/core/tree.hpp>

namespace specdec::core {

/// What validate_tree reports when node i is the first offending node: the root's parent first,
/// then (for every node) its parent, then its token. The status of a tree of n in [1, max_nodes]
/// nodes is node_fault() of the smallest i whose fault is not ok (ok when there is none).
SPECDEC_HD inline tree_status node_fault(const node_t* parent, const token_t* token, int i, int vocab_size) {
  if (i == 0 && parent[0] != -1) return tree_status::root_has_parent;
  if (i > 0 && (parent[i] < 0 || parent[i] >= i)) return tree_status::parent_not_before_child;
  if (token[i] < 0 || token[i] >= vocab_size) return tree_status::token_out_of_vocabulary;
  return tree_status::ok;
}

/// Row i of the packed ancestor mask (`words` words, all written) by walking i's ancestors, and
/// i's depth. Ancestors come in decreasing index order, so the row fills from its top word down
/// and each word is stored once. At most i + 1 steps, whatever the parents are; on a validated
/// tree the result equals build_tree_layout's row and depth.
SPECDEC_HD inline int ancestor_row(const node_t* parent, int i, int words, std::uint32_t* row) {
  int w = words - 1;
  for (; w > i / 32; --w) row[w] = 0u;
  std::uint32_t bits = 0u;
  int depth = -1;
  for (int a = i, steps = 0; a >= 0 && steps <= i; a = parent[a], ++steps) {
    for (; w > a / 32; --w) {
      row[w] = bits;
      bits = 0u;
    }
    bits |= 1u << (a % 32);
    ++depth;
  }
  for (; w >= 0; --w) {
    row[w] = bits;
    bits = 0u;
  }
  return depth;
}

/// Node i's first child (its smallest child) and next sibling (the next larger node with the
/// same parent), -1 when none: build_tree_layout's child lists, one node at a time. Scans nodes
/// i+1..n-1 at most (quadratic work over the tree, but n threads do it in parallel and trees are
/// small; the scan stops as soon as both are found).
SPECDEC_HD inline void child_links(const node_t* parent, int n, int i, node_t* first_child, node_t* next_sibling) {
  node_t child = -1, sibling = -1;
  const bool has_siblings = i > 0;
  for (int j = i + 1; j < n && (child < 0 || (has_siblings && sibling < 0)); ++j) {
    if (child < 0 && parent[j] == i) child = j;
    if (has_siblings && sibling < 0 && parent[j] == parent[i]) sibling = j;
  }
  *first_child = child;
  *next_sibling = sibling;
}

}  // namespace specdec::core
