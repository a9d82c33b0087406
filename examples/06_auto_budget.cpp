// The automatic budget: the decoder sends, each step, the number of draft nodes that maximises
// expected tokens per second under a cost model of the target, with acceptance estimates it
// learns from its own verdicts.
// [auto budget]
#include <cstdio>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

// Any type with step_seconds(nodes, context) is a CostModel: here a memory-bound target whose
// forward reads 2 ms of weights and spends 0.1 ms per node.
struct MyTargetCost {
  double step_seconds(int nodes, int /*context*/) const { return 2e-3 + 1e-4 * nodes; }
};

int main() {
  using namespace specdec;
  HashTarget model(/*vocab_size=*/64);
  const std::vector<token_t> prompt{5, 17, 42};
  std::vector<token_t> truth = prompt;  // an oracle right 70% of the time per token, for the demo
  for (token_t t : model.generate(prompt, 600)) truth.push_back(t);

  DecoderOptions options;
  options.budget = 32;             // the most nodes a step may send
  options.cost = MyTargetCost{};   // a cost model turns the automatic budget on
  options.measured_pause = false;  // HashTarget's own time is not MyTargetCost's: weigh by the model
  SpeculativeDecoder<HashTarget, OracleDrafter, CasdDrafter, ExactVerifier> decoder(
      model, options, OracleDrafter(truth, /*depth=*/12, /*error_rate=*/0.3), CasdDrafter{}, ExactVerifier{});
  decoder.prefill(prompt);
  const std::vector<token_t> out = decoder.generate(500);

  const DecodeStats& s = decoder.stats();
  std::printf("tau = %.2f (tokens per target call, bonus included), %.1f draft nodes per step\n", s.tau(),
              s.draft_nodes_per_step());
  std::printf("expected %.2f tokens per step; calibration error of the acceptance estimates %.3f\n",
              s.expected_tokens / static_cast<double>(s.sized_steps), decoder.acceptance_model()->calibration_error());
  const bool lossless = out == model.generate(prompt, 500);
  std::printf("identical to plain greedy decoding: %s\n", lossless ? "yes" : "NO");
  return lossless ? 0 : 1;
}
// [auto budget]
