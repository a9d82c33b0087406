#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include <specdec/backend.hpp>

#include "kernels/device_launch.hpp"
#include "kernels/random_batches.hpp"

using namespace specdec;

namespace {

struct Step {
  testing::TreeBatchData trees;
  testing::GreedyData verify;
  testing::KvData kv;
};

// Random trees (some malformed), logits that accept long paths, and a cache with room for them.
Step random_step(std::mt19937_64& rng, int batch, int max_size, int vocab) {
  const int max_nodes = max_size + 2;
  Step s;
  s.trees = testing::random_tree_batch(rng, batch, max_size, max_nodes, core::mask_words(max_nodes), vocab, true);
  // The logits are drawn for the host's layout (the device's must equal it anyway).
  testing::TreeBatchData laid_out = s.trees;
  REQUIRE(backend::build_trees(backend::host{}, laid_out.batch()) == backend::status::ok);
  s.verify.max_nodes = max_nodes;
  s.verify.vocab = vocab;
  s.verify.row_stride = vocab;
  s.verify.logits = testing::random_logits(rng, laid_out, vocab, vocab);
  s.kv.max_nodes = max_nodes;
  s.kv.layout = core::kv_layout(2, 4 * max_nodes, 2, 8, 2);
  s.kv.k_cache.resize(static_cast<std::size_t>(batch) * s.kv.layout.sequence_stride);
  s.kv.v_cache.resize(s.kv.k_cache.size());
  for (auto& x : s.kv.k_cache) x = static_cast<unsigned char>(rng());
  for (auto& x : s.kv.v_cache) x = static_cast<unsigned char>(rng());
  for (int b = 0; b < batch; ++b) s.kv.base.push_back(testing::uniform(rng, 0, 3 * max_nodes));
  return s;
}

// The host chain: each stage reads the previous stage's host outputs.
void run_on_host(Step& s) {
  REQUIRE(backend::build_trees(backend::host{}, s.trees.batch()) == backend::status::ok);
  s.verify.offsets = s.trees.offsets;
  s.verify.token = s.trees.token;
  s.verify.first_child = s.trees.first_child;
  s.verify.next_sibling = s.trees.next_sibling;
  s.verify.build_status = s.trees.status;
  REQUIRE(backend::greedy_verify(backend::host{}, s.verify.batch()) == backend::status::ok);
  s.kv.path = s.verify.path;
  s.kv.length = s.verify.length;
  REQUIRE(backend::compact_kv(backend::host{}, s.kv.batch()) == backend::status::ok);
}

}  // namespace

TEST_CASE("a whole step chained on the device (no host sync between kernels) equals the host chain", "[gpu][step]") {
  std::mt19937_64 rng(12);
  // in_graph: the same step captured into a CUDA graph (global capture mode) and launched.
  for (bool in_graph : {false, true}) {
    for (int batch : {1, 8, 64}) {
      for (int vocab : {50, 32000}) {
        INFO("batch " << batch << ", vocab " << vocab << (in_graph ? ", in a CUDA graph" : ""));
        Step host = random_step(rng, batch, 64, vocab);
        Step device = host;
        run_on_host(host);
        // The device's verifier and compaction read the build's and the verifier's device outputs;
        // give the descriptors the host offsets only for sizing the copies.
        device.verify.offsets = device.trees.offsets;
        device.verify.token = device.trees.token;
        device.verify.first_child.assign(device.trees.token.size(), -7);
        device.verify.next_sibling.assign(device.trees.token.size(), -7);
        device.verify.build_status.assign(device.trees.size(), core::tree_status::ok);
        device.kv.path.assign(static_cast<std::size_t>(batch) * device.kv.max_nodes, 0);
        device.kv.length.assign(batch, 0);
        REQUIRE(testing::run_step_on_device(device.trees.batch(), device.verify.batch(), device.kv.batch(), in_graph) ==
                backend::status::ok);
        CHECK(device.trees.status == host.trees.status);
        CHECK(device.trees.mask == host.trees.mask);
        CHECK(device.verify.status == host.verify.status);
        CHECK(device.verify.path == host.verify.path);
        CHECK(device.verify.length == host.verify.length);
        CHECK(device.verify.next_token == host.verify.next_token);
        CHECK(device.kv.status == host.kv.status);
        CHECK(device.kv.k_cache == host.kv.k_cache);
        CHECK(device.kv.v_cache == host.kv.v_cache);
      }
    }
  }
}
