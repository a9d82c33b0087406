// Conditional verification (CASD): a lossy verifier that accepts draft tokens the target finds
// likely enough, rather than only the tokens it would have produced. Shared by host and kernels
// (written over a lane executor, core/lanes.hpp, like the rejection walk).
#pragma once

#include <cstdint>

#include <specdec/config.hpp>
#include <specdec/core/lanes.hpp>
#include <specdec/core/portable_math.hpp>
#include <specdec/core/sampling.hpp>
#include <specdec/core/tree_view.hpp>

namespace specdec::core {

/// The distribution conditional verification compares draft tokens against: the plain softmax.
SPECDEC_HD constexpr SamplingParams conditional_softmax() { return SamplingParams{1.0f}; }

/// ConditionalParams::eos of a target that has no end-of-sequence token: the rule is then
/// p(x) > delta. Said explicitly; an eos left unset (kEosUnset) is refused by ConditionalVerifier,
/// since it would silently turn off CASD's EOS guard.
inline constexpr token_t kNoEos = -1;
/// ConditionalParams::eos when none was given.
inline constexpr token_t kEosUnset = -2;

struct ConditionalParams {
  float delta = 0.1f;       ///< accept x when p(x) > max(delta, p(eos))
  int top_k = 0;            ///< mixed mode when > 0: x must also be among the target's top_k tokens
  token_t eos = kEosUnset;  ///< end-of-sequence token (required); kNoEos for a target without one
};

/// Marks accepted[i] for every node: the root is accepted; node i is accepted when its parent is
/// and, with p the softmax (temperature 1) of the target's row after the parent,
/// p(token[i]) > max(delta, p(eos)) and (top_k > 0) at most top_k - 1 tokens have a strictly
/// larger logit. Returns the deepest accepted node, ties to the lowest index, and writes the path
/// to it (path[0] = 0); its length is depth + 1. Passes per accepted parent with children: 2
/// (core::analyse_row: argmax with the NaN/+inf check, then the softmax's sum in the lane order), + 1 count per
/// child in mixed mode. On a bad row, *status says why, *bad_node which, and the root alone is
/// returned. `accepted` and `path` are written by ex.leader() and synchronised before the return;
/// the scalar outputs by every thread. `stats_at(node)`: as in rejection_walk (RowStats at
/// temperature 1 spare both passes of analyse_row).
#if defined(__CUDACC__)
#pragma nv_exec_check_disable  // logits_at is a host callable when the host instantiates this
#endif
template <class Ex, class LogitsAt, class StatsAt = NoRowStats>
SPECDEC_HD int conditional_walk(Ex& ex, const TreeView& tree, int vocab, LogitsAt&& logits_at,
                                const ConditionalParams& params, std::uint8_t* accepted, node_t* path,
                                sampling_status* status, node_t* bad_node, const StatsAt& stats_at = {}) {
  *status = sampling_status::ok;
  *bad_node = -1;
  ex.for_each(tree.size, [&](int i) { accepted[i] = i == 0; });
  ex.sync();
  node_t best = 0;
  for (int node = 0; node < tree.size; ++node) {
    if (!accepted[node] || tree.first_child[node] < 0) continue;
    const float* row = logits_at(node);
    // The softmax at temperature 1, unfiltered: no scratch row is needed.
    RowWeights softmax;
    float total = 0.0f;
    *status = analyse_row(ex, row, vocab, conditional_softmax(), &softmax, &total, nullptr, stats_at(node));
    if (*status != sampling_status::ok) {
      *bad_node = node;
      if (ex.leader()) path[0] = 0;
      ex.sync();
      return 1;
    }
    const auto probability = [&](token_t x) { return div_rn(softmax(x), total); };
    const float p_eos = params.eos >= 0 ? probability(params.eos) : 0.0f;
    const float bar = params.delta > p_eos ? params.delta : p_eos;
    for (node_t child = tree.first_child[node]; child >= 0; child = tree.next_sibling[child]) {
      bool ok = probability(tree.token[child]) > bar;
      if (ok && params.top_k > 0) {
        const float x = row[tree.token[child]];
        ok = ex.count(vocab, [&](int v) { return row[v] > x; }) < static_cast<std::uint64_t>(params.top_k);
      }
      if (ex.leader()) accepted[child] = ok;
      if (ok && (tree.depth[child] > tree.depth[best] || (tree.depth[child] == tree.depth[best] && child < best)))
        best = child;
    }
    ex.sync();  // the children's flags are read when the loop reaches them
  }
  const int length = tree.depth[best] + 1;
  if (ex.leader())
    for (node_t n = best, k = length - 1; k >= 0; n = tree.parent[n], --k) path[k] = n;
  ex.sync();
  return length;
}

/// conditional_walk on the host (SerialLanes). Host-only: `logits_at` may be a host lambda.
template <class LogitsAt>
int conditional_walk(const TreeView& tree, int vocab, LogitsAt&& logits_at, const ConditionalParams& params,
                     std::uint8_t* accepted, node_t* path, sampling_status* status, node_t* bad_node) {
  SerialLanes ex;
  return conditional_walk(ex, tree, vocab, logits_at, params, accepted, path, status, bad_node);
}

}  // namespace specdec::core
