// An OracleDrafter that counts how often it is asked for a draft (the automatic budget's pauses),
// and optionally takes at least `spin` to draft (busy-waiting: a drafter slower than its target).
#pragma once

#include <chrono>
#include <memory>

#include <specdec/policies/drafters/oracle.hpp>

namespace specdec::testing {

struct CountingOracle : OracleDrafter {
  using OracleDrafter::OracleDrafter;
  void propose(const DraftContext& ctx, DraftTree& tree) {
    ++*proposals;
    const auto until = std::chrono::steady_clock::now() + spin;
    while (std::chrono::steady_clock::now() < until) {
    }
    OracleDrafter::propose(ctx, tree);
  }
  std::shared_ptr<int> proposals = std::make_shared<int>(0);  // shared by the drafter's copies
  std::chrono::microseconds spin{0};
};

}  // namespace specdec::testing
