// Greedy (exact) verification on the GPU from fp32 logits, for a batch of laid-out trees, in two
// launches and one pass over the vocabulary:
//  1. row argmax: grid (splits, node, tree); each block reduces its slice of one logits row to a
//     64-bit key (value mapped to an ordered integer, then the complemented index, so the largest
//     key is the largest value and, among equal values, the lowest token id; NaN maps to the
//     largest key of all, so a row with NaN reports NaN) with cub::BlockReduce. For a small batch
//     the vocabulary is split across several blocks per row so the whole GPU streams the logits.
//  2. walk: one block per tree combines each node's split keys, then one thread runs
//     core::greedy_walk (through core::greedy_walk_in_batch, what the host backend runs).
// The argmaxes equal core::argmax_row (ties to the lowest id, -1 for a NaN row; -0.0 == +0.0).
// Why not one launch (the last block of a tree walking): finding the last block needs a counter
// per tree that is zero when the launch starts, a hidden contract on a workspace the caller owns
// and may share with other operations, and a stale counter would silently skip or corrupt a walk.
// Pass 2 is queued behind pass 1 on the stream; and since no launch here synchronises or
// allocates, a step can be captured in a CUDA graph, which replays both without CPU launch
// overhead (step_gpu_test captures build, verification and compaction in global capture mode).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include <cub/block/block_reduce.cuh>

#include <specdec/core/batch.hpp>
#include <specdec/core/reduction_keys.hpp>
#include <specdec/kernels/launchers.hpp>

