// The device Llama's kernels on the host's emulated grid (EmulatedLlamaTarget): the checks the GPU
// test runs (device_llama_checks.hpp), at sizes CI can afford, on the same kernel code. What a GPU
// adds beyond them is the hardware: its shared-memory limits, timing, and the tensor core's own
// sums inside an MMA.
//  - the emulated forward computes the host Llama2cTarget's model (close logits, the same greedy
//    tokens), on stories260K;
//  - every node of a tree equals a single-token forward of its path, bit for bit (fp32 stories260K
//    and a small bf16 synthetic shape with grouped KV heads);
//  - the backend-target conformance kits, single and batch (fewer, smaller trees than the GPU's);
//  - speculative greedy decoding equals plain greedy decoding, alone and in SpeculativeBatch;
//  - a batched forward's rows equal each tree forwarded alone;
//  - a bf16 model's K/V cache holds its rows rounded to bf16, which both attention kernels read as
//    an fp32 cache of the same values (the same bits);
//  - the tensor-core product (its MMAs emulated) computes W x with the same bits for a token
//    whatever shares its MMAs, and with it the forward stays bit-exact and lossless;
//  - bad input is one sentence, and the target works after it; a model or batch too large for the
//    device's memory is a device_memory_error (the emulated device's memory set by the environment).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include <specdec/targets/llama2c.hpp>
#include <specdec/testing/backend_target_conformance.hpp>
#include <specdec/testing/emulated_llama.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "support/data.hpp"
#include "targets/device_llama_checks.hpp"
#include "targets/mma_product_on_host.hpp"

using namespace specdec;
using namespace specdec::device_llama_checks;
using Catch::Matchers::Contains;

namespace {

// Under AddressSanitizer the grid's fibers switch through ucontext (about a microsecond a switch,
// against ten nanoseconds): the debug preset checks the same things on fewer, shorter decodes.
#if defined(__SANITIZE_ADDRESS__)
constexpr bool sanitized = true;
#else
constexpr bool sanitized = false;
#endif

// A smaller bf16 shape than the GPU test's, with grouped KV heads (4 heads, 2 KV heads, head size 16).
SyntheticShape tiny_shape() { return {"tiny", {64, 128, 2, 4, 2, 300, 256, false}, 10000.0f, "test"}; }

// Fewer and smaller trees than the kit's defaults: every node is also run on its path alone.
testing::BackendConformanceOptions small_kit() {
  testing::BackendConformanceOptions options;
  options.prompts = 1;
  options.random_trees = sanitized ? 0 : 1;
  options.tree_nodes = sanitized ? 6 : 10;
  options.large_tree_nodes = sanitized ? 8 : 16;
  options.slots = 2;
  return options;
}

}  // namespace

TEST_CASE("the emulated device forward computes the host target's model: close logits, the same greedy tokens") {
  const auto path = testing::data_file("models/stories260K.bin");
  if (!path) return;
  EmulatedLlamaTarget device = EmulatedLlamaTarget::load(*path);
  Llama2cTarget host(*path);
  computes_host_model(device, host, 20, 20);
}

TEST_CASE("emulated, stories260K in fp32: every node of a tree equals a single-token forward of its path") {
  const auto path = testing::data_file("models/stories260K.bin");
  if (!path) return;
  EmulatedLlamaTarget target = EmulatedLlamaTarget::load(*path);
  constexpr int sizes[] = {1, 2, 5, 9, 17, 33};
  bit_exact_sweep(target, random_tokens(37, target.vocab_size(), 1), 11,
                  std::span<const int>(sizes).first(sanitized ? 4 : std::size(sizes)));
  constexpr int few[] = {3, 8};
  bit_exact_sweep(target, random_tokens(140, target.vocab_size(), 2), 12, few);  // > 128 positions a thread
  bit_exact_sweep(target, {}, 13, few);                                          // the root at position 0
}

