#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include <specdec/core/kv_compaction.hpp>

#include "kernels/random_batches.hpp"

using namespace specdec;

namespace {

// Out-of-place reference: every destination row from the ORIGINAL cache, rows not on the
// destination list unchanged.
std::vector<unsigned char> compact_reference(const std::vector<unsigned char>& cache, const core::KvCacheLayout& l,
                                             int seq, int base, const std::vector<node_t>& path) {
  std::vector<unsigned char> out = cache;
  for (std::size_t k = 0; k < path.size(); ++k)
    for (int layer = 0; layer < l.layers; ++layer)
      for (int head = 0; head < l.kv_heads; ++head) {
        const long long dst = core::kv_row_offset(l, seq, layer, base + static_cast<int>(k), head);
        const long long src = core::kv_row_offset(l, seq, layer, base + path[k], head);
        std::copy(cache.begin() + src, cache.begin() + src + l.row_bytes, out.begin() + dst);
      }
  return out;
}

}  // namespace

TEST_CASE("kv_layout is [sequence][layer][position][kv_head][head_dim], packed", "[core][kv]") {
  const core::KvCacheLayout l = core::kv_layout(3, 10, 4, 8, 2);
  CHECK(l.row_bytes == 16);
  CHECK(core::kv_row_offset(l, 0, 0, 0, 1) == 16);
  CHECK(core::kv_row_offset(l, 0, 0, 1, 0) == 64);
  CHECK(core::kv_row_offset(l, 0, 1, 0, 0) == 640);
  CHECK(core::kv_row_offset(l, 1, 0, 0, 0) == 1920);
  CHECK(core::kv_row_offset(l, 1, 2, 9, 3) == 1920 + 2 * 640 + 9 * 64 + 3 * 16);
}

TEST_CASE("validate_compaction_path names what is wrong", "[core][kv]") {
  const node_t ok[] = {0, 2, 5};
  CHECK(core::validate_compaction_path(ok, 3, 6, 10, 16) == core::compaction_status::ok);
  CHECK(core::validate_compaction_path(ok, 0, 6, 10, 16) == core::compaction_status::path_not_from_root);
  const node_t not_root[] = {1, 2};
  CHECK(core::validate_compaction_path(not_root, 2, 6, 10, 16) == core::compaction_status::path_not_from_root);
  const node_t repeated[] = {0, 2, 2};
  CHECK(core::validate_compaction_path(repeated, 3, 6, 10, 16) == core::compaction_status::path_not_increasing);
  CHECK(core::validate_compaction_path(ok, 3, 5, 10, 16) == core::compaction_status::past_the_tree);
  CHECK(core::validate_compaction_path(ok, 3, 6, 11, 16) == core::compaction_status::past_the_cache);
  CHECK(core::validate_compaction_path(ok, 3, 6, -1, 16) == core::compaction_status::past_the_cache);
}

TEST_CASE("first_moved_entry skips the prefix already in place", "[core][kv]") {
  const node_t p1[] = {0, 1, 2, 4, 6};
  CHECK(core::first_moved_entry(p1, 5) == 3);
  const node_t p2[] = {0, 1, 2};
  CHECK(core::first_moved_entry(p2, 3) == 3);
}

TEST_CASE("in-place compaction in increasing order handles overlapping moves", "[core][kv]") {
  // path {0, 2, 3}: 2 -> 1 reads position 2 before 3 -> 2 overwrites it (decreasing order would not).
  const core::KvCacheLayout l = core::kv_layout(1, 8, 1, 1, 1);
  std::vector<unsigned char> cache{10, 11, 12, 13, 14, 15, 16, 17};
  const node_t path[] = {0, 2, 3};
  core::compact_kv_rows(cache.data(), l, 0, 4, path, 3);  // tree at 4..7: nodes 0..3
  CHECK(cache == std::vector<unsigned char>{10, 11, 12, 13, 14, 16, 17, 17});
}

TEST_CASE("in-place compaction equals the out-of-place reference on random paths", "[core][kv]") {
  std::mt19937_64 rng(21);
  for (int trial = 0; trial < 200; ++trial) {
    const int layers = testing::uniform(rng, 1, 3), heads = testing::uniform(rng, 1, 3);
    const int head_dim = testing::uniform(rng, 1, 9), element = testing::uniform(rng, 1, 4);
    const int max_nodes = testing::uniform(rng, 1, 40);
    testing::KvData d = testing::random_kv_batch(rng, 2, layers, heads, head_dim, element, max_nodes, false);
    for (int s = 0; s < d.size(); ++s) {
      const node_t* path = d.path.data() + static_cast<long>(s) * max_nodes;
      const std::vector<node_t> p(path, path + d.length[s]);
      REQUIRE(core::validate_compaction_path(path, d.length[s], max_nodes, d.base[s], d.layout.max_positions) ==
              core::compaction_status::ok);
      const auto expected = compact_reference(d.k_cache, d.layout, s, d.base[s], p);
      core::compact_kv_rows(d.k_cache.data(), d.layout, s, d.base[s], path, d.length[s]);
      REQUIRE(d.k_cache == expected);
    }
  }
}
