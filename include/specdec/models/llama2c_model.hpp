// Llama2cModel: the weights of a Llama-architecture model read from a llama2.c checkpoint.
//
// File format (llama2.c's `run.c` "legacy" export, e.g. the tinyllamas stories*.bin):
//   7 int32: dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len
//            (a negative vocab_size means the classifier is not shared with the embedding)
//   fp32:    token_embedding [vocab][dim], rms_att [L][dim], wq [L][dim][dim],
//            wk [L][kv_dim][dim], wv [L][kv_dim][dim], wo [L][dim][dim], rms_ffn [L][dim],
//            w1 [L][hidden][dim], w2 [L][dim][hidden], w3 [L][hidden][dim], rms_final [dim],
//            freq_cis_real, freq_cis_imag [seq_len][head_size / 2] each (legacy, skipped: RoPE
//            is computed), then wcls [vocab][dim] only when the classifier is not shared.
// Host-only.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <new>
#include <string>
#include <system_error>
#include <vector>

#if __has_include(<sys/mman.h>) && __has_include(<fcntl.h>) && __has_include(<unistd.h>)
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>
#define SPECDEC_HAVE_MMAP 1
#ifndef MAP_POPULATE
#define MAP_POPULATE 0
#endif
#else
#define SPECDEC_HAVE_MMAP 0
#endif

#include <specdec/error.hpp>
#include <specdec/io/file_format.hpp>
#include <specdec/models/llama_config.hpp>
#include <specdec/models/llama_layer.hpp>

namespace specdec {

namespace detail {

/// Opens a weights file `path` (called `name` in messages) and sets `size` to its bytes. Throws
/// specdec::error when it does not exist, is not a regular file or cannot be read.
inline std::ifstream open_weights(const std::filesystem::path& path, const std::string& name, std::uintmax_t& size) {
  if (const std::string problem = file_problem(path); !problem.empty()) throw error(name + ": " + problem);
  std::error_code ec;
  size = std::filesystem::file_size(path, ec);
  if (ec) throw error(name + ": cannot read its size: " + ec.message());
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error(name + ": cannot open it");
  return in;
}

/// Throws specdec::error unless a weights file of `size` bytes has the `expected` size its
/// header (described by `header`) implies.
inline void check_weights_size(const std::string& name, std::uintmax_t size, std::uintmax_t expected,
                               const std::string& header) {
  if (size != expected)
    throw error(name + ": " + std::to_string(size) + " bytes, but its header (" + header + ") needs exactly " +
                std::to_string(expected) + " bytes" +
                (size < expected ? " (truncated file?)" : " (trailing data or a different format)"));
}

/// Reads `n` floats of weights from `in` into `v` (resized), as weights [at, at + n) after the
/// header of file `name`, and advances `at`. Throws specdec::error on a failed allocation, a
/// short read, or a weight that is not finite (NaN or +-inf: either decodes garbage).
inline void read_weights(std::ifstream& in, std::vector<float>& v, std::size_t n, const std::string& name,
                         std::uint64_t& at) {
  resize_or_refuse(v, n, name);
  in.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * sizeof(float)));
  if (!in) throw error(name + ": read failed");
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(v[i]))
      throw error(name + ": weight " + std::to_string(at + i) + " (counted from the end of the header) is " +
                  std::to_string(v[i]) + ", not finite");
  at += n;
}

