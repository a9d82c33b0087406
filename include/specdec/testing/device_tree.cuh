// A LaidOutTree copied to CUDA device memory: the TreeView a CUDA target's forward takes (arrays
// on the device, sizes on the host), for tests and benchmarks that drive such a target directly.
// Include it in a .cu file.
#pragma once

#include <cstddef>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <specdec/core/tree.hpp>
#include <specdec/testing/laid_out_tree.hpp>

namespace specdec::testing {

class DeviceTree {
 public:
  /// Throws std::invalid_argument for a tree that is not valid (validate_tree) and
  /// std::runtime_error when a CUDA call fails.
  DeviceTree(const LaidOutTree& tree, int base_position) : view_(tree.view(base_position)), depth_(tree.depth) {
    if (core::validate_tree(tree.parent.data(), tree.token.data(), view_.size, std::numeric_limits<int>::max(),
                            view_.size, nullptr) != core::tree_status::ok)
      throw std::invalid_argument("DeviceTree: the tree is not valid (core::validate_tree)");
    view_.parent = upload(tree.parent);
    view_.token = upload(tree.token);
    view_.depth = upload(tree.depth);
    view_.mask = upload(tree.mask);
    view_.first_child = upload(tree.first_child);
    view_.next_sibling = upload(tree.next_sibling);
  }
  DeviceTree(const DeviceTree&) = delete;
  DeviceTree& operator=(const DeviceTree&) = delete;

  const TreeView& view() const { return view_; }
  /// Node i's depth below the root, read on the host.
  int depth(int i) const { return depth_[static_cast<std::size_t>(i)]; }

 private:
  struct Free {
    void operator()(void* p) const { cudaFree(p); }
  };

  template <class T>
  const T* upload(const std::vector<T>& values) {
    void* p = nullptr;
    check(cudaMalloc(&p, values.size() * sizeof(T) + 1), "cudaMalloc");  // + 1: an empty array has an address too
    owned_.emplace_back(p);
    check(cudaMemcpy(p, values.data(), values.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
    return static_cast<const T*>(p);
  }
  static void check(cudaError_t e, const char* what) {
    if (e != cudaSuccess) throw std::runtime_error(std::string("DeviceTree: ") + what + ": " + cudaGetErrorString(e));
  }

  TreeView view_;
  std::vector<int> depth_;
  std::vector<std::unique_ptr<void, Free>> owned_;  // freed with the tree, or when a constructor throws
};

}  // namespace specdec::testing
