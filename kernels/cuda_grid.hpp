// The host side of the CUDA executor of grid kernels (kernels/grid.hpp): backend::launch_grid on
// backend::cuda declared, and launch_status. kernels/grid.cuh defines launch_grid (nvcc); a C++
// file compiled by the host compiler may call it for kernels whose launches are compiled
// elsewhere: with SPECDEC_CUDA_KERNELS_EXTERN, the device Llama's (targets/cuda_llama.hpp,
// specdec::cuda_kernels).
#pragma once

#include <specdec/backend.hpp>

#if !SPECDEC_CUDA_OPERATIONS
#error "specdec/kernels/cuda_grid.hpp: compile with nvcc, or define SPECDEC_CUDA_KERNELS_EXTERN (the kernels compiled elsewhere: kernels/launchers.hpp)"
#else  // the whole header: the error above alone, as in targets/cuda_llama.hpp

#include <cuda_runtime_api.h>

#include <specdec/kernels/grid.hpp>

namespace specdec::backend {

/// Enqueues f on `tag`'s stream with `shape`; a launch error is left for launch_status.
template <class F>
void launch_grid(const cuda& tag, const kernels::LaunchShape& shape, const F& f);

/// The error of the last launches, if any (cudaGetLastError, which also clears it).
inline status launch_status(const cuda&) { return detail::from(cudaGetLastError()); }

}  // namespace specdec::backend

#endif  // SPECDEC_CUDA_OPERATIONS
