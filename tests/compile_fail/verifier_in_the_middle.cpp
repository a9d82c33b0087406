// Must not compile: a verifier between two drafters (issue 19): only the last argument may be one.
#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/empty.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

int main() {
  specdec::HashTarget target;
  specdec::SpeculativeDecoder<specdec::HashTarget, specdec::EmptyDrafter, specdec::ExactVerifier,
                              specdec::EmptyDrafter, specdec::ExactVerifier>
      decoder(target);
  (void)decoder;
}
