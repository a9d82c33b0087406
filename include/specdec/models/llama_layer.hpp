// One Llama decoder layer (RMSNorm, RoPE attention over a KV cache plus tree ancestors, SwiGLU
// FFN) over a batch of tokens, on the host: the code Llama2cTarget runs for each of its layers and
// the EAGLE head runs for its one layer, so that both compute bit for bit the same way.
//
// Weights once: each projection is one tiled matrix product over all the batch's tokens
// (host_kernels.hpp), so a weight read from memory serves every token; attention walks the cached
// K/V slots in blocks, outer, with the batch's nodes inner, so a cached row is read once for all
// nodes that share the prefix.
//
// What a token sees: the cache slots [0, c) — c = cached, or cached + i + 1 for token i of a
// chain (prefill) — then, outside a chain, its ancestors' slots and its own (parents from `up`),
// root first. That sequence, and every sum over it, is the one a single-token forward of the
// token's path runs (reduction order: host_kernels.hpp), so a token's result does not depend on
// the batch around it or the thread count. Host-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <vector>

#include <specdec/models/host_kernels.hpp>
#include <specdec/models/thread_pool.hpp>
#include <specdec/models/llama_config.hpp>

namespace specdec::llama {

inline void rmsnorm(float* out, const float* x, const float* weight, int n) {
  float ss = 0.0f;
  for (int j = 0; j < n; ++j) ss += x[j] * x[j];
  ss /= static_cast<float>(n);
  ss += 1e-5f;
  ss = 1.0f / std::sqrt(ss);
  for (int j = 0; j < n; ++j) out[j] = weight[j] * (ss * x[j]);
}

/// RoPE inverse frequencies of a head size, computed once per model.
struct RopeTable {
  std::vector<float> inv_freq;  // [head_size / 2]
  explicit RopeTable(int head_size = 0) : inv_freq(static_cast<std::size_t>(head_size / 2)) {
    for (int p = 0; p < head_size / 2; ++p)
      inv_freq[static_cast<std::size_t>(p)] =
          1.0f / std::pow(10000.0f, static_cast<float>(2 * p) / static_cast<float>(head_size));
  }
  /// cos_sin[2p], cos_sin[2p + 1] = the rotation of pair p at `position`.
  void angles(int position, float* cos_sin) const {
    for (std::size_t p = 0; p < inv_freq.size(); ++p) {
      const float angle = static_cast<float>(position) * inv_freq[p];
      cos_sin[2 * p] = std::cos(angle);
      cos_sin[2 * p + 1] = std::sin(angle);
    }
  }
};

// Rotates pairs (2p, 2p + 1) of every head of `v` (`width` floats) by the token's angles.
inline void rope(float* v, int width, int head_size, const float* cos_sin) {
  for (int i = 0; i < width; i += 2) {
    const int p = (i % head_size) / 2;
    const float c = cos_sin[2 * p], s = cos_sin[2 * p + 1];
    const float v0 = v[i], v1 = v[i + 1];
    v[i] = v0 * c - v1 * s;
    v[i + 1] = v0 * s + v1 * c;
  }
}

/// One layer's KV cache: K transposed, kt[(kv_head * head_size + e) * slots + slot] (a head's
/// keys of consecutive slots are contiguous, the lanes of the score kernel), V by slot,
/// v[slot * v_stride + kv_head * head_size + e], v_stride >= kv_dim.
///
/// In bf16 (bf16_attention(): bf16 weights and a head size AMX takes), kt and v are null and the
/// cache holds bf16 for AMX's operands instead: keys as pairs of dimensions,
/// kp[(kv_head * head_size / 2 + r) * slots + slot] = dimensions 2r (low half) and 2r + 1; values
/// as pairs of slots, vp[((slot / 2) * kv_dim + kv_head * head_size + e) * 2 + slot % 2]
/// (values_of); v_stride = kv_dim, slots a multiple of 32.
struct KvView {
  float* kt = nullptr;
  float* v = nullptr;
  int slots = 0;
  int v_stride = 0;
  std::uint32_t* kp = nullptr;
  std::uint16_t* vp = nullptr;

  /// bf16: where `slot`'s values start; value e (kv_head * head_size + its index) is at [2e].
  std::uint16_t* values_of(int slot) const {
    return vp + static_cast<std::size_t>(slot / 2) * 2 * static_cast<std::size_t>(v_stride) + slot % 2;
  }

  /// A V row stride for kv_dim floats that spreads a head's rows over L1's sets: kv_dim, plus one
  /// 64-byte line when kv_dim is a multiple of 128 floats. (768 floats, 3 KB apart, put a head's 64
  /// rows of a block in 16 of L1's 64 sets, 16 lines each: more than its 12 ways, so every node of
  /// a tree would read them from L2 again; 784 spreads them over all 64.)
  static int padded_v_stride(int kv_dim) { return kv_dim % 128 == 0 ? kv_dim + 16 : kv_dim; }
};

/// The tokens of one layer call: `n` tokens whose residual streams are x[n][dim]. Token i has RoPE
/// angles rope[i * head_size ...] and writes its K/V at slot first_slot + i. With `chain`, token i
/// sees slots [0, cached + i] (first_slot == cached); otherwise slots [0, cached), then its
/// ancestors and itself: up[s - cached] is the parent slot of the token at slot s >= cached, or -1
/// when its parent is the cache; no chain is longer than max_depth.
struct LayerBatch {
  int n = 0;
  int cached = 0;
  int first_slot = 0;
  float* x = nullptr;
  const float* rope = nullptr;
  bool chain = false;
  const int* up = nullptr;
  int max_depth = 1;
};

/// Scratch space of decoder_layer: grows to the largest call, then is reused (no allocation
/// per step). Attention scratch (scores, ancestor lists) is one region per thread.
struct LayerScratch {
  static constexpr int node_block = 16;  // nodes whose scores are held at once
  static constexpr int slot_block = 64;  // cached slots read once for a block of nodes
  std::vector<float> xb, qkv, att, h13, tmp, scores;
  std::vector<float> sums;  // per thread: each head's softmax denominator for node_block nodes
  std::vector<int> extra;   // per thread, per kv head: node_block ancestor lists
  // Per thread, bf16 attention: a head's queries and weights of node_block nodes (bf16), their
  // outputs (fp32), and one node's tile of values (16 slot pairs × 16 values).
  std::vector<std::uint16_t> queries16, weights16, values16;
  std::vector<float> outputs;
  int seq = 0, depth = 0, threads = 0;

