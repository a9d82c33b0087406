// EAGLE head files written by tests (format: include/specdec/models/eagle_head.hpp): random
// weights, or a "mirror" head that makes a one-layer target's own prediction.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <specdec/models/eagle_head.hpp>

#include "support/temp_dir.hpp"

namespace specdec::testing {

struct EagleHeadShape {
  int dim = 64, hidden = 172, heads = 8, kv_heads = 4, vocab = 512;  // stories260K's
};

inline std::string eagle_header(const EagleHeadShape& s, std::int32_t version = EagleHead::version) {
  std::string bytes(EagleHead::magic, 8);
  for (std::int32_t v : {version, s.dim, s.hidden, s.heads, s.kv_heads, s.vocab})
    bytes.append(reinterpret_cast<const char*>(&v), sizeof v);
  return bytes;
}

inline void append_floats(std::string& bytes, const std::vector<float>& v) {
  bytes.append(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

/// The bytes of a head file with normal(0, scale) weights and unit RMSNorm weights.
inline std::string random_eagle_head(const EagleHeadShape& s = {}, std::uint64_t seed = 1, float scale = 0.2f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::string bytes = eagle_header(s);
  auto weights = [&](long n) {
    std::vector<float> v(static_cast<std::size_t>(n));
    for (float& x : v) x = normal(rng);
    append_floats(bytes, v);
  };
  auto ones = [&](long n) { append_floats(bytes, std::vector<float>(static_cast<std::size_t>(n), 1.0f)); };
  const long d = s.dim, kv = s.dim / s.heads * s.kv_heads, h = s.hidden;
  weights(2 * d * d);                         // fc
  weights(d);                                 // fc_bias
  ones(d);                                    // rms_att
  weights(d * d + 2 * kv * d + d * d);        // wq, wk, wv, wo
  ones(d);                                    // rms_ffn
  weights(3 * h * d);                         // w1, w2, w3
  ones(d);                                    // rms_out
  return bytes;
}

/// The bytes of a head that, for a one-layer llama2.c checkpoint, computes the target itself:
/// fc = [I | 0] passes the token's embedding through (the feature is ignored), the layer and the
/// output norm are the checkpoint's layer and final norm. Its predictions are then the target's,
/// bit for bit. With `noise` > 0, normal(0, noise) is added to the layer's matrices: a good but
/// imperfect head (partial acceptance).
inline std::string mirror_eagle_head(const std::filesystem::path& checkpoint, float noise = 0.0f, std::uint64_t seed = 3) {
  const std::string ckpt = file_bytes(checkpoint);
  std::int32_t h[7];
  std::copy_n(ckpt.data(), sizeof h, reinterpret_cast<char*>(h));
  const int d = h[0], hidden = h[1], heads = h[3], kv_heads = h[4], vocab = h[5] < 0 ? -h[5] : h[5];
  if (h[2] != 1) throw std::runtime_error("mirror_eagle_head: the checkpoint has " + std::to_string(h[2]) + " layers, not 1");
  std::string bytes = eagle_header({d, hidden, heads, kv_heads, vocab});
  std::vector<float> fc(static_cast<std::size_t>(2 * d) * d, 0.0f);
  for (int r = 0; r < d; ++r) fc[static_cast<std::size_t>(r) * 2 * d + r] = 1.0f;
  append_floats(bytes, fc);
  append_floats(bytes, std::vector<float>(static_cast<std::size_t>(d), 0.0f));
  // The checkpoint's layer then rms_final: the head file's layer then rms_out, in the same order.
  const long kv = d / heads * kv_heads;
  const std::size_t layer_floats = static_cast<std::size_t>(d + 2 * d * d + 2 * kv * d + d + 3L * hidden * d + d);
  std::vector<float> layer(layer_floats);
  std::copy_n(ckpt.data() + 28 + static_cast<std::size_t>(vocab) * d * sizeof(float), layer_floats * sizeof(float),
              reinterpret_cast<char*>(layer.data()));
  if (noise > 0.0f) {
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, noise);
    for (std::size_t i = static_cast<std::size_t>(d); i + static_cast<std::size_t>(d) < layer_floats; ++i)
      layer[i] += normal(rng);  // not the norms at both ends (noise there would barely matter)
  }
  append_floats(bytes, layer);
  return bytes;
}

}  // namespace specdec::testing
