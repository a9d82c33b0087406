// GpuFlatDenseSearch for the tools' C++ translation units, which cannot include its .cuh: built in
// gpu_flat_search.cu, the tools' one CUDA translation unit (only when the CUDA backend is built).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include <specdec/index/dense_datastore.hpp>
#include <specdec/index/dense_search.hpp>

namespace specdec::tools {

std::shared_ptr<const DenseSearch> make_gpu_flat_search(std::shared_ptr<const DenseDatastore> datastore);

/// GpuFlatDenseSearch::search_batch of a search made by make_gpu_flat_search (specdec::error for
/// another search).
std::size_t gpu_flat_search_batch(const DenseSearch& search, std::span<const float> queries, int count, int k,
                                  std::vector<DenseNeighbour>& out);

}  // namespace specdec::tools
