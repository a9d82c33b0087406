// StagedDrafter: losslessness (exact verifier: identical to greedy, one and two stages, alone and
// merged with CASD, on tiny models and stories260K), the tree's shape, that the second stage
// changes the draft model's forwards and nothing else, errors (the inner decoder's under the
// drafter's name), and rejection sampling (chi-square).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/pld.hpp>
#include <specdec/policies/drafters/staged.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/testing/hash_target.hpp>
#include <specdec/targets/llama2c.hpp>

#include "support/chi_square.hpp"
#include "support/llama_decode.hpp"
#include "support/stories260k.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_llama.hpp"

using namespace specdec;
using specdec::testing::require_greedy_made;
using specdec::testing::TempDir;

namespace {

using Tokens = std::vector<token_t>;
using OneStage = StagedDrafter<Llama2cTarget>;
using TwoStage = StagedDrafter<Llama2cTarget, PldDrafter>;

std::shared_ptr<const Llama2cModel> load_model(const std::filesystem::path& path) {
  return std::make_shared<const Llama2cModel>(Llama2cModel::load(path));
}

/// A tiny target (vocab 350, 128 positions) and draft models for it: the same weights scaled
/// (close to the target, often right), other weights (rarely right), and a draft of 64 positions.
struct Tiny {
  TempDir dir;
  std::shared_ptr<const Llama2cModel> target, close, other, short_draft;
  Tiny() {
    testing::TinyLlamaShape shape;
    shape.layers = 1;
    testing::write_tiny_llama(dir.path / "target.bin", shape, 5, 0.5f);
    testing::write_tiny_llama(dir.path / "close.bin", shape, 5, 0.45f);
    testing::write_tiny_llama(dir.path / "other.bin", shape, 6, 0.5f);
    testing::TinyLlamaShape short_shape = shape;
    short_shape.seq_len = 64;
    testing::write_tiny_llama(dir.path / "short.bin", short_shape, 5, 0.45f);
    target = load_model(dir.path / "target.bin");
    close = load_model(dir.path / "close.bin");
    other = load_model(dir.path / "other.bin");
    short_draft = load_model(dir.path / "short.bin");
  }
};

const Tokens tiny_prompts[] = {{1, 40, 41, 42}, {1, 300, 7, 7, 7, 12}, {1, 5}, {1, 99, 100, 101, 102, 103, 104, 105}};

/// A drafter that proposes a token outside the vocabulary (to break the inner decoder).
struct BrokenDrafter {
  static constexpr const char* name = "broken";
  void begin(std::span<const token_t>) {}
  void propose(const DraftContext& ctx, DraftTree& tree) { tree.add(0, ctx.vocab_size); }
  void observe(std::span<const token_t>) {}
};

}  // namespace

TEST_CASE("staged: output identical to greedy on tiny models, one and two stages, alone and with casd",
          "[staged][lossless]") {
  const Tiny tiny;
  const DecoderOptions options{.budget = 24};
  const StagedOptions staged{.depth = 6, .top_k = 3, .budget = 16, .inner_budget = 8};
  for (const auto& draft : {tiny.close, tiny.other}) {
    INFO((draft == tiny.close ? "close draft" : "other draft"));
    const auto one_stage = [&] { return OneStage(Llama2cTarget(draft), staged); };
    const auto two_stages = [&] { return TwoStage(Llama2cTarget(draft), staged, PldDrafter{}); };
    const DecodeStats one = require_greedy_made(tiny.target, tiny_prompts, 100, options, one_stage);
    const DecodeStats two = require_greedy_made(tiny.target, tiny_prompts, 100, options, two_stages);
    require_greedy_made(tiny.target, tiny_prompts, 100, options, two_stages, [] { return CasdDrafter{}; });
    std::cout << "staged, tiny, " << (draft == tiny.close ? "close" : "other") << " draft: tau " << one.tau()
              << " (one stage), " << two.tau() << " (two stages)\n";
    CHECK(one.tau() == two.tau());  // the second stage changes the draft model's forwards only
  }
  // The target itself as the draft: its greedy spine is always right, every step takes the
  // whole spine.
  const DecodeStats self =
      require_greedy_made(tiny.target, tiny_prompts, 120, options, [&] { return OneStage(Llama2cTarget(tiny.target), staged); });
  CHECK(self.tau() > 6.5);
}

TEST_CASE("staged: output identical to greedy on stories260K", "[staged][lossless]") {
  const testing::Stories260K* stories = testing::stories260k();
  if (!stories) return;
  std::vector<Tokens> prompts;
  for (const char* text : {"Once upon a time", "Tom had a big red ball. Tom had a big", "The cat sat on the mat."})
    prompts.push_back(stories->tokenizer.encode(text));
  const StagedOptions staged{.depth = 8, .top_k = 3, .budget = 32, .inner_budget = 16};
  const DecodeStats st = require_greedy_made(
      stories->model, prompts, 150, DecoderOptions{.budget = 48},
      [&] { return TwoStage(Llama2cTarget(stories->model), staged, PldDrafter{}); }, [] { return CasdDrafter{}; });
  CHECK(st.tau() > 8.0);  // the target as its own draft: the spine is always accepted
}

