// Speculative *sampling* on a real model (stories260K): lossless rejection sampling against plain
// sampling at temperature 0.8, and CASD's (lossy) conditional verification for several deltas.
//
//   03_sampling [model.bin [tokenizer.bin]]
//
// Two drafters, merged into one tree each step: a copy drafter (deterministic proposals, verified
// as one-hot) and a bigram drafter that *samples* its tokens from the context's bigram counts and
// hands its distribution q to the verifier (DraftTree::add_sampled), so its tokens are accepted
// with probability min(1, p/q). τ = tokens committed per target call, bonus token included.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include <specdec/core/sampling.hpp>
#include <specdec/decoder.hpp>
#include <specdec/policies/verifiers/conditional.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

using namespace specdec;

/// Proposes, as a chain, what followed the most recent earlier occurrence of the last two tokens.
struct CopyDrafter {
  static constexpr const char* name = "copy";
  void begin(std::span<const token_t>) {}
  void observe(std::span<const token_t>) {}
  void propose(const DraftContext& ctx, DraftTree& tree) const {
    const std::span<const token_t> t = ctx.tokens;
    const std::size_t n = t.size();
    for (std::size_t i = n - 2; n >= 3 && i-- > 0;) {
      if (t[i] == t[n - 2] && t[i + 1] == t[n - 1]) {
        tree.add_chain(0, t.subspan(i + 2, std::min<std::size_t>(6, n - i - 2)), 1.0f, 0.9f);
        return;
      }
    }
  }
};

/// Samples a chain from the bigram counts of the context (add-alpha smoothed; unigram counts after
/// a token never followed yet): `width` i.i.d.
/// draws below the root, one below each following node. It declares q, so it is verified
/// against it.
class BigramSampler {
 public:
  static constexpr const char* name = "bigram sampler";
  static constexpr bool emits_draft_probabilities = true;
  BigramSampler(int vocab, std::uint64_t seed) : vocab_(vocab), rng_(seed) {}

  void begin(std::span<const token_t> prompt) {
    counts_.clear();
    unigram_.clear();
    last_ = -1;
    observe(prompt);
  }
  void observe(std::span<const token_t> tokens) {
    for (token_t t : tokens) {
      ++unigram_[t];
      if (last_ >= 0) ++counts_[last_][t];
      last_ = t;
    }
  }
  void propose(const DraftContext& ctx, DraftTree& tree) {
    node_t node = 0;
    token_t prev = ctx.tokens.back();
    for (int depth = 0; depth < std::min(4, ctx.max_depth); ++depth) {
      // q(.|prev) from the bigram counts; the unigram counts when prev was never followed
      const auto found = counts_.find(prev);
      const auto& counts = found != counts_.end() ? found->second : unigram_;
      q_.assign(vocab_, alpha);
      float total = alpha * vocab_;
      for (const auto& [next, count] : counts) {
        q_[next] += count;
        total += count;
      }
      for (float& x : q_) x /= total;
// [add_sampled]
      draws_.clear();
      std::discrete_distribution<int> draw(q_.begin(), q_.end());
      for (int i = 0; i < (depth == 0 ? 2 : 1); ++i) draws_.push_back(draw(rng_));
      tree.add_sampled(node, q_, draws_);
      node = tree.find_child(node, draws_[0]);
// [add_sampled]
      prev = draws_[0];
    }
  }

 private:
  static constexpr float alpha = 0.01f;
  int vocab_;
  std::mt19937_64 rng_;
  std::map<token_t, std::map<token_t, int>> counts_;
  std::map<token_t, int> unigram_;
  token_t last_ = -1;
  std::vector<float> q_;
  std::vector<token_t> draws_;
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
  const int vocab = model.vocab_size();
  const std::vector<token_t> stop{Llama2cTokenizer::bos, Llama2cTokenizer::eos};
  const int first_token_runs = 1000, tau_runs = 5, tau_tokens = 200;
  const std::vector<std::string> prompts = {"Once upon a time", "Lily and Ben went to the park", "The little dog",
                                            "One day, a girl named Sue"};

// [sampling]
  // CopyDrafter and BigramSampler are this example's drafters (defined above in the file).
  const SamplingParams sampling{0.8f};  // temperature 0.8, no top-k/top-p/min-p
  const std::uint64_t seed = 2024;      // with the sequence id, keys every random draw (Philox)
  using Plain = SpeculativeDecoder<Llama2cTarget, RejectionSampling>;  // no drafter: plain sampling
  using Speculative = SpeculativeDecoder<Llama2cTarget, CopyDrafter, BigramSampler, RejectionSampling>;
  using Conditional = SpeculativeDecoder<Llama2cTarget, CopyDrafter, BigramSampler, ConditionalVerifier>;
  const DecoderOptions options{.budget = 16};
  auto rejection = [&](std::uint32_t sequence) { return RejectionSampling({sampling, seed, sequence}); };
// [sampling]

