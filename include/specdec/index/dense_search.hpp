// Nearest-neighbour search over a DenseDatastore's keys, by inner product (= cosine: keys and
// queries are L2-normalised). One interface, backends chosen at run time (docs/drafters/dresd.md):
//   ExactDenseSearch     every key scored on the host, the k best kept (this header);
//   FaissDenseSearch     FAISS's flat, HNSW and IVF indexes (faiss_search.hpp; links FAISS);
//   GpuFlatDenseSearch   every key scored on a CUDA device (cuBLAS), the k best selected there
//                        with CUB (gpu_dense_search.cuh; nvcc translation units only).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <specdec/config.hpp>
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

namespace detail {

/// The 64-bit key the GPU flat search sorts (descending) to rank (score, key): the score's bits
/// mapped to an unsigned order, then the key reversed, so the larger rank key ranks_before the
/// other: higher score first, then the lower key. -0 and +0 are equal; NaN ranks below every
/// number (rank key high word 0). Keys must be below 2^32.
SPECDEC_HD inline std::uint64_t dense_rank_key(float score, std::uint32_t key) {
  std::uint32_t u = 0;
  if (score == score) {
    if (score == 0.0f) score = 0.0f;
#if defined(__CUDA_ARCH__)
    u = __float_as_uint(score);
#else
    u = std::bit_cast<std::uint32_t>(score);
#endif
    u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);
  }
  return (static_cast<std::uint64_t>(u) << 32) | (0xffffffffu - key);
}

/// The (score, key) of a rank key (a NaN score for a NaN's key).
inline DenseNeighbour dense_rank_neighbour(std::uint64_t rank_key) {
  const auto u = static_cast<std::uint32_t>(rank_key >> 32);
  const std::uint32_t bits = (u & 0x80000000u) ? (u & 0x7fffffffu) : ~u;
  return {std::bit_cast<float>(bits), 0xffffffffu - static_cast<std::uint32_t>(rank_key & 0xffffffffu)};
}

}  // namespace detail

/// Parameters of FaissDenseSearch (faiss_search.hpp), here so that code choosing a backend at run
/// time needs no FAISS headers.
struct FaissOptions {
  enum class kind { flat, hnsw, ivf };
  kind index = kind::hnsw;
  int hnsw_m = 32;              ///< graph degree
  int hnsw_ef_construction = 64;
  int hnsw_ef_search = 64;      ///< candidates kept while searching (recall vs time)
  int ivf_lists = 1024;         ///< k-means lists
  int ivf_nprobe = 16;          ///< lists scanned per query
};

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
