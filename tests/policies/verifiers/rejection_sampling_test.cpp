#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <specdec/core/rejection.hpp>
#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/testing/hash_target.hpp>

#include "support/chi_square.hpp"
#include "support/random_tree.hpp"

using namespace specdec;
using specdec::testing::chi_square;

namespace {

// ---- a tiny bigram "model": the target's logits after a token depend on that token only ----
constexpr int V = 12;
constexpr token_t first_root = 3;

struct Tables {
  std::vector<float> target, draft;  // V x V logits: row = previous token
  Tables() {
    std::mt19937_64 rng(2024);
    std::normal_distribution<float> normal(0.0f, 1.5f);
    for (int i = 0; i < V * V; ++i) target.push_back(normal(rng));
    // the drafter's model: related to the target's, but wrong in places
    for (int i = 0; i < V * V; ++i) draft.push_back(0.6f * target[i] + normal(rng));
  }
  const float* target_row(token_t prev) const { return target.data() + prev * V; }
  std::vector<float> q(token_t prev) const {  // the drafter's distribution: softmax of its row
    std::vector<float> q(draft.begin() + prev * V, draft.begin() + (prev + 1) * V);
    const float m = *std::max_element(q.begin(), q.end());
    float sum = 0;
    for (float& x : q) sum += x = std::exp(x - m);
    for (float& x : q) x /= sum;
    return q;
  }
  std::vector<token_t> top(token_t prev, int n) const {  // the drafter's n most likely tokens
    std::vector<token_t> ids(V);
    for (int v = 0; v < V; ++v) ids[v] = v;
    std::stable_sort(ids.begin(), ids.end(), [&](int a, int b) { return draft[prev * V + a] > draft[prev * V + b]; });
    ids.resize(n);
    return ids;
  }
};
const Tables tables;

std::vector<double> target_probabilities(token_t prev, const SamplingParams& params) {
  std::vector<float> w(V);
  float mass = 0;
  REQUIRE(core::sampling_weights(tables.target_row(prev), V, params, w.data(), &mass) == core::sampling_status::ok);
  std::vector<double> p;
  for (float x : w) p.push_back(static_cast<double>(x) / mass);
  return p;
}

// ---- drafts ----
using Drafter = std::function<void(token_t root, std::mt19937_64&, std::vector<DraftTree>&)>;

token_t draw(const std::vector<float>& q, std::mt19937_64& rng) {
  return static_cast<token_t>(std::discrete_distribution<int>(q.begin(), q.end())(rng));
}

// x1 ~ q(.|root), x2 ~ q(.|x1), ...: Leviathan et al.'s chain
void sampled_chain(token_t root, std::mt19937_64& rng, std::vector<DraftTree>& trees, int depth) {
  trees.resize(1);
  trees[0].reset(root);
  node_t node = 0;
  token_t prev = root;
  for (int k = 0; k < depth; ++k) {
    const auto q = tables.q(prev);
    const token_t x = draw(q, rng);
    const token_t draws[] = {x};
    trees[0].add_sampled(node, q, draws);
    node = trees[0].find_child(node, x);
    prev = x;
  }
}

// `width` i.i.d. draws below the root (duplicates kept in the draw list), `width2` below each child
void sampled_tree(token_t root, std::mt19937_64& rng, DraftTree& tree, int width, int width2, bool dedup_draws = false) {
  tree.reset(root);
  const auto q = tables.q(root);
  std::vector<token_t> draws;
  for (int i = 0; i < width; ++i) draws.push_back(draw(q, rng));
  if (dedup_draws) {  // MISUSE on purpose: declares the distinct tokens, not the draws
    std::vector<token_t> distinct;
    for (token_t x : draws)
      if (std::find(distinct.begin(), distinct.end(), x) == distinct.end()) distinct.push_back(x);
    draws = distinct;
  }
  tree.add_sampled(0, q, draws);
  const int children = tree.size();
  for (node_t c = 1; c < children; ++c) {
    const auto q2 = tables.q(tree.token(c));
    std::vector<token_t> draws2;
    for (int i = 0; i < width2; ++i) draws2.push_back(draw(q2, rng));
    tree.add_sampled(c, q2, draws2);
  }
}

// deterministic: the drafter's top tokens (one-hot proposals)
void fixed_tree(token_t root, DraftTree& tree, int width, int width2) {
  tree.reset(root);
  for (token_t x : tables.top(root, width)) {
    const node_t c = tree.add(0, x, 0.5f);
    for (token_t y : tables.top(x, width2)) tree.add(c, y, 0.25f);
  }
}

// ---- the walks under test ----
using Walk = std::function<int(const TreeView&, const SamplingParams&, core::RandomKey, node_t*, token_t*)>;

int real_walk(const TreeView& tree, const SamplingParams& params, core::RandomKey key, node_t* path, token_t* next) {
  std::vector<float> work(V);
  core::sampling_status status{};
  node_t bad = -1;
  const int length = core::rejection_walk(
      tree, V, [&](node_t n) { return tables.target_row(tree.token[n]); }, params, key, work.data(), path, next,
      &status, &bad);
  REQUIRE(status == core::sampling_status::ok);
  return length;
}

// BROKEN on purpose (the TensorRT-LLM dynamic-tree bug): every sibling is tested against the
// same p, without the residual update after a rejected sibling. The test below must catch it.
int walk_without_residual_update(const TreeView& tree, const SamplingParams& params, core::RandomKey key,
                                 node_t* path, token_t* next) {
  std::vector<float> w(V);
  int length = 0;
  node_t node = 0;
  path[length++] = 0;
  for (;;) {
    float mass = 0;
    core::sampling_weights(tables.target_row(tree.token[node]), V, params, w.data(), &mass);
    const int position = tree.position(node) + 1;
    std::uint32_t test = 0;
    node_t accepted = -1;
    for (node_t c = tree.first_child[node]; c >= 0 && accepted < 0; c = tree.next_sibling[c])
      if (core::random_uniform(key, position, core::random_purpose::accept, test++) * mass < w[tree.token[c]]) accepted = c;
    if (accepted < 0) {
      for (node_t c = tree.first_child[node]; c >= 0; c = tree.next_sibling[c]) w[tree.token[c]] = 0;
      *next = core::sample_from_weights(w.data(), V, key, position);
      return length;
    }
    path[length++] = accepted;
    node = accepted;
  }
}

struct Result {
  specdec::testing::ChiSquare first, pair;
};

// Decodes two tokens after `first_root` `trials` times (one random sequence id per trial) and
// compares the first token and the two-token sequence with the target's distributions.
Result run_trials(const std::string& name, const Drafter& drafter, const SamplingParams& params, int budget,
                  const Walk& walk = real_walk, int trials = 200000) {
  std::mt19937_64 rng(7);
  std::vector<DraftTree> trees;
  std::vector<const DraftTree*> pointers;
  TreeMerger merger;
  std::vector<std::int64_t> first(V, 0), pair(V * V, 0);
  std::vector<node_t> path(16);
  std::vector<token_t> emitted;
  std::int64_t steps = 0, accepted = 0;
  for (int trial = 0; trial < trials; ++trial) {
    emitted.clear();
    token_t root = first_root;
    int position = 0;
    while (emitted.size() < 2) {
      drafter(root, rng, trees);
      pointers.clear();
      for (const auto& t : trees) pointers.push_back(&t);
      merger.merge(pointers, budget, 8);
      TreeView view = merger.view();
      view.base_position = position;
      token_t next = -1;
      const int length = walk(view, params, core::RandomKey{99, static_cast<std::uint32_t>(trial)}, path.data(), &next);
      for (int k = 1; k < length; ++k) emitted.push_back(view.token[path[k]]);
      ++steps;
      accepted += length - 1;
      emitted.push_back(next);
      position += length;
      root = next;
    }
    ++first[emitted[0]];
    ++pair[emitted[0] * V + emitted[1]];
  }
  const auto p1 = target_probabilities(first_root, params);
  std::vector<double> p2(V * V);
  for (int a = 0; a < V; ++a) {
    const auto next = target_probabilities(a, params);
    for (int b = 0; b < V; ++b) p2[a * V + b] = p1[a] * next[b];
  }
  Result r{chi_square(first, p1), chi_square(pair, p2)};
  std::cout << "chi-square [" << name << "] first token: X2 = " << r.first.statistic << ", df = "
            << r.first.degrees_of_freedom << ", p = " << r.first.p_value << "; two tokens: X2 = " << r.pair.statistic
            << ", df = " << r.pair.degrees_of_freedom << ", p = " << r.pair.p_value
            << "; accepted draft tokens per step: " << static_cast<double>(accepted) / static_cast<double>(steps) << "\n";
  CHECK(accepted > 0);  // the drafts were really tested, not just skipped
  return r;
}

void require_lossless(const Result& r) {
  CHECK(r.first.p_value > 0.001);
  CHECK(r.pair.p_value > 0.001);
}

}  // namespace

