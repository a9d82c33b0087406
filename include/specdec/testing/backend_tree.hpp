// A LaidOutTree copied to a backend's memory: the TreeView a backend target's forward takes
// (arrays in the backend's memory, sizes on the host), for tests and benchmarks that drive such a
// target directly. testing/device_tree.cuh names its CUDA form DeviceTree.
#pragma once

#include <cstddef>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include <specdec/backend.hpp>
#include <specdec/core/tree.hpp>
#include <specdec/testing/laid_out_tree.hpp>

namespace specdec::testing {

template <class Backend>
class BackendTree {
 public:
  /// Throws std::invalid_argument for a tree that is not valid (validate_tree) and
  /// std::runtime_error when a copy fails. Waits for the copies.
  BackendTree(const LaidOutTree& tree, int base_position, Backend tag = {})
      : view_(tree.view(base_position)), depth_(tree.depth), memory_(tag, backend::memory::backend) {
    if (core::validate_tree(tree.parent.data(), tree.token.data(), view_.size, std::numeric_limits<int>::max(),
                            view_.size, nullptr) != core::tree_status::ok)
      throw std::invalid_argument("BackendTree: the tree is not valid (core::validate_tree)");
    std::size_t at = 0;
    const auto place = [&](const auto& values) {
      const std::size_t offset = at;
      at += (values.size() * sizeof(values[0]) + 15) / 16 * 16;
      return offset;
    };
    const std::size_t parent = place(tree.parent), token = place(tree.token), depth = place(tree.depth),
                      mask = place(tree.mask), first_child = place(tree.first_child),
                      next_sibling = place(tree.next_sibling);
    memory_.grow(at);
    const auto upload = [&](const auto& values, std::size_t offset) {
      using T = std::decay_t<decltype(values[0])>;
      check(backend::copy(tag, memory_.data() + offset, values.data(), values.size() * sizeof(T)), tag);
      return reinterpret_cast<const T*>(memory_.data() + offset);
    };
    view_.parent = upload(tree.parent, parent);
    view_.token = upload(tree.token, token);
    view_.depth = upload(tree.depth, depth);
    view_.mask = upload(tree.mask, mask);
    view_.first_child = upload(tree.first_child, first_child);
    view_.next_sibling = upload(tree.next_sibling, next_sibling);
    check(backend::synchronize(tag), tag);  // the host vectors are the caller's
  }
  BackendTree(const BackendTree&) = delete;
  BackendTree& operator=(const BackendTree&) = delete;

  const TreeView& view() const { return view_; }
  /// Node i's depth below the root, read on the host.
  int depth(int i) const { return depth_[static_cast<std::size_t>(i)]; }

 private:
  static void check(backend::status s, const Backend& tag) {
    if (s != backend::status::ok) throw std::runtime_error("BackendTree: a copy failed: " + backend::describe(tag, s));
  }

  TreeView view_;
  std::vector<int> depth_;
  backend::buffer<Backend> memory_;
};

}  // namespace specdec::testing
