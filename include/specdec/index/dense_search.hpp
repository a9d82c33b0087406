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
    // Common key sizes get a loop of their own, where the dot product's length is a constant
    // the compiler unrolls (the same sums in the same order: the same bits).
    switch (l) {
      case 8: return scan(query.data(), 8, keep, out);
      case 16: return scan(query.data(), 16, keep, out);
      case 32: return scan(query.data(), 32, keep, out);
      case 64: return scan(query.data(), 64, keep, out);
      default: return scan(query.data(), l, keep, out);
    }
  }

 private:
  // Scores a block of keys into a buffer (a tight, branch-free loop), then offers the block's
  // scores that beat the current k-th best to the sorted array. Keys are offered in order and enter
  // only with a strictly better score, so among equal scores the lower key wins (ranks_before).
  __attribute__((always_inline)) inline void scan(const float* query, int l, std::size_t keep,
                                                  std::vector<DenseNeighbour>& out) const {
    constexpr std::uint64_t kBlock = 256;
    float scores[kBlock];
    const std::uint64_t n = datastore_->keys();
    const float* keys = datastore_->key_matrix().data();
    for (std::uint64_t b = 0; b < n; b += kBlock) {
      const std::uint64_t rows = std::min(kBlock, n - b);
      const float* key = keys + b * static_cast<std::uint64_t>(l);
      for (std::uint64_t r = 0; r < rows; ++r, key += l) scores[r] = detail::dense_dot(query, key, l);
      for (std::uint64_t r = 0; r < rows; ++r) {
        const float s = scores[r];
        if (out.size() == keep && !(s > out.back().score)) continue;
        if (out.size() == keep) out.pop_back();
        auto at = out.end();
        while (at != out.begin() && (at - 1)->score < s) --at;
        out.insert(at, {s, b + r});
      }
    }
  }

  std::shared_ptr<const DenseDatastore> datastore_;
};

}  // namespace specdec
