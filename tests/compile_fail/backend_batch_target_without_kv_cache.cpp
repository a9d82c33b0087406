// Must not compile: a backend batch target without kv_cache(). The expected error is the one
// sentence addressed to the backend batch target, and no other.
#include <span>
#include <vector>

#include <specdec/step/backend_step.hpp>
#include <specdec/batch_decoder.hpp>
#include <specdec/policies/verifiers/exact.hpp>

struct DeviceBatchModelWithoutKvCache {
  using backend_type = specdec::backend::host;
  backend_type backend() const { return {}; }
  int vocab_size() const { return 8; }
  int slots() const { return 2; }
  void prefill(int, std::span<const specdec::token_t>) {}
  void release(int) {}
  specdec::LogitsRows forward(const specdec::TreeBatchView&) { return {}; }
};

int main() {
  DeviceBatchModelWithoutKvCache target;
  specdec::SpeculativeBatch<DeviceBatchModelWithoutKvCache, specdec::ExactVerifier> batch(target, 2);
  batch.add(std::vector<specdec::token_t>{1, 2});
  return static_cast<int>(batch.step().size());
}
