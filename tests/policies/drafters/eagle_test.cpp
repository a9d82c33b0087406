// EagleDrafter and its head file: losslessness (exact verifier: identical to greedy, alone and
// merged with CASD and the context tree, on stories260K and on a tiny model of another shape), the
// KV-cache rollback, head file errors, and rejection sampling (chi-square), including a planted
// wrong proposal that the test must catch.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/models/eagle_head.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/context_tree.hpp>
#include <specdec/policies/drafters/eagle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/testing/laid_out_tree.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "support/chi_square.hpp"
#include "support/data.hpp"
#include "support/eagle_head.hpp"
#include "support/llama_decode.hpp"
#include "support/same_counters.hpp"
#include "support/stories260k.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_llama.hpp"

using namespace specdec;
using specdec::testing::EagleHeadShape;
using specdec::testing::require_greedy;
using specdec::testing::TempDir;

namespace {

using Tokens = std::vector<token_t>;

std::shared_ptr<const Llama2cModel> load_model(const std::filesystem::path& path) {
  return std::make_shared<const Llama2cModel>(Llama2cModel::load(path));
}

std::shared_ptr<const EagleHead> load_head(const TempDir& dir, const std::string& bytes) {
  return std::make_shared<const EagleHead>(EagleHead::load(dir.write("head.bin", bytes)));
}

/// A one-layer tiny model (vocab 350, 128 positions, unshared classifier) and its mirror head.
struct Tiny {
  TempDir dir;
  std::shared_ptr<const Llama2cModel> model;
  explicit Tiny(int layers = 1) {
    testing::TinyLlamaShape shape;
    shape.layers = layers;
    testing::write_tiny_llama(dir.path / "tiny.bin", shape, 5, 0.5f);
    model = load_model(dir.path / "tiny.bin");
  }
  std::shared_ptr<const EagleHead> mirror(float noise = 0.0f) const {
    return load_head(dir, testing::mirror_eagle_head(dir.path / "tiny.bin", noise));
  }
};

const Tokens tiny_prompts[] = {{1, 40, 41, 42}, {1, 300, 7, 7, 7, 12}, {1, 5}, {1, 99, 100, 101, 102, 103, 104, 105}};

struct Stories {
  std::shared_ptr<const Llama2cModel> model;
  std::vector<Tokens> prompts;
  static const Stories* get() {
    static const std::unique_ptr<Stories> stories = []() -> std::unique_ptr<Stories> {
      const testing::Stories260K* loaded = testing::stories260k();
      if (!loaded) return nullptr;
      auto s = std::make_unique<Stories>();
      s->model = loaded->model;
      for (const char* text : {"Once upon a time", "Tom had a big red ball. Tom had a big", "The cat sat on the mat."})
        s->prompts.push_back(loaded->tokenizer.encode(text));
      return s;
    }();
    return stories.get();
  }
};

/// The features the target computes at every position of `context` but the last.
std::vector<float> plain_features(const std::shared_ptr<const Llama2cModel>& model, std::span<const token_t> context) {
  Llama2cTarget plain(model);
  std::vector<float> rows;
  testing::forward_one_by_one(plain, Tokens(context.begin(), context.end() - 1),
                              [&](int, const Llama2cTarget::Output& out) {
                                rows.insert(rows.end(), out.features(0).begin(), out.features(0).end());
                              });
  return rows;
}

/// A fresh drafter fed `context` as its prompt (with the plain forward's features).
EagleDrafter fresh_drafter(const std::shared_ptr<const EagleHead>& head, const std::shared_ptr<const Llama2cModel>& model,
                           std::span<const token_t> context, EagleOptions options) {
  EagleDrafter fresh(head, model, options);
  const std::vector<float> rows = plain_features(model, context);
  const int dim = model->config().dim;
  fresh.begin(context, TargetFeatures{0, static_cast<int>(context.size()) - 1, dim, rows.data()});
  return fresh;
}

struct Drawn {
  Tokens tokens;
  std::vector<node_t> parents;
  std::vector<float> scores;
  bool operator==(const Drawn&) const = default;
};

Drawn draft(EagleDrafter& drafter, std::span<const token_t> context, int budget, int max_depth, int vocab) {
  DraftTree tree;
  tree.reset(context.back());
  drafter.propose(DraftContext{context, 1, budget, max_depth, vocab}, tree);
  return {Tokens(tree.tokens().begin(), tree.tokens().end()), std::vector<node_t>(tree.parents().begin(), tree.parents().end()),
          std::vector<float>(tree.scores().begin(), tree.scores().end())};
}

/// Decodes with eagle (+ `others`), and after every step compares the drafter's next draft with
/// a fresh drafter's fed the committed context. Returns the steps with partial acceptance (some
/// but not all levels of the eagle draft accepted).
template <class... Others>
int check_rollback(const std::shared_ptr<const EagleHead>& head, const std::shared_ptr<const Llama2cModel>& model,
                   const Tokens& prompt, int steps, EagleOptions options, Others... others) {
  Llama2cTarget target(model);
  const DecoderOptions decoder_options{.budget = 40};
  SpeculativeDecoder<Llama2cTarget, EagleDrafter, Others..., ExactVerifier> decoder(
      target, decoder_options, EagleDrafter(head, model, options), others..., ExactVerifier{});
  decoder.prefill(prompt);
  const int vocab = model->config().vocab_size;
  int partial = 0;
  for (int s = 0; s < steps; ++s) {
    const auto committed = decoder.step();
    const int accepted = static_cast<int>(committed.size()) - 1;
    partial += accepted > 0 && accepted < options.depth;
    const std::span<const token_t> context = decoder.context();
    const int room = model->config().seq_len - static_cast<int>(context.size());
    if (room < 8) break;
    EagleDrafter copy = decoder.template drafter<0>();  // drafting leaves the committed state alone
    EagleDrafter fresh = fresh_drafter(head, model, context, options);
    INFO("step " << s << ", context " << context.size());
    REQUIRE(copy.told() == static_cast<int>(context.size()));
    REQUIRE(draft(copy, context, 40, room, vocab) == draft(fresh, context, 40, room, vocab));
  }
  return partial;
}

}  // namespace

