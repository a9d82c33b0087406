// The device Llama: a Llama as a BackendTarget whose forward runs on a device, so that
// SpeculativeDecoder verifies and compacts its trees there with the backend step
// (step/backend_step.hpp). It loads llama2.c checkpoints in fp32 (Llama2cModel's loader) or builds a
// synthetic shape (models/synthetic_llama.hpp) in bf16 on the device from a seed, with no file
// and no copy of its weights.
//
// The forward's kernels are grid kernels (kernels/llama_forward.hpp): the same code runs on two
// backends, with the same bits:
//  - backend::cuda: CudaLlamaTarget and CudaLlamaBatchTarget (targets/cuda_llama.hpp);
//  - backend::host: EmulatedLlamaTarget and EmulatedLlamaBatchTarget (testing/emulated_llama.hpp),
//    the kernels on the host's emulated grid: slow (small models only), there so that CI checks
//    the device forward, its batch invariance and lossless decoding on it without a GPU.
// Include one of those two headers, not this one: each brings its backend's launch functions.
//
// One forward per step for a tree of 1 .. max_tree_nodes nodes: every weight matrix, classifier
// included, is multiplied by all nodes in one launch; tree attention reads the cached prefix and
// each node's ancestors (from the tree's mask), in splits of 128 positions, then the splits
// folded (AttentionFold): below 16 rows a block per node, head and split (SplitAttention), from 16
// rows on a block per KV head, split and 16 queries, reading each cached prefix row once per pass
// for them (TiledAttention); node i writes its K/V at cache slot base_position + i; the logits of
// every node stay on the device (rows of vocab_size floats).
// Batch-invariant bit for bit: every output's reduction order is fixed independently of the tree
// (kernels/llama_forward.hpp states the rule), so a node's logits equal a single-token forward of
// its path. Activations and the logits are fp32; bf16 weights are widened exactly and accumulated
// in fp32 (DeviceLlamaOptions::tensor_cores: MMA products of bf16-rounded activations instead; on
// the host the emulated grid's MMA, whose sums are ordered but not the tensor core's). The KV
// cache holds the weights' format: fp32 for a checkpoint, bf16 (each K/V value rounded once, as
// it is stored) for a synthetic shape, which halves its memory and the attention's reads.
//
// DeviceLlamaBatchTarget is the same model as a BackendBatchTarget: one cache per slot, the trees
// of up to 64 requests in one forward (SpeculativeBatch, step/backend_step.hpp).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <initializer_list>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include <specdec/backend.hpp>
#include <specdec/step/backend_step.hpp>  // the step of a BackendTarget and a BackendBatchTarget
#include <specdec/concepts.hpp>
#include <specdec/core/kv_compaction.hpp>
#include <specdec/core/tree.hpp>
#include <specdec/core/tree_view.hpp>
#include <specdec/error.hpp>
#include <specdec/kernels/llama_forward.hpp>
#include <specdec/models/llama2c_model.hpp>
#include <specdec/models/synthetic_llama.hpp>
#include <specdec/models/synthetic_weights.hpp>

namespace specdec {

struct DeviceLlamaOptions {
  /// KV cache positions; 0: the model's seq_len, at most kernels::llama::max_attended.
  int max_positions = 0;
  /// The largest tree one forward takes (and the prefill's chunk), at most
  /// kernels::llama::max_tree_nodes.
  int max_tree_nodes = kernels::llama::max_tree_nodes;
  /// Nodes of all trees in one forward (what the activation buffers hold); 0: max_tree_nodes for
  /// one slot, else slots * max_tree_nodes up to 1024 (and at least max_tree_nodes).
  int max_rows = 0;
  /// Weight products on tensor cores (kernels::llama::MmaProduct: activations rounded to bf16, the
  /// fixed order of kernels/llama_forward.hpp): bf16 weights with dim and hidden_dim multiples of
  /// 32 only, and on CUDA a device of compute capability 8.0 or later. Off: CUDA-core fmaf with
  /// fp32 activations.
  bool tensor_cores = false;
  /// Which attention kernel runs before AttentionFold (kernels/llama_forward.hpp): SplitAttention
  /// (a block per node, head and split of 128 positions) for forwards of few rows and
  /// TiledAttention (a block per KV head, split and 16 queries) from
  /// kernels::llama::tiled_attention_rows rows (automatic), or one of them always. The same bits
  /// whichever runs.
  enum class Attention { automatic, per_node, tiled };
  Attention attention = Attention::automatic;
  /// Launch graphs (backend::launch_graphs: CUDA graphs): a forward of one tree with its logits
  /// pads the tree to a bucket of nodes (the next power of two, at most max_tree_nodes; the
  /// padding rows' work is skipped or thrown away) and replays the bucket's graph, captured at its
  /// first forward: one launch instead of about 9 per layer. The same bits as without. On the host
  /// backend the padded launches run as they are.
  bool graphs = false;
};

/// Where every tensor lives in DeviceLlamaModel's two device buffers: matrices (fp32 or bf16
/// elements, [out][in]) and norm weights (fp32). The one place their offsets are computed.
struct DeviceLlamaLayout {
  LlamaConfig config;
  std::uint64_t embedding = 0, classifier = 0, layers = 0, layer_elements = 0, matrix_elements = 0;
  std::uint64_t wqkv = 0, wo = 0, w13 = 0, w2 = 0;  // within a layer: wq | wk | wv, wo, w1 | w3, w2
  std::uint64_t norm_floats = 0;                     // rms_att [L][dim], rms_ffn [L][dim], rms_final [dim]

