// Must not compile: the target has no forward() (issue 19). The expected error is the one sentence
// addressed to the target, with no knock-on error blaming the verifier.
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/empty.hpp>
#include <specdec/policies/verifiers/exact.hpp>

struct TargetWithoutForward {
  struct Output {
    specdec::token_t argmax(specdec::node_t) const { return 0; }
  };
  int vocab_size() const { return 4; }
  void prefill(std::span<const specdec::token_t>) {}
  void commit(std::span<const specdec::node_t>) {}
};

int main() {
  TargetWithoutForward target;
  specdec::SpeculativeDecoder<TargetWithoutForward, specdec::EmptyDrafter, specdec::ExactVerifier> decoder(target);
  decoder.prefill(std::vector<specdec::token_t>{1, 2});
  return static_cast<int>(decoder.generate(4).size());
}
