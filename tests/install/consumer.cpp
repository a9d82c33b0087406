#include <cstdio>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/empty.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

int main() {
  specdec::HashTarget target(32);
  specdec::SpeculativeDecoder<specdec::HashTarget, specdec::EmptyDrafter, specdec::ExactVerifier> decoder(target);
  const std::vector<specdec::token_t> prompt{1, 2, 3};
  decoder.prefill(prompt);
  const auto out = decoder.generate(8);
  const bool same = out == target.generate(prompt, 8);
  std::printf("consumer: %s\n", same ? "ok" : "MISMATCH");
  return same ? 0 : 1;
}