namespace specdec::kernels {

using core::GreedyVerifyBatch;

namespace detail {

inline constexpr int argmax_threads = 256;
inline constexpr int walk_threads = 128;

/// The current device's multiprocessors (132 when it cannot be asked).
inline int multiprocessors() {
  int device = 0, sms = 132;
  if (cudaGetDevice(&device) == cudaSuccess) cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  return sms;
}

}  // namespace detail

/// The largest core::argmax_key of row[lo, hi), reduced over the block (valid in thread 0). With
/// Vec4, lo must be a multiple of 4 and the row 16-byte aligned. Shared by the greedy argmax and
/// the stochastic kernels' pre-pass.
template <bool Vec4>
__device__ std::uint64_t block_top_key(const float* row, int lo, int hi) {
  using BlockReduce = cub::BlockReduce<std::uint64_t, detail::argmax_threads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  std::uint64_t best = 0u;
  int v = lo;
  if constexpr (Vec4) {
    const int vec_hi = lo < hi ? lo + ((hi - lo) & ~3) : lo;
#pragma unroll 4
    for (int i = lo + 4 * static_cast<int>(threadIdx.x); i < vec_hi; i += 4 * detail::argmax_threads) {
      const float4 x = *reinterpret_cast<const float4*>(row + i);
      const std::uint64_t low = core::max_key(core::argmax_key(x.x, i), core::argmax_key(x.y, i + 1));
      const std::uint64_t high = core::max_key(core::argmax_key(x.z, i + 2), core::argmax_key(x.w, i + 3));
      best = core::max_key(best, core::max_key(low, high));
    }
    v = vec_hi;
  }
#pragma unroll 4
  for (int i = v + static_cast<int>(threadIdx.x); i < hi; i += detail::argmax_threads)
    best = core::max_key(best, core::argmax_key(row[i], i));
  return BlockReduce(reduce_storage).Reduce(best, core::MaxKey{});
}

/// Pass 1. `chunk` vocabulary entries per split (a multiple of 4 when Vec4: then every slice
/// starts 16-byte aligned, given an aligned row).
template <bool Vec4>
__global__ void __launch_bounds__(detail::argmax_threads)
    row_argmax_kernel(GreedyVerifyBatch b, int splits, int chunk, std::uint64_t* partial) {
  const int tree = blockIdx.z, node = blockIdx.y, split = blockIdx.x;
  const int begin = b.offsets[tree];
  const int n = b.offsets[tree + 1] - begin;
  if (node >= n || n > b.max_nodes) return;  // uniform over the block
  const float* row = b.logits + static_cast<long long>(begin + node) * b.row_stride;
  const int lo = split * chunk;
  const int hi = lo + chunk < b.vocab_size ? lo + chunk : b.vocab_size;
  const std::uint64_t best = block_top_key<Vec4>(row, lo, hi);
  if (threadIdx.x == 0) partial[(static_cast<long long>(tree) * b.max_nodes + node) * splits + split] = best;
}

/// Pass 2: combine the splits per node, then walk (one thread; the walk is at most max_depth + 1
/// steps over a few child lists).
template <class Batch>
__global__ void __launch_bounds__(detail::walk_threads)
    greedy_walk_kernel(Batch b, int splits, const std::uint64_t* partial) {
  extern __shared__ token_t s_argmax[];  // max_nodes entries
  const int tree = blockIdx.x;
  const int begin = b.offsets[tree];
  const int n = b.offsets[tree + 1] - begin;
  if (n >= 1 && n <= b.max_nodes) {
    for (int i = threadIdx.x; i < n; i += detail::walk_threads) {
      const std::uint64_t* keys = partial + (static_cast<long long>(tree) * b.max_nodes + i) * splits;
      std::uint64_t key = 0u;
      for (int s = 0; s < splits; ++s) key = core::max_key(key, keys[s]);
      s_argmax[i] = core::argmax_key_token(key);
      b.argmax[begin + i] = s_argmax[i];
    }
  }
  __syncthreads();
  if (threadIdx.x == 0) core::greedy_walk_in_batch(b, tree, s_argmax);
}

/// How many blocks share one logits row when `rows` rows of `vocab` entries are reduced: enough
/// blocks for ~4 per multiprocessor, but at least 4096 vocabulary entries per block.
inline int vocab_splits(long long rows, int vocab) {
  if (rows <= 0) return 1;
  long long splits = (4LL * detail::multiprocessors() + rows - 1) / rows;
  const long long most = vocab / 4096 > 1 ? vocab / 4096 : 1;
  if (splits > most) splits = most;
  return splits < 1 ? 1 : static_cast<int>(splits);
}

/// Entries per split of a row (a multiple of 4 with Vec4), as block_top_key takes them.
inline int split_chunk(int vocab, int splits, bool vec4) {
  const int chunk = (vocab + splits - 1) / splits;
  return vec4 ? (chunk + 3) / 4 * 4 : chunk;
}

inline int greedy_splits(const GreedyVerifyBatch& b) {
  return vocab_splits(static_cast<long long>(b.batch) * b.max_nodes, b.vocab_size);
}

namespace detail {
/// Bytes of the per-split keys when each row is split `splits` ways.
inline std::size_t greedy_partial_bytes(const GreedyVerifyBatch& b, int splits) {
  return sizeof(std::uint64_t) * static_cast<std::size_t>(b.batch) * b.max_nodes * splits;
}
}  // namespace detail

// The launchers (declared in launchers.hpp).
#if SPECDEC_CUDA_KERNELS_DEFINED
SPECDEC_CUDA_LAUNCHER std::size_t greedy_verify_workspace_bytes(const GreedyVerifyBatch& b) {
  if (b.batch <= 0 || b.max_nodes <= 0) return 0;
  return detail::greedy_partial_bytes(b, greedy_splits(b));
}

SPECDEC_CUDA_LAUNCHER cudaError_t greedy_verify(const GreedyVerifyBatch& b, void* workspace, std::size_t workspace_bytes,
                                                cudaStream_t stream) {
  if (b.batch <= 0) return cudaSuccess;
  if (b.max_nodes < 1 || b.max_nodes > 65535 || b.batch > 65535 || b.vocab_size < 1 || b.row_stride < b.vocab_size)
    return cudaErrorInvalidValue;
  if (static_cast<std::size_t>(b.max_nodes) * sizeof(token_t) > 48 * 1024) return cudaErrorInvalidValue;
  const int splits = greedy_splits(b);  // asks the device once per launch
  if (workspace == nullptr || workspace_bytes < detail::greedy_partial_bytes(b, splits)) return cudaErrorInvalidValue;
  auto* partial = static_cast<std::uint64_t*>(workspace);
  const bool vec4 = b.row_stride % 4 == 0 && reinterpret_cast<std::uintptr_t>(b.logits) % 16 == 0;
  const dim3 grid(splits, b.max_nodes, b.batch);
  const int chunk = split_chunk(b.vocab_size, splits, vec4);
  if (vec4) row_argmax_kernel<true><<<grid, detail::argmax_threads, 0, stream>>>(b, splits, chunk, partial);
  else row_argmax_kernel<false><<<grid, detail::argmax_threads, 0, stream>>>(b, splits, chunk, partial);
  greedy_walk_kernel<<<b.batch, detail::walk_threads, sizeof(token_t) * b.max_nodes, stream>>>(b, splits, partial);
  return cudaGetLastError();
}
#endif

}  // namespace specdec::kernels
