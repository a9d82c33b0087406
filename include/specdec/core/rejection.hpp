// Lossless tree verification by rejection sampling: the walk shared by the host verifier and the
// CUDA kernels (written over a lane executor, core/lanes.hpp: one CUDA block per tree, or the
// host's serial loop, with the same bits). No allocation, no exceptions: the caller gives the
// work row and reads a status.
#pragma once

#include <cstdint>

#include <specdec/config.hpp>
#include <specdec/core/lanes.hpp>
#include <specdec/core/philox.hpp>
#include <specdec/core/portable_math.hpp>
#include <specdec/core/sampling.hpp>
#include <specdec/core/tree_view.hpp>

namespace specdec::core {

/// The tokens of a node's children: the rejected proposals a walk's final race excludes (see race).
struct ChildTokens {
  const TreeView* tree;
  node_t node;

  SPECDEC_HD bool contains(int v) const {
    for (node_t c = tree->first_child[node]; c >= 0; c = tree->next_sibling[c])
      if (tree->token[c] == v) return true;
    return false;
  }
  SPECDEC_HD bool in_lane(int lane) const {
    for (node_t c = tree->first_child[node]; c >= 0; c = tree->next_sibling[c])
      if (tree->token[c] % sampling_lanes == lane) return true;
    return false;
  }
};

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
/// Uniforms: random_uniform(key, position of the decided token, accept, i-th test there), and the
/// exponential race of core::race (key, position, sample, ·) for the final draw; a temperature of
/// 0 makes p one-hot at the argmax, and the walk then returns the exact (greedy) verifier's path
/// and next token.
///
/// Passes over the vocabulary per visited node: those of analyse_row (2, + 1 + 4 per top-k/top-p
/// filter; 1 at temperature 0), + 1 per rejected draft distribution's draw (2 after the first
/// one: the residual is stored in `work`), + 1 at the last node for the race (its lane masses; a
/// lane holding a child is summed again, vocab / 256 entries). One-hot proposals cost no pass:
/// p(x) is one exp, a rejected child is subtracted from the mass and excluded from the race
/// (every child left untested then has probability 0).
///
/// `logits_at(node)` returns the target's row (vocab floats) after `node`; `stats_at(node)` its
/// RowStats when known beforehand, else null (they save passes, never change a bit). `work` holds
/// vocab floats. The path is written by ex.leader() (path[0] = 0) and its length returned; the scalar
/// outputs are written by every thread (pass the thread's own variables). *status != ok aborts
/// the walk (the path so far is written, *next_token is -1, *bad_node is the node whose row was
/// bad).
#if defined(__CUDACC__)
#pragma nv_exec_check_disable  // logits_at is a host callable when the host instantiates this
#endif
template <class Ex, class LogitsAt, class StatsAt = NoRowStats>
SPECDEC_HD int rejection_walk(Ex& ex, const TreeView& tree, int vocab, LogitsAt&& logits_at,
                              const SamplingParams& params, RandomKey key, float* work, node_t* path,
                              token_t* next_token, sampling_status* status, node_t* bad_node,
                              const StatsAt& stats_at = {}) {
  int length = 1;
  node_t node = 0;
  if (ex.leader()) path[0] = 0;
  *next_token = -1;
  *bad_node = -1;
  for (;;) {
    RowWeights p;
    float mass = 0.0f;
    *status = analyse_row(ex, logits_at(node), vocab, params, &p, &mass, work, stats_at(node));  // work is free here
    if (*status != sampling_status::ok) {
      *bad_node = node;
      return length;
    }
    bool stored = false;  // p's weights are the residual in `work`, not the row's
    const auto weight = [&](int v) { return stored ? work[v] : p(v); };
    const int position = tree.position(node) + 1;
    std::uint32_t test = 0;
    token_t accepted = -1;
    node_t accepted_node = -1;
    for (int k = tree.proposal_of(node); k >= 0 && accepted < 0; k = tree.next_proposal[k]) {
      const float* q = tree.proposal_q + static_cast<long>(k) * vocab;
      for (int d = tree.draw_begin[k]; d < tree.draw_begin[k + 1]; ++d) {
        const token_t x = tree.draw_token[d];
        const float u = random_uniform(key, position, random_purpose::accept, test++);
        if (mul_rn(mul_rn(u, q[x]), mass) < weight(x)) {  // u < p(x) / q(x), without dividing
          accepted = x;
          accepted_node = tree.draw_node[d];
          break;
        }
        // At temperature 0 the residual of a one-hot p stays one-hot at the argmax: no pass.
        if (p.greedy) continue;
        const float inverse_mass = div_rn(1.0f, mass);
        const auto residual = [&](int v) {
          const float r = sub_rn(mul_rn(weight(v), inverse_mass), q[v]);
          return r > 0.0f ? r : 0.0f;
        };
        // A rejection with an empty residual only happens through rounding when p == q: the exact
        // rejection probability is 0 there, so keeping p is as good as any choice.
        if (!stored) {  // p is recomputable from the row: write the residual while summing it
          const float residual_mass = ex.sum(vocab, [&](int v) {
            const float r = residual(v);
            work[v] = r;
            return r;
          });
          if (residual_mass > 0.0f) {
            stored = true;
            mass = residual_mass;
          }
        } else {  // the residual replaces p in `work`: sum first, overwrite only if non-empty
          const float residual_mass = ex.sum(vocab, residual);
          if (residual_mass > 0.0f) {
            ex.for_each(vocab, [&](int v) { work[v] = residual(v); });
            ex.sync();
            mass = residual_mass;
          }
        }
      }
    }
    for (node_t child = tree.first_child[node]; child >= 0 && accepted < 0; child = tree.next_sibling[child]) {
      const float wx = weight(tree.token[child]);
      if (wx <= 0.0f) continue;  // cannot be accepted; save the draw
      const float u = random_uniform(key, position, random_purpose::accept, test++);
      if (mul_rn(u, mass) < wx) {
        accepted = tree.token[child];
        accepted_node = child;
        break;
      }
      mass = sub_rn(mass, wx);
      if (mass <= 0.0f) {  // rounding: recompute rather than trust a drifting sum
        const node_t last = child;
        mass = ex.sum(vocab, [&](int v) {
          for (node_t c = tree.first_child[node];; c = tree.next_sibling[c]) {
            if (tree.token[c] == v) return 0.0f;
            if (c == last) break;
          }
          return weight(v);
        });
      }
    }
    if (accepted < 0) {  // everything rejected: draw from the residual without the children
      if (p.greedy) {
        *next_token = p.best;
      } else {
        // `stored` decided outside the race, so that its pass over the row vectorises on the host
        const ChildTokens children{&tree, node};
        *next_token = stored ? race(ex, vocab, [&](int v) { return work[v]; }, children, key, position)
                             : race(ex, vocab, p, children, key, position, p.lane_mass);
      }
      return length;
    }
    if (accepted_node < 0) {
      *next_token = accepted;
      return length;
    }
    if (ex.leader()) path[length] = accepted_node;
    ++length;
    node = accepted_node;
  }
}

/// rejection_walk on the host (SerialLanes). Host-only: `logits_at` may be a host lambda.
template <class LogitsAt>
int rejection_walk(const TreeView& tree, int vocab, LogitsAt&& logits_at, const SamplingParams& params,
                   RandomKey key, float* work, node_t* path, token_t* next_token, sampling_status* status,
                   node_t* bad_node) {
  SerialLanes ex;
  return rejection_walk(ex, tree, vocab, logits_at, params, key, work, path, next_token, status, bad_node);
}

}  // namespace specdec::core
