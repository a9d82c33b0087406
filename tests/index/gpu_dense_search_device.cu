// gpu_dense_search_launch.hpp on the device: GpuFlatDenseSearch.
#include "index/gpu_dense_search_launch.hpp"

#include <memory>
#include <utility>

#include <specdec/index/gpu_dense_search.cuh>

namespace specdec::testing {

namespace {

class Device final : public TestedDenseSearch {
 public:
  explicit Device(std::shared_ptr<const DenseDatastore> datastore) : search_(std::move(datastore)) {}
  const DenseSearch& search() const override { return search_; }
  std::size_t search_batch(std::span<const float> queries, int count, int k,
                           std::vector<DenseNeighbour>& out) const override {
    return search_.search_batch(queries, count, k, out);
  }

 private:
  GpuFlatDenseSearch search_;
};

}  // namespace

std::unique_ptr<TestedDenseSearch> make_tested_search(std::shared_ptr<const DenseDatastore> datastore) {
  return std::make_unique<Device>(std::move(datastore));
}

}  // namespace specdec::testing
