// A real model: speculative decoding of stories260K (a tiny Llama trained on TinyStories, in
// llama2.c's checkpoint format) with a drafter policy written right here in a few lines.
//
//   02_stories260k [model.bin [tokenizer.bin]]
//
// Without arguments the model is read from $SPECDEC_DATA/models/stories260K.bin (or the build's
// default data directory) and the tokenizer from tok512.bin beside it.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

using namespace specdec;

/// A drafter policy: find the most recent earlier occurrence of the last two tokens and propose,
/// as a chain, the tokens that followed it. (It rescans the context each step, which is fine for
/// a demo; a production copy drafter keeps an incremental index instead.)
struct LastBigramCopyDrafter {
  static constexpr const char* name = "last-bigram copy";
  std::size_t max_length = 8;

  void begin(std::span<const token_t>) {}
  void observe(std::span<const token_t>) {}
  void propose(const DraftContext& ctx, DraftTree& tree) const {
    const std::span<const token_t> t = ctx.tokens;
    const std::size_t n = t.size();
    for (std::size_t i = n - 2; n >= 3 && i-- > 0;) {
      if (t[i] == t[n - 2] && t[i + 1] == t[n - 1]) {
        const std::size_t start = i + 2;
        tree.add_chain(0, t.subspan(start, std::min(max_length, n - start)), 1.0f, 0.9f);
        return;
      }
    }
  }
};

int run(int argc, char** argv) {
  const char* env = std::getenv("SPECDEC_DATA");
  const std::filesystem::path data = env && *env ? env : SPECDEC_DEFAULT_DATA_DIR;
  const std::filesystem::path model_path = argc > 1 ? argv[1] : data / "models/stories260K.bin";
  const std::filesystem::path tokenizer_path = argc > 2 ? argv[2] : model_path.parent_path() / "tok512.bin";
  if (!std::filesystem::exists(model_path) || !std::filesystem::exists(tokenizer_path)) {
    std::printf("specdec-skip: %s or %s not found (set SPECDEC_DATA, or pass the model's path)\n",
                model_path.string().c_str(), tokenizer_path.string().c_str());
    return 0;
  }

  Llama2cTarget model(model_path);
  const auto tokenizer = Llama2cTokenizer::load(tokenizer_path, model.vocab_size());
  const std::string text = "Once upon a time";
  const std::vector<token_t> prompt = tokenizer.encode(text);
  const std::vector<token_t> stop{Llama2cTokenizer::bos, Llama2cTokenizer::eos};
  // The model knows max_positions() positions: the prompt and the new tokens (but the last, which
  // is never read back) must fit.
  const int room = model.max_positions() - static_cast<int>(prompt.size()) + 1;
  if (room < 1) {
    std::fprintf(stderr, "02_stories260k: the prompt has %zu tokens, the model only %d positions\n", prompt.size(),
                 model.max_positions());
    return 1;
  }
  const int max_new = std::min(400, room);
  if (max_new < 400) std::printf("(the model has %d positions: %d new tokens at most)\n", model.max_positions(), max_new);
  using clock = std::chrono::steady_clock;
  auto seconds_since = [](clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); };

  auto t0 = clock::now();
  const std::vector<token_t> plain = model.generate(prompt, max_new, stop);
  const double plain_s = seconds_since(t0);

  SpeculativeDecoder<Llama2cTarget, LastBigramCopyDrafter, ExactVerifier> decoder(
      model, DecoderOptions{.budget = 8}, LastBigramCopyDrafter{}, ExactVerifier{});
  t0 = clock::now();
  decoder.prefill(prompt);
  const std::vector<token_t> speculative = decoder.generate(max_new, stop);
  const double spec_s = seconds_since(t0);

  const DecodeStats& s = decoder.stats();
  std::printf("%s%s\n\n", text.c_str(), tokenizer.decode(speculative, prompt.back()).c_str());
  std::printf("plain greedy:  %zu tokens, %.0f tokens/s\n", plain.size(), plain.size() / plain_s);
  std::printf("speculative:   %zu tokens, %.0f tokens/s, tau = %.2f (tokens per target call, bonus "
              "included), %.1f draft nodes per call\n",
              speculative.size(), speculative.size() / spec_s, s.tau(), s.draft_nodes_per_step());
  const bool identical = speculative == plain;
  std::printf("identical output: %s\n", identical ? "yes" : "NO");
  return identical ? 0 : 1;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // a bad file, a prompt that does not fit, ...: say so, no abort
    std::fprintf(stderr, "02_stories260k: %s\n", e.what());
    return 1;
  }
}
