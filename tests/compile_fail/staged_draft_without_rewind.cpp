// Must not compile: a staged drafter whose draft model cannot rewind its KV cache (no rewind()).
// The expected error is StagedDrafter's one sentence; the decoder adds no knock-on error.
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/staged.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

// A draft model without rewind(): HashTarget's interface, minus rewind.
struct NoRewindTarget {
  specdec::HashTarget model;
  int vocab_size() const { return model.vocab_size(); }
  void prefill(std::span<const specdec::token_t> tokens) { model.prefill(tokens); }
  const specdec::HashTarget::Output& forward(const specdec::TreeView& tree) { return model.forward(tree); }
  void commit(std::span<const specdec::node_t> path) { model.commit(path); }
};

int main() {
  specdec::HashTarget target;
  using Staged = specdec::StagedDrafter<NoRewindTarget>;
  specdec::SpeculativeDecoder<specdec::HashTarget, Staged, specdec::ExactVerifier> decoder(target, Staged(NoRewindTarget{}),
                                                                                          specdec::ExactVerifier{});
  decoder.prefill(std::vector<specdec::token_t>{1, 2});
  return static_cast<int>(decoder.generate(4).size());
}
