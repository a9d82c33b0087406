// One Llama decoder layer (RMSNorm, RoPE attention over a KV cache plus tree ancestors, SwiGLU
// FFN) over a batch of tokens, on the host: the code Llama2cTarget runs for each of its layers and
// the EAGLE head runs for its one layer, so that both compute bit for bit the same way.
//
// Sums run in the order a single-sequence forward uses (matrix products over the input index,
// attention over slots in order), so a token's result does not depend on the batch around it.
// Host-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <vector>

#include <specdec/models/llama2c_model.hpp>

namespace specdec::llama {

// y[out_n] = W x for W given transposed ([in][out_n]); y[r] sums x[j] * W[r][j] over j = 0, 1, ...
// (the order of a plain dot product), vectorized over r.
inline void matvec(float* __restrict y, const float* __restrict x, const float* __restrict w_t, int in, int out_n) {
  for (int r = 0; r < out_n; ++r) y[r] = 0.0f;
  for (int j = 0; j < in; ++j) {
    const float xj = x[j];
    const float* __restrict row = w_t + static_cast<std::size_t>(j) * out_n;
    for (int r = 0; r < out_n; ++r) y[r] += row[r] * xj;
  }
}

inline void rmsnorm(float* out, const float* x, const float* weight, int n) {
  float ss = 0.0f;
  for (int j = 0; j < n; ++j) ss += x[j] * x[j];
  ss /= static_cast<float>(n);
  ss += 1e-5f;
  ss = 1.0f / std::sqrt(ss);
  for (int j = 0; j < n; ++j) out[j] = weight[j] * (ss * x[j]);
}

/// cos_sin[2p], cos_sin[2p + 1] = the RoPE rotation of pair p of a head at `position`.
inline void rope_angles(int position, int head_size, float* cos_sin) {
  for (int p = 0; p < head_size / 2; ++p) {
    const float freq = 1.0f / std::pow(10000.0f, static_cast<float>(2 * p) / static_cast<float>(head_size));
    const float angle = static_cast<float>(position) * freq;
    cos_sin[2 * p] = std::cos(angle);
    cos_sin[2 * p + 1] = std::sin(angle);
  }
}

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

/// The tokens of one layer call: `n` tokens whose residual streams are x[n][dim]. Token i has RoPE
/// angles rope[i * head_size ...], writes its K/V at slot first_slot + i, and attends to slots
/// [0, cached) and to visible[visible_begin[i] .. visible_begin[i + 1]) (slots past the cache, its
/// ancestors then itself, in order).
struct LayerBatch {
  int n = 0;
  int cached = 0;
  int first_slot = 0;
  float* x = nullptr;
  const float* rope = nullptr;
  const int* visible = nullptr;
  const int* visible_begin = nullptr;
};

/// Scratch space of decoder_layer, reused across calls.
struct LayerScratch {
  std::vector<float> xb, attn, q, hb, hb2, scores;
};

/// Runs one decoder layer with weights `w` of a model shaped `c` over `batch`, in place on
/// batch.x. k_layer/v_layer: this layer's caches, [slot][kv_dim], with room for first_slot + n slots.
inline void decoder_layer(const Llama2cModel::Layer& w, const Llama2cConfig& c, const LayerBatch& batch,
                          float* k_layer, float* v_layer, LayerScratch& s) {
  const int dim = c.dim, kv_dim = c.kv_dim(), hs = c.head_size(), hidden = c.hidden_dim;
  const int n = batch.n, cached = batch.cached;
  const std::size_t un = static_cast<std::size_t>(n);
  s.xb.resize(un * dim);
  s.attn.resize(un * dim);
  s.q.resize(un * dim);
  s.hb.resize(un * hidden);
  s.hb2.resize(un * hidden);
  int most_visible = 0;
  for (int i = 0; i < n; ++i) most_visible = std::max(most_visible, batch.visible_begin[i + 1] - batch.visible_begin[i]);
  s.scores.resize(static_cast<std::size_t>(cached + most_visible));
  const float sqrt_hs = std::sqrt(static_cast<float>(hs));
  // Q, K, V of every token first: a token's attention reads its ancestors' K/V.
  for (int i = 0; i < n; ++i) {
    float* xb = s.xb.data() + static_cast<std::size_t>(i) * dim;
    float* q = s.q.data() + static_cast<std::size_t>(i) * dim;
    float* k = k_layer + static_cast<std::size_t>(batch.first_slot + i) * kv_dim;
    float* v = v_layer + static_cast<std::size_t>(batch.first_slot + i) * kv_dim;
    const float* cs = batch.rope + static_cast<std::size_t>(i) * hs;
    rmsnorm(xb, batch.x + static_cast<std::size_t>(i) * dim, w.rms_att.data(), dim);
    matvec(q, xb, w.wq_t.data(), dim, dim);
    matvec(k, xb, w.wk_t.data(), dim, kv_dim);
    matvec(v, xb, w.wv_t.data(), dim, kv_dim);
    rope(q, dim, hs, cs);
    rope(k, kv_dim, hs, cs);
  }
  for (int i = 0; i < n; ++i) {
    const int* tree_slots = batch.visible + batch.visible_begin[i];
    const int count = cached + batch.visible_begin[i + 1] - batch.visible_begin[i];
    auto slot = [&](int t) { return t < cached ? t : tree_slots[t - cached]; };
    for (int h = 0; h < c.n_heads; ++h) {
      const float* q = s.q.data() + static_cast<std::size_t>(i) * dim + h * hs;
      const int kv_offset = (h / c.kv_group()) * hs;
      float* att = s.scores.data();
      float best = 0.0f;
      for (int t = 0; t < count; ++t) {
        const float* k = k_layer + static_cast<std::size_t>(slot(t)) * kv_dim + kv_offset;
        float score = 0.0f;
        for (int e = 0; e < hs; ++e) score += q[e] * k[e];
        att[t] = score / sqrt_hs;
        if (t == 0 || att[t] > best) best = att[t];
      }
      float sum = 0.0f;
      for (int t = 0; t < count; ++t) {
        att[t] = std::exp(att[t] - best);
        sum += att[t];
      }
      for (int t = 0; t < count; ++t) att[t] /= sum;
      float* out = s.attn.data() + static_cast<std::size_t>(i) * dim + h * hs;
      for (int e = 0; e < hs; ++e) out[e] = 0.0f;
      for (int t = 0; t < count; ++t) {
        const float* v = v_layer + static_cast<std::size_t>(slot(t)) * kv_dim + kv_offset;
        for (int e = 0; e < hs; ++e) out[e] += att[t] * v[e];
      }
    }
  }
  for (int i = 0; i < n; ++i) {
    float* x = batch.x + static_cast<std::size_t>(i) * dim;
    float* xb = s.xb.data() + static_cast<std::size_t>(i) * dim;
    float* hb = s.hb.data() + static_cast<std::size_t>(i) * hidden;
    float* hb2 = s.hb2.data() + static_cast<std::size_t>(i) * hidden;
    matvec(xb, s.attn.data() + static_cast<std::size_t>(i) * dim, w.wo_t.data(), dim, dim);
    for (int e = 0; e < dim; ++e) x[e] += xb[e];
    rmsnorm(xb, x, w.rms_ffn.data(), dim);
    matvec(hb, xb, w.w1_t.data(), dim, hidden);
    matvec(hb2, xb, w.w3_t.data(), dim, hidden);
    for (int e = 0; e < hidden; ++e) hb[e] = hb[e] * (1.0f / (1.0f + std::exp(-hb[e]))) * hb2[e];
    matvec(xb, hb, w.w2_t.data(), hidden, dim);
    for (int e = 0; e < dim; ++e) x[e] += xb[e];
  }
}

}  // namespace specdec::llama
