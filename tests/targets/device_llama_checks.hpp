// The checks of the device Llama (targets/device_llama.hpp), written once for both backends: the
// GPU test (cuda_llama_gpu_test.cpp, CudaLlamaTarget) and the host test (emulated_llama_test.cpp,
// EmulatedLlamaTarget, the same kernels on the emulated grid) run them with their own sizes.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <string>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include <specdec/backend.hpp>
#include <specdec/batch_decoder.hpp>
#include <specdec/core/tree.hpp>
#include <specdec/decoder.hpp>
#include <specdec/error.hpp>
#include <specdec/models/synthetic_llama.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/targets/device_llama.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/testing/backend_tree.hpp>
#include <specdec/testing/laid_out_tree.hpp>

namespace specdec::device_llama_checks {

template <class Target>
using TreeOn = testing::BackendTree<typename Target::backend_type>;

// Rows [0, n) of a forward's logits on the host (waits for the device).
template <class Target>
std::vector<float> logits_on_host(Target& target, const LogitsRows& rows, int n) {
  const int vocab = target.vocab_size();
  std::vector<float> out(static_cast<std::size_t>(n) * vocab);
  REQUIRE(rows.row_stride == vocab);
  REQUIRE(backend::copy(target.backend(), out.data(), rows.data, out.size() * sizeof(float)) == backend::status::ok);
  REQUIRE(backend::synchronize(target.backend()) == backend::status::ok);
  return out;
}

// The logits after one token at `position` (its K/V written there), the cache before it as is.
template <class Target>
std::vector<float> single_token(Target& target, token_t token, int position) {
  const TreeOn<Target> one(testing::LaidOutTree({-1}, {token}), position, target.backend());
  return logits_on_host(target, target.forward(one.view()), 1);
}

enum class Shape { chain, wide, branchy, random };

inline std::vector<node_t> random_parents(Shape shape, int n, std::mt19937& rng) {
  std::vector<node_t> parent(static_cast<std::size_t>(n));
  parent[0] = -1;
  for (int i = 1; i < n; ++i) {
    int p = 0;
    switch (shape) {
      case Shape::chain: p = i - 1; break;
      case Shape::wide: p = 0; break;
      case Shape::branchy: p = std::uniform_int_distribution<int>(std::max(0, i - 6), i - 1)(rng); break;
      case Shape::random: p = std::uniform_int_distribution<int>(0, i - 1)(rng); break;
    }
    parent[static_cast<std::size_t>(i)] = p;
  }
  return parent;
}

inline std::vector<token_t> random_tokens(int count, int vocab, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<token_t> out(static_cast<std::size_t>(count));
  for (token_t& t : out) t = std::uniform_int_distribution<token_t>(0, vocab - 1)(rng);
  return out;
}

// A small shape with grouped KV heads (8 heads, 2 KV heads, head size 32) for bf16 sweeps.
inline SyntheticShape small_shape() { return {"small", {256, 512, 3, 8, 2, 1000, 1024, false}, 10000.0f, "test"}; }

// Every node of a tree of each size and shape (shapes in turn), on top of `prefix`: its row of the
// tree forward against a single-token forward of its path. The path's forwards run depth first,
// so when node i (depth d) runs, the slots base .. base + d - 1 hold exactly its ancestors' K/V,
// written by their own single-token forwards: the cache a fresh prefill plus the path one token
// at a time gives.
template <class Target>
void bit_exact_sweep(Target& target, const std::vector<token_t>& prefix, std::uint32_t seed, std::span<const int> sizes) {
  std::mt19937 rng(seed);
  const int vocab = target.vocab_size(), base = static_cast<int>(prefix.size());
  target.prefill(prefix);
  int trees = 0;
  for (int n : sizes) {
    if (base + n > target.max_positions()) continue;
    const Shape shape = static_cast<Shape>(trees++ % 4);
    const std::vector<node_t> parent = random_parents(shape, n, rng);
    std::vector<token_t> token(static_cast<std::size_t>(n));
    for (token_t& t : token) t = std::uniform_int_distribution<token_t>(0, vocab - 1)(rng);
    const TreeOn<Target> tree(testing::LaidOutTree(parent, token), base, target.backend());
    const std::vector<float> together = logits_on_host(target, target.forward(tree.view()), n);
    // Depth-first, children in increasing index order.
    std::vector<std::vector<int>> children(static_cast<std::size_t>(n));
    for (int i = 1; i < n; ++i) children[static_cast<std::size_t>(parent[static_cast<std::size_t>(i)])].push_back(i);
    std::vector<int> stack{0};
    int mismatched = 0, first_bad = -1;
    while (!stack.empty()) {
      const int i = stack.back();
      stack.pop_back();
      const auto& kids = children[static_cast<std::size_t>(i)];
      for (auto it = kids.rbegin(); it != kids.rend(); ++it) stack.push_back(*it);
      const std::vector<float> alone = single_token(target, token[static_cast<std::size_t>(i)], base + tree.depth(i));
      if (std::memcmp(alone.data(), together.data() + static_cast<std::size_t>(i) * vocab, sizeof(float) * vocab) != 0) {
        ++mismatched;
        if (first_bad < 0) first_bad = i;
      }
    }
    INFO("tree of " << n << " nodes (shape " << static_cast<int>(shape) << ") on " << base
                    << " cached tokens; first node that differs: " << first_bad);
    CHECK(mismatched == 0);
    // The logits are real numbers, not a constant row: the sweep compares something.
    bool varied = false;
    for (int v = 1; v < vocab; ++v) varied |= together[static_cast<std::size_t>(v)] != together[0];
    CHECK(varied);
  }
}

// The device target computes the host target's model (the same checkpoint): the logits of a
// random tree of `nodes` nodes behind 30 cached tokens within 2e-3 of Llama2cTarget's (fp32
// rounding: a check of the kernels' meaning, which bit-exactness against itself cannot give), and
// plain greedy decoding gives the host's `tokens` tokens.
template <class Target>
void computes_host_model(Target& device, Llama2cTarget& host, int nodes, int tokens);

// Two targets of the same model give the same bits: a random tree of each size behind `prefix`
// cached tokens, every row compared, `forwards` times in a row (2: a graph captured, then replayed).
template <class A, class B>
void forwards_agree(A& a, B& b, int prefix, std::span<const int> sizes, int forwards = 1) {
  const int vocab = a.vocab_size();
  const std::vector<token_t> tokens = random_tokens(prefix, vocab, 41);
  std::mt19937 rng(42);
  int trees = 0;
  for (const int n : sizes) {
    const testing::LaidOutTree tree(random_parents(static_cast<Shape>(trees++ % 4), n, rng), random_tokens(n, vocab, rng()));
    a.prefill(tokens);
    b.prefill(tokens);
    const TreeOn<A> on_device(tree, prefix, a.backend());
    for (int f = 0; f < forwards; ++f) {
      const std::vector<float> x = logits_on_host(a, a.forward(on_device.view()), n);
      const std::vector<float> y = logits_on_host(b, b.forward(on_device.view()), n);
      INFO("a tree of " << n << " nodes behind " << prefix << " tokens, forward " << f + 1);
      CHECK(std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0);
    }
  }
}

// The two attention kernels (SplitAttention and TiledAttention) give the same bits: make(kind)
// builds the same target with DeviceLlamaOptions::attention = kind.
template <class Make>
void attention_kernels_agree(Make make, int prefix, std::span<const int> sizes) {
  auto per_node = make(DeviceLlamaOptions::Attention::per_node);
  auto tiled = make(DeviceLlamaOptions::Attention::tiled);
  forwards_agree(per_node, tiled, prefix, sizes);
}

// Plain greedy decoding on a device target: one single-token forward per token, argmax on the host.
template <class Target>
std::vector<token_t> plain_greedy(Target& target, const std::vector<token_t>& prompt, int count) {
  target.prefill(std::span<const token_t>(prompt).first(prompt.size() - 1));
  std::vector<token_t> out;
  token_t last = prompt.back();
  for (int k = 0; k < count; ++k) {
    const std::vector<float> row = single_token(target, last, static_cast<int>(prompt.size()) - 1 + k);
    last = core::argmax_row(row.data(), target.vocab_size());
    REQUIRE(last >= 0);
    out.push_back(last);
  }
  return out;
}

template <class Target, class... Drafters>
std::vector<token_t> speculative(Target& target, const std::vector<token_t>& prompt, int count, int budget,
                                 Drafters... drafters) {
  SpeculativeDecoder<Target, Drafters..., ExactVerifier> decoder(target, DecoderOptions{.budget = budget},
                                                                 std::move(drafters)..., ExactVerifier{});
  decoder.prefill(prompt);
  std::vector<token_t> out = decoder.generate(count);
  INFO("tau " << decoder.stats().tau());
  CHECK(decoder.stats().steps < count);  // the drafts were accepted at times: trees really ran
  return out;
}

// Speculative greedy decoding with oracle drafts that err (chains and trees) equals plain greedy
// decoding, `count` tokens after `prompt`.
template <class Target>
void speculative_equals_plain(Target& target, const std::vector<token_t>& prompt, int count) {
  const std::vector<token_t> plain = plain_greedy(target, prompt, count);
  std::vector<token_t> truth = prompt;
  truth.insert(truth.end(), plain.begin(), plain.end());
  CHECK(speculative(target, prompt, count, 16, OracleDrafter(truth, 6, 0.3, 2, 7)) == plain);
  CHECK(speculative(target, prompt, count, 64, OracleDrafter(truth, 12, 0.1, 3, 8)) == plain);
  CHECK(speculative(target, prompt, count, 8, OracleDrafter(truth, 8, 0.0)) == plain);
}

// Operands of a tensor-core product (kernels::llama::MmaProduct) check: W [out][in] and x16 [n
// rounded up to an MMA's tokens][in] in bf16, random in [-1, 1).
struct MmaOperands {
  int in = 0, out = 0, n = 0;
  std::vector<std::uint16_t> w, x16;
  MmaOperands(int in_, int out_, int n_, std::uint32_t seed) : in(in_), out(out_), n(n_) {
    std::mt19937 rng(seed);
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    const int rows = (n + kernels::llama::mma_tokens - 1) / kernels::llama::mma_tokens * kernels::llama::mma_tokens;
    w.resize(static_cast<std::size_t>(out) * in);
    x16.resize(static_cast<std::size_t>(rows) * in);
    for (auto& v : w) v = synthetic::bf16_bits(u(rng));
    for (auto& v : x16) v = synthetic::bf16_bits(u(rng));
  }
  /// The product y[t][o] checked against a double-precision one: within fp32 rounding of the sum
  /// of |terms| (a fragment or k permutation off by one element errs by a whole term).
  void check(const std::vector<float>& y) const {
    REQUIRE(y.size() == static_cast<std::size_t>(n) * out);
    int bad = 0;
    double worst = 0;
    for (int t = 0; t < n; ++t)
      for (int o = 0; o < out; ++o) {
        double exact = 0, magnitude = 0;
        for (int k = 0; k < in; ++k) {
          const double term = static_cast<double>(synthetic::bf16_value(w[static_cast<std::size_t>(o) * in + k])) *
                              synthetic::bf16_value(x16[static_cast<std::size_t>(t) * in + k]);
          exact += term;
          magnitude += std::abs(term);
        }
        const double error = std::abs(y[static_cast<std::size_t>(t) * out + o] - exact) / magnitude;
        worst = std::max(worst, error);
        bad += error > 1e-5;
      }
    INFO(bad << " of " << n * out << " outputs off; worst error / sum of |terms| " << worst);
    CHECK(bad == 0);
  }
};

// Tensor-core products (DeviceLlamaOptions::tensor_cores on `tensor_cores`) compute the model of
// the CUDA-core ones (`cuda_cores`, the same shape and seed): a branchy tree of `nodes` nodes behind
// `prefix` cached tokens gets logits within 5 % of the largest, and not the same bits (the
// activations were rounded to bf16: the other product ran).
template <class Target>
void tensor_cores_compute_the_model(Target& cuda_cores, Target& tensor_cores, int prefix, int nodes) {
  REQUIRE(tensor_cores.tensor_cores());
  REQUIRE(!cuda_cores.tensor_cores());
  const int vocab = cuda_cores.vocab_size();
  const std::vector<token_t> tokens = random_tokens(prefix, vocab, 13);
  std::mt19937 rng(4);
  const TreeOn<Target> tree(testing::LaidOutTree(random_parents(Shape::branchy, nodes, rng), random_tokens(nodes, vocab, 14)),
                            prefix, cuda_cores.backend());
  cuda_cores.prefill(tokens);
  tensor_cores.prefill(tokens);
  const std::vector<float> a = logits_on_host(cuda_cores, cuda_cores.forward(tree.view()), nodes);
  const std::vector<float> b = logits_on_host(tensor_cores, tensor_cores.forward(tree.view()), nodes);
  double largest = 0, worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    largest = std::max(largest, static_cast<double>(std::abs(a[i])));
    worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
  }
  INFO("largest logit " << largest << ", largest difference " << worst);
  CHECK(largest > 0);
  CHECK(worst < 0.05 * largest);
  CHECK(a != b);
}

