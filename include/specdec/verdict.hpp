// What a verifier decides in one step.
#pragma once

#include <vector>

#include <specdec/config.hpp>

namespace specdec {

/// The accepted path and the token that follows it.
struct Verdict {
  /// Accepted nodes from the root: path[0] == 0, then each node a child of the previous one.
  std::vector<node_t> path;
  /// The token after the path (the "bonus" token); it becomes the next step's root.
  token_t next_token = -1;
};

}  // namespace specdec
