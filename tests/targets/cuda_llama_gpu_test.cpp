// CudaLlamaTarget on a GPU (label gpu; exits 77 without a device):
//  - its forward equals, bit for bit, the same kernels run on the host's emulated grid
//    (EmulatedLlamaTarget), and its two attention kernels give the same bits;
//  - it computes the host Llama2cTarget's model (same checkpoint, same tree): logits within fp32
//    rounding, the same greedy continuation (a check of the kernels' meaning, which bit-exactness
//    against itself cannot give);
//  - bit-exact sweep: random trees of 1 .. 256 nodes (chains, wide, branchy, random) on
//    stories260K (fp32) and a small synthetic bf16 shape with grouped KV heads: every node's
//    logits equal, bit for bit, a single-token forward of its path;
//  - speculative greedy decoding on the GPU target equals plain greedy decoding on it
//    (stories260K and BabyLlama-936K prompts);
//  - the same with tensor-core products (CudaLlamaOptions::tensor_cores), which compute the
//    CUDA-core products' model within the bf16 rounding of the activations; their MMA product
//    computes W x on the device as its emulation does (the fragments' layout);
//  - the synthetic weights on the device equal the host generator's, bit for bit;
//  - the batched form: each request's rows of a forward of many trees (up to 64, on their own
//    slots) equal its tree forwarded alone, bit for bit; SpeculativeBatch on it decodes every
//    request exactly as plain greedy decoding does;
//  - errors: a tree larger than the cache's free slots or than max_tree_nodes, an unknown shape,
//    a checkpoint too big for the card: one sentence each, and the target still works after.
#include <catch2/catch.hpp>

#include <algorithm>
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
#include <specdec/targets/cuda_llama.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/testing/backend_target_conformance.hpp>
#include <specdec/testing/device_tree.cuh>
#include <specdec/testing/laid_out_tree.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "support/data.hpp"
#include "targets/device_llama_checks.hpp"
#include "targets/emulated_reference.hpp"

using namespace specdec;
using Catch::Matchers::Contains;
namespace syn = specdec::synthetic;

namespace {

using namespace specdec::device_llama_checks;

constexpr int sweep_sizes[] = {1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100, 127, 128, 129, 200, 255, 256};

void batched_rows_equal_alone(int slots, int max_n) {
  device_llama_checks::batched_rows_equal_alone(
      slots, max_n, 300,
      [](int s) { return CudaLlamaBatchTarget::synthetic(small_shape(), 8, s, {}, {.max_positions = 400}); },
      [] { return CudaLlamaTarget::synthetic(small_shape(), 8, {}, {.max_positions = 400}); });
}

}  // namespace

TEST_CASE("the GPU target computes the host target's model: close logits, the same greedy tokens") {
  for (const char* file : {"models/stories260K.bin", "models/babyllama-936K.bin"}) {
    const auto path = testing::data_file(file);
    if (!path) continue;
    INFO(file);
    CudaLlamaTarget gpu = CudaLlamaTarget::load(*path);
    Llama2cTarget host(*path);
    computes_host_model(gpu, host, 40, 40);
  }
}

// The device runs kernels/llama_forward.hpp's code, which the host's emulated grid runs with the
// same bits: any difference is the device's (a launch, a limit, a race), not the model's.
TEST_CASE("the GPU forward equals its emulation on the host, bit for bit") {
  std::mt19937 rng(17);
  const auto compare = [&](CudaLlamaTarget& gpu, const std::filesystem::path& checkpoint, const SyntheticShape& shape,
                           std::uint64_t seed) {
    const int vocab = gpu.vocab_size();
    const std::vector<token_t> prefix = random_tokens(140, vocab, 21);  // two attention splits
    const testing::LaidOutTree tree(random_parents(Shape::branchy, 20, rng), random_tokens(20, vocab, 22));
    gpu.prefill(prefix);
    const TreeOn<CudaLlamaTarget> device_tree(tree, 140);
    const std::vector<float> device = logits_on_host(gpu, gpu.forward(device_tree.view()), 20);
    const std::vector<float> host = emulated_logits(checkpoint, shape, seed, prefix, tree);
    REQUIRE(host.size() == device.size());
    std::size_t differ = 0;
    for (std::size_t i = 0; i < host.size(); ++i) differ += std::memcmp(&host[i], &device[i], sizeof(float)) != 0;
    INFO(differ << " of " << host.size() << " logits differ");
    CHECK(differ == 0);
  };
  CudaLlamaTarget synthetic = CudaLlamaTarget::synthetic(small_shape(), 3);
  compare(synthetic, {}, small_shape(), 3);
  if (const auto path = testing::data_file("models/stories260K.bin")) {
    CudaLlamaTarget checkpoint = CudaLlamaTarget::load(*path);
    compare(checkpoint, *path, small_shape(), 0);
  }
}

