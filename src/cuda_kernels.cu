// The launchers of the step's CUDA kernels, the device Llama's launches and BackendHashTarget's
// forward, compiled once (specdec::cuda_kernels): the programs that link it define
// SPECDEC_CUDA_KERNELS_EXTERN and only declare them (kernels/launchers.hpp, targets/cuda_llama.hpp,
// testing/backend_hash_target.hpp). docs/cuda.md shows the lines
// between the markers.
// [implementation]
#define SPECDEC_CUDA_KERNELS_IMPLEMENTATION
#include <specdec/backend.hpp>
#include <specdec/targets/cuda_llama.hpp>
#include <specdec/testing/backend_hash_target.hpp>

namespace specdec::backend {
#define SPECDEC_LLAMA_LAUNCH(...) \
  template void launch_grid(const cuda&, const kernels::LaunchShape&, const kernels::llama::__VA_ARGS__&);
SPECDEC_LLAMA_GRID_KERNELS(SPECDEC_LLAMA_LAUNCH)
}  // namespace specdec::backend
// [implementation]