/// The `floats` weights that follow the header of an open weights file (`in`, at the end of its
/// header): the file mapped read-only where the system can map it, else read into a buffer.
class WeightsFile {
 public:
  WeightsFile(const std::filesystem::path& path, std::ifstream& in, std::size_t floats, const std::string& name) {
    const std::size_t header = static_cast<std::size_t>(in.tellg());
#if SPECDEC_HAVE_MMAP
    if (const int fd = ::open(path.c_str(), O_RDONLY); fd >= 0) {
      bytes_ = header + floats * sizeof(float);
      void* p = ::mmap(nullptr, bytes_, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
      ::close(fd);
      if (p != MAP_FAILED) {
        map_ = p;
        weights_ = reinterpret_cast<const float*>(static_cast<const char*>(p) + header);
        return;
      }
    }
#else
    (void)path;
#endif
    buffer_.reset(new float[floats]);
    in.read(reinterpret_cast<char*>(buffer_.get()), static_cast<std::streamsize>(floats * sizeof(float)));
    if (!in) throw error(name + ": read failed");
    weights_ = buffer_.get();
  }
  WeightsFile(const WeightsFile&) = delete;
  WeightsFile& operator=(const WeightsFile&) = delete;
  ~WeightsFile() {
#if SPECDEC_HAVE_MMAP
    if (map_) ::munmap(map_, bytes_);
#endif
  }
  const float* weights() const { return weights_; }

 private:
  void* map_ = nullptr;
  std::size_t bytes_ = 0;
  std::unique_ptr<float[]> buffer_;
  const float* weights_ = nullptr;
};

/// Throws specdec::error unless weights [from, to) of `w` (counted from the end of the header
/// of file `name`) are finite, naming the first that is not.
inline void check_weights_finite(const float* w, std::size_t from, std::size_t to, const std::string& name) {
  constexpr std::size_t block = 4096;
  for (std::size_t b = from; b < to; b += block) {
    const std::size_t e = std::min(to, b + block);
    std::uint32_t bad = 0;  // exponent bits all ones: +-inf or NaN
    for (std::size_t i = b; i < e; ++i) {
      std::uint32_t u;
      std::memcpy(&u, w + i, sizeof u);
      bad |= static_cast<std::uint32_t>((u & 0x7f800000u) == 0x7f800000u);
    }
    if (!bad) continue;
    for (std::size_t i = b; i < e; ++i)
      if (!std::isfinite(w[i]))
        throw error(name + ": weight " + std::to_string(i) + " (counted from the end of the header) is " +
                    std::to_string(w[i]) + ", not finite");
  }
}

}  // namespace detail

/// The weights, laid out for the forward pass. Every projection y = W x with W stored
/// [out][in] in the file is packed transposed (llama::Matrix), so that the matrix product reads
/// contiguous rows while still summing each output in the file's input order; projections of the
/// same input share one matrix (q, k, v; w1, w3) so that one pass over it serves all of them.
class Llama2cModel {
 public:
  using Layer = llama::LayerWeights;

  /// Reads a checkpoint. Throws specdec::error naming the file when it does not exist, cannot be
  /// read, has an implausible header, its size differs from what the header implies, a weight is
  /// not finite, or its weights do not fit in memory.
  /// With WeightFormat::bf16 the matrices are rounded to bf16 for AMX (models/host_kernels.hpp);
  /// a machine or build without AMX is an error that says why.
  static Llama2cModel load(const std::filesystem::path& path, WeightFormat weights = WeightFormat::fp32) {
    const std::string name = "llama2.c checkpoint '" + path.string() + "'";
    if (weights == WeightFormat::bf16 && !llama::bf16_unavailable().empty())
      throw error(name + ": " + llama::bf16_unavailable());
    try {
      return load(path, name, weights);
    } catch (const std::bad_alloc&) {
      throw error(name + ": cannot allocate memory for its weights");
    }
  }

  /// Reads and checks a checkpoint's header only (its size against the file's included), so that
  /// a caller can refuse a model that does not fit before reading its weights. Throws as load().
  static LlamaConfig read_config(const std::filesystem::path& path) {
    const std::string name = "llama2.c checkpoint '" + path.string() + "'";
    std::uintmax_t file_size = 0;
    std::ifstream in = detail::open_weights(path, name, file_size);
    return read_header(in, name, file_size);
  }