  explicit DeviceLlamaLayout(const LlamaConfig& c) : config(c) {
    const std::uint64_t d = c.dim, kv = static_cast<std::uint64_t>(c.kv_dim()), hid = c.hidden_dim,
                        V = c.vocab_size, L = c.n_layers;
    wqkv = 0;
    wo = wqkv + (d + 2 * kv) * d;
    w13 = wo + d * d;
    w2 = w13 + 2 * hid * d;
    layer_elements = w2 + d * hid;
    embedding = 0;
    layers = V * d;
    classifier = c.shared_classifier ? embedding : layers + L * layer_elements;
    matrix_elements = layers + L * layer_elements + (c.shared_classifier ? 0 : V * d);
    norm_floats = (2 * L + 1) * d;
  }

  /// Tensor `kind` of `layer`: its first element and how many it has, in the matrix buffer, or
  /// for a norm in the norm buffer.
  struct Range {
    std::uint64_t first = 0, count = 0;
    bool norm = false;
  };
  Range range(synthetic::tensor kind, int layer) const {
    const LlamaConfig& c = config;
    const std::uint64_t d = c.dim, kv = static_cast<std::uint64_t>(c.kv_dim()), hid = c.hidden_dim,
                        V = c.vocab_size, L = c.n_layers;
    const std::uint64_t at = layers + static_cast<std::uint64_t>(layer) * layer_elements;
    using synthetic::tensor;
    switch (kind) {
      case tensor::embedding: return {embedding, V * d};
      case tensor::classifier: return {classifier, V * d};
      case tensor::wq: return {at + wqkv, d * d};
      case tensor::wk: return {at + wqkv + d * d, kv * d};
      case tensor::wv: return {at + wqkv + d * d + kv * d, kv * d};
      case tensor::wo: return {at + wo, d * d};
      case tensor::w1: return {at + w13, hid * d};
      case tensor::w3: return {at + w13 + hid * d, hid * d};
      case tensor::w2: return {at + w2, d * hid};
      case tensor::rms_att: return {static_cast<std::uint64_t>(layer) * d, d, true};
      case tensor::rms_ffn: return {(L + static_cast<std::uint64_t>(layer)) * d, d, true};
      case tensor::rms_final: return {2 * L * d, d, true};
    }
    return {};
  }
};

/// The model both targets run: weights, the KV caches of `slots` sequences (sequence s of
/// kv_layout() is slot s), the activation buffers, and the forward of several trees at once.
/// DeviceLlamaTarget is it with one slot, DeviceLlamaBatchTarget with many.
template <class Backend>
class DeviceLlamaModel {
 public:
  /// Whether the kernels run on a CUDA device (else on the host's emulated grid).
  static constexpr bool on_cuda = std::is_same_v<Backend, backend::cuda>;

  /// A llama2.c checkpoint in fp32. Throws specdec::error (one sentence, starting with `who`) for
  /// a bad file, a shape the kernels do not take, no usable device, or a model that does not fit
  /// the device's free memory (said from the header, before any weight is read:
  /// specdec::device_memory_error).
  static DeviceLlamaModel load(const std::filesystem::path& checkpoint, Backend tag, DeviceLlamaOptions options,
                             int slots, const char* who) {
    const LlamaConfig config = Llama2cModel::read_config(checkpoint);
    DeviceLlamaModel model(config, 10000.0f, WeightFormat::fp32, tag, options, slots, who,
                         "llama2.c checkpoint '" + checkpoint.string() + "'");
    model.upload(Llama2cModel::load(checkpoint));
    return model;
  }

  /// `shape` in bf16 with the synthetic weights of `seed`, generated on the device.
  static DeviceLlamaModel synthetic(const SyntheticShape& shape, std::uint64_t seed, Backend tag,
                                  DeviceLlamaOptions options, int slots, const char* who) {
    DeviceLlamaModel model(shape.config, shape.rope_theta, WeightFormat::bf16, tag, options, slots, who,
                         std::string("synthetic ") + shape.name);
    model.fill_synthetic(seed);
    return model;
  }

  DeviceLlamaModel(DeviceLlamaModel&&) noexcept = default;
  DeviceLlamaModel& operator=(DeviceLlamaModel&&) noexcept = default;

  Backend backend() const { return tag_; }
  int vocab_size() const { return layout_.config.vocab_size; }
  const LlamaConfig& config() const { return layout_.config; }
  WeightFormat weight_format() const { return format_; }
  int slots() const { return slots_; }
  int max_positions() const { return max_positions_; }
  int max_tree_nodes() const { return max_tree_; }
  int max_rows() const { return max_rows_; }
  bool tensor_cores() const { return tensor_cores_; }
  bool graphs() const { return graphs_on_; }
  core::KvCacheView kv_cache() { return {kv_layout(), k_cache_.data(), v_cache_.data()}; }
  /// Device memory held, in bytes (weights, norms, KV caches, buffers).
  std::uint64_t device_bytes() const { return device_bytes_; }

  /// Slot `slot`'s cache holds exactly `tokens` afterwards (their K/V at positions 0 .. size - 1),
  /// run as chains of max_tree_nodes; waits for the device.
  void prefill(int slot, std::span<const token_t> tokens) {
    check_slot(slot, "prefill");
    if (static_cast<long long>(tokens.size()) > max_positions_)
      throw error(who_ + "::prefill: " + std::to_string(tokens.size()) + " tokens do not fit the cache's " +
                  std::to_string(max_positions_) + " positions");
    for (token_t t : tokens)
      if (t < 0 || t >= vocab_size())
        throw error(who_ + "::prefill: token " + std::to_string(t) + " is outside the vocabulary [0, " +
                    std::to_string(vocab_size()) + ")");
    const int total = static_cast<int>(tokens.size());
    for (int first = 0; first < total; first += max_tree_) {
      const int n = std::min(max_tree_, total - first), words = core::mask_words(n);
      std::vector<int> depth(static_cast<std::size_t>(n));
      std::vector<std::uint32_t> mask(static_cast<std::size_t>(n) * words, 0u);
      for (int i = 0; i < n; ++i) {
        depth[static_cast<std::size_t>(i)] = i;
        for (int j = 0; j <= i; ++j) mask[static_cast<std::size_t>(i) * words + j / 32] |= 1u << (j % 32);
      }
      auto* chain_tokens = reinterpret_cast<token_t*>(chain_.data());
      auto* chain_depth = chain_tokens + max_tree_;
      auto* chain_mask = reinterpret_cast<std::uint32_t*>(chain_depth + max_tree_);
      check(backend::copy(tag_, chain_tokens, tokens.data() + first, sizeof(token_t) * n), "prefill");
      check(backend::copy(tag_, chain_depth, depth.data(), sizeof(int) * n), "prefill");
      check(backend::copy(tag_, chain_mask, mask.data(), sizeof(std::uint32_t) * mask.size()), "prefill");
      kernels::llama::ForwardTrees chain;
      chain.count = 1;
      chain.rows = n;
      chain.tree[0] = {chain_tokens, chain_depth, chain_mask, words, first, 0, sequence_offset(slot)};
      run(chain, first + n, false);
      // The host arrays above are reused by the next chunk: wait for this one.
      check(backend::synchronize(tag_), "prefill");
    }
  }

