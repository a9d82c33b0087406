// Tree build on the GPU: validation and layout (depth, packed ancestor mask, child lists) for a
// batch of ragged trees in one launch. The work per tree is core::validate_tree and
// core::build_tree_layout, the functions the host backend runs.
#pragma once

#include <cuda_runtime.h>

#include <specdec/core/tree.hpp>

namespace specdec::kernels {

/// A batch of trees stored back to back: tree b owns nodes [offsets[b], offsets[b + 1]) of
/// parent/token (parents are indices local to the tree). Mask rows have `words` words, and row i
/// of tree b starts at (offsets[b] + i) * words.
struct TreeBatch {
  int batch = 0;
  int words = 0;      ///< words per mask row, >= mask_words(largest tree)
  int max_nodes = 0;  ///< trees larger than this (or than 32 * words) are rejected
  int vocab_size = 0;
  const int* offsets = nullptr;  ///< batch + 1 entries
  const node_t* parent = nullptr;
  const token_t* token = nullptr;
  int* depth = nullptr;
  std::uint32_t* mask = nullptr;
  node_t* first_child = nullptr;
  node_t* next_sibling = nullptr;
  int* max_depth = nullptr;                 ///< per tree
  core::tree_status* status = nullptr;      ///< per tree; a malformed tree is flagged, not laid out
};

__global__ void build_trees_kernel(TreeBatch b) {
  const int tree = blockIdx.x * blockDim.x + threadIdx.x;
  if (tree >= b.batch) return;
  const int begin = b.offsets[tree];
  const int n = b.offsets[tree + 1] - begin;
  const int limit = b.max_nodes < 32 * b.words ? b.max_nodes : 32 * b.words;
  const core::tree_status s =
      core::validate_tree(b.parent + begin, b.token + begin, n, b.vocab_size, limit, nullptr);
  b.status[tree] = s;
  if (s != core::tree_status::ok) return;
  b.max_depth[tree] = core::build_tree_layout(b.parent + begin, n, b.words, b.depth + begin,
                                              b.mask + static_cast<long>(begin) * b.words,
                                              b.first_child + begin, b.next_sibling + begin);
}

/// Launches the tree build for the whole batch on `stream`.
inline cudaError_t build_trees(const TreeBatch& batch, cudaStream_t stream = nullptr) {
  if (batch.batch == 0) return cudaSuccess;
  constexpr int threads = 64;
  build_trees_kernel<<<(batch.batch + threads - 1) / threads, threads, 0, stream>>>(batch);
  return cudaGetLastError();
}

}  // namespace specdec::kernels
