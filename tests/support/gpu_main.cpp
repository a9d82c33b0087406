// Entry point of the GPU tests: skip (exit 77, CTest's SKIP_RETURN_CODE) when there is no device.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <cuda_runtime_api.h>

#include <cstdio>

int main(int argc, char* argv[]) {
  int devices = 0;
  const cudaError_t status = cudaGetDeviceCount(&devices);
  if (status != cudaSuccess || devices == 0) {
    std::printf("specdec-skip: no CUDA device (%s); GPU test not run\n",
                status != cudaSuccess ? cudaGetErrorString(status) : "0 devices");
    return 77;
  }
  return Catch::Session().run(argc, argv);
}
