// The CUDA kernels' launchers (the step's and the tensor-core products'), compiled once
// (specdec::cuda_kernels): the programs that link it define SPECDEC_CUDA_KERNELS_EXTERN and only
// declare them (kernels/launchers.hpp). docs/cuda.md shows the lines between the markers.
// [implementation]
#define SPECDEC_CUDA_KERNELS_IMPLEMENTATION
#include <specdec/backend.hpp>
#include <specdec/kernels/llama_forward.cuh>
// [implementation]
