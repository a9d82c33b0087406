// CudaLlamaTarget's host side, without a GPU (label unit, runs in CI): where its tensors live,
// the index math its kernels share with the host (a node's attended slots, a row's tree), the
// shapes and options it refuses before touching a device (one sentence each), and, on a machine
// without a device, that constructing one says so in a sentence instead of crashing.
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <specdec/targets/cuda_llama.hpp>
#include <specdec/testing/laid_out_tree.hpp>

using namespace specdec;
using Catch::Matchers::Contains;
namespace syn = specdec::synthetic;

namespace {

const syn::tensor kLayerTensors[] = {syn::tensor::rms_att, syn::tensor::wq, syn::tensor::wk, syn::tensor::wv,
                                     syn::tensor::wo,      syn::tensor::rms_ffn, syn::tensor::w1, syn::tensor::w2,
                                     syn::tensor::w3};

bool device_present() {
  int devices = 0;
  return cudaGetDeviceCount(&devices) == cudaSuccess && devices > 0;
}

std::string construction_error(const SyntheticShape& shape, CudaLlamaOptions options = {}) {
  try {
    CudaLlamaTarget::synthetic(shape, 1, {}, options);
  } catch (const error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("the weight layout gives every tensor its own aligned range, and covers both buffers exactly") {
  for (const SyntheticShape& shape : synthetic_shapes()) {
    INFO(shape.name);
    const CudaLlamaLayout layout(shape.config);
    const LlamaConfig& c = shape.config;
    struct Span {
      std::uint64_t first, end;
    };
    std::vector<Span> matrices, norms;
    auto add = [&](syn::tensor kind, int layer) {
      const CudaLlamaLayout::Range r = layout.range(kind, layer);
      (r.norm ? norms : matrices).push_back({r.first, r.first + r.count});
      // Rows start on 16 bytes for bf16 (8 elements) and fp32 (4).
      if (!r.norm) CHECK(r.first % 8 == 0);
    };
    add(syn::tensor::embedding, 0);
    for (int l = 0; l < c.n_layers; ++l)
      for (syn::tensor kind : kLayerTensors) add(kind, l);
    add(syn::tensor::rms_final, 0);
    if (!c.shared_classifier) add(syn::tensor::classifier, 0);
    else CHECK(layout.range(syn::tensor::classifier, 0).first == layout.range(syn::tensor::embedding, 0).first);
    for (auto* spans : {&matrices, &norms}) {
      std::sort(spans->begin(), spans->end(), [](Span a, Span b) { return a.first < b.first; });
      CHECK(spans->front().first == 0);
      for (std::size_t i = 1; i < spans->size(); ++i) CHECK((*spans)[i].first == (*spans)[i - 1].end);
    }
    CHECK(matrices.back().end == layout.matrix_elements);
    CHECK(norms.back().end == layout.norm_floats);
    // The matrices are the checkpoint's, less the legacy RoPE tables and the norms.
    const std::uint64_t rope = 2ull * c.seq_len * (c.head_size() / 2);
    CHECK(layout.matrix_elements + layout.norm_floats + rope == Llama2cModel::weight_floats(c));
    // Fused products: wq | wk | wv and w1 | w3 are consecutive rows of one matrix.
    CHECK(layout.range(syn::tensor::wk, 0).first == layout.range(syn::tensor::wq, 0).first + std::uint64_t(c.dim) * c.dim);
    CHECK(layout.range(syn::tensor::w3, 1).first ==
          layout.range(syn::tensor::w1, 1).first + std::uint64_t(c.hidden_dim) * c.dim);
  }
}

TEST_CASE("a node attends to the prefix, then its path root first: the slots of its single-token forward") {
  namespace k = specdec::kernels::llama;
  std::mt19937 rng(5);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = 1 + static_cast<int>(rng() % k::max_tree_nodes);
    std::vector<node_t> parent(static_cast<std::size_t>(n), -1);
    for (int i = 1; i < n; ++i) {
      const int lo = trial % 3 == 0 ? i - 1 : trial % 3 == 1 ? 0 : std::max(0, i - 5);
      parent[static_cast<std::size_t>(i)] = lo + static_cast<int>(rng() % static_cast<unsigned>(i - lo));
    }
    const testing::LaidOutTree tree(parent, std::vector<token_t>(static_cast<std::size_t>(n), 0));
    const TreeView view = tree.view(/*base_position=*/17);
    const int base = view.base_position;
    for (int i = 0; i < n; ++i) {
      int ancestors[k::max_tree_nodes];
      const int count = k::tree_ancestors(view.mask, view.words_per_row, i, ancestors);
      const int depth = tree.depth[static_cast<std::size_t>(i)];
      REQUIRE(count == depth + 1);
      // Attended position p of the node holds the K/V of the token its single-token path forward
      // has at position p: the prefix, then the path's node at depth p - base.
      for (int p = 0; p < base + count; ++p) {
        const int slot = k::attended_slot(p, base, ancestors);
        if (p < base) {
          CHECK(slot == p);
        } else {
          const int node = slot - base;
          CHECK(tree.depth[static_cast<std::size_t>(node)] == p - base);
          CHECK(view.attends(i, node));
        }
      }
      CHECK(ancestors[count - 1] == i);
    }
  }
}

TEST_CASE("a forward's row belongs to the tree whose rows hold it") {
  namespace k = specdec::kernels::llama;
  std::mt19937 rng(9);
  for (int trial = 0; trial < 100; ++trial) {
    k::ForwardTrees trees;
    trees.count = 1 + static_cast<int>(rng() % k::max_forward_trees);
    std::vector<int> owner;
    for (int b = 0; b < trees.count; ++b) {
      trees.tree[b].first_row = static_cast<int>(owner.size());
      const int size = 1 + static_cast<int>(rng() % 20);
      owner.insert(owner.end(), static_cast<std::size_t>(size), b);
    }
    for (int row = 0; row < static_cast<int>(owner.size()); ++row)
      CHECK(trees.tree_of(row) == owner[static_cast<std::size_t>(row)]);
  }
}

TEST_CASE("the attention launches' shared memory fits a block's 48 KB at the largest cache and head") {
  namespace k = specdec::kernels::llama;
  CHECK(k::SplitAttentionShared::bytes <= 48 * 1024);
  CHECK(k::tiled_attention_shared_bytes(k::attention_threads) <= 48 * 1024);
  // Kernel parameters: the kernels travel by value (the trees by pointer), within the 4 KB every
  // launch may pass.
  CHECK(sizeof(k::SplitAttention<float>) <= 4096);
  CHECK(sizeof(k::AttentionFold) <= 4096);
  CHECK(sizeof(k::TiledAttention<float>) <= 4096);
  CHECK(sizeof(k::RopeStore<float>) <= 4096);
  CHECK(sizeof(k::Embed<k::bf16>) <= 4096);
}

TEST_CASE("shapes and options the kernels do not take are one sentence, before any device is used") {
  SyntheticShape shape{"test", {64, 128, 1, 4, 2, 100, 64, true}, 10000.0f, ""};
  SECTION("a head size that does not divide the attention block") {
    shape.config = {768, 128, 1, 3, 1, 100, 64, true};  // head size 256
    CHECK_THAT(construction_error(shape), Contains("head size 256 must be a multiple of 4 that divides 128"));
  }
  SECTION("rows that are not whole 16-byte vectors of bf16") {
    shape.config.hidden_dim = 172;
    CHECK_THAT(construction_error(shape), Contains("hidden_dim 172 must be multiples of 8"));
  }
  SECTION("a tree limit past the kernels'") {
    const std::string e = construction_error(shape, {.max_positions = 0, .max_tree_nodes = 257});
    CHECK_THAT(e, Contains("max_tree_nodes 257 must be in [1, 256]"));
  }
  SECTION("more positions than an attention block holds scores for") {
    const std::string e = construction_error(shape, {.max_positions = 8193});
    CHECK_THAT(e, Contains("max_positions 8193"));
  }
  SECTION("a batch without slots, or with fewer rows than one tree") {
    auto batch_error = [&](int slots, CudaLlamaOptions options) -> std::string {
      try {
        CudaLlamaBatchTarget::synthetic(shape, 1, slots, {}, options);
      } catch (const error& e) {
        return e.what();
      }
      return "";
    };
    CHECK_THAT(batch_error(0, {}), Contains("CudaLlamaBatchTarget: synthetic test: slots 0 must be in [1, 32767]"));
    CHECK_THAT(batch_error(4, {.max_positions = 0, .max_tree_nodes = 64, .max_rows = 63}),
               Contains("max_rows 63 must be in [max_tree_nodes = 64, 65535]"));
  }
  SECTION("tensor cores without bf16 rows of whole 32-element k-blocks") {
    shape.config.hidden_dim = 136;  // 8 x 17: whole 16-byte rows, not whole k-blocks
    CHECK_THAT(construction_error(shape, {.max_positions = 0, .max_tree_nodes = 256, .max_rows = 0, .tensor_cores = true}),
               Contains("tensor_cores needs bf16 weights (a synthetic shape) with dim and hidden_dim multiples of 32, "
                        "not bf16 with dim 64 and hidden_dim 136"));
  }
  SECTION("a header that cannot shape a layer") {
    shape.config.n_kv_heads = 3;
    CHECK_THAT(construction_error(shape), Contains("n_kv_heads 3 does not divide n_heads 4"));
  }
}

TEST_CASE("without a device, a target is a sentence that says so") {
  if (device_present()) {
    WARN("a CUDA device is present: this case checks the machines without one");
    return;
  }
  const SyntheticShape shape{"test", {64, 128, 1, 4, 2, 100, 64, true}, 10000.0f, ""};
  const std::string e = construction_error(shape);
  CHECK_THAT(e, Contains("CudaLlamaTarget: no usable CUDA device ("));
  CHECK(e.find('\n') == std::string::npos);
}
