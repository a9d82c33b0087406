// The search gpu_dense_search_test.cpp checks against ExactDenseSearch: GpuFlatDenseSearch
// (gpu_dense_search_device.cpp, in gpu_dense_search_gpu_test, which needs a device), or a host
// stand-in (gpu_dense_search_host.cpp, in gpu_dense_search_harness_test, which CI runs: the
// test's datastores, queries and comparisons, passing when the device equals the host).
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

#include <specdec/index/dense_datastore.hpp>
#include <specdec/index/dense_search.hpp>

namespace specdec::testing {

class TestedDenseSearch {
 public:
  virtual ~TestedDenseSearch() = default;
  virtual const DenseSearch& search() const = 0;
  /// GpuFlatDenseSearch::search_batch.
  virtual std::size_t search_batch(std::span<const float> queries, int count, int k,
                                   std::vector<DenseNeighbour>& out) const = 0;
};

std::unique_ptr<TestedDenseSearch> make_tested_search(std::shared_ptr<const DenseDatastore> datastore);

}  // namespace specdec::testing
