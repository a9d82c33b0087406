#include "kernels/device_decoder.hpp"

#include <specdec/testing/backend_hash_target.hpp>

#include "support/cuda_stream.hpp"

namespace specdec::testing {

DecodeResult decode_on_device(const DecodeCase& c) {
  CudaStream stream;
  BackendHashTarget<backend::cuda> target(c.vocab, c.max_positions, c.seed, 4.0f, stream.tag());
  return decode(target, c);
}

CacheCheck check_cache_after_each_step_on_device(const DecodeCase& c, int steps) {
  CudaStream stream;
  BackendHashTarget<backend::cuda> target(c.vocab, c.max_positions, c.seed, 4.0f, stream.tag());
  return check_cache_after_each_step(target, c, steps);
}

BatchRun run_batch_on_device(const BatchCase& c) {
  CudaStream stream;
  BackendHashBatchTarget<backend::cuda> target(c.vocab, c.max_positions, c.slots, c.seed, 4.0f, stream.tag());
  return run_batch(target, c);
}

}  // namespace specdec::testing
