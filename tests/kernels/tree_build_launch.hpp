// Host entry to the tree-build kernel for the GPU tests (implemented in tree_build_launch.cu).
#pragma once

#include <cstdint>
#include <vector>

#include <specdec/core/tree.hpp>

namespace specdec::testing {

struct TreeBuildResult {
  std::vector<int> depth;
  std::vector<std::uint32_t> mask;
  std::vector<node_t> first_child, next_sibling;
  std::vector<int> max_depth;
  std::vector<core::tree_status> status;
};

/// Copies the batch to the device, runs kernels::build_trees, and copies the results back.
TreeBuildResult build_trees_on_device(const std::vector<int>& offsets, const std::vector<node_t>& parent,
                                      const std::vector<token_t>& token, int words, int max_nodes,
                                      int vocab_size);

}  // namespace specdec::testing
