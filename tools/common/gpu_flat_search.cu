// GpuFlatDenseSearch behind make_gpu_flat_search (gpu_flat_search.hpp).
#include "common/gpu_flat_search.hpp"

#include <memory>
#include <utility>

#include <specdec/error.hpp>
#include <specdec/index/gpu_dense_search.cuh>

namespace specdec::tools {

std::shared_ptr<const DenseSearch> make_gpu_flat_search(std::shared_ptr<const DenseDatastore> datastore) {
  return std::make_shared<const GpuFlatDenseSearch>(std::move(datastore));
}

std::size_t gpu_flat_search_batch(const DenseSearch& search, std::span<const float> queries, int count, int k,
                                  std::vector<DenseNeighbour>& out) {
  const auto* gpu = dynamic_cast<const GpuFlatDenseSearch*>(&search);
  if (!gpu) throw error(std::string("gpu_flat_search_batch: the ") + search.name() + " search is not the GPU flat search");
  return gpu->search_batch(queries, count, k, out);
}

}  // namespace specdec::tools