 private:
  static Llama2cModel load(const std::filesystem::path& path, const std::string& name, WeightFormat weights) {
    std::uintmax_t file_size = 0;
    std::ifstream in = detail::open_weights(path, name, file_size);
    Llama2cModel m;
    m.config_ = read_header(in, name, file_size);
    m.weights_ = weights;
    const LlamaConfig& c = m.config_;
    const int d = c.dim, kv = c.kv_dim(), hid = c.hidden_dim, L = c.n_layers;
    const std::size_t ud = static_cast<std::size_t>(d), ukv = static_cast<std::size_t>(kv),
                      uhid = static_cast<std::size_t>(hid), uL = static_cast<std::size_t>(L);
    // The whole payload at once (mapped, else read into one buffer), packed from there.
    const std::uint64_t total = weight_floats(c);
    if (total > std::numeric_limits<std::size_t>::max() / sizeof(float)) throw std::bad_alloc();
    const detail::WeightsFile all(path, in, static_cast<std::size_t>(total), name);
    // Offsets (floats after the header) of each tensor, in file order.
    const std::size_t embedding = 0, rms_att = embedding + static_cast<std::size_t>(c.vocab_size) * ud,
                      wq = rms_att + uL * ud, wk = wq + uL * ud * ud, wv = wk + uL * ukv * ud,
                      wo = wv + uL * ukv * ud, rms_ffn = wo + uL * ud * ud, w1 = rms_ffn + uL * ud,
                      w2 = w1 + uL * uhid * ud, w3 = w2 + uL * ud * uhid, rms_final = w3 + uL * uhid * ud,
                      rope = rms_final + ud, rope_floats = 2 * static_cast<std::size_t>(c.seq_len) * (ud / static_cast<std::size_t>(c.n_heads) / 2),
                      wcls = rope + rope_floats;
    // Every weight finite (the legacy RoPE tables, unused, excepted).
    const float* w = all.weights();
    detail::check_weights_finite(w, 0, rope, name);
    detail::check_weights_finite(w, wcls, static_cast<std::size_t>(total), name);
    m.embedding_.assign(w + embedding, w + rms_att);
    m.rms_final_.assign(w + rms_final, w + rope);
    m.layers_.resize(uL);
    for (std::size_t i = 0; i < uL; ++i) {
      Layer& l = m.layers_[i];
      l.rms_att.assign(w + rms_att + i * ud, w + rms_att + (i + 1) * ud);
      l.rms_ffn.assign(w + rms_ffn + i * ud, w + rms_ffn + (i + 1) * ud);
      l.wqkv = llama::Matrix::pack(d, {{w + wq + i * ud * ud, d}, {w + wk + i * ukv * ud, kv}, {w + wv + i * ukv * ud, kv}},
                                    weights);
      l.wo = llama::Matrix::pack(d, {{w + wo + i * ud * ud, d}}, weights);
      l.w13 = llama::Matrix::pack(d, {{w + w1 + i * uhid * ud, hid}, {w + w3 + i * uhid * ud, hid}}, weights);
      l.w2 = llama::Matrix::pack(hid, {{w + w2 + i * ud * uhid, d}}, weights);
    }
    m.classifier_ = llama::Matrix::pack(d, {{w + (c.shared_classifier ? embedding : wcls), c.vocab_size}}, weights);
    return m;
  }

 public:

  const LlamaConfig& config() const { return config_; }
  /// How the matrices are stored and multiplied (load()'s choice).
  WeightFormat weights() const { return weights_; }
  /// Token embedding, [vocab][dim].
  const std::vector<float>& embedding() const { return embedding_; }
  const Layer& layer(int l) const { return layers_[static_cast<std::size_t>(l)]; }
  const std::vector<float>& rms_final() const { return rms_final_; }
  /// Classifier, packed: vocab_size outputs of dim inputs.
  const llama::Matrix& classifier() const { return classifier_; }

