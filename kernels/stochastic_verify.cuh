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
// Two launch shapes, chosen by batch size (StochasticLaunch):
//  - per tree: the walk kernel alone. Each block reads the rows its walk visits, two or three
//    passes each, at one multiprocessor's bandwidth: right when there are trees for every
//    multiprocessor, and the rows nobody visits are never read.
//  - row-parallel (small batches): a pre-pass computes every node's core::RowStats first, with
//    the whole GPU: (1) the largest argmax key of each row, the vocabulary split over blocks as in
//    greedy verification; (2) the 256 lane masses of each row, a warp per 32 lanes of a row (each
//    lane's sum must stay one thread's sequential sum to keep the lane order's bits). Then the
//    walks read a few hundred entries per visited row (the race's winning lane and the lanes of
//    rejected children) instead of whole rows; with top-k/top-p only the argmax pass is spared.
//    The bits are the same as per tree (tests/core/stochastic_batch_test.cpp checks the walks
//    with and without RowStats on the host).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include <specdec/core/lanes.hpp>
#include <specdec/core/stochastic_batch.hpp>
#include <specdec/kernels/greedy_verify.cuh>
#include <specdec/kernels/launchers.hpp>

namespace specdec::kernels {

namespace detail {
inline constexpr int stats_threads = 128;  // 4 warps; each sums 32 lanes of one row
}  // namespace detail

/// Pre-pass 1: the largest argmax key of each (node row, split), grid (splits, max_nodes, batch).
template <bool Vec4, class Batch>
__global__ void __launch_bounds__(detail::argmax_threads)
    row_top_key_kernel(Batch b, int splits, int chunk, std::uint64_t* partial) {
  const int tree = blockIdx.z, node = blockIdx.y, split = blockIdx.x;
  const int n = b.trees[tree].size;
  if (node >= n || n > b.max_nodes) return;  // uniform over the block
  const int lo = split * chunk;
  const int hi = lo + chunk < b.vocab_size ? lo + chunk : b.vocab_size;
  const std::uint64_t best = block_top_key<Vec4>(core::detail::logits_row(b, tree, node), lo, hi);
  if (threadIdx.x == 0) partial[(static_cast<long long>(tree) * b.max_nodes + node) * splits + split] = best;
}

/// Pre-pass 2: RowStats of each node row, a warp per 32 lanes (core::row_stats_thread).
template <class Batch>
__global__ void __launch_bounds__(detail::stats_threads)
    row_stats_kernel(Batch b, core::SamplingParams params, int splits, const std::uint64_t* partial,
                     core::RowStats* stats) {
  core::row_stats_thread(b, params, splits, partial, stats,
                         static_cast<long long>(blockIdx.x) * detail::stats_threads + threadIdx.x);
}

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

/// Byte offset of the partial keys in the row-parallel workspace (after the RowStats).
inline std::size_t partial_keys_at(const StochasticVerifyBatch& b) {
  return sizeof(core::RowStats) * static_cast<std::size_t>(b.batch) * b.max_nodes;
}

/// Bytes of the row-parallel workspace when each row is split `splits` ways.
inline std::size_t row_parallel_bytes(const StochasticVerifyBatch& b, int splits) {
  return partial_keys_at(b) + sizeof(std::uint64_t) * static_cast<std::size_t>(b.batch) * b.max_nodes * splits;
}
}  // namespace detail

/// The launch shape `automatic` stands for: row-parallel while the batch's rows are few enough
/// for the whole GPU to read them all sooner than one block per tree reads the visited ones, and
/// rows long enough for that to outweigh the pre-pass's two extra launches (vocab >= 8192).
/// Measured on an H200 (bench/kernels_bench, docs/performance.md): row-parallel was 2-24x faster
/// at every shape timed, up to 64 trees x 64 nodes (31 rows per multiprocessor), hence the bound
/// of 32 rows per multiprocessor; past it (more trees than were timed) per tree.
inline StochasticLaunch stochastic_launch(const StochasticVerifyBatch& b, StochasticLaunch requested) {
  if (requested != StochasticLaunch::automatic) return requested;
  const bool few_rows = static_cast<long long>(b.batch) * b.max_nodes <= 32LL * detail::multiprocessors();
  return few_rows && b.vocab_size >= 8192 ? StochasticLaunch::row_parallel : StochasticLaunch::per_tree;
}

