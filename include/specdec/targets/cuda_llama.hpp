// CudaLlamaTarget: the device Llama (targets/device_llama.hpp) on one CUDA device, as a
// BackendTarget (backend::cuda), so that SpeculativeDecoder verifies and compacts its trees on the
// device with the backend step; CudaLlamaBatchTarget is the same model as a BackendBatchTarget.
// The kernels are kernels/llama_forward.hpp's grid kernels on a CUDA grid (kernels/grid.cuh).
//
// Two ways to include it (C++20):
//  - in a .cu file compiled by nvcc (as this header or targets/cuda_llama.cuh): the kernels are
//    compiled there;
//  - in a C++ file compiled by the host compiler that defines
//    SPECDEC_CUDA_KERNELS_EXTERN (CMake: link specdec::cuda_kernels; or compile the .cu file of
//    docs/cuda.md's "compile time" section, which instantiates the launches that
//    SPECDEC_LLAMA_GRID_KERNELS lists): the file needs the CUDA runtime's headers and library only,
//    and a decoding loop over CudaLlamaTarget need not be compiled by nvcc. A .cu file that defines
//    SPECDEC_CUDA_KERNELS_EXTERN takes the launches from there too.
#pragma once

#include <specdec/backend.hpp>  // SPECDEC_CUDA_OPERATIONS

#if !SPECDEC_CUDA_OPERATIONS
#error "specdec/targets/cuda_llama.hpp: compile it with nvcc, or define SPECDEC_CUDA_KERNELS_EXTERN and link the kernels compiled once (CMake: specdec::cuda_kernels)"
#else  // the whole header: the error above alone, not one per missing declaration

#if defined(__CUDACC__)
#include <specdec/kernels/grid.cuh>  // the launches' definitions (not instantiated with SPECDEC_CUDA_KERNELS_EXTERN)
#endif

#include <cstddef>
#include <cstdint>
#include <string>

#include <cuda_runtime_api.h>

#include <specdec/kernels/cuda_grid.hpp>
#include <specdec/kernels/llama_forward.hpp>

namespace specdec::backend {

/// Makes the calling thread's current device usable (a device model's first call).
inline status select_device(const cuda&) {
  int device = 0;
  cudaGetDevice(&device);  // an error here shows in cudaSetDevice's result
  return detail::from(cudaSetDevice(device));
}

/// Whether the current device runs CudaThread::mma_bf16 (compute capability 8.0 or later):
/// `lacking` is left empty if it does, else names the device and its capability.
inline status bf16_mma_support(const cuda&, std::string& lacking) {
  int device = 0;
  cudaDeviceProp prop{};
  if (const status s = detail::from(cudaGetDevice(&device)); s != status::ok) return s;
  if (const status s = detail::from(cudaGetDeviceProperties(&prop, device)); s != status::ok) return s;
  lacking = prop.major >= 8 ? std::string() : std::string(prop.name) + " (compute capability " +
                                                  std::to_string(prop.major) + "." + std::to_string(prop.minor) + ")";
  return status::ok;
}

/// Zeroes `bytes` of device memory at `p` (enqueued on the tag's stream).
inline status clear(const cuda& tag, void* p, std::size_t bytes) {
  return detail::from(cudaMemsetAsync(p, 0, bytes, tag.stream));
}

/// The current device's free memory, in bytes.
inline status free_memory(const cuda&, std::uint64_t& bytes) {
  std::size_t free = 0, total = 0;
  const status s = detail::from(cudaMemGetInfo(&free, &total));
  bytes = free;
  return s;
}

}  // namespace specdec::backend

// After the backend functions above, which the model calls by their qualified names.
#include <specdec/targets/device_llama.hpp>

namespace specdec::backend {

#if defined(SPECDEC_CUDA_KERNELS_EXTERN) && !defined(SPECDEC_CUDA_KERNELS_IMPLEMENTATION)
#define SPECDEC_LLAMA_LAUNCH_EXTERN(...) \
  extern template void launch_grid(const cuda&, const kernels::LaunchShape&, const kernels::llama::__VA_ARGS__&);
SPECDEC_LLAMA_GRID_KERNELS(SPECDEC_LLAMA_LAUNCH_EXTERN)
#undef SPECDEC_LLAMA_LAUNCH_EXTERN
#endif

}  // namespace specdec::backend

namespace specdec {

using CudaLlamaOptions = DeviceLlamaOptions;
using CudaLlamaLayout = DeviceLlamaLayout;
using CudaLlamaModel = DeviceLlamaModel<backend::cuda>;
using CudaLlamaTarget = DeviceLlamaTarget<backend::cuda>;
using CudaLlamaBatchTarget = DeviceLlamaBatchTarget<backend::cuda>;

static_assert(BackendTarget<CudaLlamaTarget>);
static_assert(BackendBatchTarget<CudaLlamaBatchTarget>);

}  // namespace specdec

#endif  // SPECDEC_CUDA_OPERATIONS
