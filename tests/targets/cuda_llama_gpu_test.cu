// CudaLlamaTarget on a GPU (label gpu; exits 77 without a device):
//  - it computes the host Llama2cTarget's model (same checkpoint, same tree): logits within fp32
//    rounding, the same greedy continuation (a check of the kernels' meaning, which bit-exactness
//    against itself cannot give);
//  - bit-exact sweep: random trees of 1 .. 256 nodes (chains, wide, branchy, random) on
//    stories260K (fp32) and a small synthetic bf16 shape with grouped KV heads: every node's
//    logits equal, bit for bit, a single-token forward of its path;
//  - speculative greedy decoding on the GPU target equals plain greedy decoding on it
//    (stories260K and BabyLlama-936K prompts);
//  - the same with tensor-core products (CudaLlamaOptions::tensor_cores), which compute the
//    CUDA-core products' model within the bf16 rounding of the activations;
//  - the synthetic weights on the device equal the host generator's, bit for bit;
//  - the batched form: each request's rows of a forward of many trees (up to 64, on their own
//    slots) equal its tree forwarded alone, bit for bit; SpeculativeBatch on it decodes every
//    request exactly as plain greedy decoding does;
//  - errors: a tree larger than the cache's free slots or than max_tree_nodes, an unknown shape,
//    a checkpoint too big for the card: one sentence each, and the target still works after.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <fstream>
#include <limits>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <specdec/batch_decoder.hpp>
#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/drafters/pld.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/targets/cuda_llama.cuh>
#include <specdec/targets/llama2c.hpp>
#include <specdec/testing/backend_target_conformance.hpp>
#include <specdec/testing/device_tree.cuh>
#include <specdec/testing/laid_out_tree.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "support/data.hpp"

using namespace specdec;
using Catch::Matchers::Contains;
namespace syn = specdec::synthetic;

namespace {

void cuda_check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) FAIL(what << ": " << cudaGetErrorString(e));
}

// Rows [0, n) of the forward's logits on the host (waits for the device).
std::vector<float> logits_on_host(CudaLlamaTarget& target, const LogitsRows& rows, int n) {
  const int vocab = target.vocab_size();
  std::vector<float> out(static_cast<std::size_t>(n) * vocab);
  REQUIRE(rows.row_stride == vocab);
  cuda_check(cudaStreamSynchronize(target.backend().stream), "the forward");
  cuda_check(cudaMemcpy(out.data(), rows.data, out.size() * sizeof(float), cudaMemcpyDeviceToHost), "logits");
  return out;
}

// The logits after one token at `position` (its K/V written there), the cache before it as is.
std::vector<float> single_token(CudaLlamaTarget& target, token_t token, int position) {
  const testing::DeviceTree one(testing::LaidOutTree({-1}, {token}), position);
  return logits_on_host(target, target.forward(one.view()), 1);
}

enum class Shape { chain, wide, branchy, random };

