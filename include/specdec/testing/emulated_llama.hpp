// EmulatedLlamaTarget and EmulatedLlamaBatchTarget: the device Llama (targets/device_llama.hpp) on
// backend::host, its kernels run by the host's emulated grid (testing/emulated_grid.hpp). The same
// kernel code as CudaLlamaTarget's CUDA-core path, with the same bits, at emulation speed (a
// forward of stories260K takes tens of milliseconds): for CI, which has no GPU, to check the
// device forward's batch invariance, its conformance as a backend target and lossless decoding
// on it; and for a GPU run to compare the device's logits with, bit for bit. With tensor_cores the
// products' MMAs are the emulated grid's (kernels/grid.hpp): the same rule, other sums than a
// tensor core's. Plain C++: no CUDA toolkit needed.
#pragma once

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include <unistd.h>

#include <specdec/backend.hpp>
#include <specdec/error.hpp>
#include <specdec/testing/emulated_grid.hpp>

namespace specdec::backend {

/// The emulated device is the host: always usable.
inline status select_device(host) { return status::ok; }

/// What an emulated model may take, in bytes: the host's available physical memory, or the
/// environment's SPECDEC_EMULATED_MEMORY (bytes, a whole number), which stands for a smaller
/// device in tests of what one refuses.
inline status free_memory(host, std::uint64_t& bytes) {
  if (const char* given = std::getenv("SPECDEC_EMULATED_MEMORY"); given && *given) {
    char* end = nullptr;
    errno = 0;
    const unsigned long long value = std::strtoull(given, &end, 10);
    if (*end != '\0' || errno != 0 || *given == '-')
      throw error(std::string("SPECDEC_EMULATED_MEMORY must be a whole number of bytes, got '") + given + "'");
    bytes = value;
    return status::ok;
  }
  const long pages = sysconf(_SC_AVPHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  bytes = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                                : std::numeric_limits<std::uint64_t>::max();
  return status::ok;
}

/// The emulated grid has mma_bf16 (its host form).
inline status bf16_mma_support(host, std::string& lacking) {
  lacking.clear();
  return status::ok;
}

/// Zeroes `bytes` at `p`.
inline status clear(host, void* p, std::size_t bytes) {
  std::memset(p, 0, bytes);
  return status::ok;
}

}  // namespace specdec::backend

#include <specdec/targets/device_llama.hpp>

// With SPECDEC_EMULATED_KERNELS_EXTERN the model's launches on the emulated grid are compiled
// once, with the executor, in the unit that defines SPECDEC_EMULATED_KERNELS_IMPLEMENTATION
// (testing/emulated_grid.hpp says why; CMake: specdec::emulated_kernels).
#if defined(SPECDEC_EMULATED_KERNELS_EXTERN) && !defined(SPECDEC_EMULATED_KERNELS_IMPLEMENTATION)
namespace specdec::backend {
#define SPECDEC_LLAMA_LAUNCH_EXTERN(...) \
  extern template void launch_grid(host, const kernels::LaunchShape&, const kernels::llama::__VA_ARGS__&);
SPECDEC_LLAMA_GRID_KERNELS(SPECDEC_LLAMA_LAUNCH_EXTERN)
#undef SPECDEC_LLAMA_LAUNCH_EXTERN
}  // namespace specdec::backend
#endif

namespace specdec {

using EmulatedLlamaTarget = DeviceLlamaTarget<backend::host>;
using EmulatedLlamaBatchTarget = DeviceLlamaBatchTarget<backend::host>;

static_assert(BackendTarget<EmulatedLlamaTarget>);
static_assert(BackendBatchTarget<EmulatedLlamaBatchTarget>);

}  // namespace specdec
