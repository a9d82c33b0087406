#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include <specdec/core/tree.hpp>
#include <specdec/core/tree_parallel.hpp>

#include "kernels/random_batches.hpp"
#include "support/random_tree.hpp"

using namespace specdec;

TEST_CASE("per-node layout equals build_tree_layout on random trees", "[core][tree]") {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 300; ++trial) {
    const int n = testing::uniform(rng, 1, 200);
    const int words = core::mask_words(n) + static_cast<int>(rng() % 2);  // also rows wider than needed
    const auto t = testing::random_tree(rng, n, 50);
    std::vector<int> depth(n);
    std::vector<std::uint32_t> mask(static_cast<std::size_t>(n) * words);
    std::vector<node_t> fc(n), ns(n);
    core::build_tree_layout(t.parent.data(), n, words, depth.data(), mask.data(), fc.data(), ns.data());
    for (int i = 0; i < n; ++i) {
      std::vector<std::uint32_t> row(words, 0xdeadbeefu);
      CHECK(core::ancestor_row(t.parent.data(), i, words, row.data()) == depth[i]);
      CHECK(std::equal(row.begin(), row.end(), mask.begin() + static_cast<long>(i) * words));
      node_t child = -7, sibling = -7;
      core::child_links(t.parent.data(), n, i, &child, &sibling);
      CHECK(child == fc[i]);
      CHECK(sibling == ns[i]);
    }
  }
}

TEST_CASE("a chain fills every word of a wide row", "[core][tree]") {
  const int n = 100, words = 4;
  std::vector<node_t> parent(n);
  for (int i = 0; i < n; ++i) parent[i] = i - 1;
  std::vector<std::uint32_t> row(words);
  CHECK(core::ancestor_row(parent.data(), 99, words, row.data()) == 99);
  CHECK(row[0] == 0xffffffffu);
  CHECK(row[1] == 0xffffffffu);
  CHECK(row[2] == 0xffffffffu);
  CHECK(row[3] == 0xfu);
  CHECK(core::ancestor_row(parent.data(), 31, words, row.data()) == 31);
  CHECK(row[0] == 0xffffffffu);
  CHECK(row[1] == 0u);
  CHECK(row[3] == 0u);
}

TEST_CASE("the first node_fault is validate_tree's status, on malformed trees", "[core][tree]") {
  std::mt19937_64 rng(12);
  int faulty = 0;
  for (int trial = 0; trial < 2000; ++trial) {
    const int n = testing::uniform(rng, 1, 40);
    auto t = testing::random_tree(rng, n, 30);
    const int corruptions = testing::uniform(rng, 0, 3);
    for (int c = 0; c < corruptions; ++c) testing::corrupt(rng, t.parent, t.token, 30);
    const core::tree_status expected = core::validate_tree(t.parent.data(), t.token.data(), n, 30, 64, nullptr);
    core::tree_status first = core::tree_status::ok;
    for (int i = 0; i < n && first == core::tree_status::ok; ++i)
      first = core::node_fault(t.parent.data(), t.token.data(), i, 30);
    REQUIRE(first == expected);
    faulty += expected != core::tree_status::ok;
    // Walking a malformed tree stays bounded and in the row (cycles and forward edges included),
    // as long as every parent is a node index or negative.
    bool parents_in_range = true;
    for (int i = 0; i < n; ++i) parents_in_range = parents_in_range && t.parent[i] < n;
    if (parents_in_range) {
      const int words = core::mask_words(n);
      std::vector<std::uint32_t> row(words);
      for (int i = 0; i < n; ++i) CHECK(core::ancestor_row(t.parent.data(), i, words, row.data()) <= i);
    }
  }
  CHECK(faulty > 500);  // the generator does produce faults
}