  /// Runs trees[b] (arrays in device memory) on top of slot slots[b]'s cache: its node i writes
  /// K/V at that slot's position base_position + i; its logits are rows (the sizes of trees
  /// [0, b) summed) + i of the result. Enqueued on the stream, not waited for.
  LogitsRows forward(std::span<const TreeView> trees, std::span<const int> slots) {
    const std::string where = who_ + "::forward: ";
    if (trees.empty() || trees.size() > static_cast<std::size_t>(kernels::llama::max_forward_trees) ||
        slots.size() != trees.size())
      throw error(where + std::to_string(trees.size()) + " trees (with " + std::to_string(slots.size()) +
                  " slots) is outside [1, " + std::to_string(kernels::llama::max_forward_trees) + "]");
    kernels::llama::ForwardTrees forward;
    forward.count = static_cast<int>(trees.size());
    int rows = 0, attended = 0;
    for (std::size_t b = 0; b < trees.size(); ++b) {
      const TreeView& tree = trees[b];
      const int slot = slots[b];
      check_slot(slot, "forward");
      for (std::size_t other = 0; other < b; ++other)
        if (slots[other] == slot)
          throw error(where + "slot " + std::to_string(slot) + " has two trees in one forward");
      if (tree.size < 1 || tree.size > max_tree_)
        throw error(where + "a tree of " + std::to_string(tree.size) + " nodes is outside [1, max_tree_nodes = " +
                    std::to_string(max_tree_) + "]");
      if (tree.base_position < 0 || tree.base_position > max_positions_ - tree.size)
        throw error(where + "a tree of " + std::to_string(tree.size) + " nodes at position " +
                    std::to_string(tree.base_position) + " does not fit the cache's " + std::to_string(max_positions_) +
                    " positions (" + std::to_string(std::max(0, max_positions_ - tree.base_position)) + " free)");
      if (tree.words_per_row < core::mask_words(tree.size))
        throw error(where + "the tree's mask has " + std::to_string(tree.words_per_row) + " words per row, a tree of " +
                    std::to_string(tree.size) + " nodes needs " + std::to_string(core::mask_words(tree.size)));
      if (rows > max_rows_ - tree.size)
        throw error(where + "the trees have more than max_rows = " + std::to_string(max_rows_) + " nodes in all");
      forward.tree[b] = {tree.token,    tree.depth, tree.mask, tree.words_per_row, tree.base_position, rows,
                         sequence_offset(slot)};
      rows += tree.size;
      attended = std::max(attended, tree.base_position + tree.size);
    }
    forward.rows = rows;
    run(forward, attended, true);
    return {logits(), vocab_size()};
  }

  /// Elements [first, first + count) of tensor `kind` of `layer`, as the forward reads them
  /// (bf16 widened to fp32), copied to the host (waits for the device). For tests.
  std::vector<float> weights(synthetic::tensor kind, int layer, std::uint64_t first, std::size_t count) const {
    const DeviceLlamaLayout::Range r = layout_.range(kind, layer);
    if (layer < 0 || layer >= layout_.config.n_layers || first > r.count || count > r.count - first)
      throw error(who_ + "::weights: elements [" + std::to_string(first) + ", " +
                  std::to_string(first + count) + ") of layer " + std::to_string(layer) + " are outside the tensor's " +
                  std::to_string(r.count));
    std::vector<float> out(count);
    if (r.norm || format_ == WeightFormat::fp32) {
      const unsigned char* from = r.norm ? norms_.data() : weights_.data();
      check(backend::copy(tag_, out.data(), from + (r.first + first) * sizeof(float), count * sizeof(float)),
            "weights");
    } else {
      std::vector<std::uint16_t> raw(count);
      check(backend::copy(tag_, raw.data(), weights_.data() + (r.first + first) * 2, count * 2), "weights");
      check(backend::synchronize(tag_), "weights");
      for (std::size_t i = 0; i < count; ++i) out[i] = synthetic::bf16_value(raw[i]);
    }
    check(backend::synchronize(tag_), "weights");
    return out;
  }

