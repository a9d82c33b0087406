// The drafter combinations this binary is compiled with (the list is in registry.cpp).
#pragma once

#include <span>
#include <string>
#include <vector>

#include "replay.hpp"

namespace specbench {

struct Combination {
  std::vector<std::string> drafters;  ///< the drafters' names, in template order
  ReplayRun (*replay)(const Corpus&, const ReplayOptions&);
  /// "pld,casd": the drafters' names joined by commas.
  std::string name() const;
};

/// Every compiled combination, in registry order.
const std::vector<Combination>& combinations();
/// Every drafter name that appears in a combination, in registry order.
std::vector<std::string> drafter_names();
/// The combination made of exactly these drafters, in any order. `names` may hold comma-separated
/// lists ("pld,casd"). Throws input_error naming an unknown drafter or combination and listing
/// the valid ones.
const Combination& find_combination(std::span<const std::string> names);

}  // namespace specbench
