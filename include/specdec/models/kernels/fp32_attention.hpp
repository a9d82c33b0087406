// The fp32 attention kernels of a tree's nodes over a KV cache (models/llama_layer.hpp's attend):
// scores q · k, the softmax's exponentials and their sum (exp_sum), and the value sums
// o[e] += p[t] · v[t][e], in two forms named by what they batch: head_value_sums (one node,
// several heads, each with its own weights and values) and node_value_sums (several nodes over one
// head's values). Templated on the vector type of an ISA path; isa.hpp instantiates them per ISA.
// Host-only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include <specdec/models/kernels/lanes.hpp>

SPECDEC_HOST_KERNELS_BEGIN
namespace specdec::llama::detail {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

// Nodes in a register tile of a tree's attention: N nodes × some vectors of slots (scores) or of
// a head's elements (values), so that each key or value vector loaded serves N nodes. Two loads (a
// vector and a node's broadcast) per multiply-add left the single-node kernels far below the FMA
// peak.
template <class V>
inline constexpr int attention_tile_nodes = sizeof(V) == sizeof(v16f) ? 4 : 2;

// s[n][t] for Nodes nodes and SlotVectors vectors of slots from slot t on: each slot's sum over e
// in order, each key vector loaded once for the nodes.
template <class V, bool Mul, int Nodes, int SlotVectors>
[[gnu::always_inline]] inline void score_tile(float* const* s, const float* const* q, const float* kt,
                                              std::size_t kt_stride, int hs, int t, float inv, float sqrt_hs) {
  constexpr int L = lanes<V>;
  V acc[Nodes][SlotVectors] = {};
  for (int e = 0; e < hs; ++e) {
    const float* k = kt + e * kt_stride + t;
    V kv[SlotVectors];
    _Pragma("GCC unroll 8") for (int v = 0; v < SlotVectors; ++v) kv[v] = load<V>(k + v * L);
    _Pragma("GCC unroll 8") for (int n = 0; n < Nodes; ++n) multiply_add_all<fused<V>, SlotVectors>(acc[n], kv, q[n][e]);
  }
  _Pragma("GCC unroll 8") for (int n = 0; n < Nodes; ++n) _Pragma("GCC unroll 8") for (int v = 0; v < SlotVectors; ++v)
      store(s[n] + t + v * L, Mul ? acc[n][v] * inv : acc[n][v] / sqrt_hs);
}

// One node: s[t] = (q · k_t) / sqrt_hs for t in [t0, t1), K transposed: kt[e * kt_stride + t].
// With Mul, sqrt_hs is a power of two (head size 4, 16, 64, ...) and the division a
// multiplication by its reciprocal: the same real number, so the same rounded result, for every
// operand.
template <class V, bool Mul>
[[gnu::always_inline]] inline void scores_of_node(float* s, const float* q, const float* kt, std::size_t kt_stride,
                                                  int hs, int t0, int t1, float sqrt_hs) {
  constexpr int L = lanes<V>;
  const float inv = 1.0f / sqrt_hs;
  int t = t0;
  // 8, then 4, then 1 vector of slots at once: independent sums hide the adds' latency.
  for (; t + 8 * L <= t1; t += 8 * L) score_tile<V, Mul, 1, 8>(&s, &q, kt, kt_stride, hs, t, inv, sqrt_hs);
  for (; t + 4 * L <= t1; t += 4 * L) score_tile<V, Mul, 1, 4>(&s, &q, kt, kt_stride, hs, t, inv, sqrt_hs);
  for (; t + L <= t1; t += L) score_tile<V, Mul, 1, 1>(&s, &q, kt, kt_stride, hs, t, inv, sqrt_hs);
  for (; t < t1; ++t) {
    float acc = 0.0f;
    for (int e = 0; e < hs; ++e) multiply_add<fused<V>>(acc, kt[e * kt_stride + t], q[e]);
    s[t] = Mul ? acc * inv : acc / sqrt_hs;
  }
}

// scores_of_node for `nodes` nodes (rows s[n], queries q[n]) over the same slots: whole tiles of
// nodes and vectors, the rest node by node. Each score is the same sum as scores_of_node's.
template <class V, bool Mul>
[[gnu::always_inline]] inline void scores_of_nodes(float* const* s, const float* const* q, int nodes, const float* kt,
                                                   std::size_t kt_stride, int hs, int t0, int t1, float sqrt_hs) {
  constexpr int L = lanes<V>, N = attention_tile_nodes<V>, T = 4;
  const float inv = 1.0f / sqrt_hs;
  int n = 0;
  for (; n + N <= nodes; n += N) {
    int t = t0;
    for (; t + T * L <= t1; t += T * L) score_tile<V, Mul, N, T>(s + n, q + n, kt, kt_stride, hs, t, inv, sqrt_hs);
    for (; t + L <= t1; t += L) score_tile<V, Mul, N, 1>(s + n, q + n, kt, kt_stride, hs, t, inv, sqrt_hs);
    for (int m = n; m < n + N; ++m) scores_of_node<V, Mul>(s[m], q[m], kt, kt_stride, hs, t, t1, sqrt_hs);
  }
  for (; n < nodes; ++n) scores_of_node<V, Mul>(s[n], q[n], kt, kt_stride, hs, t0, t1, sqrt_hs);
}

// Whether x is a power of two whose reciprocal is a normal float.
inline bool exact_reciprocal(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const std::uint32_t exponent = u >> 23;  // sign bit included: positive only
  return (u & 0x7fffffu) == 0 && exponent >= 2 && exponent <= 252;
}

// ---- head_value_sums: one node, several heads -------------------------------------------------

// For Heads heads h: o[h][e] += p[h][t] * v[h][t * v_stride + e] for e in [e, e + lanes of W), t
// in [t0, t1) in order. The heads' sums are independent chains, interleaved to hide the adds'
// latency.
template <int Heads, class W, bool F>
[[gnu::always_inline]] inline void head_group_value_tile(float* const* o, const float* const* p, const float* const* v,
                                                         std::size_t v_stride, int e, int t0, int t1) {
  W acc[Heads];
  _Pragma("GCC unroll 8") for (int h = 0; h < Heads; ++h) acc[h] = load<W>(o[h] + e);
  for (int t = t0; t < t1; ++t)
    _Pragma("GCC unroll 8") for (int h = 0; h < Heads; ++h) multiply_add<F>(acc[h], load<W>(v[h] + t * v_stride + e), p[h][t]);
  _Pragma("GCC unroll 8") for (int h = 0; h < Heads; ++h) store(o[h] + e, acc[h]);
}

// The same for e in [0, hs): tiles of 16 lanes where V has 16, then of 8, then one by one.
template <int Heads, class V>
[[gnu::always_inline]] inline void head_group_value_sums(float* const* o, const float* const* p, const float* const* v,
                                                         std::size_t v_stride, int hs, int t0, int t1) {
  int e = 0;
  if constexpr (sizeof(V) >= sizeof(v16f))
    for (; e + 16 <= hs; e += 16) head_group_value_tile<Heads, v16f, fused<V>>(o, p, v, v_stride, e, t0, t1);
  for (; e + 8 <= hs; e += 8) head_group_value_tile<Heads, v8f, fused<V>>(o, p, v, v_stride, e, t0, t1);
  for (; e < hs; ++e)
    for (int h = 0; h < Heads; ++h)
      for (int t = t0; t < t1; ++t) multiply_add<fused<V>>(o[h][e], v[h][t * v_stride + e], p[h][t]);
}

// `heads` heads in groups of 8, 4, 2, then 1.
template <class V>
[[gnu::always_inline]] inline void head_value_sums(float* const* o, const float* const* p, const float* const* v,
                                                   int heads, std::size_t v_stride, int hs, int t0, int t1) {
  int h = 0;
  for (; h + 8 <= heads; h += 8) head_group_value_sums<8, V>(o + h, p + h, v + h, v_stride, hs, t0, t1);
  for (; h + 4 <= heads; h += 4) head_group_value_sums<4, V>(o + h, p + h, v + h, v_stride, hs, t0, t1);
  for (; h + 2 <= heads; h += 2) head_group_value_sums<2, V>(o + h, p + h, v + h, v_stride, hs, t0, t1);
  for (; h < heads; ++h) head_group_value_sums<1, V>(o + h, p + h, v + h, v_stride, hs, t0, t1);
}

// ---- node_value_sums: several nodes, one head ---------------------------------------------------

// o[n][e ..] += p[n][t] * v[t * v_stride + e ..] for Nodes nodes and Vectors vectors of W lanes,
// t in [t0, t1) in order: head_group_value_tile's sums, each value vector loaded once for the
// nodes.
template <class W, bool F, int Nodes, int Vectors>
[[gnu::always_inline]] inline void node_value_tile(float* const* o, const float* const* p, const float* v,
                                                   std::size_t v_stride, int e, int t0, int t1) {
  constexpr int L = lanes<W>;
  W acc[Nodes][Vectors];
  _Pragma("GCC unroll 8") for (int n = 0; n < Nodes; ++n) _Pragma("GCC unroll 8") for (int c = 0; c < Vectors; ++c)
      acc[n][c] = load<W>(o[n] + e + c * L);
  for (int t = t0; t < t1; ++t) {
    W vv[Vectors];
    _Pragma("GCC unroll 8") for (int c = 0; c < Vectors; ++c) vv[c] = load<W>(v + t * v_stride + e + c * L);
    _Pragma("GCC unroll 8") for (int n = 0; n < Nodes; ++n) multiply_add_all<F, Vectors>(acc[n], vv, p[n][t]);
  }
  _Pragma("GCC unroll 8") for (int n = 0; n < Nodes; ++n) _Pragma("GCC unroll 8") for (int c = 0; c < Vectors; ++c)
      store(o[n] + e + c * L, acc[n][c]);
}

// The last r < Nodes nodes in one tile of r nodes.
template <class W, bool F, int Nodes, int Vectors>
[[gnu::always_inline]] inline void node_value_tile_rest(float* const* o, const float* const* p, int r, const float* v,
                                                        std::size_t v_stride, int e, int t0, int t1) {
  if constexpr (Nodes > 1) {
    if (r == Nodes - 1) node_value_tile<W, F, Nodes - 1, Vectors>(o, p, v, v_stride, e, t0, t1);
    else node_value_tile_rest<W, F, Nodes - 1, Vectors>(o, p, r, v, v_stride, e, t0, t1);
  }
}

// Every node's sums of Vectors vectors of W lanes from e on: tiles of Nodes nodes, then the rest.
template <class W, bool F, int Nodes, int Vectors>
[[gnu::always_inline]] inline void node_span_value_sums(float* const* o, const float* const* p, int nodes,
                                                        const float* v, std::size_t v_stride, int e, int t0, int t1) {
  int n = 0;
  for (; n + Nodes <= nodes; n += Nodes) node_value_tile<W, F, Nodes, Vectors>(o + n, p + n, v, v_stride, e, t0, t1);
  if (n < nodes) node_value_tile_rest<W, F, Nodes, Vectors>(o + n, p + n, nodes - n, v, v_stride, e, t0, t1);
}

// One head's value sums for `nodes` nodes (outputs o[n], weights p[n]) over the same slots, in the
// lane widths of head_group_value_sums: 4 vectors of V's lanes at a time, then one, then 8 lanes,
// then one.
template <class V>
[[gnu::always_inline]] inline void node_value_sums(float* const* o, const float* const* p, int nodes, const float* v,
                                                   std::size_t v_stride, int hs, int t0, int t1) {
  constexpr int L = lanes<V>, N = attention_tile_nodes<V>;
  constexpr bool F = fused<V>;
  int e = 0;
  for (; e + 4 * L <= hs; e += 4 * L) node_span_value_sums<V, F, N, 4>(o, p, nodes, v, v_stride, e, t0, t1);
  for (; e + L <= hs; e += L) node_span_value_sums<V, F, 2 * N, 1>(o, p, nodes, v, v_stride, e, t0, t1);
  if constexpr (sizeof(V) >= sizeof(v16f))
    for (; e + 8 <= hs; e += 8) node_span_value_sums<v8f, F, 2 * N, 1>(o, p, nodes, v, v_stride, e, t0, t1);
  for (; e < hs; ++e)
    for (int n = 0; n < nodes; ++n)
      for (int t = t0; t < t1; ++t) multiply_add<F>(o[n][e], v[t * v_stride + e], p[n][t]);
}

// ---- the softmax -----------------------------------------------------------------------------

// s[0 .. n) = exp16(s[t] - max); returns their sum, in 16 lanes (see host_kernels.hpp): the
// softmax's denominator. V holds L of the 16 lanes (P vectors), so every ISA adds the same numbers
// in the same order: a[l] += a[l + 8] is acc[q] += acc[q + P/2] while P > 1, then sum_halves.
template <class V>
[[gnu::always_inline]] inline float exp_sum_impl(float* s, int n) {
  constexpr int L = lanes<V>, P = 16 / L;
  const int full = n / 16 * 16;
  // The last block, padded with -inf: exp16 gives +0 there, and a[l] + 0 = a[l].
  float tail[16];
  if (full < n) {
    std::fill_n(tail, 16, -__builtin_inff());
    std::copy(s + full, s + n, tail);
  }
  V m = splat<V>(-__builtin_inff());  // the exact maximum: the order of comparisons changes nothing
  for (int t = 0; t < full; t += L) {
    const V x = load<V>(s + t);
    m = x > m ? x : m;
  }
  if (full < n)
    for (int q = 0; q < P; ++q) {
      const V x = load<V>(tail + q * L);
      m = x > m ? x : m;
    }
  const float best = max_halves(m)[0];
  V acc[P];
  for (int q = 0; q < P; ++q) acc[q] = V{};
  for (int t = 0; t < full; t += 16)
    for (int q = 0; q < P; ++q) {
      V e = load<V>(s + t + q * L) - best;
      exp_lanes(e);
      store(s + t + q * L, e);
      acc[q] += e;
    }
  if (full < n) {
    for (int q = 0; q < P; ++q) {
      V e = load<V>(tail + q * L) - best;
      exp_lanes(e);
      store(tail + q * L, e);
      acc[q] += e;
    }
    std::copy_n(tail, n - full, s + full);
  }
  for (int w = P / 2; w >= 1; w /= 2)
    for (int q = 0; q < w; ++q) acc[q] += acc[q + w];
  return sum_halves(acc[0]);
}

#pragma GCC diagnostic pop

}  // namespace specdec::llama::detail
SPECDEC_HOST_KERNELS_END
