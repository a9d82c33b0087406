// Staged speculative decoding: stories260K verifies a tree drafted by a smaller draft model with
// the same vocabulary (the committed tools/draft_model/models/stories260K-draft.bin), and the
// draft model is itself decoded speculatively, with an n-gram model of its own output as the
// second stage. The output equals plain greedy decoding of stories260K.
//
//   04_staged [target.bin [draft.bin]]
//
// Without arguments the target is read from $SPECDEC_DATA/models/stories260K.bin (or the build's
// default data directory), with tok512.bin beside it.
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/index/ngram_model_builder.hpp>
#include <specdec/policies/drafters/ngram.hpp>
#include <specdec/policies/drafters/staged.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

using namespace specdec;

int run(int argc, char** argv) {
  const char* env = std::getenv("SPECDEC_DATA");
  const std::filesystem::path data = env && *env ? env : SPECDEC_DEFAULT_DATA_DIR;
  const std::filesystem::path target_path = argc > 1 ? argv[1] : data / "models/stories260K.bin";
  const std::filesystem::path draft_path = argc > 2 ? argv[2] : SPECDEC_DRAFT_MODEL;
  const std::filesystem::path tokenizer_path = target_path.parent_path() / "tok512.bin";
  if (!std::filesystem::exists(target_path) || !std::filesystem::exists(tokenizer_path)) {
    std::printf("specdec-skip: %s or %s not found (set SPECDEC_DATA, or pass the model's path)\n",
                target_path.string().c_str(), tokenizer_path.string().c_str());
    return 0;
  }
  const auto target_model = std::make_shared<const Llama2cModel>(Llama2cModel::load(target_path));
  const auto draft_model = std::make_shared<const Llama2cModel>(Llama2cModel::load(draft_path));
  const auto tokenizer = Llama2cTokenizer::load(tokenizer_path, target_model->config().vocab_size);

  // The second stage: a Katz trigram model of text the draft model wrote. Here a few of its
  // greedy stories; specdec-ngram builds one from a large corpus sampled from it
  // (docs/drafters/ngram.md).
  TokenDocuments samples;
  Llama2cTarget writer(draft_model);
  for (const char* opening : {"Once upon a time", "Lily and Ben", "The dog", "One day, a little girl", "Tom was sad"}) {
    const std::vector<token_t> story = writer.generate(tokenizer.encode(opening), 300);
    samples.add(std::vector<std::uint32_t>(story.begin(), story.end()));
  }
  const std::filesystem::path ngram_file = std::filesystem::temp_directory_path() / "specdec_04_staged.ngram";
  build_ngram_model(samples, ngram_file, {.vocab_size = target_model->config().vocab_size});

// [staged]
  using Staged = StagedDrafter<Llama2cTarget, NgramDrafter>;  // draft model, then its own drafters
  Llama2cTarget target(target_model);
  SpeculativeDecoder<Llama2cTarget, Staged, ExactVerifier> decoder(
      target, DecoderOptions{.budget = 48},
      Staged(Llama2cTarget(draft_model), StagedOptions{.depth = 8, .top_k = 3}, NgramDrafter(ngram_file)),
      ExactVerifier{});
  const std::vector<token_t> prompt = tokenizer.encode("Once upon a time, there was a little girl named Lily.");
  decoder.prefill(prompt);
  const std::vector<token_t> out = decoder.generate(200);
  const Staged& staged = decoder.drafter<0>();
  std::printf("tau %.3f (target), draft-model forwards per committed token %.3f, draft model's own tau %.3f\n",
              decoder.stats().tau(), double(staged.draft_forwards()) / double(decoder.stats().tokens),
              staged.inner().stats().tau());
// [staged]
  std::filesystem::remove(ngram_file);

  std::printf("%s\n", tokenizer.decode(out, prompt.back()).c_str());
  if (out != target.generate(prompt, 200)) {
    std::printf("error: the output differs from plain greedy decoding\n");
    return 1;
  }
  std::printf("identical to plain greedy decoding\n");
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "04_staged: %s\n", e.what());
    return 1;
  }
}