TEST_CASE("staged: the tree is the draft's greedy spine with its top-k alternatives, best first", "[staged]") {
  const Tiny tiny;
  const Tokens context = tiny_prompts[1];
  Llama2cTarget draft(tiny.close);
  const Tokens greedy = draft.generate(context, 10);
  for (const auto& [depth, budget] : {std::pair{6, 100}, std::pair{6, 7}, std::pair{3, 100}, std::pair{10, 12}}) {
    INFO("depth " << depth << ", budget " << budget);
    OneStage drafter(Llama2cTarget(tiny.close), StagedOptions{.depth = 10, .top_k = 3, .budget = 100});
    drafter.begin(context);
    DraftTree tree;
    tree.reset(context.back());
    drafter.propose(DraftContext{context, static_cast<int>(context.size()), budget, depth, 350}, tree);
    CHECK(tree.size() - 1 == std::min(budget, 3 * depth));
    std::vector<int> depth_of(static_cast<std::size_t>(tree.size()), 0);
    for (int i = 1; i < tree.size(); ++i) {
      depth_of[static_cast<std::size_t>(i)] = depth_of[static_cast<std::size_t>(tree.parent(i))] + 1;
      CHECK(depth_of[static_cast<std::size_t>(i)] <= depth);
      CHECK(tree.score(i) <= tree.score(tree.parent(i)));
      CHECK(tree.score(i) > 0.0f);
    }
    // Following the first child from the root is the draft model's greedy continuation.
    int node = 0;
    for (int level = 1;; ++level) {
      int first = -1;
      for (int i = node + 1; i < tree.size() && first < 0; ++i)
        if (tree.parent(i) == node) first = i;
      if (first < 0) break;
      CHECK(tree.token(first) == greedy[static_cast<std::size_t>(level - 1)]);
      node = first;
    }
  }
}

TEST_CASE("staged: the second stage cuts the draft model's forwards, the trees stay the same", "[staged]") {
  const Tiny tiny;
  Llama2cTarget target_one(tiny.target), target_two(tiny.target);
  const StagedOptions staged{.depth = 8, .top_k = 2, .budget = 16, .inner_budget = 12};
  const DecoderOptions options{.budget = 16};
  std::int64_t one_forwards = 0, two_forwards = 0, tokens = 0;
  for (const Tokens& prompt : tiny_prompts) {
    SpeculativeDecoder<Llama2cTarget, OneStage, ExactVerifier> one(target_one, options,
                                                                   OneStage(Llama2cTarget(tiny.close), staged), ExactVerifier{});
    SpeculativeDecoder<Llama2cTarget, TwoStage, ExactVerifier> two(
        target_two, options, TwoStage(Llama2cTarget(tiny.close), staged, PldDrafter{}), ExactVerifier{});
    one.prefill(prompt);
    two.prefill(prompt);
    while (one.context().size() < 110) {
      const auto a = one.step();
      const auto b = two.step();
      REQUIRE(Tokens(a.begin(), a.end()) == Tokens(b.begin(), b.end()));
      REQUIRE(std::ranges::equal(one.last_tree().tokens(), two.last_tree().tokens()));
      REQUIRE(std::ranges::equal(one.last_tree().parents(), two.last_tree().parents()));
    }
    one_forwards += one.drafter<0>().draft_forwards();
    two_forwards += two.drafter<0>().draft_forwards();
    tokens += one.stats().tokens;
  }
  std::cout << "staged, tiny: draft forwards per committed token " << double(one_forwards) / double(tokens)
            << " (one stage), " << double(two_forwards) / double(tokens) << " (two stages, pld)\n";
  CHECK(two_forwards < one_forwards);
}

