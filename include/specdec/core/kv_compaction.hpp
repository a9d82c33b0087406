// KV-cache compaction after verification: the target's forward wrote tree node i's K/V at cache
// position base + i; after acceptance only the accepted path (root first) must stay, at the
// contiguous positions base + 0, base + 1, ... . Index math and a sequential in-place move shared
// by the host backend and the CUDA kernel. No allocation, no throw.
//
// Why moving in place is safe. The path is a chain of a topological tree that starts at the
// root, so path[0] == 0 and path is strictly increasing; hence path[k] >= k for every k and entry
// k moves from source position base + path[k] to destination base + k <= source.
//  - Sequential, k increasing (compact_kv_rows): step k writes position base + k. Every later
//    step j > k reads base + path[j] >= base + j > base + k, so no position is overwritten before
//    it is read. (Decreasing order would NOT be safe: path = {0, 2, 3} moves 3 -> 2 before 2 -> 1.)
//  - In parallel (the kernel): entry j may read the position entry k writes (path[j] == k with
//    j < k), so the kernel reads every moved entry of its slice into shared memory, synchronises
//    the block, then writes. Blocks own disjoint (sequence, layer, kv_head) slices, so no two
//    blocks touch the same bytes.
#pragma once

#include <cstddef>

#include <specdec/config.hpp>

namespace specdec::core {

/// Where one K or V row (the head_dim values of one layer, position and kv_head) lives, in bytes
/// from the cache's base pointer. kv_layout() gives the packed
/// [sequence][layer][position][kv_head][head_dim] layout; set the strides yourself for another
/// order (e.g. [layer][sequence][position][kv_head][head_dim]).
struct KvCacheLayout {
  int layers = 0;
  int kv_heads = 0;
  int max_positions = 0;               ///< positions per sequence
  int row_bytes = 0;                   ///< head_dim * bytes per element
  long long head_stride = 0;           ///< bytes between kv_heads of one position
  long long position_stride = 0;       ///< bytes between positions
  long long layer_stride = 0;          ///< bytes between layers
  long long sequence_stride = 0;       ///< bytes between sequences of the batch
};

/// A target's K and V caches and their layout (what compaction moves rows in).
struct KvCacheView {
  KvCacheLayout layout;
  unsigned char* k = nullptr;
  unsigned char* v = nullptr;  ///< may be null (one tensor, e.g. MLA)
};

/// The packed [sequence][layer][position][kv_head][head_dim] layout.
SPECDEC_HD constexpr KvCacheLayout kv_layout(int layers, int max_positions, int kv_heads, int head_dim,
                                             int element_bytes) {
  KvCacheLayout l;
  l.layers = layers;
  l.kv_heads = kv_heads;
  l.max_positions = max_positions;
  l.row_bytes = head_dim * element_bytes;
  l.head_stride = l.row_bytes;
  l.position_stride = static_cast<long long>(kv_heads) * l.row_bytes;
  l.layer_stride = static_cast<long long>(max_positions) * l.position_stride;
  l.sequence_stride = static_cast<long long>(layers) * l.layer_stride;
  return l;
}

/// Byte offset of the row of (sequence, layer, position, kv_head).
SPECDEC_HD constexpr long long kv_row_offset(const KvCacheLayout& l, int sequence, int layer, int position,
                                             int head) {
  return sequence * l.sequence_stride + layer * l.layer_stride + position * l.position_stride +
         head * l.head_stride;
}

enum class compaction_status : int {
  ok = 0,
  path_not_from_root,   ///< length < 1 or path[0] != 0
  path_not_increasing,  ///< path[k] <= path[k - 1] (not a chain of a topological tree)
  past_the_tree,        ///< path[k] >= tree size
  past_the_cache,       ///< base + path[k] >= max_positions, or base < 0
};

SPECDEC_HD constexpr const char* to_string(compaction_status s) {
  switch (s) {
    case compaction_status::ok: return "ok";
    case compaction_status::path_not_from_root: return "the accepted path must start at the root (node 0)";
    case compaction_status::path_not_increasing: return "the accepted path's nodes must increase";
    case compaction_status::past_the_tree: return "an accepted node is outside the tree";
    case compaction_status::past_the_cache: return "an accepted node's position is outside the KV cache";
  }
  return "unknown compaction status";
}

/// Checks what the in-place move relies on: path[0] == 0, strictly increasing, inside the tree of
/// `tree_size` nodes and inside the cache. Bounded by `length`.
SPECDEC_HD inline compaction_status validate_compaction_path(const node_t* path, int length, int tree_size,
                                                             int base, int max_positions) {
  if (length < 1 || path[0] != 0) return compaction_status::path_not_from_root;
  if (base < 0) return compaction_status::past_the_cache;
  for (int k = 1; k < length; ++k)
    if (path[k] <= path[k - 1]) return compaction_status::path_not_increasing;
  if (path[length - 1] >= tree_size) return compaction_status::past_the_tree;
  if (base + path[length - 1] >= max_positions) return compaction_status::past_the_cache;
  return compaction_status::ok;
}

/// Index of the first path entry that actually moves (path[k] != k); `length` when none does.
/// Entries before it are already in place (path[k] == k for every earlier k).
SPECDEC_HD inline int first_moved_entry(const node_t* path, int length) {
  int k = 0;
  while (k < length && path[k] == k) ++k;
  return k;
}

/// Moves one row of `row_bytes` bytes inside a cache (src >= dst; byte by byte, front to back,
/// which is correct for overlapping rows with src >= dst, though rows of distinct positions never
/// overlap with a valid layout).
SPECDEC_HD inline void move_row(unsigned char* dst, const unsigned char* src, int row_bytes) {
  if (dst == src) return;
  for (int i = 0; i < row_bytes; ++i) dst[i] = src[i];
}

/// Compacts one sequence of one cache (K or V) in place, sequentially in increasing path order
/// (safe: see the header comment). The path must have passed validate_compaction_path.
SPECDEC_HD inline void compact_kv_rows(unsigned char* cache, const KvCacheLayout& l, int sequence, int base,
                                       const node_t* path, int length) {
  for (int k = first_moved_entry(path, length); k < length; ++k) {
    for (int layer = 0; layer < l.layers; ++layer) {
      for (int head = 0; head < l.kv_heads; ++head) {
        move_row(cache + kv_row_offset(l, sequence, layer, base + k, head),
                 cache + kv_row_offset(l, sequence, layer, base + path[k], head), l.row_bytes);
      }
    }
  }
}

}  // namespace specdec::core
