// Host entry to the CUDA backend for the GPU tests (implemented in device_launch.cpp, with the
// launchers of specdec::cuda_kernels): copies every array of a descriptor that points to host memory
// onto the device, runs the backend::cuda operation, synchronises, and copies the outputs back
// into the descriptor's host arrays. The tests then compare with backend::host on the same input.
#pragma once

#include <specdec/backend.hpp>

namespace specdec::testing {

backend::status run_on_device(const core::TreeBatch& host);
backend::status run_on_device(const core::GreedyVerifyBatch& host);
backend::status run_on_device(const core::SuffixMatchBatch& host);
backend::status run_on_device(const core::KvCompactionBatch& host);

/// The launch shape of stochastic verification (kernels::StochasticLaunch, which host translation
/// units cannot name): automatic goes through backend::cuda, the others call the kernels directly.
enum class stochastic_shape { automatic, per_tree, row_parallel };

/// Stochastic verification: every TreeView is deep-copied (all its arrays) to the device.
backend::status run_rejection_on_device(const core::StochasticVerifyBatch& host, const core::SamplingParams& params,
                                        stochastic_shape shape = stochastic_shape::automatic);
backend::status run_conditional_on_device(const core::StochasticVerifyBatch& host, const core::ConditionalParams& params,
                                          const core::SamplingParams& next,
                                          stochastic_shape shape = stochastic_shape::automatic);

/// One decoding step's GPU part as a single launch sequence with one synchronisation at its end:
/// tree build, then greedy verification reading the build's outputs in device memory (the
/// descriptor's offsets, token, child lists and build_status are taken from the build, not from
/// `verify`), then KV compaction reading the verifier's path and length in device memory. With
/// `in_graph`, the three launches are captured into a CUDA graph (global capture mode: a call that
/// synchronises or allocates would fail the capture), which is then launched once.
backend::status run_step_on_device(const core::TreeBatch& trees, const core::GreedyVerifyBatch& verify,
                                   const core::KvCompactionBatch& kv, bool in_graph = false);

}  // namespace specdec::testing
