#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include <specdec/backend.hpp>

#include "kernels/device_launch.hpp"
#include "kernels/random_batches.hpp"

using namespace specdec;

namespace {

// Runs both backends on the same input and requires identical outputs (untouched entries included).
void require_same_on_both(testing::TreeBatchData host) {
  testing::TreeBatchData device = host;
  REQUIRE(backend::build_trees(backend::host{}, host.batch()) == backend::status::ok);
  REQUIRE(testing::run_on_device(device.batch()) == backend::status::ok);
  CHECK(device.status == host.status);
  CHECK(device.max_depth == host.max_depth);
  CHECK(device.depth == host.depth);
  CHECK(device.mask == host.mask);
  CHECK(device.first_child == host.first_child);
  CHECK(device.next_sibling == host.next_sibling);
  CHECK(device.position == host.position);
  CHECK(device.sequence == host.sequence);
}

}  // namespace

TEST_CASE("GPU tree build equals the host backend on random batches", "[gpu][tree]") {
  std::mt19937_64 rng(3);
  for (int batch : {1, 8, 64}) {
    for (int max_nodes : {8, 32, 64, 96, 300}) {
      const int words = core::mask_words(max_nodes) + static_cast<int>(rng() % 2);
      require_same_on_both(testing::random_tree_batch(rng, batch, max_nodes, max_nodes, words, 1000, false));
    }
  }
}

TEST_CASE("GPU tree build flags malformed, empty and oversized trees like the host", "[gpu][tree]") {
  std::mt19937_64 rng(4);
  for (int trial = 0; trial < 20; ++trial)
    require_same_on_both(testing::random_tree_batch(rng, 64, 64, 64, 2, 500, true));
}

TEST_CASE("GPU tree build: a cycle, a bad token, and a good tree in one batch", "[gpu][tree]") {
  testing::TreeBatchData d;
  d.words = 1;
  d.max_nodes = 32;
  d.vocab = 10;
  d.add({-1, 1, 0}, {1, 2, 3});  // node 1 is its own parent
  d.add({-1, 0}, {1, 2});
  d.add({-1, 0}, {1, 99});  // token outside the vocabulary
  const core::TreeBatch b = d.batch();
  REQUIRE(testing::run_on_device(b) == backend::status::ok);
  CHECK(d.status[0] == core::tree_status::parent_not_before_child);
  CHECK(d.status[1] == core::tree_status::ok);
  CHECK(d.status[2] == core::tree_status::token_out_of_vocabulary);
  CHECK(d.depth[4] == 1);
  CHECK(d.mask[4] == 0x3u);
}

TEST_CASE("GPU tree build handles an empty batch and a tree bigger than a block", "[gpu][tree]") {
  testing::TreeBatchData empty;
  REQUIRE(testing::run_on_device(empty.batch()) == backend::status::ok);
  std::mt19937_64 rng(5);
  require_same_on_both(testing::random_tree_batch(rng, 3, 1000, 1000, core::mask_words(1000), 50, false));
}

TEST_CASE("GPU tree build at the node limit, and with a limit set by the mask words", "[gpu][tree]") {
  std::mt19937_64 rng(6);
  // The largest trees a block takes: its shared copy of the parents fills the 48 KB a launch may
  // use without opting in.
  require_same_on_both(testing::random_tree_batch(rng, 2, backend::max_tree_nodes, backend::max_tree_nodes,
                                                  core::mask_words(backend::max_tree_nodes), 1000, false));
  // words < mask_words(max_nodes): the limit is 32 * words nodes, and bigger trees are over capacity.
  require_same_on_both(testing::random_tree_batch(rng, 16, 100, 100, 2, 50, true));
}
