// Llama2cBatchTarget: one forward for the trees of many slots gives every node, bit for bit, what a
// Llama2cTarget of that slot alone gives (any batch, thread count, cache lengths); SpeculativeBatch
// on it is lossless per request; bad calls throw one sentence and leave every slot as it was.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <random>
#include <vector>

#include <specdec/batch_decoder.hpp>
#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/context_tree.hpp>
#include <specdec/policies/drafters/eagle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/targets/llama2c_batch.hpp>
#include <specdec/testing/laid_out_tree.hpp>

#include "support/eagle_head.hpp"
#include "support/random_tree.hpp"
#include "support/stories260k.hpp"
#include "support/temp_dir.hpp"
#include "support/tiny_llama.hpp"

using namespace specdec;
using Catch::Matchers::Contains;
using testing::LaidOutTree;

namespace {

std::shared_ptr<const Llama2cModel> tiny_model(const testing::TempDir& dir) {
  testing::TinyLlamaShape shape;
  shape.dim = 48, shape.hidden = 100, shape.layers = 2, shape.heads = 6, shape.kv_heads = 2, shape.vocab = 300,
  shape.seq_len = 300;
  testing::write_tiny_llama(dir.path / "tiny.bin", shape, 7);
  return std::make_shared<const Llama2cModel>(Llama2cModel::load(dir.path / "tiny.bin"));
}

bool same_bits(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<token_t> random_tokens(std::mt19937_64& rng, int n, int vocab) {
  std::vector<token_t> t(static_cast<std::size_t>(n));
  for (token_t& x : t) x = static_cast<token_t>(rng() % static_cast<unsigned>(vocab));
  return t;
}

// A random root-first path through `tree`.
std::vector<node_t> random_path(std::mt19937_64& rng, const testing::RandomTree& tree) {
  std::vector<node_t> path{0};
  for (;;) {
    std::vector<node_t> children;
    for (std::size_t i = 1; i < tree.parent.size(); ++i)
      if (tree.parent[i] == path.back()) children.push_back(static_cast<node_t>(i));
    if (children.empty() || rng() % 4 == 0) return path;
    path.push_back(children[rng() % children.size()]);
  }
}

// Slots with prompts of different lengths step through random trees, batched and one target per
// slot side by side; every node of every step must match bit for bit.
void check_against_single_targets(const std::shared_ptr<const Llama2cModel>& model, int threads) {
  const int vocab = model->config().vocab_size, slots = 5;
  std::mt19937_64 rng(static_cast<std::uint64_t>(threads) * 31u + 3u);
  Llama2cBatchTarget batched(model, slots, {threads});
  std::vector<Llama2cTarget> single;
  for (int s = 0; s < slots; ++s) {
    single.emplace_back(model);
    const std::vector<token_t> prompt = random_tokens(rng, 1 + 9 * s, vocab);
    batched.prefill(s, prompt);
    single.back().prefill(prompt);
  }
  int mismatches = 0, nodes = 0;
  for (int step = 0; step < 12; ++step) {
    // A random subset of the slots, in a random order, each with its own random tree.
    std::vector<int> order;
    for (int s = 0; s < slots; ++s)
      if (rng() % 4 != 0) order.push_back(s);
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<testing::RandomTree> shapes;
    std::vector<LaidOutTree> trees;
    std::vector<TreeView> views;
    for (std::size_t b = 0; b < order.size(); ++b) {
      shapes.push_back(testing::random_tree(rng, 1 + static_cast<int>(rng() % 40), vocab));
      trees.emplace_back(shapes.back().parent, shapes.back().token);
    }
    for (std::size_t b = 0; b < order.size(); ++b) views.push_back(trees[b].view(batched.cached(order[b])));
    const auto& out = batched.forward(TreeBatchView{order, views});
    for (std::size_t b = 0; b < order.size(); ++b) {
      const auto& want = single[static_cast<std::size_t>(order[b])].forward(views[b]);
      for (int i = 0; i < views[b].size; ++i, ++nodes)
        if (!same_bits(out.tree(static_cast<int>(b)).logits(i), want.logits(i)) ||
            !same_bits(out.tree(static_cast<int>(b)).features(i), want.features(i)) ||
            out.tree(static_cast<int>(b)).argmax(i) != want.argmax(i))
          ++mismatches;
    }
    for (std::size_t b = 0; b < order.size(); ++b) {
      const std::vector<node_t> path = random_path(rng, shapes[b]);
      batched.commit(order[b], path);
      single[static_cast<std::size_t>(order[b])].commit(path);
    }
  }
  INFO(threads << " threads, " << nodes << " nodes compared");
  CHECK(nodes > 500);
  CHECK(mismatches == 0);
  for (int s = 0; s < slots; ++s) CHECK(batched.cached(s) == single[static_cast<std::size_t>(s)].cached());
}

/// Decodes `prompts` through `batch`, a new request joining whenever a slot is free, with mixed
/// speculation and budgets; every few steps a random request is removed. Returns each request's
/// output (cut short for a removed one), in prompt order, and which were removed.
template <class Batch>
std::vector<std::vector<token_t>> decode_all(Batch& batch, const std::vector<std::vector<token_t>>& prompts, int max_new_tokens,
                                             std::vector<bool>& removed) {
  std::mt19937_64 rng(99);
  std::vector<std::vector<token_t>> out(prompts.size());
  removed.assign(prompts.size(), false);
  std::map<request_id, std::size_t> prompt_of;
  std::size_t next = 0;
  while (next < prompts.size() || batch.active() > 0) {
    while (next < prompts.size() && batch.active() < batch.capacity()) {
      RequestOptions options;
      options.max_new_tokens = max_new_tokens;
      options.speculate = next % 4 != 3;
      options.budget = std::vector<int>{1, 4, 16, 64}[next % 4];
      prompt_of[batch.add(prompts[next], options)] = next;
      ++next;
    }
    for (const RequestUpdate& u : batch.step()) {
      auto& o = out[prompt_of.at(u.id)];
      o.insert(o.end(), u.tokens.begin(), u.tokens.end());
      if (u.finished) prompt_of.erase(u.id);
    }
    if (!prompt_of.empty() && rng() % 40 == 0) {
      auto victim = prompt_of.begin();
      std::advance(victim, static_cast<long>(rng() % prompt_of.size()));
      batch.remove(victim->first);
      removed[victim->second] = true;
      prompt_of.erase(victim);
    }
  }
  return out;
}

void check_lossless(const std::shared_ptr<const Llama2cModel>& model, const std::vector<std::vector<token_t>>& prompts,
                    int max_new_tokens, int threads) {
  Llama2cBatchTarget target(model, 4, {threads});
  SpeculativeBatch<Llama2cBatchTarget, CasdDrafter, ContextTreeDrafter, ExactVerifier> batch(target, 4);
  std::vector<bool> removed;
  const auto out = decode_all(batch, prompts, max_new_tokens, removed);
  Llama2cTarget single(model);
  int compared = 0;
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    const std::vector<token_t> greedy = single.generate(prompts[p], max_new_tokens);
    INFO("prompt " << p << (removed[p] ? " (removed)" : ""));
    if (removed[p]) {
      REQUIRE(out[p].size() <= greedy.size());
      CHECK(std::equal(out[p].begin(), out[p].end(), greedy.begin()));
    } else {
      CHECK(out[p] == greedy);
      ++compared;
    }
  }
  CHECK(compared >= static_cast<int>(prompts.size()) / 2);
}

}  // namespace

