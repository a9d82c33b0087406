// GpuFlatDenseSearch against ExactDenseSearch (gpu_dense_search_launch.hpp says which search runs):
// the same neighbours in the same order, up to near ties of scores that another summation order
// may swap (dense_parity.hpp), on datastores that need one, two and three selection rounds on the
// device, with tied keys, k from 1 to the limit and past the number of keys, single and batched.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <specdec/error.hpp>
#include <specdec/index/dense_datastore.hpp>
#include <specdec/index/dense_datastore_builder.hpp>
#include <specdec/index/dense_search.hpp>

#include "index/dense_parity.hpp"
#include "index/gpu_dense_search_launch.hpp"
#include "support/temp_dir.hpp"

using namespace specdec;

namespace {

/// `documents` documents of `length` tokens; each token's feature is one of 64 centres plus
/// noise, and every 7th document repeats the first one's features (tied keys).
std::shared_ptr<const DenseDatastore> datastore(const testing::TempDir& dir, int documents, int length, int key_dim) {
  constexpr int kDim = 40;
  std::mt19937_64 rng(static_cast<std::uint64_t>(documents) * 31 + static_cast<std::uint64_t>(length));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> centres(64 * kDim);
  for (float& x : centres) x = normal(rng);
  TokenDocuments docs;
  std::vector<float> features;
  for (int d = 0; d < documents; ++d) {
    std::vector<std::uint32_t> doc(static_cast<std::size_t>(length));
    for (std::size_t t = 0; t < doc.size(); ++t) {
      doc[t] = static_cast<std::uint32_t>(rng() % 64);
      for (int i = 0; i < kDim; ++i)
        features.push_back(d % 7 == 6 ? features[t * kDim + i] : centres[doc[t] * kDim + i] + 0.4f * normal(rng));
    }
    docs.add(doc);
  }
  const auto path = dir.path / ("ds" + std::to_string(documents) + ".bin");
  build_dense_datastore(docs, features, kDim, path, {.key_dim = key_dim});
  return std::make_shared<const DenseDatastore>(path);
}

/// Stored keys, their negations and random unit vectors.
std::vector<std::vector<float>> queries(const DenseDatastore& ds, int count) {
  std::mt19937_64 rng(5);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<std::vector<float>> out;
  for (int q = 0; q < count; ++q) {
    const auto key = ds.key(rng() % ds.keys());
    std::vector<float> query(key.begin(), key.end());
    if (q % 3 == 1) for (float& x : query) x = -x;
    if (q % 3 == 2) {
      float norm = 0;
      for (float& x : query) x = normal(rng), norm += x * x;
      for (float& x : query) x /= std::sqrt(norm);
    }
    out.push_back(std::move(query));
  }
  return out;
}

std::string difference(const DenseDatastore& ds, const std::vector<float>& query, int k,
                       std::span<const DenseNeighbour> got) {
  std::vector<DenseNeighbour> want;
  ExactDenseSearch(std::shared_ptr<const DenseDatastore>(&ds, [](const DenseDatastore*) {})).search(query, k, want);
  const auto host_score = [&](std::uint64_t key) {
    return detail::dense_dot(query.data(), ds.key(key).data(), ds.key_dim());
  };
  return testing::dense_ranking_difference(want, got, host_score);
}

}  // namespace

TEST_CASE("gpu flat search ranks like the exact search", "[dense][gpu]") {
  testing::TempDir dir;
  // 1000, 60000 and 300000 keys: one, two and three selection rounds for k = 32.
  for (const auto& [documents, length, key_dim] : {std::tuple{20, 50, 8}, std::tuple{600, 100, 16},
                                                   std::tuple{1500, 200, 32}}) {
    const auto ds = datastore(dir, documents, length, key_dim);
    const auto tested = testing::make_tested_search(ds);
    const DenseSearch& search = tested->search();
    std::vector<DenseNeighbour> got;
    for (const auto& query : queries(*ds, 12)) {
      for (const int k : {1, 7, 32, 1024}) {
        INFO(ds->keys() << " keys, k " << k);
        search.search(query, k, got);
        CHECK(difference(*ds, query, k, got) == "");
      }
    }
    // A batch of 12 queries (SGEMM) against each query's exact search.
    const auto batch = queries(*ds, 12);
    std::vector<float> flat;
    for (const auto& q : batch) flat.insert(flat.end(), q.begin(), q.end());
    const std::size_t n = tested->search_batch(flat, 12, 32, got);
    REQUIRE(n == 32);
    REQUIRE(got.size() == 12 * n);
    for (std::size_t q = 0; q < batch.size(); ++q) {
      INFO(ds->keys() << " keys, batch query " << q);
      CHECK(difference(*ds, batch[q], 32, std::span(got).subspan(q * n, n)) == "");
    }
  }
}

TEST_CASE("gpu flat search: tied keys go to the lower key, k past the keys, bad queries", "[dense][gpu]") {
  testing::TempDir dir;
  const auto ds = datastore(dir, 7, 40, 8);  // document 6 repeats document 0: keys 240.. equal keys 0..
  const auto tested = testing::make_tested_search(ds);
  const DenseSearch& search = tested->search();
  std::vector<DenseNeighbour> got;
  const auto key = ds->key(240 + 3);
  const std::vector<float> query(key.begin(), key.end());
  search.search(query, 2, got);
  REQUIRE(got.size() == 2);
  CHECK(got[0].key == 3);  // the lower of the two equal keys, with the same score
  CHECK(got[1].key == 243);
  CHECK(got[0].score == got[1].score);
  search.search(query, 1000, got);  // 280 keys
  CHECK(got.size() == ds->keys());
  CHECK(difference(*ds, query, 1000, got) == "");
  search.search(query, 0, got);
  CHECK(got.empty());
  CHECK_THROWS_AS(search.search(std::vector<float>(7), 3, got), error);
  CHECK_THROWS_AS(tested->search_batch(std::vector<float>(17), 2, 3, got), error);
  if (std::string(search.name()) == "gpu-flat") {
    CHECK_THROWS_WITH(search.search(query, 1025, got), "gpu flat search: k = 1025, at most 1024");
    CHECK_THROWS_WITH(tested->search_batch({}, 0, 3, got), "gpu flat search: 0 queries in a batch, must be 1 to 65535");
  }
}
