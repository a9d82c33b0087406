// A draft tree with its layout, built without the decoder, as the decoder would hand it to a
// target: for tests that drive a target directly (part of the target conformance kit).
#pragma once

#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include <specdec/core/tree.hpp>
#include <specdec/core/tree_view.hpp>

namespace specdec::testing {

/// A tree with its layout, as the decoder would hand it to the target.
struct LaidOutTree {
  std::vector<node_t> parent;
  std::vector<token_t> token;
  std::vector<int> depth;
  std::vector<std::uint32_t> mask;
  std::vector<node_t> first_child, next_sibling;
  int max_depth = 0;

  LaidOutTree(std::vector<node_t> p, std::vector<token_t> t) : parent(std::move(p)), token(std::move(t)) {
    const int n = static_cast<int>(parent.size());
    const int words = core::mask_words(n);
    depth.resize(parent.size());
    mask.resize(parent.size() * static_cast<std::size_t>(words > 0 ? words : 0));
    first_child.resize(parent.size());
    next_sibling.resize(parent.size());
    max_depth = core::build_tree_layout(parent.data(), n, words, depth.data(), mask.data(), first_child.data(),
                                        next_sibling.data());
  }
  TreeView view(int base_position) const {
    TreeView v;
    v.size = static_cast<int>(parent.size());
    v.words_per_row = core::mask_words(v.size);
    v.base_position = base_position;
    v.max_depth = max_depth;
    v.parent = parent.data();
    v.token = token.data();
    v.depth = depth.data();
    v.mask = mask.data();
    v.first_child = first_child.data();
    v.next_sibling = next_sibling.data();
    return v;
  }
  /// Tokens from the root down to `node`.
  std::vector<token_t> path_tokens(int node) const {
    std::vector<token_t> path;
    for (int k = node; k >= 0; k = parent[k]) path.insert(path.begin(), token[k]);
    return path;
  }
};

/// The plain single-sequence forward of a target: `sequence` fed one token at a time (a root-only
/// tree per position, committed), calling visit(position, output) after each forward.
template <class T, class Visit>
void forward_one_by_one(T& target, const std::vector<token_t>& sequence, Visit&& visit) {
  target.prefill({});
  for (std::size_t i = 0; i < sequence.size(); ++i) {
    const LaidOutTree single({-1}, {sequence[i]});
    const auto& out = target.forward(single.view(static_cast<int>(i)));
    visit(static_cast<int>(i), out);
    const node_t root = 0;
    target.commit(std::span<const node_t>(&root, 1));
  }
}

}  // namespace specdec::testing
