// Lossless tree verification by rejection sampling: the walk shared by the host verifier and the
// CUDA kernels. No allocation, no exceptions: the caller gives the work row and reads a status.
#pragma once

#include <cstdint>

#include <specdec/config.hpp>
#include <specdec/core/philox.hpp>
#include <specdec/core/sampling.hpp>
#include <specdec/tree_view.hpp>

namespace specdec::core {

/// Rejection-sampling walk from the root. At each node, with p the sampling distribution of the
/// target's row there (SamplingParams), the node's proposals are tested in this order:
///  1. the draws of each draft distribution attached below it (TreeView proposals, merge order),
///     each with probability min(1, p(x)/q(x)) against that q; after each rejection
///     p <- norm(max(0, p - q)) (multi-draft / SpecInfer). Draws must be i.i.d. from q.
///  2. every child, in index order, as a fixed one-hot proposal: accept with probability p(x);
///     after a rejection p <- p without x, renormalised. (A child that was also a draw gets a
///     second chance here; that is still exact, since the children are fixed by then.)
/// An accepted token whose node exists continues the walk below it; an accepted draw whose node
/// was cut by the budget becomes the next token. When everything is rejected the next token is
/// drawn from the final residual. The emitted tokens are then distributed exactly as sampling
/// the target token by token.
///
/// Uniforms: random_uniform(key, position of the decided token, accept, i-th test there) and
/// (…, sample, 0) for the final draw; a temperature of 0 makes p one-hot at the argmax, and the
/// walk then returns the exact (greedy) verifier's path and next token.
///
/// `logits_at(node)` returns the target's row (vocab floats) after `node`. `work` holds vocab
/// floats. Writes the path (path[0] = 0) and returns its length; *status != ok aborts the walk
/// (the path so far is written, *next_token is -1, *bad_node is the node whose row was bad).
template <class LogitsAt>
SPECDEC_HD int rejection_walk(const TreeView& tree, int vocab, LogitsAt&& logits_at, const SamplingParams& params,
                              RandomKey key, float* work, node_t* path, token_t* next_token,
                              sampling_status* status, node_t* bad_node) {
  int length = 0;
  node_t node = 0;
  path[length++] = 0;
  *next_token = -1;
  *bad_node = -1;
  for (;;) {
    float mass = 0.0f;
    *status = sampling_weights(logits_at(node), vocab, params, work, &mass);
    if (*status != sampling_status::ok) {
      *bad_node = node;
      return length;
    }
    const int position = tree.position(node) + 1;
    std::uint32_t test = 0;
    token_t accepted = -1;
    node_t accepted_node = -1;
    for (int k = tree.proposal_of(node); k >= 0 && accepted < 0; k = tree.next_proposal[k]) {
      const float* q = tree.proposal_q + static_cast<long>(k) * vocab;
      for (int d = tree.draw_begin[k]; d < tree.draw_begin[k + 1]; ++d) {
        const float u = random_uniform(key, position, random_purpose::accept, test++);
        if (rejection_test(work, &mass, vocab, q, tree.draw_token[d], u)) {
          accepted = tree.draw_token[d];
          accepted_node = tree.draw_node[d];
          break;
        }
      }
    }
    for (node_t child = tree.first_child[node]; child >= 0 && accepted < 0; child = tree.next_sibling[child]) {
      if (work[tree.token[child]] <= 0.0f) continue;  // cannot be accepted; save the draw
      const float u = random_uniform(key, position, random_purpose::accept, test++);
      if (rejection_test(work, &mass, vocab, nullptr, tree.token[child], u)) {
        accepted = tree.token[child];
        accepted_node = child;
      }
    }
    if (accepted < 0) {
      *next_token = sample_from_weights(work, mass, vocab, random_uniform(key, position, random_purpose::sample, 0));
      return length;
    }
    if (accepted_node < 0) {
      *next_token = accepted;
      return length;
    }
    path[length++] = accepted_node;
    node = accepted_node;
  }
}

}  // namespace specdec::core
