// EagleHead: the weights of an EAGLE-1/2 draft head for a llama2.c target, read from a head file,
// and its forward pass.
//
// Architecture: element k of the head's sequence is (token t_k, the target's feature f_{k-1})
// (f_{-1} = 0: the first token is read with a zero feature, so the head sees every token);
//   x = fc [embedding(t_k) ; f_{k-1}] + fc_bias                       (2·dim -> dim)
//   x = one Llama decoder layer (RMSNorm, RoPE attention at position k over the head's own KV
//       cache, SwiGLU FFN)
//   predicted feature = RMSNorm(x, rms_out)   -> the target's classifier -> logits of t_{k+1}
// The predicted feature regresses the target's feature f_k, which is its final-RMSNorm output
// (the classifier's input), hence the head's own output norm. The embedding and the classifier
// are the target's, read from its Llama2cModel, not stored in the head file: EAGLE trains with
// them frozen, and a copy would be most of the file (32000 x 288 floats for stories15M) and could
// drift from the target.
//
// File format, version 1 (little-endian):
//   8 bytes  magic "SPDEAGLE"
//   6 int32  version (1), dim, hidden_dim, n_heads, n_kv_heads, vocab_size
//   fp32     fc [dim][2·dim], fc_bias [dim],
//            rms_att [dim], wq [dim][dim], wk [kv_dim][dim], wv [kv_dim][dim], wo [dim][dim],
//            rms_ffn [dim], w1 [hidden][dim], w2 [dim][hidden], w3 [hidden][dim],
//            rms_out [dim]
// Matrices are [out][in] (torch's nn.Linear.weight), the layer in llama2.c's order; kv_dim =
// dim / n_heads · n_kv_heads. The file's size must be exactly what its header implies.
// dim, n_heads, n_kv_heads and vocab_size must equal the target's (check_fits).
// Host-only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <specdec/config.hpp>
#include <specdec/error.hpp>
#include <specdec/models/llama_layer.hpp>
#include <specdec/models/llama2c_model.hpp>

namespace specdec {

class EagleHead {
 public:
  static constexpr char magic[9] = "SPDEAGLE";
  static constexpr std::int32_t version = 1;
  static constexpr std::uintmax_t header_bytes = 8 + 6 * sizeof(std::int32_t);

  /// The head's K/V cache (llama::KvView's layout) and scratch space (one per sequence being
  /// drafted); grows to the largest call, then is reused.
  struct Cache {
    std::vector<float> kt, v;
    int slots = 0;
    std::vector<float> input, x, fc_out, rope;
    llama::LayerScratch scratch;
    /// Makes room for `needed` slots, keeping the ones written.
    void reserve(int needed, int kv_dim) {
      if (needed <= slots) return;
      const int grown = std::max(needed, slots + slots / 2);
      std::vector<float> kt2(static_cast<std::size_t>(grown) * kv_dim), v2(kt2.size());
      for (int e = 0; e < kv_dim; ++e)
        std::copy_n(kt.data() + static_cast<std::size_t>(e) * slots, slots, kt2.data() + static_cast<std::size_t>(e) * grown);
      std::copy(v.begin(), v.end(), v2.begin());
      kt = std::move(kt2);
      v = std::move(v2);
      slots = grown;
    }
  };

  /// Reads a head file. Throws specdec::error naming the file when it does not exist, is not a
  /// head file, has another version or an implausible header, or its size differs from what the
  /// header implies.
  static EagleHead load(const std::filesystem::path& path) {
    const std::string name = "EAGLE head '" + path.string() + "'";
    try {
      return load(path, name);
    } catch (const std::bad_alloc&) {
      throw error(name + ": cannot allocate memory for its weights");
    }
  }

  /// Reads and checks a head file's header only (its size against the file's included), so that
  /// a caller can refuse a head that does not fit its target (check_fits) before reading the
  /// weights. Throws as load().
  static LlamaConfig read_config(const std::filesystem::path& path) {
    const std::string name = "EAGLE head '" + path.string() + "'";
    std::uintmax_t file_size = 0;
    std::ifstream in = detail::open_weights(path, name, file_size);
    return read_header(in, name, file_size);
  }