  std::printf("temperature %.1f; first sampled token over %d runs per prompt: total variation distance "
              "from the model's exact distribution (both are sampling noise when lossless)\n\n",
              sampling.temperature, first_token_runs);
  std::vector<double> tau_spec, tau_cond[4];
  const float deltas[4] = {0.1f, 0.01f, 1e-3f, 1e-4f};
  for (const std::string& text : prompts) {
    const std::vector<token_t> prompt = tokenizer.encode(text);
    // the exact distribution of the first token: the front end applied to the model's row
    model.prefill(std::span<const token_t>(prompt).first(prompt.size() - 1));
    DraftTree root;
    root.reset(prompt.back());
    TreeMerger merger;
    const DraftTree* one[] = {&root};
    merger.merge(one, 0, 0);
    TreeView view = merger.view();
    view.base_position = model.cached();
    std::vector<float> w(vocab);
    float mass = 0;
    core::sampling_weights(model.forward(view).logits(0).data(), vocab, sampling, w.data(), &mass);

    std::vector<double> plain_counts(vocab, 0), spec_counts(vocab, 0);
    int drafted_first = 0;
    for (int r = 0; r < first_token_runs; ++r) {
      Plain plain(model, options, rejection(r));
      plain.prefill(prompt);
      ++plain_counts[plain.step()[0]];
      Speculative spec(model, options, CopyDrafter{}, BigramSampler(vocab, 1000 + r), rejection(r));
      spec.prefill(prompt);
      ++spec_counts[spec.step()[0]];
      drafted_first += spec.last_verdict().path.size() > 1;
    }
    double tv_plain = 0, tv_spec = 0;
    for (int v = 0; v < vocab; ++v) {
      tv_plain += std::abs(plain_counts[v] / first_token_runs - w[v] / mass) / 2;
      tv_spec += std::abs(spec_counts[v] / first_token_runs - w[v] / mass) / 2;
    }
    std::vector<int> top(vocab);
    for (int v = 0; v < vocab; ++v) top[v] = v;
    std::partial_sort(top.begin(), top.begin() + 3, top.end(), [&](int a, int b) { return w[a] > w[b]; });
    std::printf("\"%s\": TV(plain) = %.3f, TV(speculative) = %.3f; top tokens (exact / plain / speculative):",
                text.c_str(), tv_plain, tv_spec);
    for (int k = 0; k < 3; ++k)
      std::printf(" '%s' %.3f/%.3f/%.3f", tokenizer.decode(prompt.back(), top[k]).c_str(), w[top[k]] / mass,
                  plain_counts[top[k]] / first_token_runs, spec_counts[top[k]] / first_token_runs);
    std::printf("; a draft token was accepted in %.0f%% of the speculative first steps\n",
                100.0 * drafted_first / first_token_runs);

    // The model knows max_positions() positions: the prompt and the new tokens (but the last) must fit.
    const int new_tokens = std::min(tau_tokens, model.max_positions() - static_cast<int>(prompt.size()) + 1);
    for (int r = 0; r < tau_runs; ++r) {
      Speculative spec(model, options, CopyDrafter{}, BigramSampler(vocab, 7 + r), rejection(100000 + r));
      spec.prefill(prompt);
      spec.generate(new_tokens, stop);
      tau_spec.push_back(static_cast<double>(spec.stats().tokens));
      tau_spec.push_back(static_cast<double>(spec.stats().steps));
      for (int d = 0; d < 4; ++d) {
        Conditional cond(model, options, CopyDrafter{}, BigramSampler(vocab, 7 + r),
                         ConditionalVerifier({deltas[d], 0, Llama2cTokenizer::eos}, {sampling, seed, 100000u + r}));
        cond.prefill(prompt);
        cond.generate(new_tokens, stop);
        tau_cond[d].push_back(static_cast<double>(cond.stats().tokens));
        tau_cond[d].push_back(static_cast<double>(cond.stats().steps));
      }
    }
  }
  auto tau = [](const std::vector<double>& tokens_steps) {
    double tokens = 0, steps = 0;
    for (std::size_t i = 0; i < tokens_steps.size(); i += 2) {
      tokens += tokens_steps[i];
      steps += tokens_steps[i + 1];
    }
    return tokens / steps;
  };
  std::printf("\ntau (tokens per target call, bonus included), %zu prompts x %d runs x up to %d tokens, budget %d:\n",
              prompts.size(), tau_runs, tau_tokens, options.budget);
  std::printf("  plain sampling:                          1.00\n");
  std::printf("  rejection sampling (lossless):           %.2f\n", tau(tau_spec));
  for (int d = 0; d < 4; ++d)
    std::printf("  conditional, delta = %-8g (lossy):    %.2f\n", deltas[d], tau(tau_cond[d]));
  return 0;
}

int main(int argc, char** argv) {
  try {
    return run(argc, argv);
  } catch (const std::exception& e) {  // a bad file, a prompt that does not fit, ...: say so, no abort
    std::fprintf(stderr, "03_sampling: %s\n", e.what());
    return 1;
  }
}