 private:
  DeviceLlamaModel(const LlamaConfig& config, float rope_theta, WeightFormat format, Backend tag,
                 DeviceLlamaOptions options, int slots, const char* who, const std::string& name)
      : tag_(tag), launch_on_(tag), layout_(config), format_(format), who_(who), slots_(slots) {
    const LlamaConfig& c = config;
    tensor_cores_ = options.tensor_cores;
    attention_ = options.attention;
    graphs_on_ = options.graphs;
    max_positions_ = options.max_positions > 0 ? options.max_positions : std::min(c.seq_len, kernels::llama::max_attended);
    max_tree_ = options.max_tree_nodes;
    max_rows_ = options.max_rows > 0 ? options.max_rows
                : slots_ == 1   ? max_tree_
                                : std::max(max_tree_, std::min(slots_ * max_tree_, 1024));
    refuse_shape(name, options);
    if (const backend::status s = backend::select_device(tag_); s != backend::status::ok)
      throw error(who_ + ": no usable CUDA device (" + backend::describe(tag_, s) + ")");
    if (tensor_cores_) {
      std::string device;
      if (const backend::status s = backend::bf16_mma_support(tag_, device); s != backend::status::ok)
        throw error(who_ + ": cannot read the device's compute capability (" + backend::describe(tag_, s) + ")");
      if (!device.empty())
        throw error(who_ + ": " + name + ": tensor_cores needs bf16 MMA (compute capability 8.0 or later), which " +
                    device + " lacks");
    }
    refuse_unless_it_fits(name);

    weights_ = allocate_device(layout_.matrix_elements * element_bytes());
    if (tensor_cores_) x16_ = allocate_device(x16_elements() * 2);
    norms_ = allocate_device(layout_.norm_floats * sizeof(float));
    const core::KvCacheLayout kv = kv_layout();
    k_cache_ = allocate_device(static_cast<std::uint64_t>(kv.sequence_stride) * static_cast<std::uint64_t>(slots_));
    v_cache_ = allocate_device(static_cast<std::uint64_t>(kv.sequence_stride) * static_cast<std::uint64_t>(slots_));
    const std::uint64_t T = static_cast<std::uint64_t>(max_tree_);
    activations_ = allocate_device(static_cast<std::uint64_t>(max_rows_) * activation_floats() * sizeof(float));
    split_partials_ = allocate_device(split_partial_bytes());
    // A bucket's padding rows compute on whatever their activations hold: zeros, never memory
    // nothing wrote.
    if (graphs_on_)
      check(clear(tag_, activations_.data(), static_cast<std::size_t>(max_rows_) * activation_floats() * sizeof(float)),
            "clearing");
    trees_ = allocate_device(sizeof(kernels::llama::ForwardTrees));
    chain_ = allocate_device(T * (sizeof(token_t) + sizeof(int)) + T * core::mask_words(max_tree_) * sizeof(std::uint32_t));

    // RoPE: (cos, sin) of every position and pair, as the host's RopeTable computes them.
    const int half = c.head_size() / 2;
    std::vector<float> angles(static_cast<std::size_t>(max_positions_) * half * 2);
    for (int p = 0; p < half; ++p) {
      const float inv_freq = 1.0f / std::pow(rope_theta, static_cast<float>(2 * p) / static_cast<float>(c.head_size()));
      for (int pos = 0; pos < max_positions_; ++pos) {
        const float angle = static_cast<float>(pos) * inv_freq;
        angles[(static_cast<std::size_t>(pos) * half + p) * 2] = std::cos(angle);
        angles[(static_cast<std::size_t>(pos) * half + p) * 2 + 1] = std::sin(angle);
      }
    }
    rope_ = allocate_device(angles.size() * sizeof(float));
    check(backend::copy(tag_, rope_.data(), angles.data(), angles.size() * sizeof(float)), "the RoPE table's copy");
    check(backend::synchronize(tag_), "the RoPE table's copy");
  }

  // Shapes the kernels cannot run, and options out of range: one sentence each.
  void refuse_shape(const std::string& name, const DeviceLlamaOptions& options) const {
    const LlamaConfig& c = layout_.config;
    const int vector = format_ == WeightFormat::bf16 ? kernels::llama::product_vector<kernels::llama::bf16>
                                                     : kernels::llama::product_vector<float>;
    std::string why = c.layer_problem();
    if (why.empty() && (c.dim % vector != 0 || c.hidden_dim % vector != 0))
      why = "dim " + std::to_string(c.dim) + " and hidden_dim " + std::to_string(c.hidden_dim) +
            " must be multiples of " + std::to_string(vector) + " (16-byte rows of " + weight_format_name(format_) +
            " weights)";
    if (why.empty() && !kernels::llama::attention_head_size_ok(c.head_size()))
      why = "head size " + std::to_string(c.head_size()) + " must be a multiple of 4 that divides " +
            std::to_string(kernels::llama::attention_threads);
    if (why.empty() && (max_positions_ < 1 || max_positions_ > kernels::llama::max_attended))
      why = "max_positions " + std::to_string(options.max_positions) + " (or the model's seq_len " +
            std::to_string(c.seq_len) + ") must be in [1, " + std::to_string(kernels::llama::max_attended) + "]";
    if (why.empty() && (max_tree_ < 1 || max_tree_ > kernels::llama::max_tree_nodes))
      why = "max_tree_nodes " + std::to_string(max_tree_) + " must be in [1, " +
            std::to_string(kernels::llama::max_tree_nodes) + "]";
    if (why.empty() && tensor_cores_ &&
        (format_ != WeightFormat::bf16 || c.dim % kernels::llama::mma_k_block != 0 ||
         c.hidden_dim % kernels::llama::mma_k_block != 0))
      why = "tensor_cores needs bf16 weights (a synthetic shape) with dim and hidden_dim multiples of 32, not " +
            std::string(weight_format_name(format_)) + " with dim " + std::to_string(c.dim) + " and hidden_dim " +
            std::to_string(c.hidden_dim);
    if (why.empty() && (slots_ < 1 || slots_ > 32767))
      why = "slots " + std::to_string(slots_) + " must be in [1, 32767]";
    if (why.empty() && (max_rows_ < max_tree_ || max_rows_ > 65535))
      why = "max_rows " + std::to_string(max_rows_) + " must be in [max_tree_nodes = " + std::to_string(max_tree_) +
            ", 65535]";
    // TiledAttention's tiles are its launch's gridDim.y (at most 65535): every row's queries, one a
    // query head of its KV head's group, in tiles of attention_queries (attention_tiles, here in 64
    // bits: rows x group may pass 2^31), and at most one partial tile a tree (a slot's).
    if (why.empty()) {
      const long long queries = static_cast<long long>(max_rows_) * query_group();
      const long long tiles = (queries + kernels::llama::attention_queries - 1) / kernels::llama::attention_queries + slots_;
      if (tiles > 65535)
        why = "max_rows " + std::to_string(max_rows_) + " with " + std::to_string(query_group()) +
              " query heads a KV head makes up to " + std::to_string(tiles) +
              " attention tiles, more than a launch's 65535; fewer rows or slots";
    }
    if (!why.empty()) throw error(who_ + ": " + name + ": " + why);
  }

