// Batched stochastic verification (rejection sampling, conditional verification) on the core
// walks (core/rejection.hpp, core/conditional.hpp, core/sampling.hpp): the descriptor both
// backends take and the per-tree function both run, over a lane executor (core/lanes.hpp): the
// host backend with SerialLanes, the CUDA kernels with one block of 256 threads per tree
// (BlockLanes), bit for bit the same; and the row-parallel pre-pass (RowStats of every node)
// that the kernels run first for small batches. Each tree is a full TreeView (its arrays in the
// backend's memory), so draft distributions (add_sampled proposals) come along.
#pragma once

#include <cstdint>

#include <specdec/config.hpp>
#include <specdec/core/conditional.hpp>
#include <specdec/core/lanes.hpp>
#include <specdec/core/philox.hpp>
#include <specdec/core/rejection.hpp>
#include <specdec/core/sampling.hpp>
#include <specdec/core/tree_view.hpp>

namespace specdec::core {

enum class stochastic_status : int {
  ok = 0,
  over_capacity,  ///< the tree has more than max_nodes nodes (nothing verified)
  bad_row,        ///< a logits row was unusable: see row_status and bad_node
};

SPECDEC_HD constexpr const char* to_string(stochastic_status s) {
  switch (s) {
    case stochastic_status::ok: return "ok";
    case stochastic_status::over_capacity: return "more nodes than max_nodes";
    case stochastic_status::bad_row: return "a logits row was unusable (NaN, +inf or all -inf)";
  }
  return "unknown stochastic verification status";
}

struct StochasticVerifyBatch {
  int batch = 0;
  int max_nodes = 0;  ///< bound on every tree's size; path and accepted hold max_nodes per tree
  int vocab_size = 0;
  long long row_stride = 0;          ///< floats between logits rows (>= vocab_size)
  const TreeView* trees = nullptr;   ///< per tree
  const int* row_offset = nullptr;   ///< per tree: node i's logits row is row_offset[b] + i
  const float* logits = nullptr;
  const RandomKey* keys = nullptr;   ///< per tree: (seed, sequence) of its random stream
  float* work = nullptr;             ///< batch * vocab_size floats of scratch
  std::uint8_t* accepted = nullptr;  ///< batch * max_nodes (conditional verification only)
  node_t* path = nullptr;            ///< tree b's accepted path at path + b * max_nodes
  int* length = nullptr;
  token_t* next_token = nullptr;
  stochastic_status* status = nullptr;
  sampling_status* row_status = nullptr;  ///< why a row was bad (ok otherwise)
  node_t* bad_node = nullptr;             ///< the node whose row was bad (-1 otherwise)
  /// Optional: node i of tree b's RowStats at row_stats[b * max_nodes + i], computed beforehand
  /// for the walk's parameters (fill_row_stats_in_batch; the CUDA row-parallel launch fills its
  /// own). They spare the walk passes over rows; the results are the same bits without them.
  const RowStats* row_stats = nullptr;
};

/// The parameters ConditionalVerifier accepts: 0 <= delta <= 1, top_k >= 0, -1 <= eos < vocab.
SPECDEC_HD inline bool valid_conditional(const ConditionalParams& params, int vocab) {
  return params.delta >= 0.0f && params.delta <= 1.0f && params.top_k >= 0 && params.eos >= -1 && params.eos < vocab;
}

namespace detail {
SPECDEC_HD inline const float* logits_row(const StochasticVerifyBatch& b, int tree, node_t node) {
  return b.logits + (static_cast<long long>(b.row_offset[tree]) + node) * b.row_stride;
}

/// Clears tree's outputs (leader); false (and over_capacity) when the tree does not fit.
template <class Ex>
SPECDEC_HD bool start_tree(Ex& ex, const StochasticVerifyBatch& b, int tree) {
  const int n = b.trees[tree].size;
  const bool fits = n >= 1 && n <= b.max_nodes;
  if (ex.leader()) {
    b.length[tree] = 0;
    b.next_token[tree] = -1;
    b.row_status[tree] = sampling_status::ok;
    b.bad_node[tree] = -1;
    b.status[tree] = fits ? stochastic_status::ok : stochastic_status::over_capacity;
  }
  return fits;
}

/// The RowStats of tree's nodes, or none.
struct BatchRowStats {
  const StochasticVerifyBatch* b;
  int tree;
  SPECDEC_HD const RowStats* operator()(node_t node) const {
    return b->row_stats ? b->row_stats + static_cast<long long>(tree) * b->max_nodes + node : nullptr;
  }
};

/// Writes tree's results (leader) and returns its status.
template <class Ex>
SPECDEC_HD stochastic_status finish_tree(Ex& ex, const StochasticVerifyBatch& b, int tree, int length, token_t next,
                                         sampling_status row, node_t bad) {
  const stochastic_status status = row == sampling_status::ok ? stochastic_status::ok : stochastic_status::bad_row;
  if (ex.leader()) {
    b.length[tree] = length;
    b.next_token[tree] = row == sampling_status::ok ? next : -1;
    b.row_status[tree] = row;
    b.bad_node[tree] = bad;
    b.status[tree] = status;
  }
  return status;
}
}  // namespace detail

/// RejectionSampling::verify for tree `tree` (core::rejection_walk). Parameters must be valid.
template <class Ex>
SPECDEC_HD stochastic_status rejection_verify_in_batch(Ex& ex, const StochasticVerifyBatch& b, int tree,
                                                       const SamplingParams& params) {
  if (!detail::start_tree(ex, b, tree)) return stochastic_status::over_capacity;
  sampling_status row = sampling_status::ok;
  node_t bad = -1;
  token_t next = -1;
  const int length = rejection_walk(
      ex, b.trees[tree], b.vocab_size, [&](node_t node) { return detail::logits_row(b, tree, node); }, params,
      b.keys[tree], b.work + static_cast<long long>(tree) * b.vocab_size,
      b.path + static_cast<long long>(tree) * b.max_nodes, &next, &row, &bad, detail::BatchRowStats{&b, tree});
  return detail::finish_tree(ex, b, tree, length, next, row, bad);
}

/// ConditionalVerifier::verify for tree `tree`: core::conditional_walk, then the next token after
/// the path sampled with `next` (temperature 0: greedy). Parameters must be valid.
template <class Ex>
SPECDEC_HD stochastic_status conditional_verify_in_batch(Ex& ex, const StochasticVerifyBatch& b, int tree,
                                                         const ConditionalParams& params,
                                                         const SamplingParams& next) {
  if (!detail::start_tree(ex, b, tree)) return stochastic_status::over_capacity;
  const TreeView& view = b.trees[tree];
  node_t* path = b.path + static_cast<long long>(tree) * b.max_nodes;
  sampling_status row = sampling_status::ok;
  node_t bad = -1;
  token_t token = -1;
  const auto rows = [&](node_t node) { return detail::logits_row(b, tree, node); };
  const detail::BatchRowStats stats{&b, tree};
  const int length = conditional_walk(ex, view, b.vocab_size, rows, params,
                                      b.accepted + static_cast<long long>(tree) * b.max_nodes, path, &row, &bad, stats);
  if (row == sampling_status::ok) {
    const node_t last = path[length - 1];  // written by the leader; the walk synchronised
    token = sample_token(ex, rows(last), b.vocab_size, next, b.keys[tree], view.position(last) + 1,
                         b.work + static_cast<long long>(tree) * b.vocab_size, &row, stats(last));
    if (row != sampling_status::ok) bad = last;
  }
  return detail::finish_tree(ex, b, tree, length, token, row, bad);
}

// ---- the row-parallel pre-pass ---------------------------------------------------------------

/// Lane `lane`'s share of node `node`'s RowStats (tree `tree`), given the row's largest argmax_key
/// `top`: lane 0 writes the header, every lane its lane mass when `params` allow one (temperature
/// > 0, no top-k/top-p, a usable row). What each thread of the CUDA pre-pass runs.
SPECDEC_HD inline void fill_row_stats_lane(const StochasticVerifyBatch& b, int tree, node_t node, std::uint64_t top,
                                           const SamplingParams& params, int lane, RowStats* stats) {
  RowWeights w;
  const bool masses = weights_from_top_key(top, detail::logits_row(b, tree, node), params, &w) == sampling_status::ok &&
                      !w.greedy && !filters_on(params, b.vocab_size);
  if (lane == 0) {
    stats->top_key = top;
    stats->temperature = masses ? params.temperature : -1.0f;
    stats->min_p = params.min_p;
  }
  if (masses) stats->lane_mass[lane] = lane_mass(w, b.vocab_size, lane);
}

/// Warps of 32 threads per row in the row-parallel pre-pass (one per 32 lanes).
inline constexpr int row_stats_warps_per_row = sampling_lanes / 32;

/// Thread `thread` (a global index; threads 32 w .. 32 w + 31 are warp w) of the pre-pass's
/// second kernel: warp w sums lanes 32 (w % 8) .. + 31 of node row w / 8 (tree * max_nodes +
/// node), after combining that row's `splits` partial argmax keys (partial[row * splits + s]).
/// Threads past the batch's rows or trees do nothing (uniformly per warp).
SPECDEC_HD inline void row_stats_thread(const StochasticVerifyBatch& b, const SamplingParams& params, int splits,
                                        const std::uint64_t* partial, RowStats* stats, long long thread) {
  const long long warp = thread / 32;
  const long long row = warp / row_stats_warps_per_row;
  if (row >= static_cast<long long>(b.batch) * b.max_nodes) return;
  const int tree = static_cast<int>(row / b.max_nodes), node = static_cast<int>(row % b.max_nodes);
  const int n = b.trees[tree].size;
  if (node >= n || n > b.max_nodes) return;
  std::uint64_t top = 0;
  for (int s = 0; s < splits; ++s) top = max_key(top, partial[row * splits + s]);
  const int lane = static_cast<int>(warp % row_stats_warps_per_row) * 32 + static_cast<int>(thread % 32);
  fill_row_stats_lane(b, tree, node, top, params, lane, stats + row);
}

/// The pre-pass for tree `tree` on one thread: RowStats of its nodes at out[tree * max_nodes + i]
/// (nothing for a tree that does not fit). `params`: the walk's (conditional: conditional_softmax()).
SPECDEC_HD inline void fill_row_stats_in_batch(const StochasticVerifyBatch& b, int tree, const SamplingParams& params,
                                               RowStats* out) {
  const int n = b.trees[tree].size;
  if (n < 1 || n > b.max_nodes) return;
  for (node_t i = 0; i < n; ++i) {
    RowStats* stats = out + static_cast<long long>(tree) * b.max_nodes + i;
    const std::uint64_t top = top_key_of(detail::logits_row(b, tree, i), 0, b.vocab_size);
    for (int lane = 0; lane < sampling_lanes; ++lane) fill_row_stats_lane(b, tree, i, top, params, lane, stats);
  }
}

/// rejection_verify_in_batch on the host (SerialLanes).
SPECDEC_HD inline stochastic_status rejection_verify_in_batch(const StochasticVerifyBatch& b, int tree,
                                                              const SamplingParams& params) {
  SerialLanes ex;
  return rejection_verify_in_batch(ex, b, tree, params);
}

/// conditional_verify_in_batch on the host (SerialLanes).
SPECDEC_HD inline stochastic_status conditional_verify_in_batch(const StochasticVerifyBatch& b, int tree,
                                                                const ConditionalParams& params,
                                                                const SamplingParams& next) {
  SerialLanes ex;
  return conditional_verify_in_batch(ex, b, tree, params, next);
}

}  // namespace specdec::core