TEST_CASE("the per-node and the tiled attention kernels give the same bits on the GPU") {
  constexpr int sizes[] = {1, 3, 17, 64, 200};
  const auto make = [](DeviceLlamaOptions::Attention kind) {  // head size 32, 4 heads a KV head, bf16
    return CudaLlamaTarget::synthetic(small_shape(), 3, {},
                                      {.max_positions = 0, .max_tree_nodes = 256, .max_rows = 0,
                                       .tensor_cores = false, .attention = kind});
  };
  attention_kernels_agree(make, 300, sizes);
  attention_kernels_agree(make, 0, sizes);
}

TEST_CASE("CUDA graphs (trees padded to their bucket) give the same bits and the same decoding on the GPU") {
  constexpr int sizes[] = {1, 3, 5, 17, 64, 200};
  graphs_agree_with_each_product(  // head size 32, 4 heads a KV head, bf16
      [](const CudaLlamaOptions& options) { return CudaLlamaTarget::synthetic(small_shape(), 3, {}, options); }, 300,
      sizes, random_tokens(20, small_shape().config.vocab_size, 5), 24);
}

TEST_CASE("stories260K in fp32: every node of a tree equals a single-token forward of its path, bit for bit") {
  const auto path = testing::data_file("models/stories260K.bin");
  if (!path) return;
  CudaLlamaTarget target = CudaLlamaTarget::load(*path);
  REQUIRE(target.weight_format() == WeightFormat::fp32);
  bit_exact_sweep(target, random_tokens(37, target.vocab_size(), 1), 11, sweep_sizes);
  bit_exact_sweep(target, random_tokens(200, target.vocab_size(), 2), 12, sweep_sizes);  // > 128 positions a thread
  bit_exact_sweep(target, {}, 13, sweep_sizes);                                          // the root at position 0
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
  bit_exact_sweep(target, random_tokens(300, target.vocab_size(), 3), 21, sweep_sizes);
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
  bit_exact_sweep(target, random_tokens(20, target.vocab_size(), 12), 31, sweep_sizes);
}

namespace {

// MmaProduct on the device: y [n][out] = W x16ᵀ, by <1, 1> (tiles 1) or <8, 2> (tiles 8).
std::vector<float> device_mma_product(const MmaOperands& op, int n, const std::vector<std::uint16_t>& x16, int tiles) {
  const auto bytes = [](const auto& v) { return v.size() * sizeof(v[0]); };
  std::vector<float> y(static_cast<std::size_t>(n) * op.out);
  void *w = nullptr, *x = nullptr, *out = nullptr;
  REQUIRE(cudaMalloc(&w, bytes(op.w)) == cudaSuccess);
  REQUIRE(cudaMalloc(&x, bytes(x16)) == cudaSuccess);
  REQUIRE(cudaMalloc(&out, bytes(y)) == cudaSuccess);
  REQUIRE(cudaMemcpy(w, op.w.data(), bytes(op.w), cudaMemcpyHostToDevice) == cudaSuccess);
  REQUIRE(cudaMemcpy(x, x16.data(), bytes(x16), cudaMemcpyHostToDevice) == cudaSuccess);
  kernels::llama::ProductArgs a;
  a.w = w;
  a.in = op.in;
  a.out = op.out;
  a.n = n;
  a.y = static_cast<float*>(out);
  a.ldy = op.out;
  const auto* x16_device = static_cast<const kernels::llama::bf16*>(x);
  kernels::llama::launch_mma_variant(tiles == 8, a, x16_device, [](const auto& kernel) {
    backend::launch_grid(backend::cuda{}, kernel.shape(), kernel);
  });
  REQUIRE(cudaGetLastError() == cudaSuccess);
  REQUIRE(cudaMemcpy(y.data(), out, bytes(y), cudaMemcpyDeviceToHost) == cudaSuccess);
  cudaFree(w);
  cudaFree(x);
  cudaFree(out);
  return y;
}

}  // namespace

