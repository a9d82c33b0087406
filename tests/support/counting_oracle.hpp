// An OracleDrafter that counts how often it is asked for a draft (the automatic budget's pauses),
// and optionally takes `spin` to draft on the TestClock (a drafter slower than its target).
#pragma once

#include <chrono>
#include <memory>

#include <specdec/policies/drafters/oracle.hpp>

#include "test_clock.hpp"

namespace specdec::testing {

struct CountingOracle : OracleDrafter {
  using OracleDrafter::OracleDrafter;
  void propose(const DraftContext& ctx, DraftTree& tree) {
    ++*proposals;
    TestClock::advance(spin);
    OracleDrafter::propose(ctx, tree);
  }
  std::shared_ptr<int> proposals = std::make_shared<int>(0);  // shared by the drafter's copies
  std::chrono::microseconds spin{0};
};

}  // namespace specdec::testing
