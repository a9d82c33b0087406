// Tree build on the GPU: validation and layout (depth, packed ancestor mask, child lists) for a
// batch of ragged trees in one launch, one block per tree and one thread per node. The per-node
// work is core/tree_parallel.hpp, which the host tests check against core::validate_tree and
// core::build_tree_layout, the functions the host backend runs.
#pragma once

#include <cuda_runtime.h>

#include <specdec/core/batch.hpp>
#include <specdec/core/tree_parallel.hpp>
#include <specdec/kernels/launchers.hpp>

namespace specdec::kernels {

using core::TreeBatch;

/// Trees above this many nodes do not fit the block's shared copy of the parents: a launch may
/// take 48 KB of shared memory without opting in, static (the kernel's two counters) and dynamic
/// together, so the parents get 48 KB less a margin.
inline constexpr int max_tree_nodes = 12 * 1024 - 64;
static_assert(sizeof(node_t) * max_tree_nodes + 64 <= 48 * 1024, "the parents and the counters exceed 48 KB");

template <class Batch>
__global__ void __launch_bounds__(256) build_trees_kernel(Batch b) {
  extern __shared__ node_t s_parent[];
  __shared__ int s_first_fault;
  __shared__ int s_max_depth;
  const int tree = blockIdx.x;
  const int begin = b.offsets[tree];
  const int n = b.offsets[tree + 1] - begin;
  // n is the same for the whole block, so these returns are uniform.
  if (n < 1 || n > core::node_limit(b)) {
    if (threadIdx.x == 0) b.status[tree] = n < 1 ? core::tree_status::empty : core::tree_status::over_capacity;
    return;
  }
  const node_t* parent = b.parent + begin;
  const token_t* token = b.token + begin;
  if (threadIdx.x == 0) {
    s_first_fault = n;
    s_max_depth = 0;
  }
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    s_parent[i] = parent[i];
    if (core::node_fault(parent, token, i, b.vocab_size) != core::tree_status::ok) atomicMin(&s_first_fault, i);
  }
  __syncthreads();
  if (s_first_fault < n) {
    if (threadIdx.x == 0) b.status[tree] = core::node_fault(parent, token, s_first_fault, b.vocab_size);
    return;
  }
  int deepest = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) {
    const int d = core::ancestor_row(s_parent, i, b.words, b.mask + static_cast<long>(begin + i) * b.words);
    b.depth[begin + i] = d;
    core::write_node_indices(b, tree, i, d);
    deepest = d > deepest ? d : deepest;
    core::child_links(s_parent, n, i, b.first_child + begin + i, b.next_sibling + begin + i);
  }
  atomicMax(&s_max_depth, deepest);
  __syncthreads();
  if (threadIdx.x == 0) {
    b.max_depth[tree] = s_max_depth;
    b.status[tree] = core::tree_status::ok;
  }
}

// The launcher (declared in launchers.hpp).
#if SPECDEC_CUDA_KERNELS_DEFINED
SPECDEC_CUDA_LAUNCHER cudaError_t build_trees(const TreeBatch& batch, cudaStream_t stream) {
  if (batch.batch <= 0) return cudaSuccess;
  const int limit = core::node_limit(batch);
  if (limit < 1 || limit > max_tree_nodes || batch.words < 1) return cudaErrorInvalidValue;
  const int threads = limit <= 64 ? 64 : limit <= 128 ? 128 : 256;
  build_trees_kernel<<<batch.batch, threads, sizeof(node_t) * limit, stream>>>(batch);
  return cudaGetLastError();
}
#endif

}  // namespace specdec::kernels
