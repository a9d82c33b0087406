// A feature drafter: a drafter policy that reads the target's hidden states (needs_target_features),
// written right here, decoding stories260K (a Llama2cTarget gives its features). The output equals
// plain greedy decoding.
//
//   07_feature_drafter [model.bin [tokenizer.bin]]
//
// Without arguments the model is read from $SPECDEC_DATA/models/stories260K.bin (or the build's
// default data directory) and the tokenizer from tok512.bin beside it.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <limits>
#include <span>
#include <string>
#include <vector>

#include <specdec/checks.hpp>
#include <specdec/decoder.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

using namespace specdec;

// [feature_drafter]
/// Drafts from the sequence's own past by the target's state: finds the earlier position whose
/// feature is nearest to the latest one among those after which the root's token came, and drafts
/// what followed there (a DReSD over the sequence itself, no datastore). It compares with every
/// earlier position each step, which is fine for a demo; a real one keeps an index.
class NearestStateDrafter {
 public:
  static constexpr const char* name = "nearest_state";
  static constexpr bool needs_target_features = true;

  explicit NearestStateDrafter(int depth = 6) : depth_(depth) {}

  // Rows for positions 0 .. prompt.size() - 2: the last prompt token is the first root.
  void begin(std::span<const token_t> prompt, const TargetFeatures& prompt_features) {
    tokens_.assign(prompt.begin(), prompt.end());
    features_.clear();
    keep(prompt_features);
  }

  // One row per committed token, from the step's root on: row k is the state at position
  // features.first_position + k, from which the target predicted committed[k].
  void observe(std::span<const token_t> committed, const TargetFeatures& features) {
    tokens_.insert(tokens_.end(), committed.begin(), committed.end());
    keep(features);
  }

  void propose(const DraftContext& ctx, DraftTree& tree) {
    // A row for every position but the last (the root): the latest is the state that predicted
    // the root. Look for an earlier state that predicted the same token.
    const int latest = rows() - 1;
    int best = -1;
    float best_distance = std::numeric_limits<float>::infinity();
    for (int p = 0; p < latest; ++p) {
      if (tokens_[p + 1] != tree.root_token()) continue;
      float distance = 0;
      for (int i = 0; i < dim_; ++i) {
        const float d = features_[p * dim_ + i] - features_[latest * dim_ + i];
        distance += d * d;
      }
      if (distance < best_distance) best = p, best_distance = distance;
    }
    if (best < 0) return;  // an empty draft
    node_t node = 0;
    const int end = std::min(static_cast<int>(tokens_.size()), best + 2 + std::min(depth_, ctx.max_depth));
    for (int i = best + 2; i < end; ++i)
      node = tree.add(node, tokens_[i], 1.0f / static_cast<float>(i - best));  // scores fall with depth
  }

 private:
  // Stores row i of `features` as the feature of position features.first_position + i.
  void keep(const TargetFeatures& features) {
    dim_ = features.dim;
    features_.resize(static_cast<std::size_t>(features.first_position + features.rows) * dim_);
    for (int i = 0; i < features.rows; ++i)
      std::ranges::copy(features.row(i), features_.begin() + (features.first_position + i) * dim_);
  }
  int rows() const { return dim_ > 0 ? static_cast<int>(features_.size()) / dim_ : 0; }

  int depth_;
  int dim_ = 0;
  std::vector<token_t> tokens_;  // the committed tokens
  std::vector<float> features_;  // the feature of each position but the last, dim_ floats each
};

static_assert(check_drafter<NearestStateDrafter>());
// [feature_drafter]

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
  // The prompt and the new tokens (but the last, which is never read back) must fit the model.
  const int max_new = std::min(300, model.max_positions() - static_cast<int>(prompt.size()) + 1);

  const std::vector<token_t> plain = model.generate(prompt, max_new);
  SpeculativeDecoder<Llama2cTarget, NearestStateDrafter, ExactVerifier> decoder(
      model, DecoderOptions{.budget = 8}, NearestStateDrafter{}, ExactVerifier{});
  decoder.prefill(prompt);
  const std::vector<token_t> speculative = decoder.generate(max_new);

  std::printf("%s%s\n\n", text.c_str(), tokenizer.decode(speculative, prompt.back()).c_str());
  std::printf("%zu tokens, tau = %.2f (tokens per target call, bonus included)\n", speculative.size(),
              decoder.stats().tau());
  const bool identical = speculative == plain;
  std::printf("identical to plain greedy decoding: %s\n", identical ? "yes" : "NO");
  return identical ? 0 : 1;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // a bad file, a prompt that does not fit, ...: say so, no abort
    std::fprintf(stderr, "07_feature_drafter: %s\n", e.what());
    return 1;
  }
}