TEST_CASE("Llama2cBatchTarget: a batched forward is bit-exact against one target per slot (1-3 threads)",
          "[llama2c][batch][bitexact]") {
  STATIC_REQUIRE(BatchTarget<Llama2cBatchTarget>);
  testing::TempDir dir;
  const auto model = tiny_model(dir);
  for (int threads : {1, 2, 3}) check_against_single_targets(model, threads);
}

TEST_CASE("Llama2cBatchTarget on stories260K: bit-exact against one target per slot", "[llama2c][batch][bitexact][data]") {
  const testing::Stories260K* stories = testing::stories260k();
  if (!stories) return;  // skipped: see data.hpp
  for (int threads : {1, 2}) check_against_single_targets(stories->model, threads);
}

TEST_CASE("SpeculativeBatch on Llama2cBatchTarget: every request equals its own greedy decoding",
          "[llama2c][batch][lossless]") {
  testing::TempDir dir;
  const auto model = tiny_model(dir);
  std::mt19937_64 rng(5);
  std::vector<std::vector<token_t>> prompts;
  for (int p = 0; p < 11; ++p) {
    // Repeats, so that casd and the context tree have something to copy.
    std::vector<token_t> prompt = random_tokens(rng, 3 + p, 300);
    prompt.insert(prompt.end(), prompt.begin(), prompt.end());
    prompts.push_back(prompt);
  }
  for (int threads : {1, 2}) check_lossless(model, prompts, 40, threads);
}

