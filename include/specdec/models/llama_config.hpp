// What a Llama model is, apart from its weights: its shape (LlamaConfig) and how its weight
// matrices are stored (WeightFormat). The llama2.c loader, the synthetic shapes, the host layer
// and the CUDA target all read these; none of them needs the others' files to.
#pragma once

#include <string>
#include <string_view>

namespace specdec {

/// How a model's weight matrices are stored and multiplied (models/host_kernels.hpp): fp32 as in
/// the checkpoint, or bf16 on Intel AMX.
enum class WeightFormat { fp32, bf16 };

inline const char* weight_format_name(WeightFormat f) { return f == WeightFormat::bf16 ? "bf16" : "fp32"; }
/// The format a command line names: "fp32" or "bf16" (anything else: fp32; a caller checks it
/// against those two names first).
inline WeightFormat weight_format_named(std::string_view name) {
  return name == "bf16" ? WeightFormat::bf16 : WeightFormat::fp32;
}

/// The shape of a Llama model: a llama2.c checkpoint's header (Llama2cModel), a synthetic shape
/// (synthetic_llama.hpp), an EAGLE head's layer.
struct LlamaConfig {
  int dim = 0;         ///< width of the residual stream
  int hidden_dim = 0;  ///< width of the SwiGLU feed-forward layer
  int n_layers = 0;
  int n_heads = 0;     ///< query heads
  int n_kv_heads = 0;  ///< key/value heads (grouped-query attention when < n_heads)
  int vocab_size = 0;
  int seq_len = 0;     ///< positions the model was trained for: the target's max_positions()
  bool shared_classifier = true;  ///< classifier weights = token embedding

  int head_size() const { return dim / n_heads; }
  int kv_dim() const { return head_size() * n_kv_heads; }
  /// Query heads per key/value head.
  int kv_group() const { return n_heads / n_kv_heads; }

  /// Why dim, hidden_dim, n_heads and n_kv_heads cannot shape a Llama layer ("" when they can):
  /// the checks a checkpoint's header and an EAGLE head's share. Generous bounds: they only keep a
  /// garbage header from asking for absurd allocations.
  std::string layer_problem() const {
    auto in_range = [](int v, int hi) { return v >= 1 && v <= hi; };
    if (!in_range(dim, 1 << 16)) return "dim " + std::to_string(dim) + " is not in [1, 65536]";
    if (!in_range(hidden_dim, 1 << 18)) return "hidden_dim " + std::to_string(hidden_dim) + " is not in [1, 262144]";
    if (!in_range(n_heads, dim) || dim % n_heads != 0)
      return "n_heads " + std::to_string(n_heads) + " does not divide dim " + std::to_string(dim);
    if (head_size() % 2 != 0) return "head size " + std::to_string(head_size()) + " is odd (RoPE rotates pairs)";
    if (!in_range(n_kv_heads, n_heads) || n_heads % n_kv_heads != 0)
      return "n_kv_heads " + std::to_string(n_kv_heads) + " does not divide n_heads " + std::to_string(n_heads);
    return "";
  }
};

}  // namespace specdec
