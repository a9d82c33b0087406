// GpuFlatDenseSearch for the tools' C++ translation units, which cannot include its .cuh: built in
// gpu_flat_search.cu, the tools' one CUDA translation unit (only when the CUDA backend is built).
#pragma once

#include <memory>

#include <specdec/index/dense_datastore.hpp>
#include <specdec/index/dense_search.hpp>

namespace specdec::tools {

std::shared_ptr<const DenseSearch> make_gpu_flat_search(std::shared_ptr<const DenseDatastore> datastore);

}  // namespace specdec::tools