TEST_CASE("SpeculativeBatch on Llama2cBatchTarget (stories260K): lossless with joins and removals",
          "[llama2c][batch][lossless][data]") {
  const testing::Stories260K* stories = testing::stories260k();
  if (!stories) return;  // skipped: see data.hpp
  std::vector<std::vector<token_t>> prompts;
  for (const char* text : {"Once upon a time", "Tom had a big red ball.", "The cat", "Mom said", "There was a dog",
                           "Lily and Ben went to the park.", "One day"})
    prompts.push_back(stories->tokenizer.encode(text));
  check_lossless(stories->model, prompts, 80, 2);
}

TEST_CASE("SpeculativeBatch on Llama2cBatchTarget, rejection sampling: a request's tokens depend only on its seed",
          "[llama2c][batch][sampling]") {
  testing::TempDir dir;
  const auto model = tiny_model(dir);
  using Batch = SpeculativeBatch<Llama2cBatchTarget, ContextTreeDrafter, RejectionSampling>;
  std::mt19937_64 rng(8);
  const std::vector<token_t> prompt = random_tokens(rng, 12, 300);
  RequestOptions mine;
  mine.max_new_tokens = 30;
  mine.budget = 8;
  mine.seed = 77;
  mine.stream = 3;
  mine.sampling.temperature = 0.9f;
  auto run_mine = [&](int others) {
    Llama2cBatchTarget target(model, 4);
    Batch batch(target, 4);
    for (int i = 0; i < others; ++i) {
      RequestOptions other;
      other.max_new_tokens = 5 + static_cast<int>(rng() % 40);
      other.seed = rng();
      batch.add(random_tokens(rng, 1 + static_cast<int>(rng() % 20), 300), other);
    }
    const request_id id = batch.add(prompt, mine);
    std::vector<token_t> out;
    while (batch.active() > 0)
      for (const RequestUpdate& u : batch.step())
        if (u.id == id) out.insert(out.end(), u.tokens.begin(), u.tokens.end());
    return out;
  };
  const std::vector<token_t> alone = run_mine(0);
  REQUIRE(alone.size() == 30);
  for (int others : {1, 3}) CHECK(run_mine(others) == alone);
}

TEST_CASE("Llama2cBatchTarget: bad calls throw one sentence and leave every slot as it was", "[llama2c][batch][errors]") {
  testing::TempDir dir;
  const auto model = tiny_model(dir);
  CHECK_THROWS_WITH(Llama2cBatchTarget(model, 0), "Llama2cBatchTarget: slots must be >= 1, got 0");
  CHECK_THROWS_WITH(Llama2cBatchTarget(model, 2, {0}), "Llama2cTarget: threads must be in [1, 256], got 0");
  Llama2cBatchTarget target(model, 3);
  Llama2cTarget reference(model);
  const std::vector<token_t> prompt{5, 6, 7, 8};
  const LaidOutTree tree({-1, 0, 0, 1}, {9, 10, 11, 12});
  const LaidOutTree bad_token({-1, 0}, {9, 300});
  const std::vector<int> one{0}, two{0, 1}, twice{1, 1}, outside{3};
  CHECK_THROWS_WITH(target.prefill(3, prompt), "Llama2cBatchTarget::prefill: slot 3 outside [0, 3)");
  CHECK_THROWS_WITH(target.prefill(0, std::vector<token_t>{1, -4}), Contains("slot 0") && Contains("token 1 is -4"));
  CHECK_THROWS_WITH(target.prefill(0, std::vector<token_t>(301, 1)), Contains("301 tokens exceed the model's 300 positions"));
  const std::vector<TreeView> views{tree.view(4)}, views2{tree.view(4), tree.view(4)};
  CHECK_THROWS_WITH(target.forward(TreeBatchView{one, views}), "Llama2cBatchTarget::forward (slot 0): call prefill() first");
  target.prefill(0, prompt);
  target.prefill(1, prompt);
  reference.prefill(prompt);
  CHECK_THROWS_WITH(target.forward(TreeBatchView{outside, views}), "Llama2cBatchTarget::forward: slot 3 outside [0, 3)");
  CHECK_THROWS_WITH(target.forward(TreeBatchView{two, views}), Contains("2 slots but 1 trees"));
  CHECK_THROWS_WITH(target.forward(TreeBatchView{twice, views2}), Contains("slot 1") && Contains("two trees"));
  const std::vector<TreeView> bad{tree.view(4), bad_token.view(4)}, shifted{tree.view(4), tree.view(2)};
  CHECK_THROWS_WITH(target.forward(TreeBatchView{two, bad}), Contains("slot 1") && Contains("300") && Contains("tree node 1"));
  CHECK_THROWS_WITH(target.forward(TreeBatchView{two, shifted}), Contains("slot 1") && Contains("position 2") && Contains("holds 4"));
  CHECK_THROWS_WITH(target.commit(0, std::vector<node_t>{0}), Contains("slot 0") && Contains("no forward()"));
  // After all of that, both slots still decode exactly as a target alone would.
  const auto& out = target.forward(TreeBatchView{two, views2});
  const auto& want = reference.forward(tree.view(4));
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 4; ++i) CHECK(same_bits(out.tree(b).logits(i), want.logits(i)));
  CHECK_THROWS_WITH(target.commit(1, std::vector<node_t>{0, 2, 3}), Contains("slot 1") && Contains("node 3"));
  target.commit(1, std::vector<node_t>{0, 1, 3});
  CHECK(target.cached(1) == 7);
  target.release(1);
  CHECK_THROWS_WITH(target.commit(1, std::vector<node_t>{0}), Contains("no forward()"));
  CHECK_THROWS_WITH(target.forward(TreeBatchView{two, views2}), Contains("slot 1") && Contains("prefill() first"));
}

