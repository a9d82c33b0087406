// gpu_dense_search_launch.hpp on the host: ExactDenseSearch standing in for the device, with
// GpuFlatDenseSearch's argument checks, so that the parity test's own logic runs without a GPU.
#include "index/gpu_dense_search_launch.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <utility>

#include <specdec/error.hpp>

namespace specdec::testing {

namespace {

class Host final : public TestedDenseSearch {
 public:
  explicit Host(std::shared_ptr<const DenseDatastore> datastore)
      : datastore_(datastore), search_(std::move(datastore)) {}
  const DenseSearch& search() const override { return search_; }
  std::size_t search_batch(std::span<const float> queries, int count, int k,
                           std::vector<DenseNeighbour>& out) const override {
    const auto l = static_cast<std::size_t>(datastore_->key_dim());
    if (queries.size() != static_cast<std::size_t>(count) * l)
      throw error("gpu flat search: " + std::to_string(count) + " queries of " + std::to_string(queries.size()) +
                  " floats in all, keys have " + std::to_string(l));
    out.clear();
    std::vector<DenseNeighbour> one;
    for (int q = 0; q < count; ++q) {
      search_.search(queries.subspan(static_cast<std::size_t>(q) * l, l), k, one);
      out.insert(out.end(), one.begin(), one.end());
    }
    if (k <= 0) return 0;
    return static_cast<std::size_t>(std::min<std::uint64_t>(static_cast<std::uint64_t>(k), datastore_->keys()));
  }

 private:
  std::shared_ptr<const DenseDatastore> datastore_;
  ExactDenseSearch search_;
};

}  // namespace

std::unique_ptr<TestedDenseSearch> make_tested_search(std::shared_ptr<const DenseDatastore> datastore) {
  return std::make_unique<Host>(std::move(datastore));
}

}  // namespace specdec::testing