TEST_CASE("the chi-square p-value matches the tables", "[statistics]") {
  using specdec::testing::regularized_gamma_q;
  CHECK(regularized_gamma_q(0.5, 3.841459 / 2) == Approx(0.05).epsilon(1e-4));    // df 1
  CHECK(regularized_gamma_q(5.0, 18.307038 / 2) == Approx(0.05).epsilon(1e-4));   // df 10
  CHECK(regularized_gamma_q(50.0, 135.806723 / 2) == Approx(0.01).epsilon(1e-4)); // df 100
  CHECK(regularized_gamma_q(2.0, 0.0) == 1.0);
  CHECK(chi_square({50, 50}, {0.5, 0.5}).p_value == 1.0);
  CHECK(chi_square({1, 99}, {0.0, 1.0}).p_value == 0.0);  // an impossible outcome was observed
}

TEST_CASE("rejection sampling is lossless on chains (statistical)", "[rejection][lossless][statistical]") {
  SECTION("draft probabilities q, temperature 1") {
    require_lossless(run_trials("chain, sampled q, T=1", [](token_t r, auto& rng, auto& trees) { sampled_chain(r, rng, trees, 3); },
                                SamplingParams{1.0f}, 8));
  }
  SECTION("one-hot drafts, temperature 0.7, top-k 5") {
    require_lossless(run_trials("chain, one-hot, T=0.7, top-k 5",
                                [](token_t r, auto&, auto& trees) {
                                  trees.resize(1);
                                  trees[0].reset(r);
                                  node_t n = 0;
                                  token_t prev = r;
                                  for (int k = 0; k < 3; ++k) n = trees[0].add(n, prev = tables.top(prev, 1)[0]);
                                },
                                SamplingParams{0.7f, 5}, 8));
  }
}

