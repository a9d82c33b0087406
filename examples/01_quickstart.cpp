// Quickstart: compose a target, a drafter and a verifier; decode; read the statistics.
// [quickstart]
#include <cstdio>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

int main() {
  using namespace specdec;
  HashTarget model(/*vocab_size=*/64);                   // your model: any type modelling Target
  const std::vector<token_t> prompt{5, 17, 42};

  std::vector<token_t> truth = prompt;                    // an oracle drafter that is right 80% of
  for (token_t t : model.generate(prompt, 300)) truth.push_back(t);  // the time, for the demo
  SpeculativeDecoder<HashTarget, OracleDrafter, ExactVerifier> decoder(
      model, DecoderOptions{.budget = 16}, OracleDrafter(truth, /*depth=*/6, /*error_rate=*/0.2), ExactVerifier{});

  decoder.prefill(prompt);
  const std::vector<token_t> out = decoder.generate(/*max_new_tokens=*/200);

  const DecodeStats& s = decoder.stats();
  std::printf("generated %zu tokens in %lld target calls: tau = %.2f (tokens per call, bonus included)\n",
              out.size(), static_cast<long long>(s.steps), s.tau());
  const bool lossless = out == model.generate(prompt, 200);
  std::printf("identical to plain greedy decoding: %s\n", lossless ? "yes" : "NO");
  return lossless ? 0 : 1;
}
// [quickstart]
