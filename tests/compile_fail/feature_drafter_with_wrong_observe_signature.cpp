// Must not compile: a feature drafter (needs_target_features) with the plain observe(committed)
// only. The expected error says that observe has the wrong signature (not that it is missing),
// shows the one a feature drafter declares, and the line above it names the drafter.
#include <specdec/decoder.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/targets/llama2c.hpp>

struct FeatureDrafter {
  static constexpr bool needs_target_features = true;
  void begin(std::span<const specdec::token_t>, const specdec::TargetFeatures&) {}
  void observe(std::span<const specdec::token_t>) {}
  void propose(const specdec::DraftContext&, specdec::DraftTree&) {}
};

int main() {
  specdec::Llama2cTarget* target = nullptr;
  specdec::SpeculativeDecoder<specdec::Llama2cTarget, FeatureDrafter, specdec::ExactVerifier> decoder(*target);
  (void)decoder;
}