TEST_CASE("emulated, a bf16 shape with grouped KV heads: every node equals its path's single-token forward") {
  EmulatedLlamaTarget target = EmulatedLlamaTarget::synthetic(tiny_shape(), 5);
  REQUIRE(target.weight_format() == WeightFormat::bf16);
  constexpr int sizes[] = {1, 4, 12};
  bit_exact_sweep(target, random_tokens(50, target.vocab_size(), 3), 21, sizes);
  // Prefill in chains of max_tree_nodes: a cache prefilled in pieces of 7 gives the same bits.
  EmulatedLlamaTarget chunked = EmulatedLlamaTarget::synthetic(tiny_shape(), 5, {}, {.max_positions = 0, .max_tree_nodes = 7});
  const std::vector<token_t> prompt = random_tokens(20, target.vocab_size(), 4);
  target.prefill(prompt);
  chunked.prefill(prompt);
  CHECK(single_token(target, 17, 20) == single_token(chunked, 17, 20));
}

TEST_CASE("emulated: the per-node and the tiled attention kernels give the same bits") {
  constexpr int sizes[] = {3, 17};
  if (const auto path = testing::data_file("models/stories260K.bin")) {  // head size 8, 2 heads a KV head
    const auto make = [&](DeviceLlamaOptions::Attention kind) {
      return EmulatedLlamaTarget::load(*path, {}, {.max_positions = 0, .max_tree_nodes = 256, .max_rows = 0,
                                                   .tensor_cores = false, .attention = kind});
    };
    attention_kernels_agree(make, 150, sizes);  // two splits of 128 positions, the last partial
  }
  const auto make = [](DeviceLlamaOptions::Attention kind) {  // head size 16, 2 heads a KV head, bf16
    return EmulatedLlamaTarget::synthetic(tiny_shape(), 3, {}, {.max_positions = 400, .max_tree_nodes = 256,
                                                                 .max_rows = 0, .tensor_cores = false,
                                                                 .attention = kind});
  };
  attention_kernels_agree(make, 21, sizes);
  attention_kernels_agree(make, 300, sizes);  // three splits, folded twice
}

TEST_CASE("emulated: AttentionFold folds a row's splits in increasing order, as many as there are") {
  namespace k = kernels::llama;
  constexpr int hs = 8, cached = 2500;  // one node behind 2500 positions: 20 splits
  const int splits = k::attention_splits(cached + 1), stride = k::split_partial_floats(hs);
  REQUIRE(splits == 20);
  std::vector<float> partials(static_cast<std::size_t>(splits * stride));
  std::mt19937 rng(9);
  std::uniform_real_distribution<float> u(-4.0f, 4.0f);
  for (int s = 0; s < splits; ++s)
    for (int f = 0; f < stride; ++f)
      partials[static_cast<std::size_t>(s * stride + f)] = f == 1 ? 1.0f + std::abs(u(rng)) : u(rng);
  const token_t token = 0;
  const int depth = 0;
  const std::uint32_t mask = 1;  // the node is its own ancestor
  k::ForwardTrees trees;
  trees.count = 1;
  trees.rows = 1;
  trees.tree[0] = {&token, &depth, &mask, 1, cached, 0, 0};
  std::vector<float> out(hs, -1.0f);
  k::AttentionArgs a;
  a.trees = &trees;
  a.heads = a.kv_heads = 1;
  a.head_size = hs;
  a.out = out.data();
  const k::AttentionFold fold{a, 1, splits, partials.data()};
  backend::launch_grid(backend::host{}, fold.shape(), fold);
  // The rule's fold, written out.
  for (int e = 0; e < hs; ++e) {
    float run_max = partials[0], total = partials[1], value = partials[static_cast<std::size_t>(2 + e)];
    for (int s = 1; s < splits; ++s) {
      const float* split = partials.data() + s * stride;
      const k::SplitFold f = k::split_fold(run_max, split[0]);
      total = k::folded(total, split[1], f);
      value = k::folded(value, split[2 + e], f);
      run_max = f.max;
    }
    CHECK(out[static_cast<std::size_t>(e)] == core::div_rn(value, total));
  }
}

