// `--device cuda` (device.hpp) in a CUDA build: device_runs.hpp on CudaLlamaTarget. Compiled by
// the host compiler: the kernels come from specdec::cuda_kernels (SPECDEC_CUDA_KERNELS_EXTERN).
#include <string>

#include <cuda_runtime.h>

#include <specdec/targets/cuda_llama.hpp>

#include "device_runs.hpp"

namespace specbench {

namespace {

struct Cuda {
  using backend = specdec::backend::cuda;
  static constexpr const char* option = "--device cuda";
  static constexpr const char* timer = "CUDA events";
  static constexpr const char* kind = "GPU";

  /// Device 0's name, once a device is visible.
  static std::string require() {
    int devices = 0;
    const cudaError_t status = cudaGetDeviceCount(&devices);
    if (status != cudaSuccess || devices == 0)
      throw input_error(std::string("--device cuda: no CUDA device is visible (") +
                        (status != cudaSuccess ? cudaGetErrorString(status) : "0 devices") +
                        "); run on a machine with an NVIDIA GPU and its driver");
    cudaDeviceProp p{};
    if (const cudaError_t e = cudaGetDeviceProperties(&p, 0); e != cudaSuccess)
      throw input_error(std::string("--device cuda: cudaGetDeviceProperties failed: ") + cudaGetErrorString(e));
    return p.name;
  }

  /// NVML's meter of device 0, found by its PCI bus id.
  static EnergyMeter energy_meter() {
    char bus[32] = {};
    if (const cudaError_t e = cudaDeviceGetPCIBusId(bus, sizeof bus, 0); e != cudaSuccess)
      return EnergyMeter::unavailable(std::string("cudaDeviceGetPCIBusId failed: ") + cudaGetErrorString(e));
    return EnergyMeter(bus);
  }
};

}  // namespace

const DeviceRuns& cuda_runs() {
  static const device_runs_detail::BackendRuns<Cuda> runs;
  return runs;
}

}  // namespace specbench
