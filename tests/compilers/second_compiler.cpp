// Every public header, and the decoders over every policy and kind of target, for a second
// compiler (tests/CMakeLists.txt: Clang's -fsyntax-only -Werror where the build's compiler is GCC,
// and the reverse). The README promises both, and the rest of the suite builds with one. Never
// run: the functions below are there to be compiled, each instantiating what it names.
#include "every_header.hpp"

namespace {

using namespace specdec;

std::vector<token_t> prompt() { return {1, 2, 3}; }

template <class Decoder>
void decode(Decoder& decoder) {
  decoder.prefill(prompt());
  (void)decoder.step();
  (void)decoder.generate(8, prompt());
  (void)decoder.stats();
  (void)Decoder::names();
}

template <class Batch>
void decode_batch(Batch& batch) {
  const request_id id = batch.add(prompt(), RequestOptions{});
  (void)batch.step();
  batch.remove(id);
}

// A host model with the drafters that read no features, and each verifier (resume() too: the
// staged drafter's draft decoder calls it).
[[maybe_unused]] void host_model(Llama2cTarget& target, PldDrafter pld, CasdDrafter casd,
                                 CasdPromptDrafter prompt_casd, HistoryTreeDrafter history, RestDrafter rest,
                                 NgramDrafter ngram, FixedTreeDrafter fixed,
                                 StagedDrafter<Llama2cTarget, NgramDrafter> staged, RejectionSampling rejection,
                                 ConditionalVerifier conditional) {
  SpeculativeDecoder<Llama2cTarget, PldDrafter, CasdDrafter, CasdPromptDrafter, HistoryTreeDrafter, RestDrafter,
                     NgramDrafter, FixedTreeDrafter, EmptyDrafter, StagedDrafter<Llama2cTarget, NgramDrafter>,
                     ExactVerifier>
      exact(target, pld, casd, prompt_casd, history, rest, ngram, fixed, EmptyDrafter{}, std::move(staged),
            ExactVerifier{});
  decode(exact);
  exact.resume(prompt());
  SpeculativeDecoder<Llama2cTarget, PldDrafter, RejectionSampling> sampled(target, pld, std::move(rejection));
  decode(sampled);
  SpeculativeDecoder<Llama2cTarget, ContextTreeDrafter, ConditionalVerifier> lossy(target, ContextTreeDrafter{},
                                                                                    std::move(conditional));
  decode(lossy);
}

// The drafters that read the target's features.
[[maybe_unused]] void feature_drafters(Llama2cTarget& target, EagleDrafter eagle, DresdDrafter dresd) {
  SpeculativeDecoder<Llama2cTarget, EagleDrafter, DresdDrafter, CasdDrafter, ExactVerifier> decoder(
      target, std::move(eagle), std::move(dresd), CasdDrafter{}, ExactVerifier{});
  decode(decoder);
}

// Batches: of the host model (with a feature drafter), of the host backend's targets, and the
// device Llama on the emulated grid, single and batched.
[[maybe_unused]] void batches_and_backends(Llama2cBatchTarget& llama, EagleDrafter eagle, BackendHashTarget<>& hash,
                                           BackendHashBatchTarget<>& hash_batch, EmulatedLlamaTarget& device,
                                           EmulatedLlamaBatchTarget& device_batch, HashTarget& plain,
                                           ConditionalVerifier conditional) {
  SpeculativeBatch<Llama2cBatchTarget, EagleDrafter, CasdDrafter, ExactVerifier> features(
      llama, 4, std::move(eagle), CasdDrafter{}, ExactVerifier{});
  decode_batch(features);
  SpeculativeDecoder<BackendHashTarget<>, PldDrafter, RejectionSampling> on_backend(hash, PldDrafter{},
                                                                                  RejectionSampling{});
  decode(on_backend);
  SpeculativeBatch<BackendHashBatchTarget<>, CasdDrafter, ConditionalVerifier> batch_on_backend(
      hash_batch, 4, CasdDrafter{}, std::move(conditional));
  decode_batch(batch_on_backend);
  SpeculativeDecoder<EmulatedLlamaTarget, ContextTreeDrafter, ExactVerifier> emulated(device);
  decode(emulated);
  SpeculativeBatch<EmulatedLlamaBatchTarget, PldDrafter, ExactVerifier> emulated_batch(device_batch, 4);
  decode_batch(emulated_batch);
  SpeculativeDecoder<HashTarget, OracleDrafter, ExactVerifier> oracle(plain, OracleDrafter({}, 4), ExactVerifier{});
  decode(oracle);
}

}  // namespace
