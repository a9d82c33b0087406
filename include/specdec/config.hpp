// Basic types and the host/device annotation shared by every specdec header.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SPECDEC_HD __host__ __device__
// Before a host/device function template that calls a callable the caller gives: on the host the
// callable may be host-only (a policy's lambda over a target's output), which is fine, so nvcc's
// execution-space check is turned off for it.
#define SPECDEC_NO_EXEC_CHECK _Pragma("nv_exec_check_disable")
#else
#define SPECDEC_HD
#define SPECDEC_NO_EXEC_CHECK
#endif

// `#pragma unroll` for device code (host compilers would warn about an unknown pragma).
#if defined(__CUDA_ARCH__)
#define SPECDEC_UNROLL _Pragma("unroll")
#else
#define SPECDEC_UNROLL
#endif

namespace specdec {

/// A token id of the target's vocabulary (32-bit: vocabularies beyond 65k are common).
using token_t = std::int32_t;
/// An index of a node in a draft tree; node 0 is the root.
using node_t = std::int32_t;

}  // namespace specdec