  void refuse_unless_it_fits(const std::string& name) {
    const std::uint64_t weights = layout_.matrix_elements * element_bytes() + layout_.norm_floats * sizeof(float);
    const std::uint64_t cache =
        2 * static_cast<std::uint64_t>(kv_layout().sequence_stride) * static_cast<std::uint64_t>(slots_);
    const std::uint64_t T = static_cast<std::uint64_t>(max_tree_);
    const std::uint64_t buffers = static_cast<std::uint64_t>(max_rows_) * activation_floats() * sizeof(float) +
                                  split_partial_bytes() +
                                  static_cast<std::uint64_t>(max_positions_) * layout_.config.head_size() * sizeof(float) +
                                  T * (8 + core::mask_words(max_tree_) * 4) + (tensor_cores_ ? x16_elements() * 2 : 0);
    device_bytes_ = weights + cache + buffers;
    std::uint64_t free = 0;
    if (const backend::status s = backend::free_memory(tag_, free); s != backend::status::ok)
      throw error(who_ + ": cannot read the device's free memory (" + backend::describe(tag_, s) + ")");
    if (device_bytes_ > free) {
      const std::string format = weight_format_name(format_);
      throw device_memory_error(who_ + ": " + name + " needs " + memory_text(device_bytes_) +
                                " of device memory (weights " + memory_text(weights) + " in " + format + ", KV cache " +
                                memory_text(cache) + " in " + format + ", buffers " + memory_text(buffers) +
                                ") but the device has " + memory_text(free) + " free");
    }
  }

  /// "13.48 GB", "37.1 MB", "12.3 kB", "512 bytes" (decimal units).
  static std::string memory_text(std::uint64_t bytes) {
    const double b = static_cast<double>(bytes);
    char text[32];
    if (b >= 1e9) std::snprintf(text, sizeof text, "%.2f GB", b / 1e9);
    else if (b >= 1e6) std::snprintf(text, sizeof text, "%.1f MB", b / 1e6);
    else if (b >= 1e3) std::snprintf(text, sizeof text, "%.1f kB", b / 1e3);
    else std::snprintf(text, sizeof text, "%llu bytes", static_cast<unsigned long long>(bytes));
    return text;
  }

  // Query heads a KV head serves (each attention tile's queries: heads of one group).
  int query_group() const { return layout_.config.n_heads / layout_.config.n_kv_heads; }

  // Bytes of a weight matrix's element, and of a K/V cache's: the caches hold the weights' format
  // (fp32, or bf16: half the bytes the attention reads).
  int element_bytes() const { return format_ == WeightFormat::bf16 ? 2 : 4; }
  core::KvCacheLayout kv_layout() const {
    const LlamaConfig& c = layout_.config;
    return core::kv_layout(c.n_layers, max_positions_, c.n_kv_heads, c.head_size(), element_bytes());
  }
  /// Cache elements from the cache's start to slot `slot`'s sequence.
  long long sequence_offset(int slot) const { return slot * (kv_layout().sequence_stride / element_bytes()); }
  void check_slot(int slot, const char* what) const {
    if (slot < 0 || slot >= slots_)
      throw error(who_ + "::" + what + ": slot " + std::to_string(slot) + " is outside [0, " + std::to_string(slots_) +
                  ")");
  }

  // The tensor-core products' bf16 activations: every row, the widest input.
  std::uint64_t x16_elements() const {
    return static_cast<std::uint64_t>(max_rows_) *
           static_cast<std::uint64_t>(std::max(layout_.config.dim, layout_.config.hidden_dim));
  }
  // Where the kernel before a tensor-core product writes its output in bf16 too (none without).
  kernels::llama::bf16* x16() const {
    return tensor_cores_ ? reinterpret_cast<kernels::llama::bf16*>(x16_.data()) : nullptr;
  }

  // The attention's split partials (kernels/llama_forward.hpp): every row, head and split of
  // max_positions.
  int split_stride() const { return kernels::llama::attention_splits(max_positions_); }
  std::uint64_t split_partial_bytes() const {
    const LlamaConfig& c = layout_.config;
    return static_cast<std::uint64_t>(max_rows_) * static_cast<std::uint64_t>(c.n_heads) *
           static_cast<std::uint64_t>(split_stride()) *
           static_cast<std::uint64_t>(kernels::llama::split_partial_floats(c.head_size())) * sizeof(float);
  }

  // Per token: x, xb, att [dim]; qkv [dim + 2 kv_dim]; h13 [2 hidden]; hb [hidden]; logits [vocab].
  std::uint64_t activation_floats() const {
    const LlamaConfig& c = layout_.config;
    return 3ull * c.dim + (c.dim + 2ull * c.kv_dim()) + 3ull * c.hidden_dim + static_cast<std::uint64_t>(c.vocab_size);
  }
  float* activation(int which) const {
    const LlamaConfig& c = layout_.config;
    const std::uint64_t T = static_cast<std::uint64_t>(max_rows_);
    const std::uint64_t sizes[] = {static_cast<std::uint64_t>(c.dim), static_cast<std::uint64_t>(c.dim),
                                   static_cast<std::uint64_t>(c.dim), c.dim + 2ull * c.kv_dim(),
                                   2ull * c.hidden_dim, static_cast<std::uint64_t>(c.hidden_dim)};
    std::uint64_t at = 0;
    for (int i = 0; i < which; ++i) at += T * sizes[i];
    return reinterpret_cast<float*>(activations_.data()) + at;
  }
  float* x() const { return activation(0); }
  float* xb() const { return activation(1); }
  float* att() const { return activation(2); }
  float* qkv() const { return activation(3); }
  float* h13() const { return activation(4); }
  float* hb() const { return activation(5); }
  float* logits() const { return activation(6); }

