// Must not compile: a sampling verifier needs full rows of logits, and this target's output only
// knows its argmax. The expected error is the sentence from specdec::detail::check_verifier.
#include <span>

#include <specdec/decoder.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>

struct ArgmaxOnlyTarget {
  struct Output {
    specdec::token_t argmax(specdec::node_t) const { return 0; }
  };
  int vocab_size() const { return 4; }
  void prefill(std::span<const specdec::token_t>) {}
  const Output& forward(const specdec::TreeView&) { return out; }
  void commit(std::span<const specdec::node_t>) {}
  Output out;
};

int main() {
  ArgmaxOnlyTarget target;
  specdec::SpeculativeDecoder<ArgmaxOnlyTarget, specdec::RejectionSampling> decoder(target);
  (void)decoder;
}
