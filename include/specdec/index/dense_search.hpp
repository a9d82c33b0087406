// Nearest-neighbour search over a DenseDatastore's keys, by inner product (= cosine: keys and
// queries are L2-normalised). One interface, backends chosen at run time:
//   ExactDenseSearch  every key scored on the host, the k best kept (this header).
// FAISS (flat, HNSW/IVF) and a GPU flat search (cuBLAS + CUB top-k) are meant to implement the
// same interface (not written yet; docs/drafters.md, "DReSD").
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <specdec/error.hpp>
#include <specdec/index/dense_datastore.hpp>

namespace specdec {

/// A key of the datastore and its inner product with the query.
struct DenseNeighbour {
  float score = 0;
  std::uint64_t key = 0;
  friend bool operator==(const DenseNeighbour&, const DenseNeighbour&) = default;
};

/// Ranking of neighbours: higher score first, then the lower key (deterministic ties).
inline bool ranks_before(const DenseNeighbour& a, const DenseNeighbour& b) {
  return a.score != b.score ? a.score > b.score : a.key < b.key;
}

/// A search backend. Immutable once built, so one instance serves many drafters and threads.
class DenseSearch {
 public:
  virtual ~DenseSearch() = default;
  virtual const char* name() const = 0;
  /// The (at most) k keys nearest to `query` (key_dim floats), best first, into `out` (reused).
  virtual void search(std::span<const float> query, int k, std::vector<DenseNeighbour>& out) const = 0;
};

/// Exact search: one pass over the keys, each scored with detail::dense_dot (vectorised), the k
/// best kept in a sorted array. O(keys · key_dim) per query: measured in docs/performance.md.
class ExactDenseSearch final : public DenseSearch {
 public:
  explicit ExactDenseSearch(std::shared_ptr<const DenseDatastore> datastore) : datastore_(std::move(datastore)) {
    if (!datastore_) throw error("exact dense search: no datastore (null pointer)");
  }
  const char* name() const override { return "exact"; }

  void search(std::span<const float> query, int k, std::vector<DenseNeighbour>& out) const override {
    const int l = datastore_->key_dim();
    if (query.size() != static_cast<std::size_t>(l))
      throw error("exact dense search: query of " + std::to_string(query.size()) + " floats, keys have " +
                  std::to_string(l));
    out.clear();
    if (k <= 0) return;
    const std::uint64_t n = datastore_->keys();
    const std::size_t keep = static_cast<std::size_t>(std::min<std::uint64_t>(static_cast<std::uint64_t>(k), n));
    const float* key = datastore_->key_matrix().data();
    // Keys are scanned in order and a key enters only with a strictly better score, so among
    // equal scores the lower key wins, as ranks_before says.
    for (std::uint64_t i = 0; i < n; ++i, key += l) {
      const float s = detail::dense_dot(query.data(), key, l);
      if (out.size() == keep && !(s > out.back().score)) continue;
      if (out.size() == keep) out.pop_back();
      auto at = out.end();
      while (at != out.begin() && (at - 1)->score < s) --at;
      out.insert(at, {s, i});
    }
  }

 private:
  std::shared_ptr<const DenseDatastore> datastore_;
};

}  // namespace specdec
