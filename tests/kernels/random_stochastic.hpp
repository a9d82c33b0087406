// Random inputs for stochastic verification: merged draft trees with drafters' sampled
// proposals (DraftTree::add_sampled), logits rows with -inf entries and some unusable rows, and a
// random stream per tree. Host-only (DraftTree/TreeMerger): not for CUDA translation units.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include <specdec/core/stochastic_batch.hpp>
#include <specdec/tree_merger.hpp>

#include "kernels/random_batches.hpp"

namespace specdec::testing {

struct StochasticData {
  int max_nodes = 0, vocab = 0;
  long long row_stride = 0;  ///< floats between logits rows; 0: vocab
  std::vector<TreeMerger> mergers;
  std::vector<TreeView> views;
  std::vector<int> row_offset;
  std::vector<float> logits;
  std::vector<core::RandomKey> keys;
  std::vector<float> work;
  std::vector<std::uint8_t> accepted;
  std::vector<node_t> path;
  std::vector<int> length;
  std::vector<token_t> next_token;
  std::vector<core::stochastic_status> status;
  std::vector<core::sampling_status> row_status;
  std::vector<node_t> bad_node;

  int size() const { return static_cast<int>(views.size()); }

  core::StochasticVerifyBatch batch() {
    const std::size_t n = views.size();
    work.assign(n * vocab, 0.0f);
    accepted.assign(n * max_nodes, 7);
    path.assign(n * max_nodes, -7);
    length.assign(n, -7);
    next_token.assign(n, -7);
    status.assign(n, static_cast<core::stochastic_status>(-1));
    row_status.assign(n, static_cast<core::sampling_status>(-1));
    bad_node.assign(n, -7);
    core::StochasticVerifyBatch b;
    b.batch = size();
    b.max_nodes = max_nodes;
    b.vocab_size = vocab;
    b.row_stride = row_stride > 0 ? row_stride : vocab;
    b.trees = views.data();
    b.row_offset = row_offset.data();
    b.logits = logits.data();
    b.keys = keys.data();
    b.work = work.data();
    b.accepted = accepted.data();
    b.path = path.data();
    b.length = length.data();
    b.next_token = next_token.data();
    b.status = status.data();
    b.row_status = row_status.data();
    b.bad_node = bad_node.data();
    return b;
  }
};

/// A random distribution over the vocabulary (some tokens impossible).
inline std::vector<float> random_distribution(std::mt19937_64& rng, int vocab) {
  std::vector<float> q(vocab);
  double total = 0.0;
  for (float& x : q) {
    x = rng() % 3 == 0 ? 0.0f : static_cast<float>(rng() % 1000 + 1);
    total += x;
  }
  if (total == 0.0) {
    q[0] = 1.0f;
    total = 1.0;
  }
  for (float& x : q) x = static_cast<float>(x / total);
  return q;
}

/// `batch` merged trees of up to max_nodes nodes; with `sampled`, some nodes get add_sampled
/// proposals (draws from q). Logits: small-range values so that acceptance is frequent, some -inf
/// entries, and (with `bad_rows`) a few NaN, +inf and all -inf rows. With `edge_rows`, a third of
/// the rows are edge cases: every logit equal (ties everywhere, top-k ties), one finite logit
/// (p one-hot: accepted with certainty), three levels only (large tie groups), and a spread so
/// wide that every weight but the largest underflows to 0.
inline StochasticData random_stochastic_batch(std::mt19937_64& rng, int batch, int max_nodes, int vocab, bool sampled,
                                              bool bad_rows, bool edge_rows = false) {
  StochasticData d;
  d.max_nodes = max_nodes;
  d.vocab = vocab;
  d.mergers.resize(batch);
  int rows = 0;
  for (int b = 0; b < batch; ++b) {
    DraftTree tree;
    tree.reset(static_cast<token_t>(rng() % vocab));
    const int target = uniform(rng, 1, max_nodes);
    while (tree.size() < target) {
      const node_t parent = static_cast<node_t>(rng() % tree.size());
      if (sampled && rng() % 3 == 0) {
        const std::vector<float> q = random_distribution(rng, vocab);
        std::discrete_distribution<int> draw(q.begin(), q.end());
        std::vector<token_t> draws(uniform(rng, 1, 3));
        for (token_t& x : draws) x = draw(rng);
        tree.add_sampled(parent, q, draws);
      } else {
        tree.add(parent, static_cast<token_t>(rng() % vocab), static_cast<float>(rng() % 100) / 100.0f);
      }
    }
    const DraftTree* trees[] = {&tree};
    d.mergers[b].merge(trees, max_nodes - 1, max_nodes);
    TreeView view = d.mergers[b].view();
    view.base_position = uniform(rng, 0, 1000);
    d.views.push_back(view);
    d.row_offset.push_back(rows);
    rows += view.size;
    d.keys.push_back(core::RandomKey{rng(), static_cast<std::uint32_t>(b)});
  }
  d.logits.resize(static_cast<std::size_t>(rows) * vocab);
  const float inf = std::numeric_limits<float>::infinity();
  for (int r = 0; r < rows; ++r) {
    float* row = d.logits.data() + static_cast<std::size_t>(r) * vocab;
    for (int v = 0; v < vocab; ++v) row[v] = rng() % 10 == 0 ? -inf : static_cast<float>(rng() % 400) / 100.0f;
    if (edge_rows && rng() % 3 == 0) {
      switch (rng() % 4) {
        case 0: for (int v = 0; v < vocab; ++v) row[v] = 1.5f; break;
        case 1: {
          for (int v = 0; v < vocab; ++v) row[v] = -inf;
          row[rng() % vocab] = 0.25f;
          break;
        }
        case 2: for (int v = 0; v < vocab; ++v) row[v] = static_cast<float>(rng() % 3); break;
        default: for (int v = 0; v < vocab; ++v) row[v] = static_cast<float>(rng() % 1000) * 1e3f; break;
      }
    }
    if (bad_rows && rng() % 25 == 0) {
      switch (rng() % 3) {
        case 0: row[rng() % vocab] = std::numeric_limits<float>::quiet_NaN(); break;
        case 1: row[rng() % vocab] = inf; break;
        default: for (int v = 0; v < vocab; ++v) row[v] = -inf; break;
      }
    }
  }
  return d;
}

/// Pads every logits row of `d` to `stride` floats, as a target with aligned rows lays them out.
/// The padding is NaN, so a walk that reads past vocab makes the row bad and the tree differ.
/// In place: d's views point into its mergers (or those of the batch it was copied from).
inline void pad_rows(StochasticData& d, long long stride) {
  const std::vector<float> packed = std::move(d.logits);
  const std::size_t rows = packed.size() / static_cast<std::size_t>(d.vocab);
  d.row_stride = stride;
  d.logits.assign(rows * static_cast<std::size_t>(stride), std::numeric_limits<float>::quiet_NaN());
  for (std::size_t r = 0; r < rows; ++r)
    std::copy_n(packed.begin() + static_cast<std::ptrdiff_t>(r * d.vocab), d.vocab,
                d.logits.begin() + static_cast<std::ptrdiff_t>(r * stride));
}

/// Trees whose outputs differ between two runs over the same batch: status, row status, bad
/// node, path, next token, or (conditional verification) the accepted flags of its nodes.
inline int differing_trees(const StochasticData& a, const StochasticData& b) {
  int count = 0;
  for (int t = 0; t < a.size(); ++t) {
    const std::size_t at = static_cast<std::size_t>(t) * a.max_nodes;
    const bool same = a.status[t] == b.status[t] && a.row_status[t] == b.row_status[t] &&
                      a.bad_node[t] == b.bad_node[t] && a.length[t] == b.length[t] &&
                      a.next_token[t] == b.next_token[t] &&
                      std::equal(a.path.begin() + at, a.path.begin() + at + std::max(a.length[t], 0), b.path.begin() + at) &&
                      std::equal(a.accepted.begin() + at, a.accepted.begin() + at + std::min(a.views[t].size, a.max_nodes),
                                 b.accepted.begin() + at);  // a tree over capacity has max_nodes slots
    count += !same;
  }
  return count;
}

/// The CUDA row-parallel pre-pass on the host: RowStats of every node of `b` for `params`
/// (core::fill_row_stats_in_batch), to hand to a batch as row_stats.
inline std::vector<core::RowStats> row_stats(const core::StochasticVerifyBatch& b, const core::SamplingParams& params) {
  std::vector<core::RowStats> stats(static_cast<std::size_t>(b.batch) * b.max_nodes);
  for (int t = 0; t < b.batch; ++t) core::fill_row_stats_in_batch(b, t, params, stats.data());
  return stats;
}

/// row_stats of d's batch.
inline std::vector<core::RowStats> row_stats(StochasticData& d, const core::SamplingParams& params) {
  return row_stats(d.batch(), params);
}

}  // namespace specdec::testing