  /// Room for a call of `n` tokens in all, whose sequences see and write no slot at or past
  /// `seq_needed` (a tree's scores are laid out by slot) and have no chain longer than
  /// `max_depth`, on `pool`'s threads (null: one).
  void reserve(const LlamaConfig& c, const Matrix& wqkv, const Matrix& w13, int n, int seq_needed, int max_depth,
               const ThreadPool* pool) {
    const int threads_needed = pool ? pool->threads() : 1;
    const std::size_t un = static_cast<std::size_t>(n);
    auto grow = [](auto& v, std::size_t size) {
      if (v.size() < size) v.resize(size);
    };
    grow(xb, un * c.dim);
    grow(qkv, un * wqkv.stride);
    grow(att, un * c.dim);
    grow(h13, un * w13.stride);
    grow(tmp, un * Matrix::padded(c.dim));
    if (seq_needed > seq || max_depth > depth || threads_needed > threads) {
      seq = std::max(seq, (seq_needed + 31) / 32 * 32);  // whole chunks of 32 slots for AMX
      depth = std::max(depth, max_depth);
      threads = std::max(threads, threads_needed);
      const std::size_t t = static_cast<std::size_t>(threads), nodes = node_block, hs = c.head_size();
      grow(scores, t * scores_per_thread(c));
      grow(sums, t * sums_per_thread(c));
      grow(extra, t * extra_per_thread(c));
      if (bf16_attention(wqkv.format, c.head_size())) {
        grow(queries16, t * nodes * hs);
        grow(weights16, t * nodes * static_cast<std::size_t>(seq));
        grow(outputs, t * nodes * hs);
        grow(values16, t * 16 * 32);
      }
    }
  }
  std::size_t scores_per_thread(const LlamaConfig& c) const {
    return static_cast<std::size_t>(c.n_heads) * node_block * seq;
  }
  static std::size_t sums_per_thread(const LlamaConfig& c) {
    return static_cast<std::size_t>(c.n_heads) * node_block;
  }
  std::size_t extra_per_thread(const LlamaConfig& c) const {
    return static_cast<std::size_t>(c.n_kv_heads) * node_block * depth;
  }
};

/// Weights of one decoder layer, packed for the kernels (a llama2.c checkpoint's, an EAGLE head's).
struct LayerWeights {
  std::vector<float> rms_att;  // [dim]
  Matrix wqkv;                 // wq | wk | wv
  Matrix wo;
  std::vector<float> rms_ffn;  // [dim]
  Matrix w13;                  // w1 | w3
  Matrix w2;
};

namespace detail {

// Matrix product over `pool`'s threads, split by 64-column groups (the matrix's tiles); fp32 with
// kernels `k`, bf16 on AMX.
SPECDEC_HOST_MODEL_INLINE void matmul(ThreadPool* pool, const Matrix& m, const float* x, int ldx, int n, float* y,
                                      int ldy, const Kernels& k = kernels());

}  // namespace detail

/// Runs one decoder layer with weights `w` of a model shaped `c` over the tokens of several
/// sequences at once, in place on their rows of x, on `pool`'s threads (null: the caller's): each
/// weight is read once for all of them. sequences[k] writes its K/V into caches[k] (room for
/// first_slot + n slots) and its rows x and rope follow sequences[k - 1]'s in one buffer. A token's
/// result does not depend on the other sequences. `s` must have been reserved for this call
/// (LayerScratch::reserve, all tokens, pool's threads). `k`: the fp32 kernels (isa.hpp).
SPECDEC_HOST_MODEL_INLINE void decoder_layer(const LayerWeights& w, const LlamaConfig& c,
                                             std::span<const LayerBatch> sequences, std::span<const KvView> caches,
                                             LayerScratch& s, ThreadPool* pool, const detail::Kernels& k = kernels());

/// One sequence: decoder_layer over `batch` in place on batch.x, K/V into `kv`.
SPECDEC_HOST_MODEL_INLINE void decoder_layer(const LayerWeights& w, const LlamaConfig& c, const LayerBatch& batch,
                                             const KvView& kv, LayerScratch& s, ThreadPool* pool,
                                             const detail::Kernels& k = kernels());

}  // namespace specdec::llama

// The definitions: compiled here, or once elsewhere (SPECDEC_HOST_MODEL_DEFINED, isa.hpp).
#if SPECDEC_HOST_MODEL_DEFINED
#include <specdec/models/llama_layer_definitions.hpp>
#endif