// Launch graphs (DeviceLlamaOptions::graphs) change nothing: make(graphs) builds the same target
// with the option. Trees padded to their bucket give the same bits as without, and greedy
// decoding on the graphs' K/V, plain and speculative, gives the same `count` tokens after `prompt`.
template <class Make>
void graphs_agree(Make make, int prefix, std::span<const int> sizes, const std::vector<token_t>& prompt, int count) {
  auto launched = make(false);
  auto graphs = make(true);
  forwards_agree(launched, graphs, prefix, sizes, 2);
  // A tree of 5 nodes that ends at the cache's last position: its bucket's 3 padding rows would
  // be past the cache, and must write nothing there (the sanitizers watch the emulation).
  const int end = launched.max_positions();
  const int at_end[] = {5};
  forwards_agree(launched, graphs, end - 5, at_end, 2);
  const std::vector<token_t> plain = plain_greedy(launched, prompt, count);
  CHECK(plain_greedy(graphs, prompt, count) == plain);
  std::vector<token_t> truth = prompt;
  truth.insert(truth.end(), plain.begin(), plain.end());
  CHECK(speculative(graphs, prompt, count, 16, OracleDrafter(truth, 6, 0.3, 2, 7)) == plain);
}

// graphs_agree with CUDA-core and with tensor-core products: make(options) builds the same model
// with `options` (automatic attention; graphs and tensor_cores set here).
template <class Make>
void graphs_agree_with_each_product(Make make, int prefix, std::span<const int> sizes,
                                    const std::vector<token_t>& prompt, int count) {
  for (const bool tensor_cores : {false, true}) {  // padding rows feed the MMAs' bf16 rows too
    INFO((tensor_cores ? "tensor-core" : "CUDA-core") << " products");
    const auto make_with = [&](bool graphs) {
      return make(DeviceLlamaOptions{.max_positions = 0, .max_tree_nodes = 256, .max_rows = 0,
                                     .tensor_cores = tensor_cores,
                                     .attention = DeviceLlamaOptions::Attention::automatic, .graphs = graphs});
    };
    graphs_agree(make_with, prefix, sizes, prompt, count);
  }
}