TEST_CASE("emulated: a bf16 cache holds K/V rounded to bf16, and attention reads it as an fp32 cache of those values") {
  namespace k = kernels::llama;
  constexpr int heads = 4, kv_heads = 2, hs = 16, dim = heads * hs, kv = kv_heads * hs, width = dim + 2 * kv;
  constexpr int base = 150, n = 3, positions = base + n;  // a chain behind 150 cached positions: two splits
  const token_t tokens[n] = {};
  const int depth[n] = {0, 1, 2};
  const std::uint32_t mask[n] = {1, 3, 7};  // node i's ancestors: 0 .. i
  k::ForwardTrees trees;
  trees.count = 1;
  trees.rows = n;
  trees.tree[0] = {tokens, depth, mask, 1, base, 0, 0};
  std::mt19937 rng(17);
  std::uniform_real_distribution<float> u(-2.0f, 2.0f);
  std::vector<float> qkv(n * width), cos_sin(positions * hs);
  for (float& v : qkv) v = u(rng);
  for (int p = 0; p < positions; ++p)
    for (int i = 0; i < hs / 2; ++i) {
      const float angle = static_cast<float>(p) * std::pow(10000.0f, -2.0f * static_cast<float>(i) / hs);
      cos_sin[static_cast<std::size_t>(p * hs + 2 * i)] = std::cos(angle);
      cos_sin[static_cast<std::size_t>(p * hs + 2 * i + 1)] = std::sin(angle);
    }
  // The prefix's rows: bf16 values, in both caches.
  std::vector<k::bf16> k16(positions * kv), v16(positions * kv);
  std::vector<float> k32(positions * kv), v32(positions * kv);
  for (int i = 0; i < base * kv; ++i) {
    k16[static_cast<std::size_t>(i)] = synthetic::bf16_bits(u(rng));
    v16[static_cast<std::size_t>(i)] = synthetic::bf16_bits(u(rng));
    k32[static_cast<std::size_t>(i)] = synthetic::bf16_value(k16[static_cast<std::size_t>(i)]);
    v32[static_cast<std::size_t>(i)] = synthetic::bf16_value(v16[static_cast<std::size_t>(i)]);
  }
  // RoPE and the store: the same rotated q and k either way; the bf16 cache holds the fp32 one's rows rounded.
  std::vector<float> qkv32 = qkv, qkv16 = qkv;
  const auto run = [](const auto& kernel) { backend::launch_grid(backend::host{}, kernel.shape(), kernel); };
  run(k::RopeStore<float>{qkv32.data(), width, &trees, cos_sin.data(), n, dim, kv, hs, {k32.data(), v32.data()}});
  run(k::RopeStore<k::bf16>{qkv16.data(), width, &trees, cos_sin.data(), n, dim, kv, hs, {k16.data(), v16.data()}});
  CHECK(qkv32 == qkv16);
  for (int i = base * kv; i < positions * kv; ++i) {
    INFO("cache element " << i);
    CHECK(k16[static_cast<std::size_t>(i)] == synthetic::bf16_bits(k32[static_cast<std::size_t>(i)]));
    CHECK(v16[static_cast<std::size_t>(i)] == synthetic::bf16_bits(v32[static_cast<std::size_t>(i)]));
    k32[static_cast<std::size_t>(i)] = synthetic::bf16_value(k16[static_cast<std::size_t>(i)]);
    v32[static_cast<std::size_t>(i)] = synthetic::bf16_value(v16[static_cast<std::size_t>(i)]);
  }
  // Both attention kernels over either cache: the same partials, bit for bit.
  k::AttentionArgs a;
  a.qkv = qkv32.data();
  a.ld_qkv = width;
  a.trees = &trees;
  a.heads = heads;
  a.kv_heads = kv_heads;
  a.head_size = hs;
  a.scale = 0.25f;
  const int splits = k::attention_splits(positions), floats = n * heads * splits * k::split_partial_floats(hs);
  REQUIRE(splits == 2);
  std::vector<float> split32(static_cast<std::size_t>(floats), -1.0f), split16 = split32, tiled32 = split32,
                     tiled16 = split32;
  run(k::SplitAttention<float>{a, {k32.data(), v32.data()}, n, splits, splits, split32.data()});
  run(k::SplitAttention<k::bf16>{a, {k16.data(), v16.data()}, n, splits, splits, split16.data()});
  const int tiles = k::attention_tiles_of(trees, heads / kv_heads);
  run(k::TiledAttention<float>{a, {k32.data(), v32.data()}, tiles, splits, splits, tiled32.data()});
  run(k::TiledAttention<k::bf16>{a, {k16.data(), v16.data()}, tiles, splits, splits, tiled16.data()});
  CHECK(std::count(split32.begin(), split32.end(), -1.0f) == 0);  // every row, head and split written
  CHECK(std::memcmp(split32.data(), split16.data(), split32.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(split32.data(), tiled16.data(), split32.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(split32.data(), tiled32.data(), split32.size() * sizeof(float)) == 0);
}

TEST_CASE("emulated: launch graphs (trees padded to their bucket) give the same bits and the same decoding") {
  constexpr int sizes[] = {1, 3, 5, 17};
  graphs_agree_with_each_product(  // head size 16, 2 heads a KV head, bf16
      [](const DeviceLlamaOptions& options) { return EmulatedLlamaTarget::synthetic(tiny_shape(), 3, {}, options); },
      21, std::span<const int>(sizes).first(sanitized ? 2 : std::size(sizes)),
      random_tokens(10, tiny_shape().config.vocab_size, 5), sanitized ? 6 : 12);
}

TEST_CASE("emulated, stories260K passes the backend-target conformance kit") {
  const auto path = testing::data_file("models/stories260K.bin");
  if (!path) return;
  EmulatedLlamaTarget target = EmulatedLlamaTarget::load(*path);
  const testing::ConformanceReport report = testing::check_backend_target(target, small_kit());
  INFO(report.str());
  CHECK(report.ok());
}

TEST_CASE("emulated, the stories260K batch target passes the backend batch-target conformance kit") {
  const auto path = testing::data_file("models/stories260K.bin");
  if (!path) return;
  EmulatedLlamaBatchTarget target = EmulatedLlamaBatchTarget::load(*path, 3);
  const testing::ConformanceReport report = testing::check_backend_batch_target(target, small_kit());
  INFO(report.str());
  CHECK(report.ok());
}

TEST_CASE("emulated, speculative greedy decoding equals plain greedy decoding, alone and in a batch") {
  const auto path = testing::data_file("models/stories260K.bin");
  const auto tok_path = testing::data_file("models/tok512.bin");
  if (!path || !tok_path) return;
  EmulatedLlamaTarget single = EmulatedLlamaTarget::load(*path);
  const Llama2cTokenizer tokenizer = Llama2cTokenizer::load(*tok_path, single.vocab_size());
  speculative_equals_plain(single, tokenizer.encode("Once upon a time"), sanitized ? 16 : 30);
  EmulatedLlamaBatchTarget batch = EmulatedLlamaBatchTarget::load(*path, 3);
  std::vector<std::vector<token_t>> prompts;
  for (const char* text : {"The cat", "Lily and Tom went to the park", "One day", "Sam had a ball"})
    prompts.push_back(tokenizer.encode(text));
  batch_decodes_as_plain(batch, single, prompts, sanitized ? 12 : 20);
}

TEST_CASE("emulated: the backend step's parts are timed, and the forward is in them") {
  EmulatedLlamaTarget target = EmulatedLlamaTarget::synthetic(tiny_shape(), 4);
  const std::vector<token_t> prompt = random_tokens(8, target.vocab_size(), 31);
  SpeculativeDecoder<EmulatedLlamaTarget, OracleDrafter, ExactVerifier> decoder(
      target, DecoderOptions{.budget = 8}, OracleDrafter(prompt, 4, 0.5, 2, 1), ExactVerifier{});
  decoder.prefill(prompt);
  decoder.generate(12);
  const DecodeStats& stats = decoder.stats();
  const BackendPhases& p = stats.backend_phases;
  INFO("copy in " << p.copy_in << " s, forward " << p.forward << " s, verify and compact " << p.verify_compact
                  << " s, copy out " << p.copy_out << " s; the target's " << stats.target_seconds << " s");
  CHECK(p.copy_in >= 0);
  CHECK(p.verify_compact > 0);
  CHECK(p.copy_out >= 0);
  // The emulated forward is most of the step, and the parts lie within the step's time.
  CHECK(p.forward > 0.5 * stats.target_seconds);
  CHECK(p.copy_in + p.forward + p.verify_compact + p.copy_out <= stats.target_seconds);
}

TEST_CASE("emulated, a batched forward's rows equal each tree forwarded alone, bit for bit") {
  batched_rows_equal_alone(
      6, 9, 60, [](int slots) { return EmulatedLlamaBatchTarget::synthetic(tiny_shape(), 8, slots, {}, {.max_positions = 80}); },
      [] { return EmulatedLlamaTarget::synthetic(tiny_shape(), 8, {}, {.max_positions = 80}); });
}

TEST_CASE("emulated: bad input is one sentence, and the target still works after it") {
  EmulatedLlamaTarget target = EmulatedLlamaTarget::synthetic(tiny_shape(), 9, {}, {.max_positions = 64});
  bad_input_is_one_sentence(target);
  SyntheticShape narrow = tiny_shape();
  narrow.config.hidden_dim = 80;  // whole 16-byte rows, not whole k-blocks of 32
  CHECK_THROWS_WITH(EmulatedLlamaTarget::synthetic(narrow, 1, {}, {.tensor_cores = true}),
                    "EmulatedLlamaTarget: synthetic tiny: tensor_cores needs bf16 weights (a synthetic shape) with dim "
                    "and hidden_dim multiples of 32, not bf16 with dim 64 and hidden_dim 80");
  SyntheticShape grouped = tiny_shape();  // 16 query heads on one KV head
  grouped.config.n_heads = 16;
  grouped.config.n_kv_heads = 1;
  CHECK_THROWS_WITH(EmulatedLlamaBatchTarget::synthetic(grouped, 1, 2, {}, {.max_positions = 64, .max_rows = 65535}),
                    "EmulatedLlamaBatchTarget: synthetic tiny: max_rows 65535 with 16 query heads a KV head makes up "
                    "to 65537 attention tiles, more than a launch's 65535; fewer rows or slots");
}

TEST_CASE("emulated: a model or batch the device cannot hold is a device_memory_error, said before any allocation") {
  // The emulated device's memory as the environment gives it, for this test case only.
  struct EmulatedMemory {
    explicit EmulatedMemory(const char* bytes) { ::setenv("SPECDEC_EMULATED_MEMORY", bytes, 1); }
    ~EmulatedMemory() { ::unsetenv("SPECDEC_EMULATED_MEMORY"); }
  };
  const auto refusal = [](auto&& make) {
    try {
      make();
    } catch (const device_memory_error& e) {
      return std::string(e.what());
    }
    return std::string("no device_memory_error");
  };
  {
    const EmulatedMemory small("1000");
    const std::string what = refusal([] { EmulatedLlamaBatchTarget::synthetic(tiny_shape(), 1, 2, {}, {.max_positions = 64}); });
    CHECK_THAT(what, Catch::Matchers::Matches("EmulatedLlamaBatchTarget: synthetic tiny needs [0-9.]+ MB of device memory "
                                              "\\(weights [0-9.]+ kB in bf16, KV cache [0-9.]+ kB in bf16, buffers "
                                              "[0-9.]+ MB\\) but the device has 1.0 kB free"));
  }
  {
    const EmulatedMemory bad("12 GB");
    CHECK_THROWS_WITH(EmulatedLlamaTarget::synthetic(tiny_shape(), 1),
                      "SPECDEC_EMULATED_MEMORY must be a whole number of bytes, got '12 GB'");
  }
  // 32767 sequences of Llama-2-7B's 4096 positions: 70 TB of cache, refused before its weights are made.
  CHECK_THAT(refusal([] { EmulatedLlamaBatchTarget::synthetic(synthetic_shape("Llama-2-7B"), 1, 32767); }),
             Contains("EmulatedLlamaBatchTarget: synthetic Llama-2-7B needs ") && Contains(" GB of device memory"));
  CHECK(EmulatedLlamaBatchTarget::synthetic(tiny_shape(), 1, 2, {}, {.max_positions = 64}).slots() == 2);
}

TEST_CASE("emulated: the tensor-core product computes W x, the same bits whatever tokens share its MMAs") {
  struct Case {
    int in, out;
  };
  // 3 k-blocks (warps 0-2 only) and 10 (warps 0 and 1 twice); outputs that end inside a block.
  for (const Case c : {Case{96, 37}, Case{320, 16}}) {
    for (const int n : {1, 5, 8, 9, 70}) {  // Tiles 1; 8 in one pass, and in two
      INFO("in " << c.in << ", out " << c.out << ", " << n << " tokens");
      const MmaOperands op(c.in, c.out, n, static_cast<std::uint32_t>(c.in + n));
      const int tiles = n <= kernels::llama::mma_tokens ? 1 : 8;
      const std::vector<float> y = mma_product_on_host(op.w, op.x16, c.in, c.out, n, tiles, {}, false);
      op.check(y);
      // The other variant: other passes, other row tiles a block, the same bits.
      CHECK(mma_product_on_host(op.w, op.x16, c.in, c.out, n, tiles == 1 ? 8 : 1, {}, false) == y);
      // Accumulating: y0 + (W x) in one rounding.
      std::vector<float> y0(y.size());
      for (std::size_t i = 0; i < y0.size(); ++i) y0[i] = static_cast<float>(i % 7) - 3.25f;
      const std::vector<float> sum = mma_product_on_host(op.w, op.x16, c.in, c.out, n, tiles, y0, true);
      int wrong = 0;
      for (std::size_t i = 0; i < y.size(); ++i) wrong += sum[i] != y0[i] + y[i];
      CHECK(wrong == 0);
      // Each token alone, in the first column of an MMA of zeros: its outputs' bits.
      for (const int t : {0, n / 2, n - 1}) {
        std::vector<std::uint16_t> alone(op.x16.size() / static_cast<std::size_t>((n + 7) / 8), 0);
        std::copy_n(op.x16.begin() + static_cast<std::ptrdiff_t>(t) * c.in, c.in, alone.begin());
        const std::vector<float> one = mma_product_on_host(op.w, alone, c.in, c.out, 1, 1, {}, false);
        CHECK(std::equal(one.begin(), one.end(), y.begin() + static_cast<std::ptrdiff_t>(t) * c.out));
      }
    }
  }
}

TEST_CASE("emulated, tensor-core products: every node equals its path's single-token forward, and the model holds") {
  const DeviceLlamaOptions tc{.max_positions = 0, .max_tree_nodes = 256, .max_rows = 0, .tensor_cores = true};
  EmulatedLlamaTarget target = EmulatedLlamaTarget::synthetic(tiny_shape(), 5, {}, tc);
  constexpr int sizes[] = {1, 4, 12};  // MmaProduct<1, 1>, and <8, 2> from 9 rows
  bit_exact_sweep(target, random_tokens(30, target.vocab_size(), 3), 22, sizes);
  EmulatedLlamaTarget cuda_cores = EmulatedLlamaTarget::synthetic(tiny_shape(), 5);
  EmulatedLlamaTarget tensor_cores = EmulatedLlamaTarget::synthetic(tiny_shape(), 5, {}, tc);
  tensor_cores_compute_the_model(cuda_cores, tensor_cores, 20, 12);
  if (!sanitized) speculative_equals_plain(target, random_tokens(8, target.vocab_size(), 15), 24);
}
