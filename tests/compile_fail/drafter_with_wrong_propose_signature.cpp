// Must not compile: propose() exists but takes the wrong arguments (issue 19). The expected error
// says the signature is wrong, not that propose is missing.
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

struct DrafterWithWrongPropose {
  void begin(std::span<const specdec::token_t>) {}
  void propose(specdec::DraftTree&) {}
  void observe(std::span<const specdec::token_t>) {}
};

int main() {
  specdec::HashTarget target;
  specdec::SpeculativeDecoder<specdec::HashTarget, DrafterWithWrongPropose, specdec::ExactVerifier> decoder(target);
  decoder.prefill(std::vector<specdec::token_t>{1, 2});
  return static_cast<int>(decoder.generate(4).size());
}
