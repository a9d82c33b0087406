// ExactVerifier: greedy, lossless verification.
#pragma once

#include <string>

#include <specdec/concepts.hpp>
#include <specdec/core/tree.hpp>
#include <specdec/error.hpp>

namespace specdec {

/// The target's argmax after `node`: its own argmax() when the output has one, else the argmax
/// of its logits row (ties to the lowest id). Throws specdec::error on a NaN row.
template <TargetOutput Out>
token_t argmax_of(const Out& out, node_t node) {
  if constexpr (ArgmaxOutput<Out>) {
    return static_cast<token_t>(out.argmax(node));
  } else {
    const std::span<const float> row = out.logits(node);
    const int best = core::argmax_row(row.data(), static_cast<int>(row.size()));
    if (best < 0) throw error("target output: the logits row of node " + std::to_string(node) + " contains NaN");
    return best;
  }
}

/// Greedy verification: from the root, follow the child whose token is the target's argmax;
/// the longest such path is accepted and the argmax after it is the next token. With it the
/// decoder's output equals plain greedy decoding of the target, token for token.
struct ExactVerifier {
  static constexpr output_need needs = output_need::argmax;

  template <TargetOutput Out>
  void verify(const TreeView& tree, const Out& out, Verdict& verdict) const {
    verdict.path.resize(static_cast<std::size_t>(tree.max_depth) + 1);
    const int length = core::greedy_walk(tree.token, tree.first_child, tree.next_sibling,
                                         [&](node_t node) { return argmax_of(out, node); },
                                         verdict.path.data(), &verdict.next_token);
    verdict.path.resize(static_cast<std::size_t>(length));
  }

  /// The same verification in a backend's memory (a BackendTarget's step). Job is
  /// backend::VerifyJob; greedy_verify is found on the tag's namespace (backend.hpp, which
  /// step/backend_step.hpp includes), so that a host decoder does not compile the backend operations.
  template <class Backend, class Job = backend::VerifyJob>
  backend::status verify_on(const Backend& tag, const Job& job) const {
    return greedy_verify(tag, job.greedy);
  }
};

static_assert(Verifier<ExactVerifier>);

}  // namespace specdec
