// Must not compile: the verifier is not the last policy (issue 19). The expected error is one
// sentence about the order, not a list of drafter members ExactVerifier lacks and verifier
// members the drafter lacks; prefill and generate add no knock-on error.
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

struct MyDrafter {
  void begin(std::span<const specdec::token_t>) {}
  void propose(const specdec::DraftContext&, specdec::DraftTree&) {}
  void observe(std::span<const specdec::token_t>) {}
};

int main() {
  specdec::HashTarget target;
  specdec::SpeculativeDecoder<specdec::HashTarget, specdec::ExactVerifier, MyDrafter> decoder(target);
  decoder.prefill(std::vector<specdec::token_t>{1, 2});
  return static_cast<int>(decoder.generate(4).size());
}
