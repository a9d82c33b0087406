// Must not compile: a batch target without release(slot). The expected error is the one sentence
// addressed to the batch target.
#include <vector>

#include <specdec/batch_decoder.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

struct BatchTargetWithoutRelease {
  int vocab_size() const { return 4; }
  int slots() const { return 2; }
  void prefill(int, std::span<const specdec::token_t>) {}
  const specdec::HashTarget::BatchOutput& forward(const specdec::TreeBatchView&) { return out; }
  void commit(int, std::span<const specdec::node_t>) {}
  specdec::HashTarget::BatchOutput out;
};

int main() {
  BatchTargetWithoutRelease target;
  specdec::SpeculativeBatch<BatchTargetWithoutRelease, specdec::ExactVerifier> batch(target, 2);
  batch.add(std::vector<specdec::token_t>{1, 2});
  return static_cast<int>(batch.step().size());
}
