// An OracleDrafter that counts how often it is asked for a draft (the automatic budget's pauses).
#pragma once

#include <memory>

#include <specdec/policies/drafters/oracle.hpp>

namespace specdec::testing {

struct CountingOracle : OracleDrafter {
  using OracleDrafter::OracleDrafter;
  void propose(const DraftContext& ctx, DraftTree& tree) {
    ++*proposals;
    OracleDrafter::propose(ctx, tree);
  }
  std::shared_ptr<int> proposals = std::make_shared<int>(0);  // shared by the drafter's copies
};

}  // namespace specdec::testing
