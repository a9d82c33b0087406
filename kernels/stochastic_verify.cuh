// Stochastic verification on the GPU: rejection sampling and conditional verification, one CUDA
// thread per tree running the core walks of issue 5 (core::rejection_walk, core::conditional_walk,
// core::sample_token) through core/stochastic_batch.hpp, exactly what the host backend runs.
//
// This is the obviously-correct version, NOT the fast one: each tree's thread makes the core
// functions' sequential passes over the vocabulary (2+ per visited node). A vocabulary-parallel
// version (block reductions for max / log-sum-exp, one residual pass for the rejected row) needs
// core functions whose floating-point summation order is defined blockwise, so that host and
// device still agree; that is future work. Random numbers are Philox keyed by (seed, sequence,
// position, purpose), so the draws do not depend on the launch shape. Device expf may differ from
// the host's std::exp by an ulp or two, which can flip a decision that falls on a rounding
// boundary; the parity tests allow for that (rarely) at temperature > 0.
#pragma once

#include <cuda_runtime.h>

#include <specdec/core/stochastic_batch.hpp>

namespace specdec::kernels {

using core::StochasticVerifyBatch;

template <class Batch>
__global__ void __launch_bounds__(1) rejection_verify_kernel(Batch b, core::SamplingParams params) {
  core::rejection_verify_in_batch(b, blockIdx.x, params);
}

template <class Batch>
__global__ void __launch_bounds__(1) conditional_verify_kernel(Batch b, core::ConditionalParams params,
                                                               core::SamplingParams next) {
  core::conditional_verify_in_batch(b, blockIdx.x, params, next);
}

namespace detail {
inline bool stochastic_shape_ok(const StochasticVerifyBatch& b) {
  return b.max_nodes >= 1 && b.vocab_size >= 1 && b.row_stride >= b.vocab_size && b.work != nullptr;
}
}  // namespace detail

/// One single-thread block per tree (trees spread over the multiprocessors). Asynchronous.
inline cudaError_t rejection_verify(const StochasticVerifyBatch& b, const core::SamplingParams& params,
                                    cudaStream_t stream = nullptr) {
  if (b.batch <= 0) return cudaSuccess;
  if (!detail::stochastic_shape_ok(b) || !core::valid(params)) return cudaErrorInvalidValue;
  rejection_verify_kernel<<<b.batch, 1, 0, stream>>>(b, params);
  return cudaGetLastError();
}

inline cudaError_t conditional_verify(const StochasticVerifyBatch& b, const core::ConditionalParams& params,
                                      const core::SamplingParams& next, cudaStream_t stream = nullptr) {
  if (b.batch <= 0) return cudaSuccess;
  if (!detail::stochastic_shape_ok(b) || b.accepted == nullptr || !core::valid_conditional(params, b.vocab_size) ||
      !core::valid(next))
    return cudaErrorInvalidValue;
  conditional_verify_kernel<<<b.batch, 1, 0, stream>>>(b, params, next);
  return cudaGetLastError();
}

}  // namespace specdec::kernels
