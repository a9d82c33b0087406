// An independent, plain single-sequence Llama forward (llama2.c's run.c, written out again) for
// checking Llama2cTarget. It shares nothing with the target: it parses the checkpoint itself,
// keeps the weights as stored ([out][in]), and runs one token at a time with dot products.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <vector>

#include <specdec/config.hpp>

namespace specdec::testing {

class PlainLlama {
 public:
  explicit PlainLlama(const std::filesystem::path& path) {
    std::FILE* f = std::fopen(path.string().c_str(), "rb");
    if (!f) throw std::runtime_error("PlainLlama: cannot open " + path.string());
    std::int32_t h[7];
    if (std::fread(h, sizeof h, 1, f) != 1) throw std::runtime_error("PlainLlama: short header");
    dim = h[0], hidden = h[1], layers = h[2], heads = h[3], kv_heads = h[4], seq_len = h[6];
    const bool shared = h[5] > 0;
    vocab = shared ? h[5] : -h[5];
    head_size = dim / heads;
    kv_dim = head_size * kv_heads;
    auto read = [&](std::vector<float>& v, long n) {
      v.resize(static_cast<std::size_t>(n));
      if (std::fread(v.data(), sizeof(float), v.size(), f) != v.size()) throw std::runtime_error("PlainLlama: short file");
    };
    const long L = layers;
    read(embedding, long(vocab) * dim);
    read(rms_att, L * dim);
    read(wq, L * dim * dim);
    read(wk, L * kv_dim * dim);
    read(wv, L * kv_dim * dim);
    read(wo, L * dim * dim);
    read(rms_ffn, L * dim);
    read(w1, L * hidden * dim);
    read(w2, L * dim * hidden);
    read(w3, L * hidden * dim);
    read(rms_final, dim);
    std::vector<float> skipped;
    read(skipped, long(seq_len) * head_size);  // legacy freq_cis_real and freq_cis_imag
    if (shared) wcls = embedding;
    else read(wcls, long(vocab) * dim);
    std::fclose(f);
    key_cache.assign(static_cast<std::size_t>(L * seq_len * kv_dim), 0.0f);
    value_cache = key_cache;
  }

  /// Logits after `token` at position `pos`; positions must be fed 0, 1, 2, ... in order.
  std::vector<float> step(token_t token, int pos) {
    std::vector<float> x(embedding.begin() + long(token) * dim, embedding.begin() + long(token + 1) * dim);
    std::vector<float> xb(dim), xb2(dim), q(dim), hb(hidden), hb2(hidden), att(seq_len);
    for (int l = 0; l < layers; ++l) {
      norm(xb.data(), x.data(), &rms_att[long(l) * dim], dim);
      float* k = &key_cache[(long(l) * seq_len + pos) * kv_dim];
      float* v = &value_cache[(long(l) * seq_len + pos) * kv_dim];
      mul(q.data(), xb.data(), &wq[long(l) * dim * dim], dim, dim);
      mul(k, xb.data(), &wk[long(l) * kv_dim * dim], dim, kv_dim);
      mul(v, xb.data(), &wv[long(l) * kv_dim * dim], dim, kv_dim);
      for (int i = 0; i < dim; i += 2) {
        const int head_dim = i % head_size;
        const float freq = 1.0f / std::pow(10000.0f, head_dim / float(head_size));
        const float val = float(pos) * freq;
        const float fcr = std::cos(val), fci = std::sin(val);
        for (int which = 0; which < (i < kv_dim ? 2 : 1); ++which) {
          float* vec = which == 0 ? q.data() : k;
          const float v0 = vec[i], v1 = vec[i + 1];
          vec[i] = v0 * fcr - v1 * fci;
          vec[i + 1] = v0 * fci + v1 * fcr;
        }
      }
      for (int h = 0; h < heads; ++h) {
        const float* qh = &q[long(h) * head_size];
        const long kv_off = long(h / (heads / kv_heads)) * head_size;
        for (int t = 0; t <= pos; ++t) {
          const float* kt = &key_cache[(long(l) * seq_len + t) * kv_dim + kv_off];
          float score = 0.0f;
          for (int i = 0; i < head_size; ++i) score += qh[i] * kt[i];
          att[t] = score / std::sqrt(float(head_size));
        }
        float max_val = att[0];
        for (int t = 1; t <= pos; ++t) if (att[t] > max_val) max_val = att[t];
        float sum = 0.0f;
        for (int t = 0; t <= pos; ++t) { att[t] = std::exp(att[t] - max_val); sum += att[t]; }
        for (int t = 0; t <= pos; ++t) att[t] /= sum;
        float* out = &xb[long(h) * head_size];
        for (int i = 0; i < head_size; ++i) out[i] = 0.0f;
        for (int t = 0; t <= pos; ++t) {
          const float* vt = &value_cache[(long(l) * seq_len + t) * kv_dim + kv_off];
          for (int i = 0; i < head_size; ++i) out[i] += att[t] * vt[i];
        }
      }
      mul(xb2.data(), xb.data(), &wo[long(l) * dim * dim], dim, dim);
      for (int i = 0; i < dim; ++i) x[i] += xb2[i];
      norm(xb.data(), x.data(), &rms_ffn[long(l) * dim], dim);
      mul(hb.data(), xb.data(), &w1[long(l) * dim * hidden], dim, hidden);
      mul(hb2.data(), xb.data(), &w3[long(l) * dim * hidden], dim, hidden);
      for (int i = 0; i < hidden; ++i) {
        float val = hb[i];
        val *= 1.0f / (1.0f + std::exp(-val));
        hb[i] = val * hb2[i];
      }
      mul(xb.data(), hb.data(), &w2[long(l) * hidden * dim], hidden, dim);
      for (int i = 0; i < dim; ++i) x[i] += xb[i];
    }
    norm(x.data(), x.data(), rms_final.data(), dim);
    std::vector<float> logits(vocab);
    mul(logits.data(), x.data(), wcls.data(), dim, vocab);
    return logits;
  }

  /// Greedy decoding of n tokens after prompt.
  std::vector<token_t> greedy(const std::vector<token_t>& prompt, int n) {
    std::vector<token_t> out;
    std::vector<float> logits;
    int pos = 0;
    for (token_t t : prompt) logits = step(t, pos++);
    for (int i = 0; i < n; ++i) {
      token_t best = 0;
      for (int v = 1; v < vocab; ++v) if (logits[v] > logits[best]) best = v;
      out.push_back(best);
      if (i + 1 < n) logits = step(best, pos++);
    }
    return out;
  }

  int dim, hidden, layers, heads, kv_heads, vocab, seq_len, head_size, kv_dim;

 private:
  // xout[d] = W[d][n] x[n]
  static void mul(float* xout, const float* x, const float* w, int n, int d) {
    for (int i = 0; i < d; ++i) {
      float val = 0.0f;
      for (int j = 0; j < n; ++j) val += w[long(i) * n + j] * x[j];
      xout[i] = val;
    }
  }
  static void norm(float* o, const float* x, const float* weight, int size) {
    float ss = 0.0f;
    for (int j = 0; j < size; ++j) ss += x[j] * x[j];
    ss /= float(size);
    ss += 1e-5f;
    ss = 1.0f / std::sqrt(ss);
    for (int j = 0; j < size; ++j) o[j] = weight[j] * (ss * x[j]);
  }

  std::vector<float> embedding, rms_att, wq, wk, wv, wo, rms_ffn, w1, w2, w3, rms_final, wcls;
  std::vector<float> key_cache, value_cache;
};

}  // namespace specdec::testing
