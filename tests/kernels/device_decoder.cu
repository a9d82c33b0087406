#include "kernels/device_decoder.hpp"

#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include <specdec/testing/backend_hash_target.hpp>

namespace specdec::testing {
namespace {

// A stream for one test, destroyed with it.
class Stream {
 public:
  Stream() {
    const cudaError_t e = cudaStreamCreate(&stream_);
    if (e != cudaSuccess) throw std::runtime_error(std::string("cudaStreamCreate: ") + cudaGetErrorString(e));
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { cudaStreamDestroy(stream_); }
  backend::cuda tag() const { return backend::cuda{stream_}; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace

DecodeResult decode_on_device(const DecodeCase& c) {
  Stream stream;
  BackendHashTarget<backend::cuda> target(c.vocab, c.max_positions, c.seed, 4.0f, stream.tag());
  return decode(target, c);
}

CacheCheck check_cache_after_each_step_on_device(const DecodeCase& c, int steps) {
  Stream stream;
  BackendHashTarget<backend::cuda> target(c.vocab, c.max_positions, c.seed, 4.0f, stream.tag());
  return check_cache_after_each_step(target, c, steps);
}

BatchRun run_batch_on_device(const BatchCase& c) {
  Stream stream;
  BackendHashBatchTarget<backend::cuda> target(c.vocab, c.max_positions, c.slots, c.seed, 4.0f, stream.tag());
  return run_batch(target, c);
}

}  // namespace specdec::testing
