// FaissDenseSearch: DenseSearch backends from FAISS (Debian libfaiss-dev 1.7.3, CPU; link
// `faiss`), for datastores too large for one exact scan per step. Needs FAISS only where this
// header is included; the drafter and the exact search do not.
//   flat  IndexFlatIP: exact, FAISS's own scan (a reference and a speed comparison)
//   hnsw  IndexHNSWFlat (inner product): a graph, O(log n) per query, approximate
//   ivf   IndexIVFFlat (inner product): k-means lists, `nprobe` of them scanned, approximate
// The index is built from the datastore's keys when the search is constructed (FAISS keeps its
// own copy of the keys: memory doubles) and is read-only afterwards.
#pragma once

#include <faiss/IndexFlat.h>
#include <faiss/IndexHNSW.h>
#include <faiss/IndexIVFFlat.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <specdec/error.hpp>
#include <specdec/index/dense_datastore.hpp>
#include <specdec/index/dense_search.hpp>

namespace specdec {

class FaissDenseSearch final : public DenseSearch {
 public:
  /// Builds the index over every key of `datastore`. Throws specdec::error for a null datastore,
  /// an option out of range, or a datastore with more keys than FAISS's 64-bit ids hold.
  explicit FaissDenseSearch(std::shared_ptr<const DenseDatastore> datastore, FaissOptions options = {})
      : datastore_(std::move(datastore)), options_(options) {
    if (!datastore_) throw error("faiss dense search: no datastore (null pointer)");
    const int l = datastore_->key_dim();
    const auto n = static_cast<faiss::Index::idx_t>(datastore_->keys());
    const float* keys = datastore_->key_matrix().data();
    switch (options_.index) {
      case FaissOptions::kind::flat:
        index_ = std::make_unique<faiss::IndexFlatIP>(l);
        break;
      case FaissOptions::kind::hnsw: {
        if (options_.hnsw_m < 2 || options_.hnsw_ef_search < 1 || options_.hnsw_ef_construction < 1)
          throw error("faiss dense search: hnsw_m must be >= 2 and ef >= 1, got m " + std::to_string(options_.hnsw_m));
        auto hnsw = std::make_unique<faiss::IndexHNSWFlat>(l, options_.hnsw_m, faiss::METRIC_INNER_PRODUCT);
        hnsw->hnsw.efConstruction = options_.hnsw_ef_construction;
        hnsw->hnsw.efSearch = options_.hnsw_ef_search;
        index_ = std::move(hnsw);
        break;
      }
      case FaissOptions::kind::ivf: {
        if (options_.ivf_lists < 1 || options_.ivf_nprobe < 1)
          throw error("faiss dense search: ivf_lists and ivf_nprobe must be >= 1, got " +
                      std::to_string(options_.ivf_lists) + " and " + std::to_string(options_.ivf_nprobe));
        quantizer_ = std::make_unique<faiss::IndexFlatIP>(l);
        auto ivf = std::make_unique<faiss::IndexIVFFlat>(quantizer_.get(), l, options_.ivf_lists,
                                                         faiss::METRIC_INNER_PRODUCT);
        // k-means on at most 256 keys per list, spread over the datastore.
        const faiss::Index::idx_t train = std::min<faiss::Index::idx_t>(n, 256 * static_cast<faiss::Index::idx_t>(options_.ivf_lists));
        std::vector<float> sample(static_cast<std::size_t>(train) * l);
        for (faiss::Index::idx_t i = 0; i < train; ++i) {
          const auto key = datastore_->key(static_cast<std::uint64_t>(i * (n / train)));
          std::copy(key.begin(), key.end(), sample.begin() + i * l);
        }
        ivf->train(train, sample.data());
        ivf->nprobe = static_cast<std::size_t>(options_.ivf_nprobe);
        index_ = std::move(ivf);
        break;
      }
    }
    index_->add(n, keys);
  }

  const char* name() const override {
    switch (options_.index) {
      case FaissOptions::kind::flat: return "faiss-flat";
      case FaissOptions::kind::hnsw: return "faiss-hnsw";
      default: return "faiss-ivf";
    }
  }

  void search(std::span<const float> query, int k, std::vector<DenseNeighbour>& out) const override {
    const int l = datastore_->key_dim();
    if (query.size() != static_cast<std::size_t>(l))
      throw error("faiss dense search: query of " + std::to_string(query.size()) + " floats, keys have " +
                  std::to_string(l));
    out.clear();
    if (k <= 0) return;
    thread_local std::vector<float> scores;
    thread_local std::vector<faiss::Index::idx_t> ids;
    scores.resize(static_cast<std::size_t>(k));
    ids.resize(static_cast<std::size_t>(k));
    index_->search(1, query.data(), k, scores.data(), ids.data());
    for (int i = 0; i < k; ++i)
      if (ids[i] >= 0) out.push_back({scores[i], static_cast<std::uint64_t>(ids[i])});
    std::stable_sort(out.begin(), out.end(), ranks_before);  // FAISS leaves the order of ties open
  }

 private:
  std::shared_ptr<const DenseDatastore> datastore_;
  FaissOptions options_;
  std::unique_ptr<faiss::IndexFlatIP> quantizer_;  // the IVF index's lists (outlives index_: declared first)
  std::unique_ptr<faiss::Index> index_;
};

}  // namespace specdec
