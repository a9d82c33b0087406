// Parity of a dense search with ExactDenseSearch when the scores come from another summation
// order (FAISS's flat index, cuBLAS on the GPU): the scores may differ in the last bits, so keys
// whose host scores are that close may swap places, and nothing else may differ.
#pragma once

#include <cmath>
#include <cstddef>
#include <set>
#include <span>
#include <sstream>
#include <string>

#include <specdec/index/dense_search.hpp>

namespace specdec::testing {

/// "" when `got` ranks like `want` (ExactDenseSearch's answer to the same query and k), else its
/// first difference in words. `host_score(key)` is the host's score of any key for that query.
/// `got` must have as many neighbours, distinct keys, in ranks_before order by its own scores,
/// each score within `tolerance` of the host's score of the same key; and at each rank the key of
/// `want`, or a near tie of it: a key whose host score is within `tolerance` of want's score there.
template <class HostScore>
std::string dense_ranking_difference(std::span<const DenseNeighbour> want, std::span<const DenseNeighbour> got,
                                     HostScore host_score, float tolerance = 1e-5f) {
  std::ostringstream why;
  if (got.size() != want.size()) {
    why << got.size() << " neighbours, the exact search has " << want.size();
    return why.str();
  }
  std::set<std::uint64_t> seen;
  for (std::size_t i = 0; i < got.size(); ++i) {
    const DenseNeighbour& g = got[i];
    if (!seen.insert(g.key).second) why << "rank " << i << ": key " << g.key << " twice";
    else if (i > 0 && !ranks_before(got[i - 1], g))
      why << "rank " << i << ": (" << g.score << ", key " << g.key << ") does not rank after (" << got[i - 1].score
          << ", key " << got[i - 1].key << ")";
    else if (const float host = host_score(g.key); !(std::fabs(g.score - host) <= tolerance))
      why << "rank " << i << ": key " << g.key << " scored " << g.score << ", the host scores it " << host;
    else if (g.key != want[i].key && !(std::fabs(host - want[i].score) <= tolerance))
      why << "rank " << i << ": key " << g.key << " (host score " << host << "), the exact search has key "
          << want[i].key << " (score " << want[i].score << ")";
    else continue;
    return why.str();
  }
  return "";
}

}  // namespace specdec::testing
