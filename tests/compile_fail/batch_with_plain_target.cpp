// Must not compile: SpeculativeBatch given a single-sequence Target. The expected error is one
// sentence pointing to PerSlotTarget, with no knock-on error for each batch member it lacks.
#include <vector>

#include <specdec/batch_decoder.hpp>
#include <specdec/policies/drafters/empty.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

struct PlainTarget {
  int vocab_size() const { return 4; }
  void prefill(std::span<const specdec::token_t>) {}
  const specdec::HashTarget::Output& forward(const specdec::TreeView&) { return out; }
  void commit(std::span<const specdec::node_t>) {}
  specdec::HashTarget::Output out;
};

int main() {
  PlainTarget target;
  specdec::SpeculativeBatch<PlainTarget, specdec::EmptyDrafter, specdec::ExactVerifier> batch(target, 2);
  batch.add(std::vector<specdec::token_t>{1, 2});
  return static_cast<int>(batch.step().size());
}