// One batched forward of `slots` trees (slots out of order, trees of 1 .. max_n nodes behind 0 ..
// max_prefix cached tokens): each request's rows against its tree forwarded alone, bit for bit.
// make_batch(slots) and make_single() build the same model.
template <class MakeBatch, class MakeSingle>
void batched_rows_equal_alone(int slots, int max_n, int max_prefix, MakeBatch make_batch, MakeSingle make_single) {
  INFO(slots << " slots");
  auto batch = make_batch(slots);
  auto alone = make_single();
  using Tree = TreeOn<decltype(alone)>;
  const int vocab = batch.vocab_size();
  std::mt19937 rng(static_cast<unsigned>(slots));
  std::vector<std::vector<token_t>> prefixes;
  std::vector<std::unique_ptr<Tree>> trees;
  std::vector<TreeView> views;
  std::vector<int> order(static_cast<std::size_t>(slots));
  for (int b = 0; b < slots; ++b) order[static_cast<std::size_t>(b)] = (b * 5 + 3) % slots;  // slots out of order
  int rows = 0;
  for (int b = 0; b < slots; ++b) {
    const int length = std::uniform_int_distribution<int>(0, max_prefix)(rng);
    const int n = std::uniform_int_distribution<int>(1, max_n)(rng);
    prefixes.push_back(random_tokens(length, vocab, rng()));
    batch.prefill(order[static_cast<std::size_t>(b)], prefixes.back());
    trees.push_back(std::make_unique<Tree>(
        testing::LaidOutTree(random_parents(static_cast<Shape>(b % 4), n, rng), random_tokens(n, vocab, rng())), length,
        batch.backend()));
    views.push_back(trees.back()->view());
    rows += n;
  }
  const LogitsRows out = batch.forward(TreeBatchView{order, views});
  std::vector<float> all(static_cast<std::size_t>(rows) * vocab);
  REQUIRE(backend::copy(batch.backend(), all.data(), out.data, all.size() * sizeof(float)) == backend::status::ok);
  REQUIRE(backend::synchronize(batch.backend()) == backend::status::ok);
  int row = 0, mismatched = 0;
  for (int b = 0; b < slots; ++b) {
    alone.prefill(prefixes[static_cast<std::size_t>(b)]);
    const int n = views[static_cast<std::size_t>(b)].size;
    const std::vector<float> single = logits_on_host(alone, alone.forward(views[static_cast<std::size_t>(b)]), n);
    mismatched += std::memcmp(single.data(), all.data() + static_cast<std::size_t>(row) * vocab,
                              single.size() * sizeof(float)) != 0;
    row += n;
  }
  CHECK(mismatched == 0);
}

