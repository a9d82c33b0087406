// FAISS backends of DenseSearch: the flat index equals the exact search; HNSW and IVF find most of
// the exact neighbours (their recall@10 on clustered keys).
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <random>
#include <set>
#include <vector>

#include <specdec/index/dense_datastore_builder.hpp>
#include <specdec/index/dense_search.hpp>
#include <specdec/index/faiss_search.hpp>

#include "dense_parity.hpp"
#include "support/temp_dir.hpp"

using namespace specdec;

namespace {

/// 200 documents of 50 tokens; features: one of 40 centres plus noise.
std::shared_ptr<const DenseDatastore> clustered(const testing::TempDir& dir) {
  constexpr int kDim = 32;
  std::mt19937_64 rng(21);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> centres(40 * kDim);
  for (float& x : centres) x = normal(rng);
  TokenDocuments docs;
  std::vector<float> features;
  for (int d = 0; d < 200; ++d) {
    std::vector<std::uint32_t> doc(50);
    for (auto& t : doc) {
      t = static_cast<std::uint32_t>(rng() % 40);
      for (int i = 0; i < kDim; ++i) features.push_back(centres[t * kDim + i] + 0.3f * normal(rng));
    }
    docs.add(doc);
  }
  build_dense_datastore(docs, features, kDim, dir.path / "ds.bin", {.key_dim = 16});
  return std::make_shared<const DenseDatastore>(dir.path / "ds.bin");
}

/// Share of the exact top-k keys each search finds, over `queries` stored keys.
double recall(const DenseSearch& search, const DenseSearch& exact, const DenseDatastore& ds, int k, int queries) {
  std::vector<DenseNeighbour> a, b;
  double found = 0;
  for (int q = 0; q < queries; ++q) {
    const auto key = ds.key(static_cast<std::uint64_t>(q) * 37 % ds.keys());
    const std::vector<float> query(key.begin(), key.end());
    search.search(query, k, a);
    exact.search(query, k, b);
    std::set<std::uint64_t> want;
    for (const auto& n : b) want.insert(n.key);
    for (const auto& n : a) found += want.count(n.key);
  }
  return found / (static_cast<double>(queries) * k);
}

}  // namespace

TEST_CASE("faiss flat search equals the exact search", "[dense][faiss]") {
  testing::TempDir dir;
  const auto ds = clustered(dir);
  const ExactDenseSearch exact(ds);
  const FaissDenseSearch flat(ds, {.index = FaissOptions::kind::flat});
  CHECK(std::string(flat.name()) == "faiss-flat");
  std::vector<DenseNeighbour> a, b;
  for (int q = 0; q < 50; ++q) {
    const auto key = ds->key(static_cast<std::uint64_t>(q) * 91 % ds->keys());
    const std::vector<float> query(key.begin(), key.end());
    flat.search(query, 10, a);
    exact.search(query, 10, b);
    // FAISS sums in another order: equal scores to rounding, and the same keys unless their
    // scores are that close.
    const auto host_score = [&](std::uint64_t key) {
      return detail::dense_dot(query.data(), ds->key(key).data(), ds->key_dim());
    };
    CHECK(testing::dense_ranking_difference(b, a, host_score) == "");
  }
  CHECK(recall(flat, exact, *ds, 10, 50) > 0.99);
}

TEST_CASE("faiss approximate indexes: recall@10 against the exact search", "[dense][faiss]") {
  testing::TempDir dir;
  const auto ds = clustered(dir);
  const ExactDenseSearch exact(ds);
  const FaissDenseSearch hnsw(ds, {.index = FaissOptions::kind::hnsw});
  const FaissDenseSearch ivf(ds, {.index = FaissOptions::kind::ivf, .ivf_lists = 32, .ivf_nprobe = 8});
  const double r_hnsw = recall(hnsw, exact, *ds, 10, 100), r_ivf = recall(ivf, exact, *ds, 10, 100);
  WARN("recall@10 on 10000 clustered keys: hnsw (m 32, ef 64) " << r_hnsw << ", ivf (32 lists, nprobe 8) " << r_ivf);
  CHECK(r_hnsw > 0.9);
  CHECK(r_ivf > 0.8);
  CHECK_THROWS_WITH(FaissDenseSearch(ds, {.index = FaissOptions::kind::ivf, .ivf_lists = 0}),
                    "faiss dense search: ivf_lists and ivf_nprobe must be >= 1, got 0 and 16");
}