  /// Number of floats after the header that a checkpoint with this header holds.
  static std::uint64_t weight_floats(const LlamaConfig& c) {
    const std::uint64_t d = c.dim, kv = static_cast<std::uint64_t>(c.kv_dim()), hid = c.hidden_dim,
                        L = c.n_layers, V = c.vocab_size;
    std::uint64_t n = V * d;                           // token embedding
    n += L * (d + d * d + 2 * kv * d + d * d + d);     // rms_att, wq, wk, wv, wo, rms_ffn
    n += L * 3 * hid * d;                              // w1, w2, w3
    n += d;                                            // rms_final
    n += 2ull * c.seq_len * (c.head_size() / 2);       // legacy RoPE tables
    if (!c.shared_classifier) n += V * d;              // wcls
    return n;
  }

  /// Bytes of weights a forward reads in `format`: the checkpoint's fp32 payload (weight_floats)
  /// in fp32; in bf16, the matrices (layers and classifier) at 2 bytes and the norms at 4.
  static std::uint64_t forward_weight_bytes(const LlamaConfig& c, WeightFormat format) {
    if (format == WeightFormat::fp32) return 4 * weight_floats(c);
    const std::uint64_t d = c.dim, kv = static_cast<std::uint64_t>(c.kv_dim()), hid = c.hidden_dim, L = c.n_layers,
                        V = c.vocab_size;
    return 2 * (L * (2 * d * d + 2 * kv * d + 3 * hid * d) + V * d) + 4 * (2 * L + 1) * d;
  }

  static std::string describe(const LlamaConfig& c) {
    return "dim " + std::to_string(c.dim) + ", hidden_dim " + std::to_string(c.hidden_dim) + ", n_layers " +
           std::to_string(c.n_layers) + ", n_heads " + std::to_string(c.n_heads) + ", n_kv_heads " +
           std::to_string(c.n_kv_heads) + ", vocab_size " + std::to_string(c.vocab_size) +
           (c.shared_classifier ? "" : " (unshared classifier)") + ", seq_len " + std::to_string(c.seq_len);
  }

 private:
  // Reads the 28-byte header from `in` and checks it, and the file's size against it.
  static LlamaConfig read_header(std::ifstream& in, const std::string& name, std::uintmax_t file_size) {
    constexpr std::uintmax_t header_bytes = 7 * sizeof(std::int32_t);
    if (file_size < header_bytes)
      throw error(name + ": " + std::to_string(file_size) + " bytes, shorter than the 28-byte header");
    std::int32_t h[7];
    in.read(reinterpret_cast<char*>(h), sizeof h);
    LlamaConfig c;
    c.dim = h[0];
    c.hidden_dim = h[1];
    c.n_layers = h[2];
    c.n_heads = h[3];
    c.n_kv_heads = h[4];
    c.shared_classifier = h[5] > 0;
    const std::int64_t vocab = h[5] < 0 ? -static_cast<std::int64_t>(h[5]) : h[5];
    c.vocab_size = vocab > (1 << 24) ? -1 : static_cast<int>(vocab);  // -1: rejected below
    c.seq_len = h[6];
    check_header(c, name, h[5]);
    detail::check_weights_size(name, file_size, header_bytes + sizeof(float) * weight_floats(c), describe(c));
    return c;
  }

  static void check_header(const LlamaConfig& c, const std::string& name, std::int32_t raw_vocab) {
    std::string why = c.layer_problem();
    if (why.empty() && (c.n_layers < 1 || c.n_layers > 1024))
      why = "n_layers " + std::to_string(c.n_layers) + " is not in [1, 1024]";
    if (why.empty() && (c.vocab_size < 1 || c.vocab_size > (1 << 24)))
      why = "vocab_size " + std::to_string(raw_vocab) + " is out of range";
    if (why.empty() && (c.seq_len < 1 || c.seq_len > (1 << 20)))
      why = "seq_len " + std::to_string(c.seq_len) + " is not in [1, 1048576]";
    if (!why.empty()) throw error(name + ": not a llama2.c checkpoint: header says " + why);
  }

  LlamaConfig config_;
  WeightFormat weights_ = WeightFormat::fp32;
  std::vector<float> embedding_;
  std::vector<Layer> layers_;
  std::vector<float> rms_final_;
  llama::Matrix classifier_;
};

}  // namespace specdec