// SpeculativeBatch on `target` (a batch target of at least 3 slots) decodes each prompt as plain
// greedy decoding on `single` (the same model) does, `count` tokens each, with more requests than
// slots.
template <class BatchTarget, class Single>
void batch_decodes_as_plain(BatchTarget& target, Single& single, const std::vector<std::vector<token_t>>& prompts,
                            int count) {
  std::vector<std::vector<token_t>> expected, got(prompts.size());
  for (const auto& prompt : prompts) expected.push_back(plain_greedy(single, prompt, count));
  using Batch = SpeculativeBatch<BatchTarget, OracleDrafter, ExactVerifier>;
  Batch batch(target, 3, OracleDrafter({}, 1), ExactVerifier{});
  std::map<request_id, std::size_t> which;
  std::size_t next = 0;
  while (next < prompts.size() || batch.active() > 0) {
    while (next < prompts.size() && batch.active() < batch.capacity()) {
      std::vector<token_t> truth = prompts[next];
      truth.insert(truth.end(), expected[next].begin(), expected[next].end());
      RequestOptions options;
      options.max_new_tokens = count;
      options.budget = 12;
      which[batch.add(prompts[next], options, OracleDrafter(truth, 5, 0.3, 2, next + 1))] = next;
      ++next;
    }
    for (const RequestUpdate& u : batch.step()) {
      std::vector<token_t>& out = got[which.at(u.id)];
      out.insert(out.end(), u.tokens.begin(), u.tokens.end());
    }
  }
  for (std::size_t r = 0; r < prompts.size(); ++r) {
    INFO("request " << r);
    CHECK(got[r] == expected[r]);
  }
  CHECK(batch.forwards() < static_cast<std::int64_t>(prompts.size()) * count);  // drafts were accepted
}