TEST_CASE("rejection sampling is lossless on wide trees (statistical)", "[rejection][lossless][statistical]") {
  SECTION("draft probabilities q, 3 i.i.d. draws then 2 per child, temperature 0.7, top-p 0.9") {
    require_lossless(run_trials("tree, sampled q, T=0.7, top-p 0.9",
                                [](token_t r, auto& rng, auto& trees) { trees.resize(1); sampled_tree(r, rng, trees[0], 3, 2); },
                                SamplingParams{0.7f, 0, 0.9f}, 16));
  }
  SECTION("one-hot drafts, 4 children then 2 each, temperature 1") {
    require_lossless(run_trials("tree, one-hot, T=1",
                                [](token_t r, auto&, auto& trees) { trees.resize(1); fixed_tree(r, trees[0], 4, 2); },
                                SamplingParams{1.0f}, 16));
  }
  SECTION("sampled and one-hot drafters merged, budget cut, top-k 6, top-p 0.8, min-p 0.05") {
    require_lossless(run_trials("merged sampled + one-hot, budget 4, T=1, top-k 6, top-p 0.8, min-p 0.05",
                                [](token_t r, auto& rng, auto& trees) {
                                  trees.resize(2);
                                  fixed_tree(r, trees[0], 2, 2);
                                  sampled_tree(r, rng, trees[1], 3, 2);
                                },
                                SamplingParams{1.0f, 6, 0.8f, 0.05f}, 4));
  }
  SECTION("q's support far wider than the target's (top-k 3)") {
    require_lossless(run_trials("tree, sampled q, target top-k 3",
                                [](token_t r, auto& rng, auto& trees) { trees.resize(1); sampled_tree(r, rng, trees[0], 4, 1); },
                                SamplingParams{1.0f, 3}, 16));
  }
}