  backend::buffer<Backend> allocate_device(std::uint64_t bytes) const {
    backend::buffer<Backend> b(tag_, backend::memory::backend);
    b.grow(static_cast<std::size_t>(bytes));
    return b;
  }

  void check(backend::status s, const char* what) const {
    if (s != backend::status::ok)
      throw error(who_ + ": " + what + " failed: " + backend::describe(tag_, s));
  }
  void check_launch(const char* what) const { check(backend::launch_status(tag_), what); }
  template <class Kernel>
  void launch(const Kernel& kernel) const {
    backend::launch_grid(launch_on_, kernel.shape(), kernel);
  }

  // ---- weights ----

  void fill_synthetic(std::uint64_t seed) {
    using synthetic::tensor;
    const LlamaConfig& c = layout_.config;
    auto fill = [&](tensor kind, int layer) {
      const DeviceLlamaLayout::Range r = layout_.range(kind, layer);
      if (r.norm)
        launch(kernels::llama::FillSynthetic<float>{reinterpret_cast<float*>(norms_.data()) + r.first, r.count, seed,
                                                    kind, layer});
      else
        launch(kernels::llama::FillSynthetic<kernels::llama::bf16>{
            reinterpret_cast<kernels::llama::bf16*>(weights_.data()) + r.first, r.count, seed, kind, layer});
      check_launch("filling the synthetic weights");
    };
    fill(tensor::embedding, 0);
    for (int l = 0; l < c.n_layers; ++l)
      for (tensor kind : {tensor::rms_att, tensor::wq, tensor::wk, tensor::wv, tensor::wo, tensor::rms_ffn, tensor::w1,
                          tensor::w2, tensor::w3})
        fill(kind, l);
    fill(tensor::rms_final, 0);
    if (!c.shared_classifier) fill(tensor::classifier, 0);
    check(backend::synchronize(tag_), "filling the synthetic weights");
  }

  // The fp32 weights of a loaded checkpoint, unpacked from the host model's matrices.
  void upload(const Llama2cModel& m) {
    const LlamaConfig& c = layout_.config;
    auto* w = reinterpret_cast<float*>(weights_.data());
    auto* norms = reinterpret_cast<float*>(norms_.data());
    std::vector<float> rows;
    // A packed matrix holds its parts side by side, each padded to Matrix::align columns; here
    // they are consecutive rows.
    auto put_matrix = [&](const llama::Matrix& mat, std::initializer_list<int> parts, std::uint64_t at) {
      int rows_out = 0;
      for (int out : parts) rows_out += out;
      rows.resize(static_cast<std::size_t>(rows_out) * static_cast<std::size_t>(mat.in));
      int row = 0, column = 0;
      for (int out : parts) {
        for (int r = 0; r < out; ++r, ++row)
          for (int k = 0; k < mat.in; ++k)
            rows[static_cast<std::size_t>(row) * mat.in + k] = mat.data[mat.at(column + r, k)];
        column += llama::Matrix::padded(out);
      }
      check(backend::copy(tag_, w + at, rows.data(), rows.size() * sizeof(float)), "uploading the weights");
      check(backend::synchronize(tag_), "uploading the weights");  // `rows` is refilled next
    };
    auto put_floats = [&](float* to, const std::vector<float>& v) {
      check(backend::copy(tag_, to, v.data(), v.size() * sizeof(float)), "uploading the weights");
      check(backend::synchronize(tag_), "uploading the weights");
    };
    using synthetic::tensor;
    put_floats(w + layout_.embedding, m.embedding());
    for (int l = 0; l < c.n_layers; ++l) {
      const llama::LayerWeights& layer = m.layer(l);
      const std::uint64_t at = layout_.layers + static_cast<std::uint64_t>(l) * layout_.layer_elements;
      put_matrix(layer.wqkv, {c.dim, c.kv_dim(), c.kv_dim()}, at + layout_.wqkv);
      put_matrix(layer.wo, {c.dim}, at + layout_.wo);
      put_matrix(layer.w13, {c.hidden_dim, c.hidden_dim}, at + layout_.w13);
      put_matrix(layer.w2, {c.dim}, at + layout_.w2);
      put_floats(norms + layout_.range(tensor::rms_att, l).first, layer.rms_att);
      put_floats(norms + layout_.range(tensor::rms_ffn, l).first, layer.rms_ffn);
    }
    put_floats(norms + layout_.range(tensor::rms_final, 0).first, m.rms_final());
    if (!c.shared_classifier) put_matrix(m.classifier(), {c.vocab_size}, layout_.classifier);
  }

  // ---- the forward ----

  template <class W>
  void product(std::uint64_t matrix, int in, int out, const float* x, long long ldx, float* y, long long ldy, int n,
               bool accumulate) {
    kernels::llama::ProductArgs a;
    a.w = reinterpret_cast<const W*>(weights_.data()) + matrix;
    a.in = in;
    a.out = out;
    a.n = n;
    a.x = x;
    a.ldx = ldx;
    a.y = y;
    a.ldy = ldy;
    a.accumulate = accumulate;
    // A launch error shows in run_as's check_launch.
    if constexpr (std::is_same_v<W, kernels::llama::bf16>) {
      if (tensor_cores_) {  // x in bf16: x16(), which the kernel that made x wrote too
        a.x = nullptr;
        kernels::llama::launch_mma_product(a, x16(), [&](const auto& kernel) { launch(kernel); });
        return;
      }
    }
    launch(kernels::llama::Product<W>{a});
  }

