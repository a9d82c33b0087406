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

  // Draft distributions (DraftTree::add_sampled), for rejection sampling. Proposal k says: the
  // draws draw_token[draw_begin[k] .. draw_begin[k+1]) were drawn, in that order and
  // independently, from q = proposal_q[k * vocab .. (k+1) * vocab) below node proposal_node[k].
  // A node's proposals, in merge order: first_proposal[node], then next_proposal[k] (-1 ends).
  // proposals == 0 and null pointers when no drafter gave probabilities.
  int proposals = 0;
  const node_t* first_proposal = nullptr;  ///< per node
  const int* next_proposal = nullptr;      ///< per proposal
  const node_t* proposal_node = nullptr;   ///< per proposal
  const int* draw_begin = nullptr;         ///< proposals + 1 entries
  const token_t* draw_token = nullptr;     ///< per draw
  const node_t* draw_node = nullptr;       ///< per draw: the child of proposal_node carrying it, -1 if cut
  const float* proposal_q = nullptr;       ///< `proposals` rows of the vocabulary size

  /// Sequence position of node i (what RoPE and causal order use).
  SPECDEC_HD int position(int i) const { return base_position + depth[i]; }
  /// First proposal (draft distribution) drawn below `node`, or -1.
  SPECDEC_HD int proposal_of(int node) const { return proposals > 0 ? first_proposal[node] : -1; }
  /// May node `node` attend to node `other` of the tree? (other is node itself or an ancestor)
  SPECDEC_HD bool attends(int node, int other) const {
    return core::is_ancestor(mask, words_per_row, other, node);
  }
};

}  // namespace specdec