TEST_CASE("the statistical test catches a verifier without the residual update between siblings",
          "[rejection][statistical][teeth]") {
  const Result r = run_trials("BROKEN: no residual update, one-hot tree, T=1",
                              [](token_t root, auto&, auto& trees) { trees.resize(1); fixed_tree(root, trees[0], 4, 2); },
                              SamplingParams{1.0f}, 16, walk_without_residual_update);
  CHECK(r.first.p_value < 1e-6);
  CHECK(r.pair.p_value < 1e-6);
}

TEST_CASE("the statistical test catches draws declared without their repeats", "[rejection][statistical][teeth]") {
  // With replacement matters: declaring the distinct tokens of 6 draws as if they were the draws
  // tests them against q more often than they were drawn.
  const Result r = run_trials("MISUSE: deduplicated draws",
                              [](token_t root, auto& rng, auto& trees) { trees.resize(1); sampled_tree(root, rng, trees[0], 6, 0, true); },
                              SamplingParams{1.0f}, 16);
  CHECK(r.first.p_value < 1e-6);
}

// ---- edge cases ----

namespace {

/// A target output of fixed rows: row `node` (or the last row for deeper nodes).
struct RowsOutput {
  int vocab = 0;
  std::vector<std::vector<float>> rows;
  std::span<const float> logits(node_t node) const {
    const auto& row = rows[std::min<std::size_t>(static_cast<std::size_t>(node), rows.size() - 1)];
    return {row.data(), row.size()};
  }
};

struct Laid {
  DraftTree tree;
  TreeMerger merger;
  TreeView view() {
    const DraftTree* one[] = {&tree};
    merger.merge(one, 64, 16);
    return merger.view();
  }
};

}  // namespace

TEST_CASE("a draft token the target gives probability 0 is never accepted", "[rejection][edge]") {
  // target: only tokens 0 and 1 are possible (top-k 2); drafts propose 2 and 3
  RowsOutput out{4, {{2.0f, 1.0f, 0.5f, 0.0f}}};
  Laid laid;
  laid.tree.reset(0);
  laid.tree.add(0, 2);
  const std::vector<float> q = {0.0f, 0.0f, 0.0f, 1.0f};
  const token_t draws[] = {3, 3};
  laid.tree.add_sampled(0, q, draws);
  const TreeView view = laid.view();
  Verdict verdict;
  for (std::uint32_t seed = 0; seed < 2000; ++seed) {
    RejectionSampling verifier({SamplingParams{1.0f, 2}, seed, 0});
    verifier.verify(view, out, verdict);
    REQUIRE(verdict.path.size() == 1);  // all rejected
    REQUIRE((verdict.next_token == 0 || verdict.next_token == 1));
  }
}

TEST_CASE("a decision's random number does not depend on the tree around it", "[rejection][edge]") {
  // children the target cannot accept (outside its top-2) draw no number, so the next token is
  // the very draw that a root-only tree (plain sampling) makes at that position
  RowsOutput out{4, {{2.0f, 1.5f, 0.5f, 0.0f}}};
  Laid bare, decorated;
  bare.tree.reset(0);
  decorated.tree.reset(0);
  decorated.tree.add(0, 2);
  decorated.tree.add(0, 3);
  const TreeView a = bare.view(), b = decorated.view();
  Verdict va, vb;
  int differs_from_token_0 = 0;
  for (std::uint32_t seq = 0; seq < 500; ++seq) {
    RejectionSampling verifier({SamplingParams{1.0f, 2}, 8, seq});
    verifier.verify(a, out, va);
    verifier.verify(b, out, vb);
    REQUIRE(va.next_token == vb.next_token);
    differs_from_token_0 += va.next_token != 0;
  }
  CHECK(differs_from_token_0 > 50);  // both tokens of the top-2 came out
}

