// The backend-step decoding scenarios of tests/support/backend_decode.hpp on backend::cuda
// (defined in device_decoder.cu, the CUDA translation unit), callable from host-compiled tests.
#pragma once

#include <cstdint>
#include <vector>

#include "support/backend_decode.hpp"

namespace specdec::testing {

/// Case `c` decoded by a BackendHashTarget<backend::cuda> on its own stream.
DecodeResult decode_on_device(const DecodeCase& c);

/// Decodes `steps` steps of an oracle-drafted case on the device and returns, after each step,
/// whether the device cache equals the running hashes of the committed tokens.
std::vector<bool> device_cache_matches_after_each_step(const DecodeCase& c, int steps);

}  // namespace specdec::testing