TEST_CASE("eagle: the automatic budget's pauses run in the target's own loop, with the features", "[eagle][plain_runs]") {
  // Llama2cTarget::decode gives each step's features, so a decoder whose drafter reads them hands
  // the target the steps of a pause too: the same tokens and counters as step by step, and the
  // head, told the same features, drafts the same tree afterwards.
  STATIC_REQUIRE(SpeculativeDecoder<Llama2cTarget, EagleDrafter, ExactVerifier>::runs_plainly);
  // A target whose loop gives no features cannot serve a drafter that reads them.
  struct NoFeatureLoop : Llama2cTarget {
    using Llama2cTarget::Llama2cTarget;
    std::vector<token_t> decode(token_t last, int n, std::span<const token_t> stop) {
      return Llama2cTarget::decode(last, n, stop);
    }
  };
  STATIC_REQUIRE(PlainDecodingTarget<NoFeatureLoop>);
  STATIC_REQUIRE(!PlainDecodingFeatureTarget<NoFeatureLoop>);
  STATIC_REQUIRE(!SpeculativeDecoder<NoFeatureLoop, EagleDrafter, ExactVerifier>::runs_plainly);
  STATIC_REQUIRE(SpeculativeDecoder<NoFeatureLoop, CasdDrafter, ExactVerifier>::runs_plainly);
  const Tiny tiny;
  const auto head = tiny.mirror(0.5f);
  struct DearNodes {  // no draft node ever pays: the drafter is paused on most steps
    double step_seconds(int nodes, int) const { return nodes; }
  };
  const Tokens prompt = tiny_prompts[1];
  auto run = [&](bool plain_runs) {
    Llama2cTarget target(tiny.model);
    SpeculativeDecoder<Llama2cTarget, EagleDrafter, ExactVerifier> decoder(
        target, DecoderOptions{.budget = 8, .cost = DearNodes{}, .measured_pause = false, .plain_runs = plain_runs},
        EagleDrafter(head, tiny.model), ExactVerifier{});
    decoder.prefill(prompt);
    const Tokens out = decoder.generate(100);
    EagleDrafter drafter = decoder.template drafter<0>();
    const Drawn next = draft(drafter, decoder.context(), 8, 8, tiny.model->config().vocab_size);
    return std::tuple(out, decoder.stats(), next);
  };
  const auto [out, stats, next] = run(true);
  const auto [out_by_step, stats_by_step, next_by_step] = run(false);
  Llama2cTarget reference(tiny.model);
  CHECK(out == reference.generate(prompt, 100));
  CHECK(out_by_step == out);
  testing::check_same_counters(stats, stats_by_step);
  CHECK(stats.paused_steps > 50);
  CHECK(next.tokens.size() > 1);
  CHECK(next == next_by_step);

  // A loop that gives a feature row too few: a one-line error, and the decoder needs a new prefill.
  struct ShortFeatureLoop : Llama2cTarget {
    using Llama2cTarget::Llama2cTarget;
    std::vector<token_t> decode(token_t last, int n, std::span<const token_t> stop) {
      return Llama2cTarget::decode(last, n, stop);
    }
    std::vector<token_t> decode(token_t last, int n, std::span<const token_t> stop, std::vector<float>& features) {
      std::vector<token_t> out = Llama2cTarget::decode(last, n, stop, features);
      features.resize(features.size() - static_cast<std::size_t>(feature_dim()));
      return out;
    }
  };
  ShortFeatureLoop short_loop(tiny.model);
  SpeculativeDecoder<ShortFeatureLoop, EagleDrafter, ExactVerifier> broken(
      short_loop, DecoderOptions{.budget = 8, .cost = DearNodes{}, .measured_pause = false},
      EagleDrafter(head, tiny.model), ExactVerifier{});
  broken.prefill(prompt);
  CHECK_THROWS_WITH(broken.generate(100),
                    Catch::Contains("the target's decode() gave") && Catch::Contains("feature floats"));
  CHECK_THROWS_WITH(broken.step(), Catch::Contains("call prefill() first"));
}