template <class Target>
void computes_host_model(Target& device, Llama2cTarget& host, int nodes, int tokens) {
  const int vocab = device.vocab_size();
  REQUIRE(host.vocab_size() == vocab);
  const std::vector<token_t> prefix = random_tokens(30, vocab, 9);
  std::mt19937 rng(3);
  const testing::LaidOutTree tree(random_parents(Shape::random, nodes, rng), random_tokens(nodes, vocab, 10));
  host.prefill(prefix);
  const auto& out = host.forward(tree.view(30));
  device.prefill(prefix);
  const TreeOn<Target> device_tree(tree, 30, device.backend());
  const std::vector<float> logits = logits_on_host(device, device.forward(device_tree.view()), nodes);
  double worst = 0;
  for (int i = 0; i < nodes; ++i) {
    const std::span<const float> expected = out.logits(i);
    for (int v = 0; v < vocab; ++v)
      worst = std::max(worst, static_cast<double>(std::abs(logits[static_cast<std::size_t>(i) * vocab + v] - expected[v])));
  }
  INFO("largest logit difference " << worst);
  CHECK(worst < 2e-3);
  const std::vector<token_t> prompt = random_tokens(5, vocab, 11);
  CHECK(plain_greedy(device, prompt, tokens) == host.generate(prompt, tokens));
}

// Bad input to a target of 64 positions is one sentence, and the target still works after it: a
// tree past the cache's free positions or past max_tree_nodes (256), a prompt longer than the cache
// or with a token outside the vocabulary.
template <class Target>
void bad_input_is_one_sentence(Target& target) {
  using Catch::Matchers::Contains;
  REQUIRE(target.max_positions() == 64);
  const int vocab = target.vocab_size();
  const std::vector<token_t> prompt = random_tokens(60, vocab, 5);
  target.prefill(prompt);
  const std::vector<float> before = single_token(target, 3, 60);
  target.prefill(prompt);

  std::mt19937 rng(1);
  const TreeOn<Target> too_big(testing::LaidOutTree(random_parents(Shape::random, 8, rng), random_tokens(8, vocab, 6)),
                               60, target.backend());
  CHECK_THROWS_WITH(target.forward(too_big.view()),
                    Contains("a tree of 8 nodes at position 60 does not fit the cache's 64 positions (4 free)"));
  const TreeOn<Target> too_many(
      testing::LaidOutTree(random_parents(Shape::wide, 257, rng), random_tokens(257, vocab, 7)), 0, target.backend());
  CHECK_THROWS_WITH(target.forward(too_many.view()), Contains("a tree of 257 nodes is outside [1, max_tree_nodes = 256]"));
  CHECK_THROWS_WITH(target.prefill(random_tokens(65, vocab, 8)), Contains("do not fit the cache's 64"));
  CHECK_THROWS_WITH(target.prefill(std::vector<token_t>{1, vocab}),
                    Contains("token " + std::to_string(vocab) + " is outside the vocabulary"));
  target.prefill(prompt);
  CHECK(single_token(target, 3, 60) == before);
}

}  // namespace specdec::device_llama_checks
