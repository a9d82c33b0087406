#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include <specdec/backend.hpp>

#include "kernels/random_batches.hpp"
#include "kernels/random_stochastic.hpp"

using namespace specdec;

TEST_CASE("host backend refuses what the CUDA kernels cannot do, with the same status", "[backend]") {
  testing::SuffixData s;
  s.max_context = 10;
  s.add({1, 2, 1, 2});
  s.max_match = backend::max_suffix_match + 1;
  CHECK(backend::suffix_match(backend::host{}, s.batch()) == backend::status::invalid_argument);
  s.max_match = backend::max_suffix_match;
  s.k = backend::max_suffix_k + 1;
  CHECK(backend::suffix_match(backend::host{}, s.batch()) == backend::status::invalid_argument);
  s.k = backend::max_suffix_k;
  CHECK(backend::suffix_match(backend::host{}, s.batch()) == backend::status::ok);
  CHECK(s.match_count[0] == 1);  // ..., 1, 2 | 1, 2: the occurrence ending at position 1

  testing::TreeBatchData t;
  t.add({-1}, {0});
  t.max_nodes = backend::max_tree_nodes + 1;
  t.words = 1000;
  CHECK(backend::build_trees(backend::host{}, t.batch()) == backend::status::invalid_argument);
  t.max_nodes = 8;
  t.words = 0;
  CHECK(backend::build_trees(backend::host{}, t.batch()) == backend::status::invalid_argument);
  t.words = 1;
  CHECK(backend::build_trees(backend::host{}, t.batch()) == backend::status::ok);
  CHECK(t.status[0] == core::tree_status::ok);

  // Sequences beyond the kernels' grid limit, refused before any array is read.
  core::TreeBatch many_trees = t.batch();
  many_trees.batch = backend::max_batch + 1;
  CHECK(backend::build_trees(backend::host{}, many_trees) == backend::status::invalid_argument);
  core::SuffixMatchBatch many_contexts = s.batch();
  many_contexts.batch = backend::max_batch + 1;
  CHECK(backend::suffix_match(backend::host{}, many_contexts) == backend::status::invalid_argument);
  testing::GreedyData g;
  g.max_nodes = 8;
  g.vocab = g.row_stride = 4;
  g.offsets = {0};
  core::GreedyVerifyBatch many_verified = g.batch();
  CHECK(backend::greedy_verify(backend::host{}, many_verified) == backend::status::ok);  // batch 0
  many_verified.batch = backend::max_batch + 1;
  CHECK(backend::greedy_verify(backend::host{}, many_verified) == backend::status::invalid_argument);
  testing::StochasticData sd;
  sd.max_nodes = 8;
  sd.vocab = 4;
  core::StochasticVerifyBatch many_sampled = sd.batch();
  float work[4] = {};
  many_sampled.work = work;
  const core::SamplingParams sampling{1.0f};
  CHECK(backend::rejection_verify(backend::host{}, many_sampled, sampling) == backend::status::ok);  // batch 0
  many_sampled.batch = backend::max_batch + 1;
  CHECK(backend::rejection_verify(backend::host{}, many_sampled, sampling) == backend::status::invalid_argument);
  testing::KvData kv;
  kv.max_nodes = 4;
  kv.layout = core::kv_layout(2, 40, 2, 3, 4);
  kv.k_cache.resize(kv.layout.sequence_stride);
  core::KvCompactionBatch many_caches = kv.batch();
  CHECK(backend::compact_kv(backend::host{}, many_caches) == backend::status::ok);  // batch 0
  many_caches.batch = backend::max_batch + 1;
  CHECK(backend::compact_kv(backend::host{}, many_caches) == backend::status::invalid_argument);
  core::KvCompactionBatch many_heads = kv.batch();
  many_heads.batch = 1;
  many_heads.layout.layers = 256;
  many_heads.layout.kv_heads = 256;  // 65536 (layer, head) pairs
  CHECK(backend::compact_kv(backend::host{}, many_heads) == backend::status::invalid_argument);

  CHECK(backend::workspace_bytes(backend::host{}, s.batch()) == 0);
  CHECK(std::string(backend::to_string(backend::status::invalid_argument)).find("invalid") != std::string::npos);
}

TEST_CASE("host backend runs a whole step: build, verify, compact", "[backend]") {
  std::mt19937_64 rng(41);
  testing::TreeBatchData t = testing::random_tree_batch(rng, 8, 30, 32, 1, 20, false);
  REQUIRE(backend::build_trees(backend::host{}, t.batch()) == backend::status::ok);

  testing::GreedyData g;
  g.max_nodes = 32;
  g.vocab = 20;
  g.row_stride = 20;
  g.offsets = t.offsets;
  g.token = t.token;
  g.first_child = t.first_child;
  g.next_sibling = t.next_sibling;
  g.build_status = t.status;
  // Logits that accept each node's first child: the path is the chain of first children.
  g.logits.assign(t.token.size() * 20, 0.0f);
  for (std::size_t i = 0; i < t.token.size(); ++i) {
    const int tree = static_cast<int>(std::upper_bound(t.offsets.begin(), t.offsets.end(), static_cast<int>(i)) - t.offsets.begin()) - 1;
    const node_t child = t.first_child[i];
    g.logits[i * 20 + (child >= 0 ? t.token[t.offsets[tree] + child] : 19)] = 1.0f;
  }
  REQUIRE(backend::greedy_verify(backend::host{}, g.batch()) == backend::status::ok);
  for (int b = 0; b < g.size(); ++b) {
    REQUIRE(g.status[b] == core::verify_status::ok);
    node_t node = 0;
    int k = 0;
    for (; node >= 0; node = t.first_child[t.offsets[b] + node]) CHECK(g.path[b * 32 + k++] == node);
    CHECK(g.length[b] == k);
  }

  testing::KvData kv;
  kv.max_nodes = 32;
  kv.layout = core::kv_layout(2, 40, 2, 3, 4);
  kv.k_cache.resize(8 * kv.layout.sequence_stride);
  kv.v_cache.resize(8 * kv.layout.sequence_stride);
  for (std::size_t i = 0; i < kv.k_cache.size(); ++i) kv.k_cache[i] = static_cast<unsigned char>(i * 7);
  kv.v_cache = kv.k_cache;
  kv.base.assign(8, 5);
  kv.path = g.path;
  kv.length = g.length;
  kv.max_nodes = backend::max_compaction_nodes + 1;  // the CUDA kernel's limit holds on the host too
  CHECK(backend::compact_kv(backend::host{}, kv.batch()) == backend::status::invalid_argument);
  kv.max_nodes = 32;
  REQUIRE(backend::compact_kv(backend::host{}, kv.batch()) == backend::status::ok);
  for (int b = 0; b < 8; ++b) {
    CHECK(kv.status[b] == core::compaction_status::ok);
    // After compaction, position 5 + k of layer 1, head 1 holds what was at 5 + path[k].
    for (int k = 0; k < g.length[b]; ++k) {
      const long long dst = core::kv_row_offset(kv.layout, b, 1, 5 + k, 1);
      const long long src = core::kv_row_offset(kv.layout, b, 1, 5 + g.path[b * 32 + k], 1);
      CHECK(kv.k_cache[dst] == static_cast<unsigned char>(src * 7));
      CHECK(kv.v_cache[dst + 11] == static_cast<unsigned char>((src + 11) * 7));
    }
  }
}