  /// What a forward's launches cover: `rows` rows (the trees' nodes, or a bucket of at least as
  /// many), rows attending to at most `attended` positions, `tiles` TiledAttention tiles.
  struct Launch {
    int rows, attended, tiles;
  };

  // The forward of `trees` (host copy; none of its rows attends to more than `attended` positions):
  // the trees copied to the device (from pageable memory: the copy is staged at once, so `trees`
  // may change as soon as this returns), then the launches, or their graph.
  void run(const kernels::llama::ForwardTrees& trees, int attended, bool want_logits) {
    check(backend::copy(tag_, trees_.data(), &trees, sizeof trees), "copying the trees");
    const int group = query_group();
    if (graphs_on_ && want_logits && trees.count == 1) {
      int key = 0;  // the bucket's: the next power of two rows, 2^key, or max_tree_ past it
      while ((1 << key) < trees.rows) ++key;
      const int bucket = std::min(1 << key, max_tree_);
      const Launch padded{bucket, max_positions_, kernels::llama::attention_tiles(bucket, group)};
      check(graphs_.run(tag_, key,
                        [&](const Backend& on) {
                          // The launches go where the graph records them (launch_graphs' stream
                          // of its own where tag_'s is CUDA's legacy one), then back to tag_.
                          launch_on_ = on;
                          try {
                            run_launches(padded, want_logits);
                          } catch (...) {
                            launch_on_ = tag_;
                            throw;
                          }
                          launch_on_ = tag_;
                        }),
            "the forward's graph");
      return;
    }
    run_launches({trees.rows, attended, kernels::llama::attention_tiles_of(trees, group)}, want_logits);
  }
  void run_launches(const Launch& cover, bool want_logits) {
    if (format_ == WeightFormat::bf16) run_as<kernels::llama::bf16>(cover, want_logits);
    else run_as<float>(cover, want_logits);
  }

  bool tiled_attention(int rows) const {
    using A = DeviceLlamaOptions::Attention;
    return attention_ == A::tiled || (attention_ == A::automatic && rows >= kernels::llama::tiled_attention_rows);
  }

  template <class W>
  void run_as(const Launch& cover, bool want_logits) {
    namespace k = kernels::llama;
    const int n = cover.rows;
    const auto* trees = reinterpret_cast<const k::ForwardTrees*>(trees_.data());
    const LlamaConfig& c = layout_.config;
    const int d = c.dim, kv = c.kv_dim(), hid = c.hidden_dim, hs = c.head_size(), qkv_width = d + 2 * kv;
    const float* norms = reinterpret_cast<const float*>(norms_.data());
    const core::KvCacheLayout cache = kv_layout();
    using synthetic::tensor;

    launch(k::Embed<W>{reinterpret_cast<const W*>(weights_.data()) + layout_.embedding, trees, n, c.vocab_size, d, x(),
                       d});
    for (int l = 0; l < c.n_layers; ++l) {
      const std::uint64_t at = layout_.layers + static_cast<std::uint64_t>(l) * layout_.layer_elements;
      const k::KvLayer<W> kv_layer{reinterpret_cast<W*>(k_cache_.data() + l * cache.layer_stride),
                                   reinterpret_cast<W*>(v_cache_.data() + l * cache.layer_stride)};
      launch(k::RmsNorm{x(), d, norms + layout_.range(tensor::rms_att, l).first, d, n, xb(), d, x16()});
      product<W>(at + layout_.wqkv, d, qkv_width, xb(), d, qkv(), qkv_width, n, false);
      launch(k::RopeStore<W>{qkv(), qkv_width, trees, reinterpret_cast<const float*>(rope_.data()), n, d, kv, hs,
                             kv_layer});
      k::AttentionArgs a;
      a.qkv = qkv();
      a.ld_qkv = qkv_width;
      a.trees = trees;
      a.heads = c.n_heads;
      a.kv_heads = c.n_kv_heads;
      a.head_size = hs;
      a.scale = 1.0f / std::sqrt(static_cast<float>(hs));
      a.out = att();
      a.out16 = x16();
      auto* partials = reinterpret_cast<float*>(split_partials_.data());
      const int splits = k::attention_splits(cover.attended);
      if (tiled_attention(n)) launch(k::TiledAttention<W>{a, kv_layer, cover.tiles, splits, split_stride(), partials});
      else launch(k::SplitAttention<W>{a, kv_layer, n, splits, split_stride(), partials});
      launch(k::AttentionFold{a, n, split_stride(), partials});
      product<W>(at + layout_.wo, d, d, att(), d, x(), d, n, true);
      launch(k::RmsNorm{x(), d, norms + layout_.range(tensor::rms_ffn, l).first, d, n, xb(), d, x16()});
      product<W>(at + layout_.w13, d, 2 * hid, xb(), d, h13(), 2 * hid, n, false);
      launch(k::SwiGlu{h13(), hid, n, hb(), x16()});
      product<W>(at + layout_.w2, hid, d, hb(), hid, x(), d, n, true);
    }
    if (want_logits) {
      launch(k::RmsNorm{x(), d, norms + layout_.range(tensor::rms_final, 0).first, d, n, xb(), d, x16()});
      product<W>(layout_.classifier, d, c.vocab_size, xb(), d, logits(), c.vocab_size, n, false);
    }
    check_launch("the forward's launches");
  }