TEST_CASE("SpeculativeBatch passes each request its features: EAGLE drafts as it does alone, lossless",
          "[llama2c][batch][features][lossless]") {
  STATIC_REQUIRE(FeatureBatchTarget<Llama2cBatchTarget>);
  testing::TempDir dir;
  testing::TinyLlamaShape shape;
  shape.layers = 1;  // the mirror head predicts a one-layer model's next token from its features
  testing::write_tiny_llama(dir.path / "tiny.bin", shape, 5, 0.5f);
  const auto model = std::make_shared<const Llama2cModel>(Llama2cModel::load(dir.path / "tiny.bin"));
  const auto head = std::make_shared<const EagleHead>(
      EagleHead::load(dir.write("head.bin", testing::mirror_eagle_head(dir.path / "tiny.bin", 0.05f))));
  const std::vector<std::vector<token_t>> prompts{{1, 40, 41, 42}, {1, 300, 7, 7, 7, 12}, {1, 5}, {1, 99, 100, 101, 102}};
  const int max_new_tokens = 50, budget = 16;

  Llama2cBatchTarget target(model, 3);
  SpeculativeBatch<Llama2cBatchTarget, EagleDrafter, ExactVerifier> batch(target, 3, EagleDrafter(head, model),
                                                                         ExactVerifier{});
  std::map<request_id, std::size_t> prompt_of;
  std::vector<std::vector<token_t>> out(prompts.size());
  std::vector<DecodeStats> stats(prompts.size());
  RequestOptions options;
  options.max_new_tokens = max_new_tokens;
  options.budget = budget;
  std::size_t next = 0;
  while (next < prompts.size() || batch.active() > 0) {
    for (; next < prompts.size() && batch.active() < batch.capacity(); ++next) prompt_of[batch.add(prompts[next], options)] = next;
    for (const RequestUpdate& u : batch.step()) {
      const std::size_t p = prompt_of.at(u.id);
      out[p].insert(out[p].end(), u.tokens.begin(), u.tokens.end());
      if (u.finished) stats[p] = *u.stats;
    }
  }
  Llama2cTarget single(model);
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    INFO("prompt " << p);
    CHECK(out[p] == single.generate(prompts[p], max_new_tokens));
    // Alone, the same drafter on the same features drafts the same trees: the same steps and tokens.
    Llama2cTarget alone_target(model);
    SpeculativeDecoder<Llama2cTarget, EagleDrafter, ExactVerifier> alone(alone_target, DecoderOptions{.budget = budget},
                                                                         EagleDrafter(head, model), ExactVerifier{});
    alone.prefill(prompts[p]);
    CHECK(alone.generate(max_new_tokens) == out[p]);
    CHECK(stats[p].steps == alone.stats().steps);
    CHECK(stats[p].tau() > 1.5);  // the features reach the head: it predicts the model
  }
}
