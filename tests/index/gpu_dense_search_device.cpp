// gpu_dense_search_launch.hpp on the device: GpuFlatDenseSearch, as the tools build it
// (tools/common/gpu_flat_search.cu, specdec_dense_search): no CUDA file of its own.
#include "index/gpu_dense_search_launch.hpp"

#include <memory>
#include <utility>

#include "common/gpu_flat_search.hpp"

namespace specdec::testing {

namespace {

class Device final : public TestedDenseSearch {
 public:
  explicit Device(std::shared_ptr<const DenseDatastore> datastore)
      : search_(tools::make_gpu_flat_search(std::move(datastore))) {}
  const DenseSearch& search() const override { return *search_; }
  std::size_t search_batch(std::span<const float> queries, int count, int k,
                           std::vector<DenseNeighbour>& out) const override {
    return tools::gpu_flat_search_batch(*search_, queries, count, k, out);
  }

 private:
  std::shared_ptr<const DenseSearch> search_;
};

}  // namespace

std::unique_ptr<TestedDenseSearch> make_tested_search(std::shared_ptr<const DenseDatastore> datastore) {
  return std::make_unique<Device>(std::move(datastore));
}

}  // namespace specdec::testing
