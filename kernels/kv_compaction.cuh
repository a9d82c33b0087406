// KV compaction on the GPU: moves each sequence's accepted path (root first) from cache positions
// base + path[k] to base + k, in K and V, for a batch. Why it is safe although sources and
// destinations overlap: see core/kv_compaction.hpp — each block owns a disjoint slice (sequence,
// K or V, layer, kv_head, part of the row), reads every moved entry of its slice into shared
// memory, synchronises, then writes. Results equal core::compact_kv_in_batch (the host's
// sequential move).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include <specdec/core/batch.hpp>
#include <specdec/kernels/launchers.hpp>

namespace specdec::kernels {

using core::KvCompactionBatch;

/// Grid limits: gridDim.z holds K and V of every sequence, gridDim.y every (layer, kv_head).
inline constexpr int max_compaction_batch = 65535 / 2;
inline constexpr long long max_compaction_layer_heads = 65535;

namespace detail {
inline constexpr int compaction_threads = 256;
inline constexpr int compaction_shared_bytes = 32 * 1024;
}  // namespace detail

/// Word is the unit of each copy (16, 4 or 1 bytes; the launcher picks the widest that divides
/// every stride and the row). Each block moves `chunk_words` words of the row of one
/// (sequence, K/V, layer, kv_head).
template <class Word>
__global__ void __launch_bounds__(detail::compaction_threads)
    compact_kv_kernel(KvCompactionBatch b, int chunk_words) {
  extern __shared__ __align__(16) unsigned char s_raw[];
  Word* s_words = reinterpret_cast<Word*>(s_raw);
  __shared__ int s_status;
  __shared__ int s_first_moved;
  const int seq = blockIdx.z >> 1;
  unsigned char* cache = (blockIdx.z & 1) ? b.v_cache : b.k_cache;
  if (cache == nullptr) return;  // uniform over the block
  const int layer = blockIdx.y / b.layout.kv_heads, head = blockIdx.y % b.layout.kv_heads;
  const node_t* path = b.path + static_cast<long long>(seq) * b.max_nodes;
  if (threadIdx.x == 0) {
    const core::compaction_status s = core::validate_compaction_in_batch(b, seq);
    if (blockIdx.x == 0 && blockIdx.y == 0 && (blockIdx.z & 1) == 0) b.status[seq] = s;
    s_status = static_cast<int>(s);
    s_first_moved = s == core::compaction_status::ok ? core::first_moved_entry(path, b.length[seq]) : 0;
  }
  __syncthreads();
  if (s_status != static_cast<int>(core::compaction_status::ok)) return;
  const int row_words = b.layout.row_bytes / static_cast<int>(sizeof(Word));
  const int w0 = blockIdx.x * chunk_words;
  const int words = row_words - w0 < chunk_words ? row_words - w0 : chunk_words;
  const int first = s_first_moved;
  const int moved = b.length[seq] - first;
  const int base = b.base[seq];
  const int sequence = core::layout_sequence(b, seq);
  const int total = moved * words;  // <= max_nodes * chunk_words: fits the shared buffer
  for (int idx = threadIdx.x; idx < total; idx += blockDim.x) {
    const int e = first + idx / words;
    const long long src = core::kv_row_offset(b.layout, sequence, layer, base + path[e], head);
    s_words[idx] = reinterpret_cast<const Word*>(cache + src)[w0 + idx % words];
  }
  __syncthreads();  // every read of the slice happens before any write
  for (int idx = threadIdx.x; idx < total; idx += blockDim.x) {
    const int e = first + idx / words;
    const long long dst = core::kv_row_offset(b.layout, sequence, layer, base + e, head);
    reinterpret_cast<Word*>(cache + dst)[w0 + idx % words] = s_words[idx];
  }
}

namespace detail {
template <class Word>
cudaError_t launch_compaction(const KvCompactionBatch& b, cudaStream_t stream) {
  const int row_words = b.layout.row_bytes / static_cast<int>(sizeof(Word));
  int chunk = compaction_shared_bytes / static_cast<int>(sizeof(Word)) / b.max_nodes;
  if (chunk < 1) return cudaErrorInvalidValue;
  if (chunk > row_words) chunk = row_words;
  const dim3 grid((row_words + chunk - 1) / chunk, b.layout.layers * b.layout.kv_heads, 2 * b.batch);
  const std::size_t shared = sizeof(Word) * static_cast<std::size_t>(chunk) * b.max_nodes;
  compact_kv_kernel<Word><<<grid, compaction_threads, shared, stream>>>(b, chunk);
  return cudaGetLastError();
}

inline bool divides_all(const KvCompactionBatch& b, long long unit) {
  const auto aligned = [unit](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % unit == 0; };
  const core::KvCacheLayout& l = b.layout;
  return l.row_bytes % unit == 0 && l.head_stride % unit == 0 && l.position_stride % unit == 0 &&
         l.layer_stride % unit == 0 && l.sequence_stride % unit == 0 && aligned(b.k_cache) && aligned(b.v_cache);
}
}  // namespace detail

// The launcher (declared in launchers.hpp).
#if SPECDEC_CUDA_KERNELS_DEFINED
SPECDEC_CUDA_LAUNCHER cudaError_t compact_kv(const KvCompactionBatch& b, cudaStream_t stream) {
  if (b.batch <= 0) return cudaSuccess;
  const core::KvCacheLayout& l = b.layout;
  if (b.max_nodes < 1 || l.layers < 1 || l.kv_heads < 1 || l.row_bytes < 1 || b.k_cache == nullptr ||
      static_cast<long long>(l.layers) * l.kv_heads > max_compaction_layer_heads || b.batch > max_compaction_batch)
    return cudaErrorInvalidValue;
  if (detail::divides_all(b, 16)) return detail::launch_compaction<uint4>(b, stream);
  if (detail::divides_all(b, 4)) return detail::launch_compaction<unsigned int>(b, stream);
  return detail::launch_compaction<unsigned char>(b, stream);
}
#endif

}  // namespace specdec::kernels