TEST_CASE("an all-rejected tree samples the next token from the residual", "[rejection][edge]") {
  // p = (0.5, 0.25, 0.25); a one-hot child 0 is rejected half the time, and the next token must
  // then be 1 or 2 (never 0): overall 0, 1, 2 come out with probabilities 0.5, 0.25, 0.25.
  RowsOutput out{3, {{std::log(0.5f), std::log(0.25f), std::log(0.25f)}}};
  Laid laid;
  laid.tree.reset(1);
  laid.tree.add(0, 0);
  const TreeView view = laid.view();
  Verdict verdict;
  std::vector<std::int64_t> counts(3, 0);
  for (std::uint32_t seq = 0; seq < 40000; ++seq) {
    RejectionSampling verifier({SamplingParams{}, 5, seq});
    verifier.verify(view, out, verdict);
    if (verdict.path.size() == 1) {
      REQUIRE(verdict.next_token != 0);
      ++counts[verdict.next_token];
    } else {
      ++counts[0];
    }
  }
  CHECK(chi_square(counts, {0.5, 0.25, 0.25}).p_value > 0.001);
}

TEST_CASE("NaN and infinite logits are a clear error, -inf masks", "[rejection][edge][errors]") {
  Laid laid;
  laid.tree.reset(0);
  laid.tree.add(0, 1);
  const TreeView view = laid.view();
  Verdict verdict;
  RejectionSampling verifier;
  RowsOutput nan_row{3, {{0.0f, std::nanf(""), 1.0f}}};
  CHECK_THROWS_WITH(verifier.verify(view, nan_row, verdict), Catch::Contains("node 0") && Catch::Contains("NaN"));
  const float inf = std::numeric_limits<float>::infinity();
  RowsOutput inf_row{3, {{0.0f, 1.0f, 1.0f}, {0.0f, inf, 1.0f}}};
  // node 1 (token 1) is reached only when accepted; force it with a row where token 1 is certain
  inf_row.rows[0] = {-inf, 0.0f, -inf};
  CHECK_THROWS_WITH(verifier.verify(view, inf_row, verdict), Catch::Contains("node 1") && Catch::Contains("+inf"));
  RowsOutput masked{3, {{-inf, 0.0f, -inf}, {0.0f, -inf, -inf}}};
  verifier.verify(view, masked, verdict);
  CHECK(verdict.path == std::vector<node_t>{0, 1});
  CHECK(verdict.next_token == 0);
  CHECK_THROWS_WITH(RejectionSampling({SamplingParams{-1.0f}}), Catch::Contains("temperature -1"));
}

TEST_CASE("temperature 0 gives the exact verifier's path and next token", "[rejection][edge][lossless]") {
  std::mt19937_64 rng(11);
  HashTarget target(24, 5, 4.0f);
  const std::vector<token_t> prompt = {1, 2, 3};
  DraftTree tree, sampled;
  TreeMerger merger;
  Verdict exact, rejection;
  std::size_t longest = 0;
  for (int round = 0; round < 300; ++round) {
    target.prefill(std::span<const token_t>(prompt).first(2));  // the root is the prompt's last token
    // a random tree whose first children follow the greedy path, so that paths get long
    const auto greedy = target.generate(prompt, 6);
    const auto random = specdec::testing::random_tree(rng, 1 + static_cast<int>(rng() % 20), 24);
    tree.reset(3);
    node_t node = 0;
    for (int k = 0; k < static_cast<int>(rng() % 6); ++k) node = tree.add(node, greedy[k]);
    for (std::size_t i = 1; i < random.parent.size(); ++i)
      tree.add(static_cast<node_t>(random.parent[i] % tree.size()), random.token[i]);
    // and sampled proposals with a uniform q below the root and the first node
    sampled.reset(3);
    const std::vector<float> q(24, 1.0f / 24);
    const token_t draws[] = {static_cast<token_t>(rng() % 24), static_cast<token_t>(rng() % 24)};
    sampled.add_sampled(0, q, draws);
    const DraftTree* trees[] = {&tree, &sampled};
    merger.merge(trees, 64, 16);
    TreeView view = merger.view();
    view.base_position = 2;
    const auto& out = target.forward(view);
    ExactVerifier{}.verify(view, out, exact);
    RejectionSampling verifier({SamplingParams{0.0f}, static_cast<std::uint64_t>(round), 0});
    verifier.verify(view, out, rejection);
    REQUIRE(rejection.path == exact.path);
    REQUIRE(rejection.next_token == exact.next_token);
    longest = std::max(longest, exact.path.size());
  }
  CHECK(longest >= 4);  // the comparison covered long accepted paths
}

