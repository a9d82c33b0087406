#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include <specdec/core/tree.hpp>

#include "support/random_tree.hpp"

using namespace specdec;

namespace {

struct Layout {
  std::vector<int> depth;
  std::vector<std::uint32_t> mask;
  std::vector<node_t> first_child, next_sibling;
  int words = 0, max_depth = 0;
};

Layout lay_out(const std::vector<node_t>& parent) {
  Layout l;
  const int n = static_cast<int>(parent.size());
  l.words = core::mask_words(n);
  l.depth.resize(n);
  l.mask.resize(static_cast<std::size_t>(n) * l.words);
  l.first_child.resize(n);
  l.next_sibling.resize(n);
  l.max_depth = core::build_tree_layout(parent.data(), n, l.words, l.depth.data(), l.mask.data(),
                                        l.first_child.data(), l.next_sibling.data());
  return l;
}

}  // namespace

TEST_CASE("layout of a hand-built tree", "[core][tree]") {
  //        0
  //      / | \      .
  //     1  2  5
  //    / \    |
  //   3   4   6
  const std::vector<node_t> parent{-1, 0, 0, 1, 1, 0, 5};
  const Layout l = lay_out(parent);
  CHECK(l.depth == std::vector<int>{0, 1, 1, 2, 2, 1, 2});
  CHECK(l.max_depth == 2);
  REQUIRE(l.words == 1);
  // Row i: i and its ancestors.
  CHECK(l.mask == std::vector<std::uint32_t>{0b1, 0b11, 0b101, 0b1011, 0b10011, 0b100001, 0b1100001});
  CHECK(l.first_child == std::vector<node_t>{1, 3, -1, -1, -1, 6, -1});
  CHECK(l.next_sibling == std::vector<node_t>{-1, 2, 5, 4, -1, -1, -1});
  CHECK(core::is_ancestor(l.mask.data(), l.words, 1, 4));
  CHECK_FALSE(core::is_ancestor(l.mask.data(), l.words, 2, 4));
  CHECK(core::is_ancestor(l.mask.data(), l.words, 4, 4));
}

TEST_CASE("layout of a chain longer than one mask word", "[core][tree]") {
  std::vector<node_t> parent{-1};
  for (int i = 1; i < 70; ++i) parent.push_back(i - 1);
  const Layout l = lay_out(parent);
  REQUIRE(l.words == 3);
  CHECK(l.max_depth == 69);
  for (int i = 0; i < 70; ++i)
    for (int j = 0; j < 70; ++j) CHECK(core::is_ancestor(l.mask.data(), l.words, j, i) == (j <= i));
}

TEST_CASE("layout of random trees matches parent walks", "[core][tree]") {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 130);
    const auto t = testing::random_tree(rng, n, 100);
    const Layout l = lay_out(t.parent);
    for (int i = 0; i < n; ++i) {
      int d = 0;
      std::vector<bool> anc(n, false);
      for (int a = i; a >= 0; a = t.parent[a], ++d) anc[a] = true;
      REQUIRE(l.depth[i] == d - 1);
      for (int j = 0; j < n; ++j) REQUIRE(core::is_ancestor(l.mask.data(), l.words, j, i) == anc[j]);
      // child lists: exactly the nodes whose parent is i, increasing
      std::vector<node_t> expect, got;
      for (int j = i + 1; j < n; ++j)
        if (t.parent[j] == i) expect.push_back(j);
      for (node_t c = l.first_child[i]; c >= 0; c = l.next_sibling[c]) got.push_back(c);
      REQUIRE(got == expect);
    }
  }
}

