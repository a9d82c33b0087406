// Where the CUDA kernels are compiled. By default (a header library) every launcher of the step's
// kernels (tree build, greedy and stochastic verification, suffix matching, KV compaction) is an
// inline function, and the kernels it launches are compiled in every .cu file that includes it,
// whether the file launches them or not (some 20 kernels: 4 s of nvcc a file on a 2-core VM). A
// program of many such files may define SPECDEC_CUDA_KERNELS_EXTERN in all of them (they then
// only declare the launchers) and compile one more file that defines
// SPECDEC_CUDA_KERNELS_IMPLEMENTATION and includes <specdec/backend.hpp> (CMake, in this
// project's build: link specdec::cuda_kernels, src/cuda_kernels.cu), as
// SPECDEC_HOST_KERNELS_EXTERN does for the host kernels. The same code with the same flags: the
// same bits.
//
// This header declares the launchers (with their default arguments) and the types they take, for
// the host compiler too: a C++ file compiled without nvcc that defines SPECDEC_CUDA_KERNELS_EXTERN
// gets them, and with them <specdec/backend.hpp>'s CUDA operations, from here (it needs the CUDA
// runtime's headers and library, CUDA::cudart). The kernels' .cuh files define each one, with
// SPECDEC_CUDA_LAUNCHER again, inside #if SPECDEC_CUDA_KERNELS_DEFINED.
#pragma once

#include <cstddef>

#include <cuda_runtime_api.h>

#include <specdec/core/batch.hpp>
#include <specdec/core/stochastic_batch.hpp>

#if defined(SPECDEC_CUDA_KERNELS_EXTERN) && !defined(SPECDEC_CUDA_KERNELS_IMPLEMENTATION)
#define SPECDEC_CUDA_LAUNCHER
#define SPECDEC_CUDA_KERNELS_DEFINED 0
#elif defined(SPECDEC_CUDA_KERNELS_IMPLEMENTATION)
#define SPECDEC_CUDA_LAUNCHER
#define SPECDEC_CUDA_KERNELS_DEFINED 1
#else
#define SPECDEC_CUDA_LAUNCHER inline
#define SPECDEC_CUDA_KERNELS_DEFINED 1
#endif

namespace specdec::kernels {

using core::GreedyVerifyBatch;
using core::KvCompactionBatch;
using core::StochasticVerifyBatch;
using core::SuffixMatchBatch;
using core::TreeBatch;

/// Launches the tree build for the whole batch on `stream` (asynchronous; results and per-tree
/// status land in the batch's arrays). cudaErrorInvalidValue when the node limit exceeds
/// max_tree_nodes (tree_build.cuh).
SPECDEC_CUDA_LAUNCHER cudaError_t build_trees(const TreeBatch& batch, cudaStream_t stream = nullptr);

/// Device workspace of greedy_verify (the per-split keys).
SPECDEC_CUDA_LAUNCHER std::size_t greedy_verify_workspace_bytes(const GreedyVerifyBatch& b);

/// Launches both passes of greedy verification on `stream` (asynchronous, greedy_verify.cuh).
/// cudaErrorInvalidValue for shapes the grid cannot hold (max_nodes > 65535, batch > 65535),
/// vocab_size < 1, row_stride < vocab_size or a too small workspace.
SPECDEC_CUDA_LAUNCHER cudaError_t greedy_verify(const GreedyVerifyBatch& b, void* workspace, std::size_t workspace_bytes,
                                                cudaStream_t stream = nullptr);

enum class StochasticLaunch {
  automatic,     ///< row_parallel for small batches (stochastic_launch), else per_tree
  per_tree,      ///< the walk kernel alone (no workspace)
  row_parallel,  ///< the RowStats pre-pass, then the walks (workspace: stochastic_verify_workspace_bytes)
};

/// Device workspace of rejection_verify / conditional_verify with this launch shape: RowStats
/// (1040 bytes) per node slot plus the split argmax keys when row-parallel, 0 per tree.
SPECDEC_CUDA_LAUNCHER std::size_t stochastic_verify_workspace_bytes(const StochasticVerifyBatch& b,
                                                                    StochasticLaunch launch = StochasticLaunch::automatic);

/// RejectionSampling's verification of every tree, asynchronous on `stream` (stochastic_verify.cuh).
/// The workspace (device memory, stochastic_verify_workspace_bytes) is needed by the row-parallel
/// shape only.
SPECDEC_CUDA_LAUNCHER cudaError_t rejection_verify(const StochasticVerifyBatch& b, const core::SamplingParams& params,
                                                   void* workspace, std::size_t workspace_bytes,
                                                   cudaStream_t stream = nullptr,
                                                   StochasticLaunch launch = StochasticLaunch::automatic);

/// ConditionalVerifier's verification of every tree (RowStats at temperature 1 when row-parallel).
SPECDEC_CUDA_LAUNCHER cudaError_t conditional_verify(const StochasticVerifyBatch& b, const core::ConditionalParams& params,
                                                     const core::SamplingParams& next, void* workspace,
                                                     std::size_t workspace_bytes, cudaStream_t stream = nullptr,
                                                     StochasticLaunch launch = StochasticLaunch::automatic);

/// Device workspace suffix_match needs (the per-block top lists, sized for any k).
SPECDEC_CUDA_LAUNCHER std::size_t suffix_match_workspace_bytes(const SuffixMatchBatch& b);

/// Launches the suffix scan and the selection on `stream` (asynchronous, suffix_match.cuh).
/// cudaErrorInvalidValue when max_match > suffix_max_match, k > suffix_max_k or the workspace is
/// too small. A sequence longer than max_context gets match_count -1 and no drafts.
SPECDEC_CUDA_LAUNCHER cudaError_t suffix_match(const SuffixMatchBatch& b, void* workspace, std::size_t workspace_bytes,
                                               cudaStream_t stream = nullptr);

/// Launches the KV compaction on `stream` (asynchronous; no workspace, kv_compaction.cuh). Reads
/// path and length from device memory, so it can follow the verify kernels without a host round
/// trip. cudaErrorInvalidValue for shapes the grid cannot hold or max_nodes too large for the
/// staging buffer.
SPECDEC_CUDA_LAUNCHER cudaError_t compact_kv(const KvCompactionBatch& b, cudaStream_t stream = nullptr);

}  // namespace specdec::kernels
