// Host entry to the CUDA backend for the GPU tests (implemented in device_launch.cu, the one CUDA
// translation unit of the tests): copies every array of a descriptor that points to host memory
// onto the device, runs the backend::cuda operation, synchronises, and copies the outputs back
// into the descriptor's host arrays. The tests then compare with backend::host on the same input.
#pragma once

#include <specdec/backend.hpp>

namespace specdec::testing {

backend::status run_on_device(const core::TreeBatch& host);
backend::status run_on_device(const core::GreedyVerifyBatch& host);
backend::status run_on_device(const core::SuffixMatchBatch& host);
backend::status run_on_device(const core::KvCompactionBatch& host);

}  // namespace specdec::testing
