// Random trees for property tests.
#pragma once

#include <random>
#include <vector>

#include <specdec/config.hpp>

namespace specdec::testing {

struct RandomTree {
  std::vector<node_t> parent;
  std::vector<token_t> token;
};

/// A random topological tree of n nodes (parent[i] uniform in [0, i)), tokens in [0, vocab).
inline RandomTree random_tree(std::mt19937_64& rng, int n, int vocab) {
  RandomTree t;
  t.parent.push_back(-1);
  t.token.push_back(static_cast<token_t>(rng() % vocab));
  for (int i = 1; i < n; ++i) {
    t.parent.push_back(static_cast<node_t>(rng() % i));
    t.token.push_back(static_cast<token_t>(rng() % vocab));
  }
  return t;
}

}  // namespace specdec::testing
