// Must not compile: a feature drafter (needs_target_features) without any begin(). The expected
// error says that begin is missing (not that its signature is wrong), checked by the drafter's
// own check at the end of its header, and the line above it names the drafter.
#include <specdec/checks.hpp>

struct FeatureDrafterWithoutBegin {
  static constexpr bool needs_target_features = true;
  void observe(std::span<const specdec::token_t>, const specdec::TargetFeatures&) {}
  void propose(const specdec::DraftContext&, specdec::DraftTree&) {}
};

static_assert(specdec::check_drafter<FeatureDrafterWithoutBegin>());

int main() {}
