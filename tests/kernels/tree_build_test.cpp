#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include <specdec/core/tree.hpp>

#include "kernels/tree_build_launch.hpp"
#include "support/random_tree.hpp"

using namespace specdec;

TEST_CASE("GPU tree build equals the host core on random batches", "[gpu][tree]") {
  std::mt19937_64 rng(3);
  const int words = core::mask_words(96);
  for (int batch : {1, 8, 64}) {
    std::vector<int> offsets{0};
    std::vector<node_t> parent;
    std::vector<token_t> token;
    for (int b = 0; b < batch; ++b) {
      const auto t = testing::random_tree(rng, 1 + static_cast<int>(rng() % 96), 1000);
      parent.insert(parent.end(), t.parent.begin(), t.parent.end());
      token.insert(token.end(), t.token.begin(), t.token.end());
      offsets.push_back(static_cast<int>(parent.size()));
    }
    const auto gpu = testing::build_trees_on_device(offsets, parent, token, words, 96, 1000);
    for (int b = 0; b < batch; ++b) {
      const int begin = offsets[b], n = offsets[b + 1] - begin;
      const auto status = core::validate_tree(parent.data() + begin, token.data() + begin, n, 1000, 96, nullptr);
      REQUIRE(gpu.status[b] == status);
      if (status != core::tree_status::ok) continue;
      std::vector<int> depth(n);
      std::vector<std::uint32_t> mask(static_cast<std::size_t>(n) * words);
      std::vector<node_t> fc(n), ns(n);
      const int md = core::build_tree_layout(parent.data() + begin, n, words, depth.data(), mask.data(), fc.data(), ns.data());
      CHECK(gpu.max_depth[b] == md);
      CHECK(std::equal(depth.begin(), depth.end(), gpu.depth.begin() + begin));
      CHECK(std::equal(mask.begin(), mask.end(), gpu.mask.begin() + static_cast<long>(begin) * words));
      CHECK(std::equal(fc.begin(), fc.end(), gpu.first_child.begin() + begin));
      CHECK(std::equal(ns.begin(), ns.end(), gpu.next_sibling.begin() + begin));
    }
  }
}

TEST_CASE("GPU tree build flags malformed trees instead of looping", "[gpu][tree]") {
  // tree 0: a cycle (node 1 is its own parent); tree 1: fine; tree 2: token out of vocabulary.
  const std::vector<int> offsets{0, 3, 5, 7};
  const std::vector<node_t> parent{-1, 1, 0, -1, 0, -1, 0};
  const std::vector<token_t> token{1, 2, 3, 1, 2, 1, 99};
  const auto gpu = testing::build_trees_on_device(offsets, parent, token, 1, 32, 10);
  CHECK(gpu.status[0] == core::tree_status::parent_not_before_child);
  CHECK(gpu.status[1] == core::tree_status::ok);
  CHECK(gpu.status[2] == core::tree_status::token_out_of_vocabulary);
  CHECK(gpu.depth[4] == 1);
}
