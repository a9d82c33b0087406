// Must not compile: a drafter that reads the target's features, with a target that has none
// (HashTarget gives argmaxes and logits only). The expected error is one sentence from
// specdec::detail::check_drafter_for_target; prefill and generate add no knock-on error.
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

struct FeatureDrafter {
  static constexpr bool needs_target_features = true;
  void begin(std::span<const specdec::token_t>, const specdec::TargetFeatures&) {}
  void observe(std::span<const specdec::token_t>, const specdec::TargetFeatures&) {}
  void propose(const specdec::DraftContext&, specdec::DraftTree&) {}
};

int main() {
  specdec::HashTarget target;
  specdec::SpeculativeDecoder<specdec::HashTarget, FeatureDrafter, specdec::ExactVerifier> decoder(target);
  decoder.prefill(std::vector<specdec::token_t>{1, 2});
  return static_cast<int>(decoder.generate(4).size());
}
