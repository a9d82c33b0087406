// The backend-step decoding scenarios of tests/support/backend_decode.hpp and
// tests/support/backend_batch_decode.hpp on backend::cuda (defined in device_decoder.cpp, compiled
// once; the kernels from specdec::cuda_kernels).
#pragma once

#include "support/backend_batch_decode.hpp"
#include "support/backend_decode.hpp"

namespace specdec::testing {

/// Case `c` decoded by a BackendHashTarget<backend::cuda> on its own stream.
DecodeResult decode_on_device(const DecodeCase& c);

/// check_cache_after_each_step on a BackendHashTarget<backend::cuda>.
CacheCheck check_cache_after_each_step_on_device(const DecodeCase& c, int steps);

/// Case `c`'s schedule decoded by a SpeculativeBatch on a BackendHashBatchTarget<backend::cuda>.
BatchRun run_batch_on_device(const BatchCase& c);

}  // namespace specdec::testing