 private:
  // Reads the header from `in` and checks it, and the file's size against it.
  static LlamaConfig read_header(std::ifstream& in, const std::string& name, std::uintmax_t file_size) {
    if (file_size < header_bytes)
      throw error(name + ": " + std::to_string(file_size) + " bytes, shorter than the " + std::to_string(header_bytes) +
                  "-byte header (truncated file?)");
    char m[8];
    std::int32_t h[6];
    in.read(m, sizeof m);
    in.read(reinterpret_cast<char*>(h), sizeof h);
    if (std::memcmp(m, magic, 8) != 0) throw error(name + ": not an EAGLE head file (no \"SPDEAGLE\" magic)");
    if (h[0] != version)
      throw error(name + ": format version " + std::to_string(h[0]) + ", this build reads version " +
                  std::to_string(version));
    LlamaConfig c;
    c.dim = h[1];
    c.hidden_dim = h[2];
    c.n_heads = h[3];
    c.n_kv_heads = h[4];
    c.vocab_size = h[5];
    c.n_layers = 1;
    c.seq_len = 1;  // unused: the head's positions are the target's
    check_header(c, name);

    detail::check_weights_size(name, file_size, header_bytes + sizeof(float) * weight_floats(c), describe(c));
    return c;
  }

  static EagleHead load(const std::filesystem::path& path, const std::string& name) {
    std::uintmax_t file_size = 0;
    std::ifstream in = detail::open_weights(path, name, file_size);
    EagleHead head;
    head.config_ = read_header(in, name, file_size);
    const LlamaConfig& c = head.config_;
    const int d = c.dim, kv = c.kv_dim(), hid = c.hidden_dim;
    std::uint64_t at = 0;  // weights read so far
    auto read = [&](std::vector<float>& v, std::size_t n) { detail::read_weights(in, v, n, name, at); };
    std::vector<float> fc, wq, wk, wv, wo, w1, w2, w3;
    llama::LayerWeights& w = head.layer_;
    read(fc, static_cast<std::size_t>(d) * 2 * d);
    read(head.fc_bias_, static_cast<std::size_t>(d));
    read(w.rms_att, static_cast<std::size_t>(d));
    read(wq, static_cast<std::size_t>(d) * d);
    read(wk, static_cast<std::size_t>(kv) * d);
    read(wv, static_cast<std::size_t>(kv) * d);
    read(wo, static_cast<std::size_t>(d) * d);
    read(w.rms_ffn, static_cast<std::size_t>(d));
    read(w1, static_cast<std::size_t>(hid) * d);
    read(w2, static_cast<std::size_t>(d) * hid);
    read(w3, static_cast<std::size_t>(hid) * d);
    read(head.rms_out_, static_cast<std::size_t>(d));
    head.fc_ = llama::Matrix::pack(2 * d, {{fc.data(), d}});
    w.wqkv = llama::Matrix::pack(d, {{wq.data(), d}, {wk.data(), kv}, {wv.data(), kv}});
    w.wo = llama::Matrix::pack(d, {{wo.data(), d}});
    w.w13 = llama::Matrix::pack(d, {{w1.data(), hid}, {w3.data(), hid}});
    w.w2 = llama::Matrix::pack(hid, {{w2.data(), d}});
    head.rope_ = llama::RopeTable(c.head_size());
    return head;
  }

 public:
  /// Floats after the header of a head file with this shape.
  static std::uint64_t weight_floats(const LlamaConfig& c) {
    const std::uint64_t d = c.dim, kv = static_cast<std::uint64_t>(c.kv_dim()), hid = c.hidden_dim;
    return 2 * d * d + d                     // fc, fc_bias
           + d + 2 * d * d + 2 * kv * d + d  // rms_att, wq, wo, wk, wv, rms_ffn
           + 3 * hid * d                     // w1, w2, w3
           + d;                              // rms_out
  }

  /// Throws specdec::error unless the head was trained for a target of this shape (dim, heads,
  /// vocabulary). `what` names the target in the message.
  void check_fits(const LlamaConfig& target, const std::string& what) const { check_fits(config_, target, what); }
  /// check_fits for a head of shape `c` (EagleHead::read_config): before its weights are read.
  static void check_fits(const LlamaConfig& c, const LlamaConfig& target, const std::string& what) {
    auto mismatch = [&](const char* field, int head_value, int target_value) {
      throw error("EAGLE head: its " + std::string(field) + " is " + std::to_string(head_value) + " but " + what +
                  "'s is " + std::to_string(target_value) + " (the head was trained for another model)");
    };
    if (c.dim != target.dim) mismatch("dim", c.dim, target.dim);
    if (c.vocab_size != target.vocab_size) mismatch("vocab_size", c.vocab_size, target.vocab_size);
    if (c.n_heads != target.n_heads) mismatch("n_heads", c.n_heads, target.n_heads);
    if (c.n_kv_heads != target.n_kv_heads) mismatch("n_kv_heads", c.n_kv_heads, target.n_kv_heads);
  }

