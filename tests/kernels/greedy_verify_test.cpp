#include <catch2/catch.hpp>

#include <limits>
#include <random>
#include <vector>

#include <specdec/backend.hpp>

#include "kernels/device_launch.hpp"
#include "kernels/random_batches.hpp"

using namespace specdec;

namespace {

void require_same_on_both(testing::GreedyData host) {
  testing::GreedyData device = host;
  REQUIRE(backend::greedy_verify(backend::host{}, host.batch()) == backend::status::ok);
  REQUIRE(testing::run_on_device(device.batch()) == backend::status::ok);
  CHECK(device.status == host.status);
  CHECK(device.argmax == host.argmax);
  CHECK(device.length == host.length);
  CHECK(device.next_token == host.next_token);
  CHECK(device.path == host.path);
}

}  // namespace

TEST_CASE("GPU greedy verification equals the host backend (ties, NaN, signed zeros, infinities)", "[gpu][verify]") {
  std::mt19937_64 rng(6);
  // Vocabularies: small, odd (scalar path: rows not 16-byte aligned), Llama-3 sized (split rows).
  for (int vocab : {7, 1000, 4093, 32000, 128256}) {
    for (int batch : {1, 8, 64}) {
      const int max_size = vocab >= 32000 ? 16 : 64;
      require_same_on_both(testing::random_greedy_batch(rng, batch, max_size, vocab, vocab, true));
    }
  }
}

TEST_CASE("GPU greedy verification with padded rows reads only vocab_size entries", "[gpu][verify]") {
  std::mt19937_64 rng(7);
  require_same_on_both(testing::random_greedy_batch(rng, 4, 20, 1001, 1004, true));  // vec4 path, ragged tail
  require_same_on_both(testing::random_greedy_batch(rng, 4, 20, 1001, 1003, true));  // scalar path
}

TEST_CASE("GPU greedy verification: a NaN row on the path stops the walk as on the host", "[gpu][verify]") {
  testing::GreedyData d;
  d.max_nodes = 4;
  d.vocab = 3;
  d.row_stride = 3;
  d.offsets = {0, 3};
  d.token = {0, 1, 2};
  d.first_child = {1, 2, -1};
  d.next_sibling = {-1, -1, -1};
  d.build_status = {core::tree_status::ok};
  d.logits = {0, 9, 0, 1, std::numeric_limits<float>::quiet_NaN(), 0, 0, 0, 9};
  REQUIRE(testing::run_on_device(d.batch()) == backend::status::ok);
  CHECK(d.status[0] == core::verify_status::nan_logits);
  CHECK(d.length[0] == 2);
  CHECK(d.argmax[1] == -1);
  CHECK(d.argmax[2] == 2);
}

TEST_CASE("GPU greedy verification of empty drafts (root-only trees) commits the root's argmax", "[gpu][verify]") {
  testing::GreedyData d;
  d.max_nodes = 1;
  d.vocab = 5000;
  d.row_stride = 5000;
  d.offsets = {0, 1, 2, 3};
  d.token = {4, 4, 4};
  d.first_child = {-1, -1, -1};
  d.next_sibling = {-1, -1, -1};
  d.build_status.assign(3, core::tree_status::ok);
  d.logits.assign(3 * 5000, 0.0f);
  d.logits[0 * 5000 + 4999] = 1.0f;  // the last entry of the row
  d.logits[1 * 5000 + 0] = -1.0f;    // all zeros but one: ties go to token 1
  d.logits[2 * 5000 + 17] = std::numeric_limits<float>::quiet_NaN();
  REQUIRE(testing::run_on_device(d.batch()) == backend::status::ok);
  CHECK(d.length == std::vector<int>{1, 1, 1});
  CHECK(d.path == std::vector<node_t>{0, 0, 0});
  CHECK(d.next_token[0] == 4999);
  CHECK(d.next_token[1] == 1);
  CHECK(d.next_token[2] == -1);
  CHECK(d.status[2] == core::verify_status::nan_logits);
}
