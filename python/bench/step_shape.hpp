// The step of python/bench/step_bench.{py,cpp}: a 64-node draft tree (8 chains of 8 below the
// root), vocabulary 32000, logits whose greedy walk accepts the first chain. step_bench.py builds
// the same arrays with the same formulas.
#pragma once

#include <vector>

#include <specdec/config.hpp>

namespace specdec::bench {

inline constexpr int vocab = 32000, chains = 8, depth = 8, nodes = chains * depth;

/// FixedTreeDrafter's parents (0 = the root; node k + 1 is chain k / depth at depth k % depth + 1).
inline std::vector<node_t> parents() {
  std::vector<node_t> p;
  for (int k = 0; k < nodes; ++k) p.push_back(k % depth == 0 ? 0 : k);
  return p;
}
inline token_t token(int k) { return 100 + k; }
inline std::vector<token_t> tokens() {
  std::vector<token_t> t;
  for (int k = 0; k < nodes; ++k) t.push_back(token(k));
  return t;
}
/// Row i after tree node i: a fixed ripple, and a peak on the first chain's next token.
inline std::vector<float> logits() {
  std::vector<float> rows(static_cast<std::size_t>(nodes + 1) * vocab);
  for (int r = 0; r <= nodes; ++r)
    for (int v = 0; v < vocab; ++v) rows[static_cast<std::size_t>(r) * vocab + v] = static_cast<float>(v * 7919 % 1000) / 1000.0f;
  for (int d = 0; d <= depth; ++d)  // node d is the first chain's node at depth d (0: the root)
    rows[static_cast<std::size_t>(d) * vocab + (d < depth ? token(d) : 5)] = 10.0f;
  return rows;
}
inline std::vector<token_t> prompt() {
  std::vector<token_t> p;
  for (int i = 0; i < 512; ++i) p.push_back(static_cast<token_t>(i * 31 % 997));
  return p;
}

}  // namespace specdec::bench
