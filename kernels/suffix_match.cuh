// Suffix matching on the GPU (the CASD occurrence-selection rule of core/suffix_match.hpp) for a
// batch of contexts, in two launches and no host synchronisation:
//  1. scan: a grid of blocks per sequence; each thread computes m(p) for its positions (the query,
//     the context's last max_match tokens, sits in shared memory), keeps its best candidates as
//     64-bit keys (m << 32 | p: a larger key is a longer match, then a more recent one, exactly
//     core::ranks_before), and cub::BlockReduce merges the threads' top lists into one per block;
//     the lists hold K = k rounded up to a power of two keys (K is a template argument: merging
//     lists of suffix_max_k keys when k is 2 made the two launches 2-2.7x slower on an H200);
//  2. select: one block per sequence merges its blocks' lists (cub::BlockReduce again), writes the
//     k best occurrences and gathers their continuations into the draft slots.
// Results equal core::suffix_match_in_batch (core::find_suffix_matches + continuation_end).
#pragma once

#include <cuda_runtime.h>

#include <cub/block/block_reduce.cuh>

#include <specdec/core/batch.hpp>
#include <specdec/core/reduction_keys.hpp>
#include <specdec/kernels/launchers.hpp>

namespace specdec::kernels {

using core::SuffixMatchBatch;

/// Compile-time limits of the kernel: L (max_match) and k.
inline constexpr int suffix_max_match = 16;
inline constexpr int suffix_max_k = 8;

namespace detail {

inline constexpr int scan_threads = 256;
inline constexpr int scan_items = 16;  ///< positions per thread per block
inline constexpr int scan_tile = scan_threads * scan_items;
inline constexpr int select_threads = 128;

}  // namespace detail

template <class Batch, int K>
__global__ void __launch_bounds__(detail::scan_threads)
    suffix_scan_kernel(Batch b, int blocks_per_sequence, core::TopKeys<K>* partial) {
  using Top = core::TopKeys<K>;
  using BlockReduce = cub::BlockReduce<Top, detail::scan_threads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  __shared__ token_t s_query[suffix_max_match];
  const int seq = blockIdx.y;
  const int begin = b.offsets[seq];
  const int n = b.offsets[seq + 1] - begin;
  const token_t* c = b.context + begin;
  const int search = core::search_limit_of(b, seq, n);
  const int last = (search < n ? search : n) - 2;  // occurrences p in [0, last]
  const int max_match = b.max_match < suffix_max_match ? b.max_match : suffix_max_match;
  const int min_match = b.min_match < 1 ? 1 : b.min_match;
  // s_query[j] = c[n - 1 - j]: the query read backwards from the root.
  const int j = static_cast<int>(threadIdx.x);
  if (j < max_match && j < n) s_query[j] = c[n - 1 - j];
  __syncthreads();

  Top top = Top::none();
  const int tile = blockIdx.x * detail::scan_tile;
  if (b.k > 0 && max_match > 0 && tile <= last) {
    token_t first[detail::scan_items];
#pragma unroll
    for (int it = 0; it < detail::scan_items; ++it) {  // all loads in flight before the compares
      const int p = tile + it * detail::scan_threads + threadIdx.x;
      first[it] = p <= last ? c[p] : 0;
    }
    const token_t root = s_query[0];
#pragma unroll
    for (int it = 0; it < detail::scan_items; ++it) {
      const int p = tile + it * detail::scan_threads + threadIdx.x;
      if (p > last || first[it] != root) continue;
      const int cap = p + 1 < max_match ? p + 1 : max_match;
      int m = 1;
      while (m < cap && c[p - m] == s_query[m]) ++m;
      if (m >= min_match) top.insert(core::match_key(m, p));
    }
  }
  top = BlockReduce(reduce_storage).Reduce(top, core::MergeTopKeys{});
  if (threadIdx.x == 0) partial[static_cast<long long>(seq) * blocks_per_sequence + blockIdx.x] = top;
}

template <class Batch, int K>
__global__ void __launch_bounds__(detail::select_threads)
    suffix_select_kernel(Batch b, int blocks_per_sequence, const core::TopKeys<K>* partial) {
  using Top = core::TopKeys<K>;
  using BlockReduce = cub::BlockReduce<Top, detail::select_threads>;
  __shared__ typename BlockReduce::TempStorage reduce_storage;
  __shared__ Top s_top;
  const int seq = blockIdx.x;
  const int n = b.offsets[seq + 1] - b.offsets[seq];
  Top top = Top::none();
  const Top* mine = partial + static_cast<long long>(seq) * blocks_per_sequence;
  for (int i = threadIdx.x; i < blocks_per_sequence; i += detail::select_threads)
    top = core::MergeTopKeys{}(top, mine[i]);
  top = BlockReduce(reduce_storage).Reduce(top, core::MergeTopKeys{});
  // A context longer than max_context was not fully scanned: flag it (as the host backend does).
  const bool too_long = n > b.max_context;
  if (threadIdx.x == 0) s_top = too_long ? Top::none() : top;
  __syncthreads();
  if (threadIdx.x == 0) {
    int found = 0;
    for (int j = 0; j < b.k && j < K && s_top.key[j] != 0u; ++j, ++found) {
      b.matches[static_cast<long long>(seq) * b.k + j] = core::match_of(s_top.key[j]);
    }
    b.match_count[seq] = too_long ? -1 : found;
  }
  // Gather the continuations: thread t copies token t of every draft slot (D is small).
  const int search = core::search_limit_of(b, seq, n);
  const token_t* c = b.context + b.offsets[seq];
  for (int j = 0; j < b.k; ++j) {
    const long long slot = static_cast<long long>(seq) * b.k + j;
    const bool used = j < K && s_top.key[j] != 0u;
    const int p = used ? core::match_of(s_top.key[j]).position : 0;
    const int length = used ? core::continuation_end(p, b.depth, n, search) - (p + 1) : 0;
    for (int t = threadIdx.x; t < length; t += detail::select_threads) b.drafts[slot * b.depth + t] = c[p + 1 + t];
    if (threadIdx.x == 0) b.draft_length[slot] = length > 0 ? length : 0;
  }
}

/// Blocks of the scan per sequence for contexts of at most max_context tokens.
inline int suffix_scan_blocks(const SuffixMatchBatch& b) {
  const int positions = b.max_context > 1 ? b.max_context : 1;
  return (positions + detail::scan_tile - 1) / detail::scan_tile;
}

namespace detail {

/// The two launches with top lists of K keys (k <= K).
template <int K>
void launch_suffix_match(const SuffixMatchBatch& b, int blocks, void* workspace, cudaStream_t stream) {
  auto* partial = static_cast<core::TopKeys<K>*>(workspace);
  suffix_scan_kernel<SuffixMatchBatch, K><<<dim3(blocks, b.batch), scan_threads, 0, stream>>>(b, blocks, partial);
  suffix_select_kernel<SuffixMatchBatch, K><<<b.batch, select_threads, 0, stream>>>(b, blocks, partial);
}

}  // namespace detail

// The launchers (declared in launchers.hpp).
#if SPECDEC_CUDA_KERNELS_DEFINED
SPECDEC_CUDA_LAUNCHER std::size_t suffix_match_workspace_bytes(const SuffixMatchBatch& b) {
  return sizeof(core::TopKeys<suffix_max_k>) * static_cast<std::size_t>(b.batch > 0 ? b.batch : 0) * suffix_scan_blocks(b);
}

SPECDEC_CUDA_LAUNCHER cudaError_t suffix_match(const SuffixMatchBatch& b, void* workspace, std::size_t workspace_bytes,
                                               cudaStream_t stream) {
  if (b.batch <= 0) return cudaSuccess;
  if (b.max_match > suffix_max_match || b.k > suffix_max_k || b.batch > 65535) return cudaErrorInvalidValue;
  if (workspace_bytes < suffix_match_workspace_bytes(b) || workspace == nullptr) return cudaErrorInvalidValue;
  static_assert(suffix_max_k == 8, "suffix_match dispatches k to lists of 1, 2, 4 or 8 keys");
  const int blocks = suffix_scan_blocks(b);
  if (b.k <= 1) detail::launch_suffix_match<1>(b, blocks, workspace, stream);
  else if (b.k <= 2) detail::launch_suffix_match<2>(b, blocks, workspace, stream);
  else if (b.k <= 4) detail::launch_suffix_match<4>(b, blocks, workspace, stream);
  else detail::launch_suffix_match<8>(b, blocks, workspace, stream);
  return cudaGetLastError();
}
#endif

}  // namespace specdec::kernels
