// Must not compile: a BackendTarget used with decoder.hpp alone. A host decoder does not compile
// the backend step (issue 19), so the expected error asks for <specdec/step/backend_step.hpp>, once.
#include <span>

#include <specdec/backend.hpp>  // the tag, but not the step
#include <specdec/decoder.hpp>
#include <specdec/policies/verifiers/exact.hpp>

struct MyDeviceModel {
  using backend_type = specdec::backend::host;
  backend_type backend() const { return {}; }
  int vocab_size() const { return 8; }
  void prefill(std::span<const specdec::token_t>) {}
  specdec::LogitsRows forward(const specdec::TreeView&) { return {}; }
  specdec::core::KvCacheView kv_cache() { return {}; }
};

int main() {
  MyDeviceModel target;
  specdec::SpeculativeDecoder<MyDeviceModel, specdec::ExactVerifier> decoder(target);
  (void)decoder;
}
