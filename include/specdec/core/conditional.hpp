// Conditional verification (CASD): a lossy verifier that accepts draft tokens the target finds
// likely enough, rather than only the tokens it would have produced. Shared by host and kernels.
#pragma once

#include <cmath>
#include <cstdint>

#include <specdec/config.hpp>
#include <specdec/core/sampling.hpp>
#include <specdec/tree_view.hpp>

namespace specdec::core {

struct ConditionalParams {
  float delta = 0.1f;  ///< accept x when p(x) > max(delta, p(eos))
  int top_k = 0;       ///< mixed mode when > 0: x must also be among the target's top_k tokens
  token_t eos = -1;    ///< end-of-sequence token; -1 = none (the rule is then p(x) > delta)
};

/// Marks accepted[i] for every node: the root is accepted; node i is accepted when its parent is
/// and, with p the softmax (temperature 1) of the target's row after the parent,
/// p(token[i]) > max(delta, p(eos)) and (top_k > 0) at most top_k - 1 tokens have a strictly
/// larger logit. Returns the deepest accepted node, ties to the lowest index, and writes the path
/// to it (path[0] = 0); its length is depth + 1. One pass per accepted parent (+ one per child
/// in mixed mode). On a bad row, *status says why, *bad_node which, and the root alone is returned.
template <class LogitsAt>
SPECDEC_HD int conditional_walk(const TreeView& tree, int vocab, LogitsAt&& logits_at, const ConditionalParams& params,
                                std::uint8_t* accepted, node_t* path, sampling_status* status, node_t* bad_node) {
  *status = sampling_status::ok;
  *bad_node = -1;
  for (int i = 0; i < tree.size; ++i) accepted[i] = i == 0;
  node_t best = 0;
  for (int node = 0; node < tree.size; ++node) {
    if (!accepted[node] || tree.first_child[node] < 0) continue;
    const float* row = logits_at(node);
    float max_logit = -INFINITY, total = 0.0f;
    for (int v = 0; v < vocab; ++v) {  // online log-sum-exp
      const float x = row[v];
      if (x != x || x == INFINITY) {
        *status = x != x ? sampling_status::nan_logit : sampling_status::infinite_logit;
        *bad_node = node;
        path[0] = 0;
        return 1;
      }
      if (x > max_logit) {
        total = total * std::exp(max_logit - x) + 1.0f;
        max_logit = x;
      } else if (x > -INFINITY) {
        total += std::exp(x - max_logit);
      }
    }
    if (max_logit == -INFINITY) {
      *status = sampling_status::no_finite_logit;
      *bad_node = node;
      path[0] = 0;
      return 1;
    }
    const float p_eos = params.eos >= 0 ? std::exp(row[params.eos] - max_logit) / total : 0.0f;
    const float bar = params.delta > p_eos ? params.delta : p_eos;
    for (node_t child = tree.first_child[node]; child >= 0; child = tree.next_sibling[child]) {
      const float x = row[tree.token[child]];
      bool ok = std::exp(x - max_logit) / total > bar;
      if (ok && params.top_k > 0) {
        int larger = 0;
        for (int v = 0; v < vocab && larger < params.top_k; ++v) larger += row[v] > x;
        ok = larger < params.top_k;
      }
      accepted[child] = ok;
      if (ok && (tree.depth[child] > tree.depth[best] || (tree.depth[child] == tree.depth[best] && child < best)))
        best = child;
    }
  }
  const int length = tree.depth[best] + 1;
  for (node_t n = best, k = length - 1; k >= 0; n = tree.parent[n], --k) path[k] = n;
  return length;
}

}  // namespace specdec::core
