// A BackendTarget's step runs the verifier on the backend: a verifier with only the host verify()
// must be refused with a message that names verify_on.
#include <specdec/decoder.hpp>
#include <specdec/testing/backend_hash_target.hpp>

struct HostOnlyVerifier {
  static constexpr specdec::output_need needs = specdec::output_need::argmax;
  template <class Out>
  void verify(const specdec::TreeView&, const Out&, specdec::Verdict&) const {}
};

int main() {
  specdec::BackendHashTarget<> target(16, 64);
  specdec::SpeculativeDecoder<specdec::BackendHashTarget<>, HostOnlyVerifier> decoder(target);
  (void)decoder;
}