TEST_CASE("eagle: a mirror head on a one-layer model drafts the target's greedy path, every level accepted",
          "[eagle]") {
  // top_k 1: the draft is the head's greedy chain of `depth` tokens. The mirror head predicts
  // the target's logits bit for bit (its KV cache holding exactly the committed tokens), so the
  // whole chain and the bonus token are committed every step.
  const Tiny tiny;
  const auto head = tiny.mirror();
  Llama2cTarget target(tiny.model);
  const Tokens& prompt = tiny_prompts[0];
  const Tokens expected = target.generate(prompt, 70);
  SpeculativeDecoder<Llama2cTarget, EagleDrafter, ExactVerifier> decoder(
      target, DecoderOptions{.budget = 60}, EagleDrafter(head, tiny.model, EagleOptions{6, 6, 1}), ExactVerifier{});
  decoder.prefill(prompt);
  for (int s = 0; s < 10; ++s) CHECK(decoder.step().size() == 7);  // depth 6: 6 levels + the bonus token
  CHECK(Tokens(decoder.context().begin() + static_cast<std::ptrdiff_t>(prompt.size()), decoder.context().end()) == expected);
}

TEST_CASE("eagle: the draft follows the decoder's budget and the target's remaining positions", "[eagle]") {
  const Tiny tiny;
  const auto head = tiny.mirror();
  EagleDrafter drafter = fresh_drafter(head, tiny.model, tiny_prompts[0], {});
  const Drawn small = draft(drafter, tiny_prompts[0], 7, 3, 350);
  CHECK(small.tokens.size() == 8);
  Drawn shallow = draft(drafter, tiny_prompts[0], 60, 1, 350);
  CHECK(shallow.tokens.size() == 11);  // top_k children of the root only
  CHECK(std::all_of(shallow.parents.begin() + 1, shallow.parents.end(), [](node_t p) { return p == 0; }));
  CHECK(draft(drafter, tiny_prompts[0], 0, 5, 350).tokens.size() == 1);
  CHECK(draft(drafter, tiny_prompts[0], 60, 0, 350).tokens.size() == 1);
  // scores are path probabilities: in (0, 1], never growing along a path
  const Drawn full = draft(drafter, tiny_prompts[0], 60, 6, 350);
  REQUIRE(full.tokens.size() == 61);
  for (std::size_t i = 1; i < full.scores.size(); ++i) {
    CHECK(full.scores[i] > 0.0f);
    CHECK(full.scores[i] <= (full.parents[i] == 0 ? 1.0f : full.scores[static_cast<std::size_t>(full.parents[i])]));
  }
}