// ---- end to end through the decoder ----

namespace {

/// Drafts a chain of `depth` tokens, each drawn from q = half the mass on another hash model's
/// greedy token after the context, the rest spread evenly (the same q at every depth), and says
/// so (emits_draft_probabilities).
class SamplingChainDrafter {
 public:
  static constexpr const char* name = "sampling-chain";
  static constexpr bool emits_draft_probabilities = true;
  explicit SamplingChainDrafter(int depth, std::uint64_t seed = 3) : depth_(depth), rng_(seed) {}
  void begin(std::span<const token_t>) {}
  void observe(std::span<const token_t>) {}
  void propose(const DraftContext& ctx, DraftTree& tree) {
    const token_t guess = HashTarget(ctx.vocab_size, 77).generate(ctx.tokens, 1)[0];
    std::vector<float> q(ctx.vocab_size);
    for (int v = 0; v < ctx.vocab_size; ++v) q[v] = v == guess ? 0.5f : 0.5f / (ctx.vocab_size - 1);
    node_t node = 0;
    for (int k = 0; k < std::min(depth_, ctx.max_depth); ++k) {
      const token_t x = static_cast<token_t>(std::discrete_distribution<int>(q.begin(), q.end())(rng_));
      const token_t draws[] = {x};
      tree.add_sampled(node, q, draws);
      node = tree.find_child(node, x);
    }
  }

 private:
  int depth_;
  std::mt19937_64 rng_;
};
static_assert(drafter_traits<SamplingChainDrafter>::emits_draft_probabilities);
static_assert(!drafter_traits<OracleDrafter>::emits_draft_probabilities);

struct UndeclaredSamplingDrafter {
  void begin(std::span<const token_t>) {}
  void observe(std::span<const token_t>) {}
  void propose(const DraftContext& ctx, DraftTree& tree) {
    const std::vector<float> q(ctx.vocab_size, 1.0f / ctx.vocab_size);
    const token_t draws[] = {0};
    tree.add_sampled(0, q, draws);
  }
};

}  // namespace

TEST_CASE("decoder: rejection sampling at temperature 0 equals greedy decoding", "[rejection][decoder][lossless]") {
  HashTarget target(64, 9);
  const std::vector<token_t> prompt = {5, 6, 7};
  const auto greedy = target.generate(prompt, 80);
  std::vector<token_t> reference = prompt;
  reference.insert(reference.end(), greedy.begin(), greedy.end());
  SECTION("one-hot drafts") {
    SpeculativeDecoder<HashTarget, OracleDrafter, RejectionSampling> decoder(
        target, OracleDrafter(reference, 4, 0.3, 2), RejectionSampling({SamplingParams{0.0f}, 1, 0}));
    decoder.prefill(prompt);
    CHECK(decoder.generate(80) == greedy);
    CHECK(decoder.stats().tau() > 1.5);
  }
  SECTION("sampled drafts with q, merged with one-hot drafts") {
    SpeculativeDecoder<HashTarget, SamplingChainDrafter, OracleDrafter, RejectionSampling> decoder(
        target, DecoderOptions{6}, SamplingChainDrafter(3), OracleDrafter(reference, 4, 0.3),
        RejectionSampling({SamplingParams{0.0f}, 1, 0}));
    decoder.prefill(prompt);
    CHECK(decoder.generate(80) == greedy);
  }
}

