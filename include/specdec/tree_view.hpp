// The read-only view of a laid-out draft tree that a target forwards and a verifier walks.
#pragma once

#include <specdec/config.hpp>
#include <specdec/core/tree.hpp>

namespace specdec {

/// A draft tree after merge and layout. All arrays hold `size` entries (`mask` holds
/// size * words_per_row words); node 0 is the root, parents come before children.
/// Trivially copyable and made of raw pointers, so it can be passed to a kernel as is.
struct TreeView {
  int size = 0;            ///< nodes, root included
  int words_per_row = 0;   ///< 32-bit words per row of `mask`
  int base_position = 0;   ///< tokens in the target's KV cache = the root's position
  int max_depth = 0;       ///< deepest node's depth
  const node_t* parent = nullptr;        ///< parent[0] == -1
  const token_t* token = nullptr;        ///< token[0] is the root token
  const int* depth = nullptr;            ///< depth[0] == 0
  const std::uint32_t* mask = nullptr;   ///< packed ancestor mask (a node is its own ancestor)
  const node_t* first_child = nullptr;   ///< -1 when none
  const node_t* next_sibling = nullptr;  ///< -1 when none; siblings in increasing index order

  /// Sequence position of node i (what RoPE and causal order use).
  SPECDEC_HD int position(int i) const { return base_position + depth[i]; }
  /// May node `node` attend to node `other` of the tree? (other is node itself or an ancestor)
  SPECDEC_HD bool attends(int node, int other) const {
    return core::is_ancestor(mask, words_per_row, other, node);
  }
};

}  // namespace specdec
