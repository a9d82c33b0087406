// GpuFlatDenseSearch behind make_gpu_flat_search (gpu_flat_search.hpp).
#include "common/gpu_flat_search.hpp"

#include <memory>
#include <utility>

#include <specdec/index/gpu_dense_search.cuh>

namespace specdec::tools {

std::shared_ptr<const DenseSearch> make_gpu_flat_search(std::shared_ptr<const DenseDatastore> datastore) {
  return std::make_shared<const GpuFlatDenseSearch>(std::move(datastore));
}

}  // namespace specdec::tools