// The tensor core's fragments are those the emulated grid assumes (kernels/grid.hpp): the device's
// product is W x within fp32 rounding (a fragment off by one element errs by a whole term), close
// to the emulation's (other sums inside an MMA), and a token's bits do not depend on the others.
TEST_CASE("the tensor-core product on the device computes W x, as its emulation does, whatever shares its MMAs") {
  for (const int n : {1, 8, 9, 70}) {
    INFO(n << " tokens");
    const MmaOperands op(320, 40, n, static_cast<std::uint32_t>(n));
    const int tiles = n <= kernels::llama::mma_tokens ? 1 : 8;
    const std::vector<float> device = device_mma_product(op, n, op.x16, tiles);
    op.check(device);
    op.check(emulated_mma_product(op.w, op.x16, op.in, op.out, n, tiles, {}, false));
    CHECK(device_mma_product(op, n, op.x16, tiles == 1 ? 8 : 1) == device);  // the other variant: the same bits
    for (const int t : {0, n - 1}) {
      std::vector<std::uint16_t> alone(static_cast<std::size_t>(kernels::llama::mma_tokens) * op.in, 0);
      std::copy_n(op.x16.begin() + static_cast<std::ptrdiff_t>(t) * op.in, op.in, alone.begin());
      const std::vector<float> one = device_mma_product(op, 1, alone, 1);
      CHECK(std::equal(one.begin(), one.end(), device.begin() + static_cast<std::ptrdiff_t>(t) * op.out));
    }
  }
}

TEST_CASE("tensor-core products: every node equals its path's single-token forward, bit for bit") {
  const CudaLlamaOptions tc{.max_positions = 0, .max_tree_nodes = 256, .max_rows = 0, .tensor_cores = true};
  CudaLlamaTarget target = CudaLlamaTarget::synthetic(small_shape(), 5, {}, tc);
  REQUIRE(target.tensor_cores());
  bit_exact_sweep(target, random_tokens(300, target.vocab_size(), 3), 22, sweep_sizes);
  bit_exact_sweep(target, {}, 23, sweep_sizes);
}

TEST_CASE("tensor-core products compute the CUDA-core products' model, within bf16 rounding of the activations") {
  CudaLlamaTarget cuda_cores = CudaLlamaTarget::synthetic(small_shape(), 5);
  CudaLlamaTarget tensor_cores = CudaLlamaTarget::synthetic(
      small_shape(), 5, {}, {.max_positions = 0, .max_tree_nodes = 256, .max_rows = 0, .tensor_cores = true});
  tensor_cores_compute_the_model(cuda_cores, tensor_cores, 100, 50);
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
      speculative_equals_plain(target, tokenizer.encode(text), count);
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
  std::vector<std::vector<token_t>> prompts;
  for (const char* text : {"Once upon a time", "The cat", "Lily and Tom went to the park", "One day", "Sam had a ball",
                           "The sun was"})
    prompts.push_back(tokenizer.encode(text));
  batch_decodes_as_plain(target, single, prompts, 100);
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
  bad_input_is_one_sentence(target);
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
  } catch (const device_memory_error& e) {
    what = e.what();
  }
  std::filesystem::remove(path);
  CHECK_THAT(what, Contains("needs ") && Contains(" GB of device memory") && Contains("but the device has"));
  CHECK(what.find('\n') == std::string::npos);
}
