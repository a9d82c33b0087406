// Stochastic verification on the GPU: rejection sampling and conditional verification, one block
// of core::sampling_lanes (256) threads per tree, vocabulary-parallel. Each block runs the core
// walks (core::rejection_walk, core::conditional_walk, core::sample_token, through
// core/stochastic_batch.hpp) with the BlockLanes executor (core/lanes.hpp): the threads split
// every pass over a row by lane (entry v to thread v % 256), reduce through shared memory and
// warp shuffles, and all take the same scalar decisions from the broadcast results. Float sums
// follow the lane order, everything else is integer, and exp/log are core/portable_math.hpp's, so
// the results are bit for bit those of the host backend (SerialLanes) at every temperature.
//
// Random numbers are Philox keyed by (seed, sequence, position, purpose), so the draws do not
// depend on the launch shape.
//
// One block reads a row at one multiprocessor's bandwidth; for small batches a row could be split
// over several blocks (docs/cuda.md describes that next step).
#pragma once

#include <cuda_runtime.h>

#include <specdec/core/lanes.hpp>
#include <specdec/core/stochastic_batch.hpp>

namespace specdec::kernels {

using core::StochasticVerifyBatch;

// Templates (on the descriptor type) so that several CUDA translation units can include this
// header without defining the kernels twice.
template <class Batch>
__global__ void __launch_bounds__(core::sampling_lanes) rejection_verify_kernel(Batch b, core::SamplingParams params) {
  __shared__ core::BlockLanes::Storage storage;
  core::BlockLanes ex(storage);
  core::rejection_verify_in_batch(ex, b, static_cast<int>(blockIdx.x), params);
}

template <class Batch>
__global__ void __launch_bounds__(core::sampling_lanes)
    conditional_verify_kernel(Batch b, core::ConditionalParams params, core::SamplingParams next) {
  __shared__ core::BlockLanes::Storage storage;
  core::BlockLanes ex(storage);
  core::conditional_verify_in_batch(ex, b, static_cast<int>(blockIdx.x), params, next);
}

namespace detail {
inline bool stochastic_shape_ok(const StochasticVerifyBatch& b) {
  return b.max_nodes >= 1 && b.vocab_size >= 1 && b.row_stride >= b.vocab_size && b.work != nullptr;
}
}  // namespace detail

/// One block of 256 threads per tree (trees spread over the multiprocessors). Asynchronous.
inline cudaError_t rejection_verify(const StochasticVerifyBatch& b, const core::SamplingParams& params,
                                    cudaStream_t stream = nullptr) {
  if (b.batch <= 0) return cudaSuccess;
  if (!detail::stochastic_shape_ok(b) || !core::valid(params)) return cudaErrorInvalidValue;
  rejection_verify_kernel<<<b.batch, core::sampling_lanes, 0, stream>>>(b, params);
  return cudaGetLastError();
}

inline cudaError_t conditional_verify(const StochasticVerifyBatch& b, const core::ConditionalParams& params,
                                      const core::SamplingParams& next, cudaStream_t stream = nullptr) {
  if (b.batch <= 0) return cudaSuccess;
  if (!detail::stochastic_shape_ok(b) || b.accepted == nullptr || !core::valid_conditional(params, b.vocab_size) ||
      !core::valid(next))
    return cudaErrorInvalidValue;
  conditional_verify_kernel<<<b.batch, core::sampling_lanes, 0, stream>>>(b, params, next);
  return cudaGetLastError();
}

}  // namespace specdec::kernels
