// KV-cache compaction after a verified step, shared by host targets and CUDA kernels.
//
// During a tree forward, tree node i writes its K/V at cache slot base + i. Once the verifier has
// accepted a path (root first), the path's entries must sit at contiguous positions base,
// base + 1, ... so that the cache holds exactly the committed tokens.
#pragma once

#include <specdec/config.hpp>

namespace specdec::core {

/// Moves, in every one of `layers` blocks of `layer_stride` floats, the row of `row_size` floats at
/// slot base + path[k] to slot base + k, for k = 0 .. length - 1.
///
/// Safe in place because an accepted path is a chain of a topological tree: path[k] is strictly
/// increasing with path[k] >= k, so a destination slot is never after its own source and never
/// the source of a later move (a forward copy, as in memmove with dst <= src). Rows already in
/// place (path[k] == k) are not touched. Returns false, moving nothing, when the path does not
/// start at the root (node 0) or is not strictly increasing.
SPECDEC_HD inline bool compact_kv_path(float* cache, long layer_stride, int layers, int row_size, int base,
                                       const node_t* path, int length) {
  for (int k = 0; k < length; ++k)
    if (k == 0 ? path[0] != 0 : path[k] <= path[k - 1]) return false;
  for (int layer = 0; layer < layers; ++layer) {
    float* block = cache + layer * layer_stride;
    for (int k = 0; k < length; ++k) {
      if (path[k] == k) continue;
      const float* from = block + static_cast<long>(base + path[k]) * row_size;
      float* to = block + static_cast<long>(base + k) * row_size;
      for (int e = 0; e < row_size; ++e) to[e] = from[e];
    }
  }
  return true;
}

}  // namespace specdec::core
