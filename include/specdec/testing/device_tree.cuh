// A LaidOutTree copied to CUDA device memory (testing/backend_tree.hpp on backend::cuda): the
// TreeView a CUDA target's forward takes. Include it in a .cu file, or in a C++ file that defines
// SPECDEC_CUDA_KERNELS_EXTERN (backend.hpp's CUDA operations without nvcc).
#pragma once

#include <specdec/backend.hpp>
#include <specdec/testing/backend_tree.hpp>

namespace specdec::testing {

using DeviceTree = BackendTree<backend::cuda>;

}  // namespace specdec::testing