TEST_CASE("validate_tree rejects malformed trees and names the node", "[core][tree]") {
  const std::vector<token_t> tokens{1, 2, 3, 4};
  int bad = 99;
  SECTION("ok") {
    const std::vector<node_t> p{-1, 0, 1, 1};
    CHECK(core::validate_tree(p.data(), tokens.data(), 4, 10, 4, &bad) == core::tree_status::ok);
    CHECK(bad == -1);
  }
  SECTION("empty") { CHECK(core::validate_tree(nullptr, nullptr, 0, 10, 4, &bad) == core::tree_status::empty); }
  SECTION("over capacity") {
    const std::vector<node_t> p{-1, 0, 1, 1};
    CHECK(core::validate_tree(p.data(), tokens.data(), 4, 10, 3, &bad) == core::tree_status::over_capacity);
  }
  SECTION("root with a parent") {
    const std::vector<node_t> p{0, 0, 1, 1};
    CHECK(core::validate_tree(p.data(), tokens.data(), 4, 10, 4, &bad) == core::tree_status::root_has_parent);
    CHECK(bad == 0);
  }
  SECTION("forward parent") {
    const std::vector<node_t> p{-1, 0, 3, 1};
    CHECK(core::validate_tree(p.data(), tokens.data(), 4, 10, 4, &bad) == core::tree_status::parent_not_before_child);
    CHECK(bad == 2);
  }
  SECTION("self parent (a cycle)") {
    const std::vector<node_t> p{-1, 1, 1, 1};
    CHECK(core::validate_tree(p.data(), tokens.data(), 4, 10, 4, &bad) == core::tree_status::parent_not_before_child);
    CHECK(bad == 1);
  }
  SECTION("negative parent below the root") {
    const std::vector<node_t> p{-1, 0, -1, 1};
    CHECK(core::validate_tree(p.data(), tokens.data(), 4, 10, 4, &bad) == core::tree_status::parent_not_before_child);
    CHECK(bad == 2);
  }
  SECTION("token out of vocabulary") {
    const std::vector<node_t> p{-1, 0, 1, 1};
    CHECK(core::validate_tree(p.data(), tokens.data(), 4, 4, 4, &bad) == core::tree_status::token_out_of_vocabulary);
    CHECK(bad == 3);
    const std::vector<token_t> negative{1, -2, 3, 0};
    CHECK(core::validate_tree(p.data(), negative.data(), 4, 10, 4, &bad) == core::tree_status::token_out_of_vocabulary);
    CHECK(bad == 1);
  }
}

TEST_CASE("argmax_row: first maximum wins, NaN is refused", "[core]") {
  const std::vector<float> row{1.0f, 3.0f, -2.0f, 3.0f};
  CHECK(core::argmax_row(row.data(), 4) == 1);
  const std::vector<float> nan_row{1.0f, NAN, 2.0f};
  CHECK(core::argmax_row(nan_row.data(), 3) == -1);
  const std::vector<float> inf_row{-INFINITY, -INFINITY};
  CHECK(core::argmax_row(inf_row.data(), 2) == 0);
}

TEST_CASE("greedy_walk follows the argmax and stops at the first mismatch", "[core][verify]") {
  //  0(root) -> 1:'5' -> 3:'7' ; 0 -> 2:'6' ; 1 -> 4:'8'
  const std::vector<node_t> parent{-1, 0, 0, 1, 1};
  const std::vector<token_t> token{0, 5, 6, 7, 8};
  const Layout l = lay_out(parent);
  std::vector<node_t> path(5);
  token_t next = -1;
  // Target wants 5 after root, 8 after node 1, 9 after node 4.
  auto argmax = [](node_t n) { return n == 0 ? 5 : n == 1 ? 8 : n == 4 ? 9 : 0; };
  const int len = core::greedy_walk(token.data(), l.first_child.data(), l.next_sibling.data(), argmax,
                                    path.data(), &next);
  CHECK(len == 3);
  CHECK(path[1] == 1);
  CHECK(path[2] == 4);
  CHECK(next == 9);
  // All rejected: the root's argmax matches no child.
  const int none = core::greedy_walk(token.data(), l.first_child.data(), l.next_sibling.data(),
                                     [](node_t) { return 42; }, path.data(), &next);
  CHECK(none == 1);
  CHECK(next == 42);
}
