// The launchers of the step's CUDA kernels, compiled once
// (specdec::cuda_kernels): the programs that link it define SPECDEC_CUDA_KERNELS_EXTERN and only
// declare them (kernels/launchers.hpp). docs/cuda.md shows the lines between the markers.
// [implementation]
#define SPECDEC_CUDA_KERNELS_IMPLEMENTATION
#include <specdec/backend.hpp>
// [implementation]
