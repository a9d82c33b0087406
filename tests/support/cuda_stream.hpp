// A CUDA stream for one GPU test, destroyed with it, and the backend tag that runs on it.
#pragma once

#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include <specdec/backend.hpp>

namespace specdec::testing {

class CudaStream {
 public:
  CudaStream() {
    const cudaError_t e = cudaStreamCreate(&stream_);
    if (e != cudaSuccess) throw std::runtime_error(std::string("cudaStreamCreate: ") + cudaGetErrorString(e));
  }
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;
  ~CudaStream() { cudaStreamDestroy(stream_); }
  backend::cuda tag() const { return backend::cuda{stream_}; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace specdec::testing
