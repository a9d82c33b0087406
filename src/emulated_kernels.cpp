// The host's emulated grid (its executor) and the device Llama's launches on it, compiled once and
// optimised (specdec::emulated_kernels): the programs that link it define
// SPECDEC_EMULATED_KERNELS_EXTERN and only declare them (testing/emulated_grid.hpp,
// testing/emulated_llama.hpp), so EmulatedLlamaTarget runs at this unit's speed in a test built at -Og.
#define SPECDEC_EMULATED_KERNELS_IMPLEMENTATION
#include <specdec/testing/emulated_llama.hpp>

namespace specdec::backend {
#define SPECDEC_LLAMA_LAUNCH(...) \
  template void launch_grid(host, const kernels::LaunchShape&, const kernels::llama::__VA_ARGS__&);
SPECDEC_LLAMA_GRID_KERNELS(SPECDEC_LLAMA_LAUNCH)
}  // namespace specdec::backend