namespace detail {
/// Enqueues the walk kernel `launch_walk(batch)` with the given shape; row-parallel first runs
/// the pre-pass for `params` into the workspace and hands the walks a batch that points to it.
template <class LaunchWalk>
cudaError_t launch_stochastic(StochasticVerifyBatch b, const core::SamplingParams& params, StochasticLaunch launch,
                              void* workspace, std::size_t workspace_bytes, cudaStream_t stream,
                              LaunchWalk&& launch_walk) {
  if (stochastic_launch(b, launch) == StochasticLaunch::row_parallel) {
    if (b.max_nodes > 65535 || b.batch > 65535) return cudaErrorInvalidValue;
    const long long rows = static_cast<long long>(b.batch) * b.max_nodes;
    const int splits = vocab_splits(rows, b.vocab_size);
    if (workspace == nullptr || workspace_bytes < row_parallel_bytes(b, splits)) return cudaErrorInvalidValue;
    auto* stats = static_cast<core::RowStats*>(workspace);
    auto* partial = reinterpret_cast<std::uint64_t*>(static_cast<unsigned char*>(workspace) + partial_keys_at(b));
    const bool vec4 = b.row_stride % 4 == 0 && reinterpret_cast<std::uintptr_t>(b.logits) % 16 == 0;
    const int chunk = split_chunk(b.vocab_size, splits, vec4);
    const dim3 grid(splits, b.max_nodes, b.batch);
    if (vec4) row_top_key_kernel<true><<<grid, argmax_threads, 0, stream>>>(b, splits, chunk, partial);
    else row_top_key_kernel<false><<<grid, argmax_threads, 0, stream>>>(b, splits, chunk, partial);
    const long long warps = rows * core::row_stats_warps_per_row;
    const long long blocks = (warps * 32 + stats_threads - 1) / stats_threads;
    if (blocks > 0x7fffffffLL) return cudaErrorInvalidValue;
    row_stats_kernel<<<static_cast<unsigned>(blocks), stats_threads, 0, stream>>>(b, params, splits, partial, stats);
    b.row_stats = stats;
  }
  launch_walk(b);
  return cudaGetLastError();
}
}  // namespace detail

// The launchers (declared in launchers.hpp).
#if SPECDEC_CUDA_KERNELS_DEFINED
SPECDEC_CUDA_LAUNCHER std::size_t stochastic_verify_workspace_bytes(const StochasticVerifyBatch& b,
                                                                    StochasticLaunch launch) {
  if (b.batch <= 0 || b.max_nodes <= 0 || stochastic_launch(b, launch) != StochasticLaunch::row_parallel) return 0;
  return detail::row_parallel_bytes(b, vocab_splits(static_cast<long long>(b.batch) * b.max_nodes, b.vocab_size));
}

SPECDEC_CUDA_LAUNCHER cudaError_t rejection_verify(const StochasticVerifyBatch& b, const core::SamplingParams& params,
                                                   void* workspace, std::size_t workspace_bytes, cudaStream_t stream,
                                                   StochasticLaunch launch) {
  if (b.batch <= 0) return cudaSuccess;
  if (!detail::stochastic_shape_ok(b) || !core::valid(params)) return cudaErrorInvalidValue;
  return detail::launch_stochastic(b, params, launch, workspace, workspace_bytes, stream,
                                   [&](const StochasticVerifyBatch& walk) {
                                     rejection_verify_kernel<<<b.batch, core::sampling_lanes, 0, stream>>>(walk, params);
                                   });
}

SPECDEC_CUDA_LAUNCHER cudaError_t conditional_verify(const StochasticVerifyBatch& b, const core::ConditionalParams& params,
                                                     const core::SamplingParams& next, void* workspace,
                                                     std::size_t workspace_bytes, cudaStream_t stream,
                                                     StochasticLaunch launch) {
  if (b.batch <= 0) return cudaSuccess;
  if (!detail::stochastic_shape_ok(b) || b.accepted == nullptr || !core::valid_conditional(params, b.vocab_size) ||
      !core::valid(next))
    return cudaErrorInvalidValue;
  return detail::launch_stochastic(b, core::conditional_softmax(), launch, workspace, workspace_bytes, stream,
                                   [&](const StochasticVerifyBatch& walk) {
                                     conditional_verify_kernel<<<b.batch, core::sampling_lanes, 0, stream>>>(walk, params,
                                                                                                          next);
                                   });
}
#endif

}  // namespace specdec::kernels
