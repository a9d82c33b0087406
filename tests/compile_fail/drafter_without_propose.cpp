// Must not compile: the drafter has no propose(). The expected error is the sentence from
// specdec::detail::check_drafter, addressed to the drafter's author.
#include <specdec/decoder.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

struct DrafterWithoutPropose {
  void begin(std::span<const specdec::token_t>) {}
  void observe(std::span<const specdec::token_t>) {}
};

int main() {
  specdec::HashTarget target;
  specdec::SpeculativeDecoder<specdec::HashTarget, DrafterWithoutPropose, specdec::ExactVerifier> decoder(target);
  (void)decoder;
}