TEST_CASE("decoder: sampling runs are reproducible from the seed", "[rejection][decoder]") {
  HashTarget target(64, 9, 2.0f);
  const std::vector<token_t> prompt = {5, 6, 7};
  auto run = [&](std::uint64_t seed) {
    SpeculativeDecoder<HashTarget, SamplingChainDrafter, RejectionSampling> decoder(
        target, SamplingChainDrafter(3, seed * 13), RejectionSampling({SamplingParams{0.8f, 20, 0.95f}, seed, 0}));
    decoder.prefill(prompt);
    return decoder.generate(60);
  };
  const auto a = run(1);
  CHECK(run(1) == a);
  CHECK(run(2) != a);
}

TEST_CASE("decoder: a drafter that attaches q without declaring it is refused", "[rejection][decoder][errors]") {
  HashTarget target(16);
  SpeculativeDecoder<HashTarget, UndeclaredSamplingDrafter, RejectionSampling> decoder(target);
  const token_t prompt[] = {1, 2};
  decoder.prefill(prompt);
  CHECK_THROWS_WITH(decoder.step(), Catch::Contains("emits_draft_probabilities"));
}

TEST_CASE("decoder: sampled two-token continuations follow the target's distribution",
          "[rejection][decoder][statistical]") {
  // Through the whole decoder (positions, commits, keys across steps), with a sampling drafter
  // and a one-hot drafter merged, on an 8-token HashTarget.
  const int vocab = 8;
  HashTarget target(vocab, 21, 2.0f);
  const std::vector<token_t> prompt = {1, 4, 2};
  const SamplingParams params{0.9f, 6};
  // exact: one forward of the root with every token as a child gives p(t1) and p(t2 | t1)
  DraftTree all;
  all.reset(prompt.back());
  for (token_t t = 0; t < vocab; ++t) all.add(0, t);
  TreeMerger merger;
  const DraftTree* one[] = {&all};
  merger.merge(one, vocab, 1);
  TreeView view = merger.view();
  view.base_position = 2;
  target.prefill(std::span<const token_t>(prompt).first(2));
  const auto& out = target.forward(view);
  std::vector<float> w(vocab);
  auto distribution = [&](node_t node) {
    float mass = 0;
    core::sampling_weights(out.logits(node).data(), vocab, params, w.data(), &mass);
    std::vector<double> p;
    for (float x : w) p.push_back(x / mass);
    return p;
  };
  const auto p1 = distribution(0);
  std::vector<double> p2(vocab * vocab);
  for (node_t c = 1; c <= vocab; ++c) {
    const auto next = distribution(c);
    for (int b = 0; b < vocab; ++b) p2[view.token[c] * vocab + b] = p1[view.token[c]] * next[b];
  }
  const std::vector<token_t> reference = {1, 4, 2, 3, 3, 3, 3};  // a mostly wrong one-hot chain
  std::vector<std::int64_t> counts(vocab * vocab, 0);
  std::int64_t steps = 0;
  for (std::uint32_t trial = 0; trial < 100000; ++trial) {
    SpeculativeDecoder<HashTarget, SamplingChainDrafter, OracleDrafter, RejectionSampling> decoder(
        target, DecoderOptions{4}, SamplingChainDrafter(2, trial), OracleDrafter(reference, 3),
        RejectionSampling({params, 5, trial}));
    decoder.prefill(prompt);
    const auto tokens = decoder.generate(2);
    ++counts[tokens[0] * vocab + tokens[1]];
    steps += decoder.stats().steps;
  }
  const auto result = chi_square(counts, p2);
  std::cout << "chi-square [decoder, HashTarget, sampled + one-hot drafters] two tokens: X2 = " << result.statistic
            << ", df = " << result.degrees_of_freedom << ", p = " << result.p_value
            << "; target calls per two tokens: " << static_cast<double>(steps) / 100000 << "\n";
  CHECK(result.p_value > 0.001);
  CHECK(steps < 2 * 100000);  // drafts were accepted
}