std::vector<node_t> random_parents(Shape shape, int n, std::mt19937& rng) {
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

// Every node of a tree of each size and shape, on top of `prefix`: its row of the tree forward
// against a single-token forward of its path. The path's forwards run depth first, so when node i
// (depth d) runs, the slots base .. base + d - 1 hold exactly its ancestors' K/V, written by their
// own single-token forwards: the cache a fresh prefill plus the path one token at a time gives.
void bit_exact_sweep(CudaLlamaTarget& target, const std::vector<token_t>& prefix, std::uint32_t seed) {
  std::mt19937 rng(seed);
  const int vocab = target.vocab_size(), base = static_cast<int>(prefix.size());
  target.prefill(prefix);
  const int sizes[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 200, 255, 256};
  int trees = 0;
  for (int n : sizes) {
    if (base + n > target.max_positions()) continue;
    const Shape shape = static_cast<Shape>(trees++ % 4);
    const std::vector<node_t> parent = random_parents(shape, n, rng);
    std::vector<token_t> token(static_cast<std::size_t>(n));
    for (token_t& t : token) t = std::uniform_int_distribution<token_t>(0, vocab - 1)(rng);
    const testing::DeviceTree tree(testing::LaidOutTree(parent, token), base);
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

std::vector<token_t> random_tokens(int count, int vocab, std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<token_t> out(static_cast<std::size_t>(count));
  for (token_t& t : out) t = std::uniform_int_distribution<token_t>(0, vocab - 1)(rng);
  return out;
}

// A small shape with grouped KV heads (8 heads, 2 KV heads, head size 32) for bf16 sweeps.
SyntheticShape small_shape() { return {"small", {256, 512, 3, 8, 2, 1000, 1024, false}, 10000.0f, "test"}; }

// Plain greedy decoding on the GPU target: one single-token forward per token, argmax on the host.
std::vector<token_t> plain_greedy(CudaLlamaTarget& target, const std::vector<token_t>& prompt, int count) {
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

template <class... Drafters>
std::vector<token_t> speculative(CudaLlamaTarget& target, const std::vector<token_t>& prompt, int count, int budget,
                                 Drafters... drafters) {
  SpeculativeDecoder<CudaLlamaTarget, Drafters..., ExactVerifier> decoder(target, DecoderOptions{.budget = budget},
                                                                          std::move(drafters)..., ExactVerifier{});
  decoder.prefill(prompt);
  std::vector<token_t> out = decoder.generate(count);
  INFO("tau " << decoder.stats().tau());
  CHECK(decoder.stats().steps < count);  // the drafts were accepted at times: trees really ran
  return out;
}

// One batched forward of `slots` trees (slots out of order, trees of 1 .. max_n nodes behind 0 ..
// 300 cached tokens): each request's rows against its tree forwarded alone, bit for bit.
void batched_rows_equal_alone(int slots, int max_n) {
  INFO(slots << " slots");
  CudaLlamaBatchTarget batch = CudaLlamaBatchTarget::synthetic(small_shape(), 8, slots, {}, {.max_positions = 400});
  CudaLlamaTarget alone = CudaLlamaTarget::synthetic(small_shape(), 8, {}, {.max_positions = 400});
  const int vocab = batch.vocab_size();
  std::mt19937 rng(static_cast<unsigned>(slots));
  std::vector<std::vector<token_t>> prefixes;
  std::vector<std::unique_ptr<testing::DeviceTree>> trees;
  std::vector<TreeView> views;
  std::vector<int> order(static_cast<std::size_t>(slots));
  for (int b = 0; b < slots; ++b) order[static_cast<std::size_t>(b)] = (b * 5 + 3) % slots;  // slots out of order
  int rows = 0;
  for (int b = 0; b < slots; ++b) {
    const int length = std::uniform_int_distribution<int>(0, 300)(rng);
    const int n = std::uniform_int_distribution<int>(1, max_n)(rng);
    prefixes.push_back(random_tokens(length, vocab, rng()));
    batch.prefill(order[static_cast<std::size_t>(b)], prefixes.back());
    trees.push_back(std::make_unique<testing::DeviceTree>(
        testing::LaidOutTree(random_parents(static_cast<Shape>(b % 4), n, rng), random_tokens(n, vocab, rng())), length));
    views.push_back(trees.back()->view());
    rows += n;
  }
  std::vector<float> all(static_cast<std::size_t>(rows) * vocab);
  const LogitsRows out = batch.forward(TreeBatchView{order, views});
  cuda_check(cudaStreamSynchronize(batch.backend().stream), "the batched forward");
  cuda_check(cudaMemcpy(all.data(), out.data, all.size() * sizeof(float), cudaMemcpyDeviceToHost), "logits");
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

}  // namespace

TEST_CASE("the GPU target computes the host target's model: close logits, the same greedy tokens") {
  for (const char* file : {"models/stories260K.bin", "models/babyllama-936K.bin"}) {
    const auto path = testing::data_file(file);
    if (!path) continue;
    INFO(file);
    CudaLlamaTarget gpu = CudaLlamaTarget::load(*path);
    Llama2cTarget host(*path);
    const int vocab = gpu.vocab_size();
    REQUIRE(host.vocab_size() == vocab);
    const std::vector<token_t> prefix = random_tokens(30, vocab, 9);
    std::mt19937 rng(3);
    const testing::LaidOutTree tree(random_parents(Shape::random, 40, rng), random_tokens(40, vocab, 10));
    host.prefill(prefix);
    const auto& out = host.forward(tree.view(30));
    gpu.prefill(prefix);
    const testing::DeviceTree device_tree(tree, 30);
    const std::vector<float> logits = logits_on_host(gpu, gpu.forward(device_tree.view()), 40);
    double worst = 0;
    for (int i = 0; i < 40; ++i) {
      const std::span<const float> expected = out.logits(i);
      for (int v = 0; v < vocab; ++v)
        worst = std::max(worst, static_cast<double>(std::abs(logits[static_cast<std::size_t>(i) * vocab + v] - expected[v])));
    }
    INFO("largest logit difference " << worst);
    CHECK(worst < 2e-3);
    const std::vector<token_t> prompt = random_tokens(5, vocab, 11);
    CHECK(plain_greedy(gpu, prompt, 40) == host.generate(prompt, 40));
  }
}

TEST_CASE("stories260K in fp32: every node of a tree equals a single-token forward of its path, bit for bit") {
  const auto path = testing::data_file("models/stories260K.bin");
  if (!path) return;
  CudaLlamaTarget target = CudaLlamaTarget::load(*path);
  REQUIRE(target.weight_format() == WeightFormat::fp32);
  bit_exact_sweep(target, random_tokens(37, target.vocab_size(), 1), 11);
  bit_exact_sweep(target, random_tokens(200, target.vocab_size(), 2), 12);  // > 128 positions per thread stride
  bit_exact_sweep(target, {}, 13);                                          // the root at position 0
}

// The backend-target kit (testing/backend_target_conformance.hpp) drives the target as the decoder
// does, compaction included, and checks each node and its K/V rows against its path alone.
TEST_CASE("stories260K in fp32 passes the backend-target conformance kit") {
  const auto path = testing::data_file("models/stories260K.bin");
  if (!path) return;
  CudaLlamaTarget target = CudaLlamaTarget::load(*path);
  const testing::ConformanceReport report = testing::check_backend_target(target);
  INFO(report.str());
  CHECK(report.ok());
}

TEST_CASE("the stories260K batch target passes the backend batch-target conformance kit") {
  const auto path = testing::data_file("models/stories260K.bin");
  if (!path) return;
  CudaLlamaBatchTarget target = CudaLlamaBatchTarget::load(*path, 4);
  const testing::ConformanceReport report = testing::check_backend_batch_target(target);
  INFO(report.str());
  CHECK(report.ok());
}

TEST_CASE("a synthetic bf16 shape with grouped KV heads: every node equals its path's single-token forward") {
  CudaLlamaTarget target = CudaLlamaTarget::synthetic(small_shape(), 5);
  REQUIRE(target.weight_format() == WeightFormat::bf16);
  bit_exact_sweep(target, random_tokens(300, target.vocab_size(), 3), 21);
  // Prefill in chains of max_tree_nodes: a cache prefilled in pieces of 7 gives the same bits.
  CudaLlamaTarget chunked = CudaLlamaTarget::synthetic(small_shape(), 5, {}, {.max_positions = 0, .max_tree_nodes = 7});
  const std::vector<token_t> prompt = random_tokens(50, target.vocab_size(), 4);
  target.prefill(prompt);
  chunked.prefill(prompt);
  CHECK(single_token(target, 17, 50) == single_token(chunked, 17, 50));
}

TEST_CASE("a short sweep, small enough for compute-sanitizer", "[sanitize]") {
  // Trees of up to 44 nodes behind 20 cached tokens in a cache of 64 positions.
  CudaLlamaTarget target = CudaLlamaTarget::synthetic(small_shape(), 6, {}, {.max_positions = 64});
  bit_exact_sweep(target, random_tokens(20, target.vocab_size(), 12), 31);
}

TEST_CASE("tensor-core products: every node equals its path's single-token forward, bit for bit") {
  const CudaLlamaOptions tc{.max_positions = 0, .max_tree_nodes = 256, .max_rows = 0, .tensor_cores = true};
  CudaLlamaTarget target = CudaLlamaTarget::synthetic(small_shape(), 5, {}, tc);
  REQUIRE(target.tensor_cores());
  bit_exact_sweep(target, random_tokens(300, target.vocab_size(), 3), 22);
  bit_exact_sweep(target, {}, 23);
}

TEST_CASE("tensor-core products compute the CUDA-core products' model, within bf16 rounding of the activations") {
  CudaLlamaTarget cuda_cores = CudaLlamaTarget::synthetic(small_shape(), 5);
  CudaLlamaTarget tensor_cores = CudaLlamaTarget::synthetic(
      small_shape(), 5, {}, {.max_positions = 0, .max_tree_nodes = 256, .max_rows = 0, .tensor_cores = true});
  const int vocab = cuda_cores.vocab_size();
  const std::vector<token_t> prefix = random_tokens(100, vocab, 13);
  std::mt19937 rng(4);
  const testing::DeviceTree tree(testing::LaidOutTree(random_parents(Shape::branchy, 50, rng), random_tokens(50, vocab, 14)), 100);
  cuda_cores.prefill(prefix);
  tensor_cores.prefill(prefix);
  const std::vector<float> a = logits_on_host(cuda_cores, cuda_cores.forward(tree.view()), 50);
  const std::vector<float> b = logits_on_host(tensor_cores, tensor_cores.forward(tree.view()), 50);
  double largest = 0, worst = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    largest = std::max(largest, static_cast<double>(std::abs(a[i])));
    worst = std::max(worst, static_cast<double>(std::abs(a[i] - b[i])));
  }
  INFO("largest logit " << largest << ", largest difference " << worst);
  CHECK(largest > 0);
  CHECK(worst < 0.05 * largest);
  CHECK(a != b);  // the activations really were rounded: a different product ran
}

TEST_CASE("speculative greedy decoding with tensor-core products equals plain greedy decoding on them") {
  const CudaLlamaOptions tc{.max_positions = 0, .max_tree_nodes = 256, .max_rows = 0, .tensor_cores = true};
  CudaLlamaTarget target = CudaLlamaTarget::synthetic(small_shape(), 5, {}, tc);
  const std::vector<token_t> prompt = random_tokens(12, target.vocab_size(), 15);
  const std::vector<token_t> plain = plain_greedy(target, prompt, 120);
  std::vector<token_t> truth = prompt;
  truth.insert(truth.end(), plain.begin(), plain.end());
  CHECK(speculative(target, prompt, 120, 32, OracleDrafter(truth, 8, 0.2, 2, 3)) == plain);
}

TEST_CASE("speculative greedy decoding on the GPU target equals plain greedy decoding on it") {
  struct Model {
    const char* checkpoint;
    const char* tokenizer;
  };
  for (const Model m : {Model{"models/stories260K.bin", "models/tok512.bin"},
                        Model{"models/babyllama-936K.bin", "models/tok105.bin"}}) {
    const auto path = testing::data_file(m.checkpoint);
    const auto tok_path = testing::data_file(m.tokenizer);
    if (!path || !tok_path) continue;
    INFO(m.checkpoint);
    CudaLlamaTarget target = CudaLlamaTarget::load(*path);
    const Llama2cTokenizer tokenizer = Llama2cTokenizer::load(*tok_path, target.vocab_size());
    const int count = std::min(150, target.max_positions() / 2);
    for (const char* text : {"Once upon a time", "Lily and Tom went to the park", "The cat"}) {
      INFO(text);
      const std::vector<token_t> prompt = tokenizer.encode(text);
      const std::vector<token_t> plain = plain_greedy(target, prompt, count);
      std::vector<token_t> truth = prompt;
      truth.insert(truth.end(), plain.begin(), plain.end());
      // An oracle that errs (chains and trees), and prompt lookup.
      CHECK(speculative(target, prompt, count, 16, OracleDrafter(truth, 6, 0.3, 2, 7)) == plain);
      CHECK(speculative(target, prompt, count, 64, OracleDrafter(truth, 12, 0.1, 3, 8)) == plain);
      CHECK(speculative(target, prompt, count, 8, OracleDrafter(truth, 8, 0.0)) == plain);
    }
  }
}

TEST_CASE("batched forwards: each request's rows equal its tree forwarded alone, bit for bit") {
  batched_rows_equal_alone(6, 90);
  batched_rows_equal_alone(64, 12);
}

TEST_CASE("a small batched forward, for compute-sanitizer", "[sanitize]") { batched_rows_equal_alone(4, 10); }

TEST_CASE("SpeculativeBatch on the GPU batch target decodes every request as plain greedy decoding does") {
  const auto path = testing::data_file("models/stories260K.bin");
  const auto tok_path = testing::data_file("models/tok512.bin");
  if (!path || !tok_path) return;
  CudaLlamaTarget single = CudaLlamaTarget::load(*path);
  CudaLlamaBatchTarget target = CudaLlamaBatchTarget::load(*path, 3);
  const Llama2cTokenizer tokenizer = Llama2cTokenizer::load(*tok_path, target.vocab_size());
  const char* texts[] = {"Once upon a time", "The cat", "Lily and Tom went to the park", "One day", "Sam had a ball",
                         "The sun was"};
  std::vector<std::vector<token_t>> prompts, expected, got(std::size(texts));
  for (const char* text : texts) {
    prompts.push_back(tokenizer.encode(text));
    expected.push_back(plain_greedy(single, prompts.back(), 100));
  }
  using Batch = SpeculativeBatch<CudaLlamaBatchTarget, OracleDrafter, ExactVerifier>;
  Batch batch(target, 3, OracleDrafter({}, 1), ExactVerifier{});
  std::map<request_id, std::size_t> which;
  std::size_t next = 0;
  while (next < prompts.size() || batch.active() > 0) {
    while (next < prompts.size() && batch.active() < batch.capacity()) {
      std::vector<token_t> truth = prompts[next];
      truth.insert(truth.end(), expected[next].begin(), expected[next].end());
      RequestOptions options;
      options.max_new_tokens = 100;
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
    INFO(texts[r]);
    CHECK(got[r] == expected[r]);
  }
  CHECK(batch.forwards() < 600);  // 6 requests of 100 tokens: drafts were accepted
}

TEST_CASE("synthetic weights on the device equal the host generator's, bit for bit") {
  for (const SyntheticShape& shape : {small_shape(), synthetic_shape("TinyLlama-1.1B"), synthetic_shape("Llama-3-8B")}) {
    INFO(shape.name);
    const std::uint64_t seed = 0x1234'5678'9abcull;
    CudaLlamaTarget target = CudaLlamaTarget::synthetic(shape, seed, {}, {.max_positions = 256});
    const CudaLlamaLayout layout(shape.config);
    const int last = shape.config.n_layers - 1;
    std::vector<std::pair<syn::tensor, int>> tensors{{syn::tensor::embedding, 0}, {syn::tensor::rms_final, 0}};
    if (!shape.config.shared_classifier) tensors.push_back({syn::tensor::classifier, 0});
    for (int layer : {0, last})
      for (syn::tensor kind : {syn::tensor::rms_att, syn::tensor::wq, syn::tensor::wk, syn::tensor::wv, syn::tensor::wo,
                               syn::tensor::rms_ffn, syn::tensor::w1, syn::tensor::w2, syn::tensor::w3})
        tensors.push_back({kind, layer});
    for (const auto& [kind, layer] : tensors) {
      const std::uint64_t count = layout.range(kind, layer).count;
      const std::size_t chunk = static_cast<std::size_t>(std::min<std::uint64_t>(count, 4096));
      for (const std::uint64_t first : {std::uint64_t{0}, count / 2 + 3, count - chunk}) {
        const std::vector<float> device = target.weights(kind, layer, first, chunk);
        int mismatched = 0;
        for (std::size_t i = 0; i < chunk; ++i) {
          const float host = syn::weight(seed, kind, layer, first + i);
          const float expected = syn::is_norm(kind) ? host : syn::bf16_value(syn::bf16_bits(host));
          mismatched += std::memcmp(&expected, &device[i], sizeof(float)) != 0;
        }
        INFO("tensor " << static_cast<int>(kind) << " layer " << layer << " from element " << first);
        CHECK(mismatched == 0);
      }
    }
  }
}

TEST_CASE("bad input is one sentence, and the target still works after it", "[sanitize]") {
  CudaLlamaTarget target = CudaLlamaTarget::synthetic(small_shape(), 9, {}, {.max_positions = 64});
  const std::vector<token_t> prompt = random_tokens(60, target.vocab_size(), 5);
  target.prefill(prompt);
  const std::vector<float> before = single_token(target, 3, 60);
  target.prefill(prompt);

  std::mt19937 rng(1);
  const testing::DeviceTree too_big(
      testing::LaidOutTree(random_parents(Shape::random, 8, rng), random_tokens(8, target.vocab_size(), 6)), 60);
  try {
    target.forward(too_big.view());
    FAIL("a tree of 8 nodes at position 60 of 64 was taken");
  } catch (const error& e) {
    CHECK_THAT(std::string(e.what()), Contains("a tree of 8 nodes at position 60 does not fit the cache's 64 positions (4 free)"));
  }
  const testing::DeviceTree too_many(
      testing::LaidOutTree(random_parents(Shape::wide, 257, rng), random_tokens(257, target.vocab_size(), 7)), 0);
  CHECK_THROWS_WITH(target.forward(too_many.view()), Contains("a tree of 257 nodes is outside [1, max_tree_nodes = 256]"));
  CHECK_THROWS_WITH(target.prefill(random_tokens(65, target.vocab_size(), 8)), Contains("do not fit the cache's 64"));
  CHECK_THROWS_WITH(target.prefill(std::vector<token_t>{1, 1000}), Contains("token 1000 is outside the vocabulary"));
  target.prefill(prompt);
  CHECK(single_token(target, 3, 60) == before);

  CHECK_THROWS_WITH(CudaLlamaTarget::synthetic(synthetic_shape("GPT-5"), 1),
                    "unknown shape 'GPT-5'; the shapes are: stories15M, stories110M, TinyLlama-1.1B, Llama-2-7B, "
                    "Llama-3-8B");
}

TEST_CASE("a checkpoint too big for the card is refused from its header, in one sentence") {
  // A 70B-parameter header over a sparse file of the size it implies (nothing is written).
  const LlamaConfig c{8192, 28672, 80, 64, 8, 32000, 4096, true};
  const std::filesystem::path path = std::filesystem::temp_directory_path() / "specdec_cuda_llama_70b.bin";
  {
    std::ofstream out(path, std::ios::binary);
    const std::int32_t header[7] = {c.dim, c.hidden_dim, c.n_layers, c.n_heads, c.n_kv_heads, c.vocab_size, c.seq_len};
    out.write(reinterpret_cast<const char*>(header), sizeof header);
  }
  std::error_code ec;
  std::filesystem::resize_file(path, 28 + 4 * Llama2cModel::weight_floats(c), ec);
  if (ec) {
    WARN("cannot make a sparse file of the 70B checkpoint's size here (" << ec.message() << "): not checked");
    std::filesystem::remove(path);
    return;
  }
  std::string what;
  try {
    CudaLlamaTarget::load(path, {}, {.max_positions = 512});
  } catch (const error& e) {
    what = e.what();
  }
  std::filesystem::remove(path);
  CHECK_THAT(what, Contains("needs ") && Contains("GB of device memory") && Contains("but the device has"));
  CHECK(what.find('\n') == std::string::npos);
}
