// Must not compile: a BackendBatchTarget used with batch_decoder.hpp alone. A host batch does not
// compile the backend step, so the expected error asks for <specdec/step/backend_step.hpp>, once.
#include <span>
#include <vector>

#include <specdec/backend.hpp>  // the tag, but not the step
#include <specdec/batch_decoder.hpp>
#include <specdec/policies/verifiers/exact.hpp>

struct DeviceBatchModel {
  using backend_type = specdec::backend::host;
  backend_type backend() const { return {}; }
  int vocab_size() const { return 8; }
  int slots() const { return 2; }
  void prefill(int, std::span<const specdec::token_t>) {}
  void release(int) {}
  specdec::LogitsRows forward(const specdec::TreeBatchView&) { return {}; }
  specdec::core::KvCacheView kv_cache() { return {}; }
};

int main() {
  DeviceBatchModel target;
  specdec::SpeculativeBatch<DeviceBatchModel, specdec::ExactVerifier> batch(target, 2);
  batch.add(std::vector<specdec::token_t>{1, 2});
  return static_cast<int>(batch.step().size());
}
