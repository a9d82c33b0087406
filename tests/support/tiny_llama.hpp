// A small random-weight llama2.c checkpoint and a matching tokenizer, written by tests: another
// model than stories260K (another vocabulary, 128 positions, an unshared classifier) to show that
// code works for any checkpoint the target loads.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

namespace specdec::testing {

struct TinyLlamaShape {
  int dim = 16, hidden = 40, layers = 2, heads = 2, kv_heads = 1, vocab = 350, seq_len = 128;
};

/// Writes a llama2.c checkpoint with normal(0, scale) weights (unit RMSNorm weights) and an
/// unshared classifier.
inline void write_tiny_llama(const std::filesystem::path& path, const TinyLlamaShape& s = {}, std::uint64_t seed = 1,
                             float scale = 0.3f) {
  std::ofstream out(path, std::ios::binary);
  const std::int32_t header[7] = {s.dim, s.hidden, s.layers, s.heads, s.kv_heads, -s.vocab, s.seq_len};
  out.write(reinterpret_cast<const char*>(header), sizeof header);
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  auto weights = [&](long n) {
    for (long i = 0; i < n; ++i) {
      const float w = normal(rng);
      out.write(reinterpret_cast<const char*>(&w), sizeof w);
    }
  };
  auto ones = [&](long n) {
    const float one = 1.0f;
    for (long i = 0; i < n; ++i) out.write(reinterpret_cast<const char*>(&one), sizeof one);
  };
  const long d = s.dim, kv = s.dim / s.heads * s.kv_heads, h = s.hidden, L = s.layers;
  weights(long(s.vocab) * d);                              // embedding
  ones(L * d);                                             // rms_att
  weights(L * (d * d + 2 * kv * d + d * d));               // wq, wk, wv, wo
  ones(L * d);                                             // rms_ffn
  weights(L * 3 * h * d);                                  // w1, w2, w3
  ones(d);                                                 // rms_final
  weights(long(s.seq_len) * (s.dim / s.heads));            // legacy RoPE tables (ignored)
  weights(long(s.vocab) * d);                              // classifier
}

/// Writes a llama2.c tokenizer of `vocab` tokens: <unk>, BOS, EOS, the 256 byte tokens, then
/// letters, space-prefixed letters and a few pairs (scores favour longer pieces).
inline void write_tiny_tokenizer(const std::filesystem::path& path, int vocab = TinyLlamaShape{}.vocab) {
  std::vector<std::string> pieces{"<unk>", "\n<s>\n", "\n</s>\n"};
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    pieces.emplace_back(name);
  }
  const std::string letters = " etaoinshrdlucmfwypvbgkjqxz.,!\"'";
  for (char c : letters) pieces.emplace_back(1, c);
  for (char c : letters)
    if (c != ' ') pieces.push_back(std::string(" ") + c);
  for (const char* pair : {"he", "th", "an", "in", "er", "nd", "ou", "re", "on", "ha", " th", " the"})
    pieces.emplace_back(pair);
  pieces.resize(static_cast<std::size_t>(vocab), "<unused>");
  for (std::size_t i = pieces.size(); i-- > 0;)
    if (pieces[i] == "<unused>") pieces[i] = "<unused" + std::to_string(i) + ">";
  std::ofstream out(path, std::ios::binary);
  std::int32_t max_length = 0;
  for (const auto& p : pieces) max_length = std::max<std::int32_t>(max_length, static_cast<std::int32_t>(p.size()));
  out.write(reinterpret_cast<const char*>(&max_length), 4);
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const float score = i < 259 ? 0.0f : static_cast<float>(pieces[i].size());
    const std::int32_t length = static_cast<std::int32_t>(pieces[i].size());
    out.write(reinterpret_cast<const char*>(&score), 4);
    out.write(reinterpret_cast<const char*>(&length), 4);
    out.write(pieces[i].data(), length);
  }
}

}  // namespace specdec::testing
