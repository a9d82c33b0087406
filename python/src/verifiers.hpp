// The module's verifiers, each compiled once, and the host verification of a tree against rows of
// logits in the caller's memory. Kept apart from session.hpp so that the CUDA translation unit
// (device_verify.cpp) needs only these and the backend.
#pragma once

#include <cstdint>
#include <span>
#include <variant>

#include <specdec/config.hpp>
#include <specdec/core/tree_view.hpp>
#include <specdec/verdict.hpp>
#include <specdec/policies/verifiers/conditional.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>

namespace specdec::python {

using AnyVerifier = std::variant<ExactVerifier, RejectionSampling, ConditionalVerifier>;

/// Rows of logits in the caller's host memory, one per tree node (LogitsOutput).
struct RowMajorLogits {
  const float* data = nullptr;
  std::int64_t row_stride = 0;  ///< floats from one row to the next
  int rows = 0;
  int vocab = 0;
  std::span<const float> logits(node_t node) const {
    return {data + static_cast<std::int64_t>(node) * row_stride, static_cast<std::size_t>(vocab)};
  }
};

/// Verifies `tree` against `logits` (checked by the caller: one row per node) on the host.
inline void verify_tree(AnyVerifier& verifier, const TreeView& tree, const RowMajorLogits& logits, Verdict& verdict) {
  std::visit([&](auto& v) { v.verify(tree, logits, verdict); }, verifier);
}

}  // namespace specdec::python
