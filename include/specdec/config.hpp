// Basic types and the host/device annotation shared by every specdec header.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define SPECDEC_HD __host__ __device__
#else
#define SPECDEC_HD
#endif

namespace specdec {

/// A token id of the target's vocabulary (32-bit: vocabularies beyond 65k are common).
using token_t = std::int32_t;
/// An index of a node in a draft tree; node 0 is the root.
using node_t = std::int32_t;

}  // namespace specdec
