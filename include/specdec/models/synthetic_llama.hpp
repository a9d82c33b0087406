// The shapes of real Llama models, for synthetic models with seeded weights
// (models/synthetic_weights.hpp): what specdec-synth-model writes as llama2.c checkpoints and
// what CudaLlamaTarget builds on the device. A forward's cost depends on the shape, not on the
// weights' values, so such a model times one that cannot be downloaded here; its outputs are
// meaningless. Host-only (the table); the generator itself is host and device.
#pragma once

#include <algorithm>
#include <span>
#include <string>
#include <string_view>

#include <specdec/error.hpp>
#include <specdec/models/llama_config.hpp>
#include <specdec/models/synthetic_weights.hpp>

namespace specdec {

/// A published configuration: the llama2.c header fields (seq_len = the model's context), the
/// RoPE base (llama2.c checkpoints cannot say it; their target uses 10000), and where it is from.
struct SyntheticShape {
  const char* name = "";
  LlamaConfig config;
  float rope_theta = 10000.0f;
  const char* source = "";
};

/// Every shape, smallest first.
inline std::span<const SyntheticShape> synthetic_shapes() {
  static const SyntheticShape shapes[] = {
      {"stories15M", {288, 768, 6, 6, 6, 32000, 256, true}, 10000.0f, "karpathy/tinyllamas stories15M.bin"},
      {"stories110M", {768, 2048, 12, 12, 12, 32000, 1024, true}, 10000.0f, "karpathy/tinyllamas stories110M.bin"},
      {"TinyLlama-1.1B", {2048, 5632, 22, 32, 4, 32000, 2048, false}, 10000.0f,
       "TinyLlama/TinyLlama-1.1B config.json"},
      {"Llama-2-7B", {4096, 11008, 32, 32, 32, 32000, 4096, false}, 10000.0f, "meta-llama/Llama-2-7b config.json"},
      {"Llama-3-8B", {4096, 14336, 32, 32, 8, 128256, 8192, false}, 500000.0f,
       "meta-llama/Meta-Llama-3-8B config.json"},
  };
  return shapes;
}

/// The shape called `name`, regardless of case (no two differ in case only: "llama-2-7b" is
/// Llama-2-7B); a specdec::error listing the known names when there is none.
inline const SyntheticShape& synthetic_shape(std::string_view name) {
  const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  const auto same = [&](std::string_view a, std::string_view b) {
    return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [&](char x, char y) { return lower(x) == lower(y); });
  };
  std::string list;
  for (const SyntheticShape& s : synthetic_shapes()) {
    if (same(name, s.name)) return s;
    list += (list.empty() ? "" : ", ") + std::string(s.name);
  }
  throw error("unknown shape '" + std::string(name) + "'; the shapes are: " + list);
}

}  // namespace specdec
