#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include <specdec/backend.hpp>

#include "kernels/device_launch.hpp"
#include "kernels/random_batches.hpp"

using namespace specdec;

namespace {

void require_same_on_both(testing::KvData host) {
  testing::KvData device = host;
  REQUIRE(backend::compact_kv(backend::host{}, host.batch()) == backend::status::ok);
  REQUIRE(testing::run_on_device(device.batch()) == backend::status::ok);
  CHECK(device.status == host.status);
  CHECK(device.k_cache == host.k_cache);  // the whole cache: moved rows and untouched ones
  CHECK(device.v_cache == host.v_cache);
}

}  // namespace

TEST_CASE("GPU KV compaction equals the host's sequential in-place move", "[gpu][kv]") {
  std::mt19937_64 rng(10);
  // Element sizes and head dims that select 16-, 4- and 1-byte copies.
  for (int element : {1, 2, 4}) {
    for (int head_dim : {1, 3, 8, 64, 128}) {
      for (int max_nodes : {1, 8, 64, 300}) {
        require_same_on_both(testing::random_kv_batch(rng, testing::uniform(rng, 1, 8), testing::uniform(rng, 1, 3),
                                                      testing::uniform(rng, 1, 4), head_dim, element, max_nodes, true));
      }
    }
  }
}

TEST_CASE("GPU KV compaction with padded strides (each copy width) and paths past the tree", "[gpu][kv]") {
  std::mt19937_64 rng(12);
  for (int padding : {16, 4, 2, 1}) {  // the widest copy unit dividing every stride: 16, 4, 1, 1 bytes
    for (int max_nodes : {8, 64}) {
      require_same_on_both(testing::random_kv_batch(rng, 8, 2, 3, 64, 2, max_nodes, true, padding));
    }
  }
}

TEST_CASE("GPU KV compaction of some of the cache's sequences (KvCompactionBatch::sequence)", "[gpu][kv]") {
  std::mt19937_64 rng(14);
  const int max_nodes = 16;
  testing::KvData d = testing::random_kv_batch(rng, 6, 2, 2, 64, 2, max_nodes, false);
  d.sequence = {4, 1, 5};  // a batch of three of the six sequences, as a batch of slots is
  d.base.resize(3);
  d.length.resize(3);
  d.path.resize(3 * max_nodes);
  // Reference: each entry's path moved in its own sequence; the other sequences stay as they are.
  testing::KvData expected = d;
  for (int b = 0; b < 3; ++b)
    for (auto* cache : {&expected.k_cache, &expected.v_cache})
      core::compact_kv_rows(cache->data(), d.layout, d.sequence[b], d.base[b], d.path.data() + b * max_nodes, d.length[b]);
  testing::KvData device = d;
  REQUIRE(backend::compact_kv(backend::host{}, d.batch()) == backend::status::ok);
  CHECK(d.k_cache == expected.k_cache);
  CHECK(d.v_cache == expected.v_cache);
  REQUIRE(testing::run_on_device(device.batch()) == backend::status::ok);
  CHECK(device.k_cache == expected.k_cache);
  CHECK(device.v_cache == expected.v_cache);
  CHECK(device.status == d.status);
}

TEST_CASE("GPU KV compaction of overlapping moves (every path entry moves by one)", "[gpu][kv]") {
  testing::KvData d;
  d.max_nodes = 64;
  d.layout = core::kv_layout(2, 200, 2, 64, 2);
  d.k_cache.resize(2 * d.layout.sequence_stride);
  d.v_cache.resize(2 * d.layout.sequence_stride);
  for (std::size_t i = 0; i < d.k_cache.size(); ++i) d.k_cache[i] = static_cast<unsigned char>(i * 13 + 1);
  for (std::size_t i = 0; i < d.v_cache.size(); ++i) d.v_cache[i] = static_cast<unsigned char>(i * 17 + 3);
  d.base = {10, 0};
  d.path.assign(128, 0);
  for (int k = 1; k < 63; ++k) d.path[k] = k + 1;  // 0, 2, 3, ..., 63: destination k+... overlaps its neighbour's source
  for (int k = 1; k < 32; ++k) d.path[64 + k] = 2 * k;
  d.length = {63, 32};
  require_same_on_both(d);
  d.with_v = false;  // a cache without V
  require_same_on_both(d);
}