TEST_CASE("eagle: output identical to greedy on stories260K, alone and merged with casd and tree", "[eagle][lossless]") {
  const Stories* s = Stories::get();
  if (!s) return;
  const TempDir dir;
  const auto head = load_head(dir, testing::random_eagle_head());
  const DecoderOptions options{.budget = 60};
  const DecodeStats eagle = require_greedy(s->model, s->prompts, 80, options, EagleDrafter(head, s->model));
  const double alone = eagle.tau();
  const double with_casd = require_greedy(s->model, s->prompts, 80, options, EagleDrafter(head, s->model), CasdDrafter{}).tau();
  const double with_tree =
      require_greedy(s->model, s->prompts, 80, options, EagleDrafter(head, s->model), ContextTreeDrafter{}).tau();
  const double steps = static_cast<double>(eagle.steps);
  std::cout << "eagle (random head) on stories260K: tau " << alone << ", with casd " << with_casd << ", with tree "
            << with_tree << " (tokens per target call, bonus included); eagle alone per step: drafting "
            << 1e6 * eagle.draft_seconds / steps << " us, target forward + commit " << 1e6 * eagle.target_seconds / steps
            << " us, " << eagle.draft_nodes_per_step() << " draft nodes\n";
  CHECK(alone >= 1.0);
  CHECK(with_casd > alone);  // stories repeat: the copy drafter's nodes survive the shared budget
}

TEST_CASE("eagle: output identical to greedy on a tiny model of another shape", "[eagle][lossless]") {
  const Tiny tiny(2);
  const auto head = load_head(tiny.dir, testing::random_eagle_head(EagleHeadShape{16, 24, 2, 1, 350}, 9, 0.5f));
  const DecoderOptions options{.budget = 60};
  require_greedy(tiny.model, tiny_prompts, 100, options, EagleDrafter(head, tiny.model));
  require_greedy(tiny.model, tiny_prompts, 100, options, EagleDrafter(head, tiny.model, {20, 3, 4}), CasdDrafter{});
  require_greedy(tiny.model, tiny_prompts, 100, options, EagleDrafter(head, tiny.model), ContextTreeDrafter{});
  // A one-layer model with an imperfect mirror head: long accepted paths, and a near-full context.
  const Tiny one;
  const double tau = require_greedy(one.model, tiny_prompts, 115, options, EagleDrafter(one.mirror(0.05f), one.model)).tau();
  std::cout << "eagle (noisy mirror head) on the one-layer tiny model: tau " << tau << "\n";
  CHECK(tau > 2.0);
}

TEST_CASE("eagle: after partial acceptance the head drafts what a fresh head fed the committed prefix drafts",
          "[eagle][rollback]") {
  const Tiny one;
  const auto head = one.mirror(0.05f);
  int partial = 0;
  for (const Tokens& prompt : tiny_prompts) partial += check_rollback(head, one.model, prompt, 12, EagleOptions{});
  CHECK(partial >= 10);  // the comparison happened after steps that rejected part of the draft
  const Stories* s = Stories::get();
  if (!s) return;
  const TempDir dir;
  const auto random_head = load_head(dir, testing::random_eagle_head());
  check_rollback(random_head, s->model, s->prompts[1], 8, EagleOptions{30, 4, 6}, CasdDrafter{});
}

TEST_CASE("eagle: the committed stories260K head on held-out prompts (greedy, 60 nodes)", "[eagle][trained]") {
  // The head tools/eagle/train.py made (tools/eagle/README.md has the command); $SPECDEC_EAGLE_HEAD
  // tries another one. The prompts are specbench's `stories` task's, which the training corpus
  // does not contain.
  const Stories* s = Stories::get();
  if (!s) return;
  const char* env = std::getenv("SPECDEC_EAGLE_HEAD");
  const std::filesystem::path path =
      env && *env ? std::filesystem::path(env) : std::filesystem::path(SPECDEC_SOURCE_DIR) / "tools/eagle/heads/stories260K.eagle";
  if (!std::filesystem::exists(path)) {
    std::cout << "specdec-skip: no trained head at " << path << "\n";
    return;
  }
  const Llama2cTokenizer& tokenizer = testing::stories260k()->tokenizer;
  std::vector<Tokens> prompts;
  for (const char* text : {"Once upon a time, there was a little girl named Lily.",
                           "One day, a boy named Tom found a shiny stone in the garden.",
                           "There was a big brown dog who lived next to a farm.",
                           "Mia had a new red hat. She wanted to show it to her friends.",
                           "The sun was hot and the sky was blue.", "Ben and his sister Sue liked to play in the sand."})
    prompts.push_back(tokenizer.encode(text));
  const auto head = std::make_shared<const EagleHead>(EagleHead::load(path));
  const DecoderOptions options{.budget = 60};
  const DecodeStats eagle = require_greedy(s->model, prompts, 150, options, EagleDrafter(head, s->model));
  const DecodeStats with_casd = require_greedy(s->model, prompts, 150, options, EagleDrafter(head, s->model), CasdDrafter{});
  const double steps = static_cast<double>(eagle.steps);
  std::cout << "eagle (trained head " << path.filename().string() << ") on stories260K, 6 held-out prompts x 150 tokens: tau "
            << eagle.tau() << ", with casd " << with_casd.tau() << " (tokens per target call, bonus included); "
            << "per step: drafting " << 1e6 * eagle.draft_seconds / steps << " us, target forward + commit "
            << 1e6 * eagle.target_seconds / steps << " us\n";
  CHECK(eagle.tau() >= 3.5);  // issue 15's target (3.77 measured: decoding is deterministic)
  CHECK(with_casd.tau() > eagle.tau());
}

