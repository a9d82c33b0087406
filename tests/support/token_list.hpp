// A few tokens a race must not draw (the `excluded` argument of core::race), for tests.
#pragma once

#include <algorithm>
#include <vector>

#include <specdec/core/lanes.hpp>

namespace specdec::testing {

struct TokenList {
  std::vector<int> tokens;
  bool contains(int v) const { return std::find(tokens.begin(), tokens.end(), v) != tokens.end(); }
  bool in_lane(int lane) const {
    return std::any_of(tokens.begin(), tokens.end(), [&](int v) { return v % core::sampling_lanes == lane; });
  }
};

}  // namespace specdec::testing
