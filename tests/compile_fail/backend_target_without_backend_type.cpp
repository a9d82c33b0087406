// Must not compile: a backend target whose `backend_type` is missing (e.g. its
// `using backend_type = specdec::backend::host;` failed because <specdec/backend.hpp> was not
// included). It was checked as a host Target and told that `commit` is missing (issue 49); the
// error now names backend_type and the header.
#include <span>

#include <specdec/decoder.hpp>
#include <specdec/policies/verifiers/exact.hpp>

struct MyDeviceModel {
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