TEST_CASE("eagle: head file errors are one clear sentence", "[eagle][errors]") {
  const Tiny tiny;
  const TempDir dir;
  const std::string good = testing::random_eagle_head(EagleHeadShape{16, 24, 2, 1, 350});
  auto message = [&](const std::string& bytes) -> std::string {
    try {
      EagleDrafter(dir.write("bad.bin", bytes), tiny.model);
    } catch (const error& e) {
      return e.what();
    }
    return "(no error)";
  };
  auto one_sentence = [](const std::string& m) { return m.find('\n') == std::string::npos && m.find("bad.bin") != std::string::npos; };
  CHECK(message(good) == "(no error)");

  const std::string truncated = message(good.substr(0, good.size() - 4));
  CHECK_THAT(truncated, Catch::Contains("truncated") && Catch::Contains(std::to_string(good.size() - 4)));
  CHECK(one_sentence(truncated));
  CHECK_THAT(message(good.substr(0, 20)), Catch::Contains("shorter than the 32-byte header"));
  CHECK_THAT(message(good + "xxxx"), Catch::Contains("trailing data"));

  std::string v2 = good;
  const std::int32_t two = 2;
  std::memcpy(v2.data() + 8, &two, 4);
  const std::string version = message(v2);
  CHECK_THAT(version, Catch::Contains("format version 2") && Catch::Contains("reads version 1"));
  CHECK(one_sentence(version));

  std::string magic = good;
  magic[0] = 'X';
  CHECK_THAT(message(magic), Catch::Contains("not an EAGLE head file"));
  std::string odd_heads = good;
  const std::int32_t three = 3;
  std::memcpy(odd_heads.data() + 20, &three, 4);  // n_heads
  CHECK_THAT(message(odd_heads), Catch::Contains("n_heads 3 does not divide dim 16"));
  CHECK_THAT(message(""), Catch::Contains("shorter than"));
  CHECK_THROWS_WITH(EagleDrafter(dir.path / "missing.bin", tiny.model), Catch::Contains("missing.bin': no such file"));

  // a well-formed head trained for another target
  auto fit = [&](const EagleHeadShape& shape) {
    try {
      EagleDrafter(dir.write("other.bin", testing::random_eagle_head(shape)), tiny.model);
    } catch (const error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(fit({32, 24, 2, 1, 350}) == "EAGLE head: its dim is 32 but the target's is 16 (the head was trained for another model)");
  CHECK_THAT(fit({16, 24, 2, 1, 512}), Catch::Contains("vocab_size is 512 but the target's is 350"));
  CHECK_THAT(fit({16, 24, 4, 1, 350}), Catch::Contains("n_heads is 4 but the target's is 2"));
  CHECK_THAT(fit({16, 24, 2, 2, 350}), Catch::Contains("n_kv_heads is 2 but the target's is 1"));
  CHECK(fit({16, 24, 2, 1, 350}) == "(no error)");
  if (const Stories* s = Stories::get())
    CHECK_THROWS_WITH(EagleDrafter(load_head(dir, good), s->model), Catch::Contains("dim is 16 but the target's is 64"));

  CHECK_THROWS_WITH(EagleDrafter(load_head(dir, good), tiny.model, {0, 6, 10}), "eagle: budget must be >= 1, got 0");
  CHECK_THROWS_WITH(EagleDrafter(load_head(dir, good), tiny.model, {60, 0, 10}), "eagle: depth must be >= 1, got 0");
  CHECK_THROWS_WITH(EagleDrafter(load_head(dir, good), tiny.model, {60, 5, 0}), "eagle: top_k must be >= 1, got 0");
  CHECK_THROWS_WITH(EagleDrafter(std::shared_ptr<const EagleHead>{}, tiny.model), "eagle: no head (null pointer)");
}

// ---- rejection sampling ----

namespace {

/// PLANTED BUG: claims the head's top child of the root was sampled from the head's distribution
/// q (add_sampled), though it was chosen deterministically. With the mirror head q is the
/// target's p, so the verifier accepts it with probability min(1, p/q) = 1: the first token is
/// always the argmax. The chi-square test must reject this.
class ClaimsSampledEagle {
 public:
  static constexpr const char* name = "eagle claiming sampled drafts";
  static constexpr bool needs_target_features = true;
  static constexpr bool emits_draft_probabilities = true;

  ClaimsSampledEagle(EagleDrafter eagle, std::shared_ptr<const Llama2cModel> model)
      : eagle_(std::move(eagle)), model_(std::move(model)) {}
  void begin(std::span<const token_t> p, const TargetFeatures& f) { eagle_.begin(p, f); }
  void observe(std::span<const token_t> c, const TargetFeatures& f) { eagle_.observe(c, f); }
  void propose(const DraftContext& ctx, DraftTree& tree) {
    DraftTree deterministic;
    deterministic.reset(ctx.tokens.back());
    eagle_.propose(ctx, deterministic);
    if (deterministic.size() < 2) return;
    const token_t top = deterministic.token(1);
    std::vector<float> q = next_distribution(model_, ctx.tokens);  // the mirror head's q
    tree.add_sampled(0, q, std::span<const token_t>(&top, 1));
  }

  static std::vector<float> next_distribution(const std::shared_ptr<const Llama2cModel>& model,
                                              std::span<const token_t> context) {
    const std::vector<double> p = testing::next_token_distribution(model, context);
    return std::vector<float>(p.begin(), p.end());
  }

 private:
  EagleDrafter eagle_;
  std::shared_ptr<const Llama2cModel> model_;
};
static_assert(Drafter<ClaimsSampledEagle>);

/// Samples the first generated token after `prompt` over `trials` seeds; returns the chi-square
/// test against the target's distribution (temperature 1) and the mean accepted draft tokens.
template <class D>
std::pair<testing::ChiSquare, double> first_token_test(const std::shared_ptr<const Llama2cModel>& model,
                                                       const Tokens& prompt, int trials, auto make_drafter) {
  Llama2cTarget target(model);
  const int vocab = model->config().vocab_size;
  std::vector<std::int64_t> counts(static_cast<std::size_t>(vocab), 0);
  double accepted = 0;
  for (int t = 0; t < trials; ++t) {
    SpeculativeDecoder<Llama2cTarget, D, RejectionSampling> decoder(
        target, DecoderOptions{.budget = 24}, make_drafter(),
        RejectionSampling(SamplingOptions{.sampling = {.temperature = 1.0f}, .seed = 2024, .sequence = static_cast<std::uint32_t>(t)}));
    decoder.prefill(prompt);
    const auto committed = decoder.step();
    ++counts[static_cast<std::size_t>(committed[0])];
    accepted += static_cast<double>(committed.size() - 1);
  }
  const std::vector<float> q = ClaimsSampledEagle::next_distribution(model, prompt);
  return {testing::chi_square(counts, std::vector<double>(q.begin(), q.end())), accepted / trials};
}

}  // namespace

TEST_CASE("eagle under rejection sampling: the first token follows the target's distribution (chi-square)",
          "[eagle][lossless][statistical]") {
  const Tiny one;
  const auto head = one.mirror(0.05f);
  const auto [chi, accepted] = first_token_test<EagleDrafter>(one.model, tiny_prompts[0], 6000, [&] {
    return EagleDrafter(head, one.model, EagleOptions{24, 4, 4});
  });
  std::cout << "chi-square [eagle, one-hot drafts, T=1] first token: X2 = " << chi.statistic << ", df = "
            << chi.degrees_of_freedom << ", p = " << chi.p_value << "; accepted draft tokens per step: " << accepted << "\n";
  CHECK(chi.p_value > 0.001);
  CHECK(accepted > 0.05);  // drafts were accepted, not only rejected
}

TEST_CASE("the chi-square test catches a draft declared as sampled from q that was not", "[eagle][statistical][teeth]") {
  const Tiny one;
  const auto head = one.mirror();
  const auto [chi, accepted] = first_token_test<ClaimsSampledEagle>(one.model, tiny_prompts[0], 1000, [&] {
    return ClaimsSampledEagle(EagleDrafter(head, one.model, EagleOptions{24, 4, 4}), one.model);
  });
  std::cout << "chi-square [PLANTED: argmax declared as a draw from q] first token: X2 = " << chi.statistic
            << ", p = " << chi.p_value << "; accepted draft tokens per step: " << accepted << "\n";
  CHECK(chi.p_value < 1e-6);
}