  Backend tag_;
  Backend launch_on_;  // where launch() enqueues: tag_, or a graph's capture stream while it records
  DeviceLlamaLayout layout_;
  WeightFormat format_;
  std::string who_;  // the target's name, first in every message
  int slots_ = 1;
  int max_positions_ = 0;
  int max_tree_ = 0;
  int max_rows_ = 0;
  bool tensor_cores_ = false;
  DeviceLlamaOptions::Attention attention_ = DeviceLlamaOptions::Attention::automatic;
  bool graphs_on_ = false;
  std::uint64_t device_bytes_ = 0;
  backend::buffer<Backend> weights_, norms_, k_cache_, v_cache_, activations_, chain_, rope_;
  backend::buffer<Backend> x16_;  // bf16 activations of the tensor-core products
  backend::buffer<Backend> split_partials_;  // the attention's, for AttentionFold
  backend::buffer<Backend> trees_;  // the forward's ForwardTrees
  backend::launch_graphs<Backend> graphs_;
};

/// The model as a BackendTarget: one sequence (slot 0 of DeviceLlamaModel).
template <class Backend>
class DeviceLlamaTarget {
 public:
  using backend_type = Backend;

  /// A llama2.c checkpoint in fp32 (DeviceLlamaModel::load).
  static DeviceLlamaTarget load(const std::filesystem::path& checkpoint, Backend tag = {},
                                DeviceLlamaOptions options = {}) {
    return DeviceLlamaTarget(DeviceLlamaModel<Backend>::load(checkpoint, tag, options, 1, name()));
  }
  /// `shape` in bf16 with the synthetic weights of `seed` (DeviceLlamaModel::synthetic).
  static DeviceLlamaTarget synthetic(const SyntheticShape& shape, std::uint64_t seed, Backend tag = {},
                                     DeviceLlamaOptions options = {}) {
    return DeviceLlamaTarget(DeviceLlamaModel<Backend>::synthetic(shape, seed, tag, options, 1, name()));
  }

  Backend backend() const { return model_.backend(); }
  int vocab_size() const { return model_.vocab_size(); }
  core::KvCacheView kv_cache() { return model_.kv_cache(); }
  /// The cache holds exactly `tokens` afterwards; waits for the device.
  void prefill(std::span<const token_t> tokens) { model_.prefill(0, tokens); }
  /// Runs `tree` (arrays in device memory) on top of the cache: node i's K/V at slot
  /// base_position + i, its logits at row i of the result (enqueued, not waited for).
  LogitsRows forward(const TreeView& tree) {
    static constexpr int slot = 0;
    return model_.forward({&tree, 1}, {&slot, 1});
  }

  const LlamaConfig& config() const { return model_.config(); }
  WeightFormat weight_format() const { return model_.weight_format(); }
  int max_positions() const { return model_.max_positions(); }
  int max_tree_nodes() const { return model_.max_tree_nodes(); }
  bool tensor_cores() const { return model_.tensor_cores(); }
  std::uint64_t device_bytes() const { return model_.device_bytes(); }
  std::vector<float> weights(synthetic::tensor kind, int layer, std::uint64_t first, std::size_t count) const {
    return model_.weights(kind, layer, first, count);
  }
  DeviceLlamaModel<Backend>& model() { return model_; }
  /// "CudaLlamaTarget" or "EmulatedLlamaTarget".
  static const char* name() { return DeviceLlamaModel<Backend>::on_cuda ? "CudaLlamaTarget" : "EmulatedLlamaTarget"; }

 private:
  explicit DeviceLlamaTarget(DeviceLlamaModel<Backend> model) : model_(std::move(model)) {}
  DeviceLlamaModel<Backend> model_;
};

/// The model as a BackendBatchTarget: `slots` sequences, each its own cache (sequence s of the
/// layout), so that SpeculativeBatch runs up to kernels::llama::max_forward_trees requests' trees in
/// one forward: each weight matrix is read once for all of them, and a request's logits do not
/// depend on the others (the batch-invariance rule).
template <class Backend>
class DeviceLlamaBatchTarget {
 public:
  using backend_type = Backend;

  static DeviceLlamaBatchTarget load(const std::filesystem::path& checkpoint, int slots, Backend tag = {},
                                     DeviceLlamaOptions options = {}) {
    return DeviceLlamaBatchTarget(DeviceLlamaModel<Backend>::load(checkpoint, tag, options, slots, name()));
  }
  static DeviceLlamaBatchTarget synthetic(const SyntheticShape& shape, std::uint64_t seed, int slots,
                                          Backend tag = {}, DeviceLlamaOptions options = {}) {
    return DeviceLlamaBatchTarget(DeviceLlamaModel<Backend>::synthetic(shape, seed, tag, options, slots, name()));
  }

  Backend backend() const { return model_.backend(); }
  int vocab_size() const { return model_.vocab_size(); }
  int slots() const { return model_.slots(); }
  core::KvCacheView kv_cache() { return model_.kv_cache(); }
  void prefill(int slot, std::span<const token_t> tokens) { model_.prefill(slot, tokens); }
  /// Nothing to free: the slot's next prefill overwrites its cache.
  void release(int slot) {
    if (slot < 0 || slot >= slots())
      throw error(std::string(name()) + "::release: slot " + std::to_string(slot) + " is outside [0, " +
                  std::to_string(slots()) + ")");
  }
  /// trees[b] on slot slots[b]'s cache; node i of trees[b] at row (sizes of trees [0, b)) + i.
  LogitsRows forward(const TreeBatchView& batch) { return model_.forward(batch.trees, batch.slots); }

  DeviceLlamaModel<Backend>& model() { return model_; }
  /// "CudaLlamaBatchTarget" or "EmulatedLlamaBatchTarget".
  static const char* name() {
    return DeviceLlamaModel<Backend>::on_cuda ? "CudaLlamaBatchTarget" : "EmulatedLlamaBatchTarget";
  }

 private:
  explicit DeviceLlamaBatchTarget(DeviceLlamaModel<Backend> model) : model_(std::move(model)) {}
  DeviceLlamaModel<Backend> model_;
};

}  // namespace specdec