TEST_CASE("staged: errors name the drafter, the inner decoder's included", "[staged][errors]") {
  const Tiny tiny;
  CHECK_THROWS_WITH(OneStage(Llama2cTarget(tiny.close), StagedOptions{.top_k = 0}),
                    Catch::Equals("draft_model: top_k must be >= 1, got 0"));
  CHECK_THROWS_WITH(TwoStage(Llama2cTarget(tiny.close), StagedOptions{.depth = -1}, PldDrafter{}),
                    Catch::Equals("staged: depth must be >= 0, got -1"));

  const Tokens context = tiny_prompts[0];
  DraftTree tree;
  tree.reset(context.back());
  OneStage one(Llama2cTarget(tiny.close));
  one.begin(context);
  CHECK_THROWS_WITH(one.propose(DraftContext{context, 4, 16, 16, 512}, tree),
                    Catch::Equals("draft_model: the target's vocabulary has 512 tokens, the draft model's 350"));
  const Tokens longer{1, 40, 41, 42, 43};
  CHECK_THROWS_WITH(one.propose(DraftContext{longer, 4, 16, 16, 350}, tree),
                    Catch::Equals("draft_model: the context has 5 tokens, but begin() and observe() were told 4"));

  StagedDrafter<Llama2cTarget, BrokenDrafter> broken(Llama2cTarget(tiny.close), StagedOptions{}, BrokenDrafter{});
  broken.begin(context);
  CHECK_THROWS_WITH(broken.propose(DraftContext{context, 4, 16, 16, 350}, tree),
                    Catch::StartsWith("staged: the draft model's decoder: drafter 0 (broken)") &&
                        Catch::Contains("outside the vocabulary"));

  // Through an outer decoder: a prompt longer than the draft model's positions, refused at begin
  // with the numbers (once an error from inside the inner decoder).
  Llama2cTarget target(tiny.target);
  SpeculativeDecoder<Llama2cTarget, OneStage, ExactVerifier> decoder(target, OneStage(Llama2cTarget(tiny.short_draft)),
                                                                     ExactVerifier{});
  CHECK_THROWS_WITH(decoder.prefill(Tokens(100, 1)),
                    Catch::Equals("draft_model: the prompt has 100 tokens, more than the draft model's 64 positions"));
  CHECK_THROWS_WITH(decoder.prefill(Tokens(65, 1)),
                    Catch::Equals("draft_model: the prompt has 65 tokens, more than the draft model's 64 positions"));
  CHECK_NOTHROW(decoder.prefill(Tokens(64, 1)));
}

TEST_CASE("staged: a draft model with fewer positions than the target stops drafting past them, losslessly",
          "[staged][lossless][errors]") {
  // Regression: once the sequence passed the draft model's 64 positions, resuming the inner
  // decoder failed inside the draft model's forward, mid-generation.
  const Tiny tiny;
  const DecoderOptions options{.budget = 16};
  const StagedOptions staged{.depth = 6, .top_k = 3, .budget = 12, .inner_budget = 8};
  const DecodeStats st = require_greedy_made(tiny.target, tiny_prompts, 110, options, [&] {
    return TwoStage(Llama2cTarget(tiny.short_draft), staged, PldDrafter{});
  });
  CHECK(st.tau() > 1.0);  // drafts were accepted while the draft model could read the sequence
}

TEST_CASE("staged under rejection sampling: the first token follows the target's distribution (chi-square)",
          "[staged][lossless][statistical]") {
  const Tiny tiny;
  const Tokens prompt = tiny_prompts[0];
  Llama2cTarget target(tiny.target);
  const int vocab = tiny.target->config().vocab_size;
  std::vector<std::int64_t> counts(static_cast<std::size_t>(vocab), 0);
  double accepted = 0;
  const int trials = 4000;
  for (int t = 0; t < trials; ++t) {
    SpeculativeDecoder<Llama2cTarget, TwoStage, RejectionSampling> decoder(
        target, DecoderOptions{.budget = 16},
        TwoStage(Llama2cTarget(tiny.close), StagedOptions{.depth = 4, .top_k = 3, .budget = 12}, PldDrafter{}),
        RejectionSampling(SamplingOptions{.sampling = {.temperature = 1.0f}, .seed = 77, .sequence = static_cast<std::uint32_t>(t)}));
    decoder.prefill(prompt);
    const auto committed = decoder.step();
    ++counts[static_cast<std::size_t>(committed[0])];
    accepted += static_cast<double>(committed.size() - 1);
  }
  const testing::ChiSquare chi = testing::chi_square(counts, testing::next_token_distribution(tiny.target, prompt));
  std::cout << "chi-square [staged, one-hot drafts, T=1] first token: X2 = " << chi.statistic << ", df = "
            << chi.degrees_of_freedom << ", p = " << chi.p_value << "; accepted draft tokens per step: "
            << accepted / trials << "\n";
  CHECK(chi.p_value > 0.001);
  CHECK(accepted / trials > 0.05);  // drafts were accepted, not only rejected
}

TEST_CASE("staged: a draft model whose forward returns its output by value", "[staged][lossless]") {
  // HashTarget returns a reference; this one a copy, which the drafter must keep alive itself.
  struct ByValueTarget : HashTarget {
    using HashTarget::HashTarget;
    Output forward(const TreeView& tree) { return HashTarget::forward(tree); }
  };
  HashTarget target(64, 3, 2.0f);
  const Tokens prompt{5, 17, 42};
  SpeculativeDecoder<HashTarget, StagedDrafter<ByValueTarget>, ExactVerifier> decoder(
      target, DecoderOptions{.budget = 12},
      StagedDrafter<ByValueTarget>(ByValueTarget(64, 3, 2.0f), StagedOptions{.depth = 6, .top_k = 1}), ExactVerifier{});
  decoder.prefill(prompt);
  CHECK(decoder.generate(140) == target.generate(prompt, 140));
  CHECK(decoder.stats().tau() == 7.0);  // the draft is the target: every step takes the 6-token spine and the bonus
}