  /// The head's shape as a one-layer Llama (n_layers 1; seq_len unused).
  const LlamaConfig& config() const { return config_; }

  /// Runs `n` elements on top of `cache`: element i is (tokens[i], features row i: dim floats, or
  /// zeros where `features` is null) at RoPE position positions[i]; it writes its K/V at slot
  /// first_slot + i and attends to slots [0, cached), then to its ancestors and itself: up[s -
  /// cached] is the parent slot of the element at slot s >= cached, or -1 (see llama::LayerBatch;
  /// chains no longer than max_depth). Writes each element's predicted feature to out[i * dim
  /// ...]. `embedding` is the target's, [vocab][dim]. Each weight is read once for all n elements.
  void run(Cache& cache, int cached, int first_slot, int n, const token_t* tokens, const float* features,
           const int* positions, const int* up, int max_depth, const float* embedding, float* out,
           llama::ThreadPool* pool = nullptr) const {
    const int d = config_.dim, hs = config_.head_size(), ld = llama::Matrix::padded(d);
    const std::size_t un = static_cast<std::size_t>(n);
    cache.reserve(first_slot + n, config_.kv_dim());
    auto grow = [](std::vector<float>& v, std::size_t size) {
      if (v.size() < size) v.resize(size);
    };
    grow(cache.x, un * d);
    grow(cache.rope, un * hs);
    grow(cache.input, un * 2 * d);
    grow(cache.fc_out, un * ld);
    for (int i = 0; i < n; ++i) {
      float* in = cache.input.data() + static_cast<std::size_t>(i) * 2 * d;
      std::copy_n(embedding + static_cast<std::size_t>(tokens[i]) * d, d, in);
      if (features) std::copy_n(features + static_cast<std::size_t>(i) * d, d, in + d);
      else std::fill_n(in + d, d, 0.0f);
      rope_.angles(positions[i], cache.rope.data() + static_cast<std::size_t>(i) * hs);
    }
    llama::detail::matmul(pool, fc_, cache.input.data(), 2 * d, n, cache.fc_out.data(), ld);
    for (int i = 0; i < n; ++i) {
      float* x = cache.x.data() + static_cast<std::size_t>(i) * d;
      const float* y = cache.fc_out.data() + static_cast<std::size_t>(i) * ld;
      for (int e = 0; e < d; ++e) x[e] = y[e] + fc_bias_[static_cast<std::size_t>(e)];
    }
    cache.scratch.reserve(config_, layer_.wqkv, layer_.w13, n, first_slot + std::max(n, max_depth), max_depth, pool);
    const llama::LayerBatch batch{n, cached, first_slot, cache.x.data(), cache.rope.data(), false, up, max_depth};
    const llama::KvView kv{cache.kt.data(), cache.v.data(), cache.slots, config_.kv_dim()};
    llama::decoder_layer(layer_, config_, batch, kv, cache.scratch, pool);
    for (int i = 0; i < n; ++i)
      llama::rmsnorm(out + static_cast<std::size_t>(i) * d, cache.x.data() + static_cast<std::size_t>(i) * d,
                     rms_out_.data(), d);
  }

  static std::string describe(const LlamaConfig& c) {
    return "dim " + std::to_string(c.dim) + ", hidden_dim " + std::to_string(c.hidden_dim) + ", n_heads " +
           std::to_string(c.n_heads) + ", n_kv_heads " + std::to_string(c.n_kv_heads) + ", vocab_size " +
           std::to_string(c.vocab_size);
  }

 private:
  static void check_header(const LlamaConfig& c, const std::string& name) {
    std::string why = c.layer_problem();
    if (why.empty() && (c.vocab_size < 1 || c.vocab_size > (1 << 24)))
      why = "vocab_size " + std::to_string(c.vocab_size) + " is not in [1, 16777216]";
    if (!why.empty()) throw error(name + ": bad header: " + why);
  }

  LlamaConfig config_;
  llama::Matrix fc_;  // 2·dim inputs -> dim
  std::vector<float> fc_bias_;
  llama::RopeTable rope_;
  llama::LayerWeights layer_;
  std::vector<float> rms_out_;
};

}  // namespace specdec
