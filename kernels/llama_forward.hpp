// The kernels of the device Llama forward (targets/device_llama.hpp): embedding, RMSNorm, the
// weight products, RoPE with the K/V write, tree attention, SwiGLU, and the synthetic weights'
// fill. Each is a grid kernel (kernels/grid.hpp): one body that runs on a CUDA grid
// (kernels/grid.cuh; CudaLlamaTarget) and on the host's emulated grid (testing/emulated_grid.hpp;
// EmulatedLlamaTarget) with the same bits, so that CI checks the device forward without a GPU.
// Every floating-point operation is one IEEE operation rounded to nearest on both: fmaf where a
// fused multiply-add is meant, core::*_rn otherwise (nvcc may not fuse them), exp by
// core::exp_portable, sqrtf (IEEE on both).
//
// A forward's rows are the nodes of one or more trees (ForwardTrees: one per request, each on its
// own sequence of the cache), tree after tree.
//
// Batch invariance, the rule every kernel here keeps: each output element is reduced in an order
// that depends only on the model's shape and on what that element reads, never on the number of
// rows, the node's index in its tree, the other trees of the forward or the launch's grid.
// Concretely:
//  - products: y[t][o] = sum_k W[o][k] x[t][k]: lane l of the warp owning row o adds, with fmaf,
//    the terms k = l·V + 32·V·j + e (V = 16 bytes of weights: 4 fp32 or 8 bf16) in increasing j,
//    then e; the 32 lane sums are combined by the butterfly xor 16, 8, 4, 2, 1. Tokens are taken
//    8 at a time with one accumulator each: a token's sum is the same whichever 8 it joins.
//  - tensor-core products (bf16 weights, MmaProduct): the activations are rounded to bf16 once
//    (nearest even); y[t][o] is the sum over the block's 8 warps w = 0, 1, ..., 7 in that order
//    (add_rn) of warp w's chain of MMAs (th.mma_bf16, m16n8k16, fp32) over the k-blocks of 32
//    elements j = w, w + 8, w + 16, ... in increasing j, two MMAs a k-block, each over a fixed
//    permutation of its half (MmaProduct says which). Row o is row o % 16 of its block's tile and
//    token t column t % 8 of an MMA, and an MMA's column depends on that column's operands only:
//    a token's sums are the same whichever tokens share its MMAs or its pass.
//  - RMSNorm: thread i of 256 sums x[j]² for j = i, i + 256, ... in increasing j, then the pairwise
//    tree over the 256 partials.
//  - attention of (node, head): the node's attended positions are the cached slots 0 .. base - 1,
//    then its ancestors root first and itself (from the tree's mask), L in all: the sequence a
//    single-token forward of its path attends to, in the same order. They are taken in splits of
//    128 positions (p = 128 s .. 128 s + 127), each reduced alone: scores, a sequential fmaf dot
//    over the head (e = 0, 1, ...) times the scale; the split's max m_s (exact in any order);
//    weights exp(score - m_s); their total l_s, the pairwise tree over 128 lanes (lane p % 128: one
//    weight each, 0 past L); values: output (e, part), parts = 128 / head_size, sums weight *
//    value by fmaf over the split's p = part, part + parts, ... in increasing p, then the parts are
//    added in increasing order (from 0). The splits are then folded in increasing s: the run
//    (M, l, o) starts as split 0's; split s scales both to M' = max(M, m_s) by a = exp(M - M') and
//    b = exp(m_s - M'): l = l a + l_s b, o(e) = o(e) a + o_s(e) b (each product and sum rounded),
//    M = M'. The output is o(e) / l. So the order is fixed by L, head_size and the constant 128,
//    never by a number of splits chosen by size or occupancy. SplitAttention (with AttentionFold)
//    and TiledAttention both compute exactly this: the same bits, whichever runs.
#pragma once

#include <algorithm>
#include <cmath>  // fmaf, fmaxf, sqrtf
#include <cstdint>

#include <specdec/config.hpp>
#include <specdec/core/portable_math.hpp>
#include <specdec/core/tree.hpp>
#include <specdec/kernels/grid.hpp>
#include <specdec/models/synthetic_weights.hpp>

namespace specdec::kernels::llama {

inline constexpr int norm_threads = 256;
inline constexpr int attention_threads = 128;
inline constexpr int product_warps = 8;   // warps per block
inline constexpr int product_rows = 2;    // output rows per warp
inline constexpr int product_tokens = 8;  // tokens per pass over a row
inline constexpr int max_tree_nodes = 256;
inline constexpr int max_attended = 8192;  // positions a node may attend to (the cache's most)

inline constexpr int max_forward_trees = 64;  // trees (requests) in one forward
inline constexpr int mma_warps = 8;     // warps per block of MmaProduct, each its share of k
inline constexpr int mma_rows = 16;     // output rows per block (the MMA's m)
inline constexpr int mma_tokens = 8;    // tokens per MMA (its n)
inline constexpr int mma_k_block = 32;  // k per warp step: 8 bf16 (16 bytes) a lane, 4 lanes a row

/// One tree of a forward: its arrays (device memory), where its rows start, and its sequence.
struct ForwardTree {
  const token_t* token = nullptr;
  const int* depth = nullptr;
  const std::uint32_t* mask = nullptr;  ///< ancestor mask, words_per_row words per node
  int words_per_row = 0;
  int base = 0;                         ///< positions cached for its sequence (its root's slot)
  int first_row = 0;                    ///< row of its node 0 in the forward's activations
  long long cache_offset = 0;           ///< cache elements from a layer's rows of sequence 0 to its sequence's
};

/// The trees of one forward (about 3 KB), in device memory: the kernels take a pointer to them, so
/// that their launches stay small and a captured launch (a CUDA graph) reads each forward's trees.
/// Rows are the trees' nodes, tree after tree; a launch may have more rows than `rows` (a graph's
/// bucket), and the kernels skip those.
struct ForwardTrees {
  int count = 0;
  int rows = 0;  ///< the trees' nodes in all
  ForwardTree tree[max_forward_trees];

  /// The tree that `row` belongs to: the last whose first_row <= row.
  SPECDEC_HD int tree_of(int row) const {
    int b = 0;
    while (b + 1 < count && tree[b + 1].first_row <= row) ++b;
    return b;
  }
  /// Nodes of tree b.
  SPECDEC_HD int tree_size(int b) const { return (b + 1 < count ? tree[b + 1].first_row : rows) - tree[b].first_row; }
};

/// Weight storage: fp32, or bf16 as its 16 bits.
using bf16 = std::uint16_t;

template <class W>
SPECDEC_HD inline float to_float(W w) {
  if constexpr (sizeof(W) == 2) return synthetic::bf16_value(w);
  else return w;
}

/// Elements of W per 16-byte load.
template <class W>
inline constexpr int product_vector = 16 / static_cast<int>(sizeof(W));

/// y[t][o] (+)= sum_k W[o][k] x[t][k] for t < n, o < out.
struct ProductArgs {
  const void* w = nullptr;  ///< [out][in] of W, 16-byte aligned
  int in = 0, out = 0, n = 0;
  const float* x = nullptr;
  long long ldx = 0;        ///< floats between tokens of x, a multiple of 4
  float* y = nullptr;
  long long ldy = 0;
  bool accumulate = false;  ///< y += W x (the residual add), else y = W x
};

/// Attention of a forward's rows over one layer of the cache (the cache itself: KvLayer).
struct AttentionArgs {
  const float* qkv = nullptr;  ///< [n][ld_qkv]: q (rotated) at column 0
  long long ld_qkv = 0;
  const ForwardTrees* trees = nullptr;
  int heads = 0, kv_heads = 0, head_size = 0;
  float scale = 0;  ///< 1 / sqrt(head_size)
  float* out = nullptr;  ///< [n][heads * head_size]
  bf16* out16 = nullptr;  ///< out rounded to bf16 too, for a tensor-core product (or none)
};

/// One layer's K and V rows of sequence 0, in the cache's element type K (fp32, or bf16 as its
/// bits, the weights' format): slot s, kv head g at (s * kv_heads + g) * head_size, plus the
/// tree's cache_offset.
template <class K>
struct KvLayer {
  K* k = nullptr;
  K* v = nullptr;
};

/// Four cache elements from `p` (16-byte aligned fp32, or 8-byte aligned bf16) as floats: one
/// vector load.
template <class K>
SPECDEC_HD inline void load4(float* to, const K* p) {
  if constexpr (sizeof(K) == 4) {
    copy16(to, p);
  } else {
    alignas(8) K h[4];
    copy_vector<8>(h, p);
    for (int j = 0; j < 4; ++j) to[j] = to_float(h[j]);
  }
}

/// `v` as a cache element: fp32 as it is, bf16 rounded to the nearest (the only rounding the
/// cache adds: a node's K/V rows hold the same bits whichever forward wrote them).
template <class K>
SPECDEC_HD inline K to_cache(float v) {
  if constexpr (sizeof(K) == 2) return synthetic::bf16_bits(v);
  else return v;
}

/// The cache slot of attended position p of a node: the prefix, then its ancestors' slots.
SPECDEC_HD inline int attended_slot(int p, int base, const int* ancestors) {
  return p < base ? p : base + ancestors[p - base];
}

/// Writes node i's ancestors (itself included), root first, to `ancestors` (int, or 16-bit where
/// shared memory is short); returns how many.
template <class Index>
SPECDEC_HD inline int tree_ancestors(const std::uint32_t* mask, int words, int i, Index* ancestors) {
  int count = 0;
  for (int j = 0; j <= i; ++j)
    if (core::is_ancestor(mask, words, j, i)) ancestors[count++] = static_cast<Index>(j);
  return count;
}

/// Positions per split of the attention rule (one a thread of an attention block).
inline constexpr int attention_split = attention_threads;

/// Splits of `attended` positions.
SPECDEC_HD inline int attention_splits(int attended) { return (attended + attention_split - 1) / attention_split; }

/// Floats of a split's partial in SplitAttention's output: its max, its weights' total, then the
/// head's value sums.
SPECDEC_HD inline int split_partial_floats(int head_size) { return head_size + 2; }

/// Where (row, head)'s partial of `split` starts in the attention's partials:
/// [row][head][split_stride][split_partial_floats(head_size)].
SPECDEC_HD inline long long split_partial_at(int row, int head, int heads, int split_stride, int split, int head_size) {
  return ((static_cast<long long>(row) * heads + head) * split_stride + split) * split_partial_floats(head_size);
}

/// A split's value sum for one element: its parts (`parts_of_e[r * head_size]`, r < 128 /
/// head_size) added in increasing order from 0, as the rule says.
SPECDEC_HD inline float split_value(const float* parts_of_e, int head_size) {
  float o = 0.0f;
  for (int r = 0; r < attention_threads / head_size; ++r) o = core::add_rn(o, parts_of_e[r * head_size]);
  return o;
}

/// The rule's fold of a split into the run of the splits before it: the factors that bring both
/// to their common max.
struct SplitFold {
  float keep, take, max;  ///< the run's factor, the split's, and the new max
};
SPECDEC_HD inline SplitFold split_fold(float run_max, float split_max) {
  const float m = fmaxf(run_max, split_max);
  return {core::exp_portable(core::sub_rn(run_max, m)), core::exp_portable(core::sub_rn(split_max, m)), m};
}
SPECDEC_HD inline float folded(float run, float split, const SplitFold& f) {
  return core::add_rn(core::mul_rn(run, f.keep), core::mul_rn(split, f.take));
}

/// Shared memory of a SplitAttention block: the node's ancestors, how many positions it attends
/// to, the query, the split's weights and the reductions' partials.
struct SplitAttentionShared {
  static constexpr int ancestors = 0;
  static constexpr int attended = ancestors + max_tree_nodes * 4;
  static constexpr int query = attended + 16;
  static constexpr int weights = query + attention_threads * 4;
  static constexpr int part = weights + attention_threads * 4;
  static constexpr int bytes = part + attention_threads * 4;
};

/// From how many rows a forward's attention is TiledAttention rather than SplitAttention (the same
/// bits either way; a guess until cuda_forward_bench times both).
inline constexpr int tiled_attention_rows = 16;

/// TiledAttention's tiles: a block takes attention_queries (node, head) queries of one tree and
/// one KV head (the query heads of that KV head, node after node), and the attended positions in
/// chunks of attention_chunk.
inline constexpr int attention_queries = 16;
inline constexpr int attention_chunk = 16;

/// Where a TiledAttention block keeps what it shares (floats unless said), for head size hs: the
/// chunk's prefix K and V rows, the queries, the chunk's scores (then weights), each query's 128
/// lane weights of the split (then its value parts), the split's max and total, how many
/// positions it attends to (int), and each node's ancestors (16-bit, max_tree_nodes per node; a
/// tile holds at most attention_queries nodes).
/// Rows are hs + 4 floats apart: 16-byte aligned, and not all in one shared-memory bank.
struct TiledAttentionShared {
  int stride, k, v, q, w, lanes, max, total, length, ancestors, bytes;
  SPECDEC_HD explicit TiledAttentionShared(int hs) : stride(hs + 4) {
    k = 0;
    v = k + attention_chunk * stride * 4;
    q = v + attention_chunk * stride * 4;
    w = q + attention_queries * stride * 4;
    lanes = w + attention_queries * attention_chunk * 4;
    max = lanes + attention_queries * attention_threads * 4;
    total = max + attention_queries * 4;
    length = total + attention_queries * 4;
    ancestors = length + attention_queries * 4;
    bytes = ancestors + attention_queries * max_tree_nodes * 2;
  }
};

/// TiledAttention's tiles of a tree of `nodes` nodes with `group` query heads per KV head.
SPECDEC_HD inline int attention_tiles(int nodes, int group) {
  return (nodes * group + attention_queries - 1) / attention_queries;
}
/// The tiles of every tree of `trees` (host copy) in turn.
inline int attention_tiles_of(const ForwardTrees& trees, int group) {
  int all = 0;
  for (int b = 0; b < trees.count; ++b) all += attention_tiles(trees.tree_size(b), group);
  return all;
}

/// Shared memory of a TiledAttention launch, for head size hs.
SPECDEC_HD inline int tiled_attention_shared_bytes(int head_size) { return TiledAttentionShared(head_size).bytes; }

/// An attention score: the sequential fmaf dot of the query and the key over the head (vector
/// loads of 4 elements of the key: head_size % 4 == 0, rows aligned to 4 elements), times the
/// scale. Both attention kernels call it, so their scores have the same bits.
template <class K>
SPECDEC_HD inline float attention_score(const float* query, const K* key, int head_size, float scale) {
  float s = 0.0f;
  // Unrolled for loads in flight; the sum keeps its order.
#if defined(__CUDA_ARCH__)
#pragma unroll 16
#endif
  for (int e = 0; e < head_size; e += 4) {
    alignas(16) float k4[4];
    load4(k4, key + e);
    for (int j = 0; j < 4; ++j) s = fmaf(query[e + j], k4[j], s);
  }
  return core::mul_rn(s, scale);
}

/// Head sizes the value pass splits evenly over the block, in whole 16-byte key loads.
SPECDEC_HD inline bool attention_head_size_ok(int head_size) {
  return head_size >= 4 && head_size <= attention_threads && attention_threads % head_size == 0;
}

// std::min and std::max are host functions (and take references, which device code cannot bind
// to a namespace-scope constant).
SPECDEC_HD inline int min_of(int a, int b) { return a < b ? a : b; }
SPECDEC_HD inline int max_of(int a, int b) { return a > b ? a : b; }

/// Blocks of a grid-stride loop over `elements` with 256 threads (at most 4096).
inline unsigned stride_blocks(long long elements) {
  return static_cast<unsigned>(std::max<long long>(1, std::min<long long>((elements + 255) / 256, 4096)));
}

// ---- kernels ----------------------------------------------------------------------------------

/// One block per row: x[t] = embedding[token of row t] in fp32; a token outside the vocabulary
/// gets a row of NaN, which the verifier turns into an error (no read out of bounds).
template <class W>
struct Embed {
  const W* embedding;
  const ForwardTrees* trees;
  int rows, vocab, dim;  ///< rows: of the launch
  float* x;
  long long ldx;

  LaunchShape shape() const { return {static_cast<unsigned>(rows), 1, 256, 0}; }
  template <class Thread>
  SPECDEC_HD void operator()(const Thread& th) const {
    const int t = th.block_x();
    if (t >= trees->rows) return;  // a bucket's padding
    const ForwardTree& tree = trees->tree[trees->tree_of(t)];
    const token_t token = tree.token[t - tree.first_row];
    const bool ok = token >= 0 && token < vocab;
    const W* row = embedding + static_cast<long long>(ok ? token : 0) * dim;
    for (int j = th.thread(); j < dim; j += th.threads())
      x[t * ldx + j] = ok ? to_float(row[j]) : core::float_from_bits(0x7fc00000u);
  }
};

/// One block of norm_threads per row: out[t] = weight * (x[t] / rms(x[t])), eps 1e-5; out16 (if
/// any, rows dim apart) the same rounded to bf16, for a tensor-core product.
struct RmsNorm {
  const float* x;
  long long ldx;
  const float* weight;
  int dim, rows;
  float* out;
  long long ldo;
  bf16* out16 = nullptr;

  /// Elements a thread holds in registers (dim up to 8192); past them it reads memory again.
  static constexpr int held = 32;

  LaunchShape shape() const { return {static_cast<unsigned>(rows), 1, norm_threads, norm_threads * sizeof(float)}; }
  template <class Thread>
  SPECDEC_HD void operator()(const Thread& th) const {
    float* part = reinterpret_cast<float*>(th.shared());
    const int t = th.block_x(), i = th.thread();
    const float* xt = x + t * ldx;
    // Every load first: the stores below may alias x as far as the compiler knows, so loads
    // interleaved with them would wait for each other.
    float xs[held], ws[held];
    SPECDEC_UNROLL
    for (int c = 0; c < held; ++c) {
      const int j = i + c * norm_threads;
      xs[c] = j < dim ? xt[j] : 0.0f;
      ws[c] = j < dim ? weight[j] : 0.0f;
    }
    float ss = 0.0f;
    SPECDEC_UNROLL
    for (int c = 0; c < held; ++c)
      if (i + c * norm_threads < dim) ss = fmaf(xs[c], xs[c], ss);
    for (int j = i + held * norm_threads; j < dim; j += norm_threads) ss = fmaf(xt[j], xt[j], ss);
    part[i] = ss;
    const float total = th.block_sum(part);
    const float scale = core::div_rn(1.0f, sqrtf(core::add_rn(core::div_rn(total, static_cast<float>(dim)), 1e-5f)));
    const auto put = [&](int j, float w, float xj) {
      const float v = core::mul_rn(w, core::mul_rn(scale, xj));
      out[t * ldo + j] = v;
      if (out16) out16[t * dim + j] = synthetic::bf16_bits(v);
    };
    SPECDEC_UNROLL
    for (int c = 0; c < held; ++c)
      if (i + c * norm_threads < dim) put(i + c * norm_threads, ws[c], xs[c]);
    for (int j = i + held * norm_threads; j < dim; j += norm_threads) put(j, weight[j], xt[j]);
  }
};

/// Blocks of product_warps warps; each warp owns product_rows rows and passes over them once per
/// product_tokens tokens (later passes read the rows from cache). fmaf in the file's order.
template <class W>
struct Product {
  ProductArgs a;

  LaunchShape shape() const {
    constexpr int rows_per_block = product_warps * product_rows;
    return {static_cast<unsigned>((a.out + rows_per_block - 1) / rows_per_block), 1, warp_threads * product_warps, 0};
  }
  template <class Thread>
  SPECDEC_HD void operator()(const Thread& th) const {
    constexpr int V = product_vector<W>;
    const int warp = th.thread() / warp_threads, lane = th.thread() % warp_threads;
    const int row0 = (th.block_x() * product_warps + warp) * product_rows;
    if (row0 >= a.out) return;  // the whole warp: only warp-level steps follow
    const W* w = static_cast<const W*>(a.w);
    for (int t0 = 0; t0 < a.n; t0 += product_tokens) {
      float acc[product_rows * product_tokens];  // [r * product_tokens + t]
      for (float& v : acc) v = 0.0f;
      // Unrolled for loads in flight; the sums keep their order (k increasing per accumulator).
#if defined(__CUDA_ARCH__)
#pragma unroll 4
#endif
      for (int k = lane * V; k < a.in; k += warp_threads * V) {
        float wv[product_rows][V];
        SPECDEC_UNROLL
        for (int r = 0; r < product_rows; ++r) {
          alignas(16) W raw[V] = {};
          if (row0 + r < a.out) copy16(raw, w + static_cast<long long>(row0 + r) * a.in + k);
          SPECDEC_UNROLL
          for (int e = 0; e < V; ++e) wv[r][e] = to_float(raw[e]);
        }
        SPECDEC_UNROLL
        for (int t = 0; t < product_tokens; ++t) {
          if (t0 + t >= a.n) break;
          alignas(16) float xv[V];
          const float* xt = a.x + (t0 + t) * a.ldx + k;
          SPECDEC_UNROLL
          for (int e = 0; e < V; e += 4) copy16(xv + e, xt + e);
          SPECDEC_UNROLL
          for (int r = 0; r < product_rows; ++r)
            SPECDEC_UNROLL
            for (int e = 0; e < V; ++e) acc[r * product_tokens + t] = fmaf(wv[r][e], xv[e], acc[r * product_tokens + t]);
        }
      }
      th.warp_sums(acc);
      if (lane != 0) continue;
      for (int r = 0; r < product_rows; ++r)
        for (int t = 0; t < product_tokens; ++t)
          if (row0 + r < a.out && t0 + t < a.n) {
            float* y = a.y + (t0 + t) * a.ldy + row0 + r;
            const float v = acc[r * product_tokens + t];
            *y = a.accumulate ? core::add_rn(*y, v) : v;
          }
    }
  }
};

/// The tensor-core product of bf16 weights: y[t][o] (+)= sum_k W[o][k] x16[t][k] (x16: the
/// activations rounded to bf16 by the kernel that made them; rows `in` apart).
/// A block owns RowTiles x 16 rows; its mma_warps warps split k into k-blocks of 32 (warp w takes
/// j = w, w + 8, ...), each warp's partial sums of RowTiles x Tiles MMAs of 16 rows and 8 tokens
/// stay in registers, and the block adds the warps' partials in warp order: the rule at the top
/// of this file. Tiles (tokens a pass, / 8) and RowTiles are a matter of registers and speed only
/// (no output's sums depend on them): <1, 1> for a plain step, whose weights are all there is to
/// read; <8, 2> for trees, where every block reads all the tokens' rows (from L2), so two row tiles
/// a block halve those reads.
///
/// Each k-block is one 16-byte load a lane of each of two weight rows a row tile (lane group g:
/// rows g and g + 8, lane q of the group: elements 8q .. 8q + 7) and one of each token (token g of
/// the MMA, the same elements), fed to two MMAs without a shuffle: MMA s takes elements
/// 8q + 4s + 0..3, which the fragments (kernels/grid.hpp) see as k = 2q, 2q + 1, 2q + 8, 2q + 9.
/// The same fixed permutation of k for the weights and the tokens, whatever n is.
template <int Tiles, int RowTiles>
struct MmaProduct {
  ProductArgs a;  ///< a.x unused: the tokens come as x16
  const bf16* x16;

  static constexpr int tokens = Tiles * mma_tokens;   // a pass
  static constexpr int rows = RowTiles * mma_rows;    // a block
  LaunchShape shape() const {
    return {static_cast<unsigned>((a.out + rows - 1) / rows), 1, warp_threads * mma_warps,
            static_cast<std::size_t>(mma_warps) * mma_rows * tokens * sizeof(float)};
  }
  template <class Thread>
  SPECDEC_HD void operator()(const Thread& th) const {
    const int warp = th.thread() / warp_threads, lane = th.thread() % warp_threads;
    const int g = lane / 4, q = lane % 4, block_row = th.block_x() * rows;
    float* partial = reinterpret_cast<float*>(th.shared());  // [warp][row of a tile][token of the pass]
    const bf16* w = static_cast<const bf16*>(a.w);
    const int k_blocks = a.in / mma_k_block;
    for (int t0 = 0; t0 < a.n; t0 += tokens) {
      const int tiles = min_of(Tiles, (a.n - t0 + mma_tokens - 1) / mma_tokens);
      float acc[RowTiles][Tiles][4] = {};
#if defined(__CUDA_ARCH__)
#pragma unroll 4
#endif
      for (int j = warp; j < k_blocks; j += mma_warps) {
        const int k = j * mma_k_block + q * 8;
        alignas(16) std::uint32_t lo[RowTiles][4] = {}, hi[RowTiles][4] = {};  // rows g, g + 8; past `out`: zeros
        SPECDEC_UNROLL
        for (int rt = 0; rt < RowTiles; ++rt) {
          const int row = block_row + rt * mma_rows + g;
          if (row < a.out) copy16(lo[rt], w + static_cast<long long>(row) * a.in + k);
          if (row + 8 < a.out) copy16(hi[rt], w + static_cast<long long>(row + 8) * a.in + k);
        }
        SPECDEC_UNROLL
        for (int tt = 0; tt < Tiles; ++tt) {
          if (tt >= tiles) break;
          const int token = t0 + tt * mma_tokens + g;
          alignas(16) std::uint32_t x[4] = {};  // an MMA's tokens past n: zeros
          if (token < a.n) copy16(x, x16 + static_cast<long long>(token) * a.in + k);
          SPECDEC_UNROLL
          for (int rt = 0; rt < RowTiles; ++rt) {
            th.mma_bf16(acc[rt][tt], {lo[rt][0], hi[rt][0], lo[rt][1], hi[rt][1]}, {x[0], x[1]});
            th.mma_bf16(acc[rt][tt], {lo[rt][2], hi[rt][2], lo[rt][3], hi[rt][3]}, {x[2], x[3]});
          }
        }
      }
      // The warps' partials, a row tile at a time (shared memory for one).
      SPECDEC_UNROLL
      for (int rt = 0; rt < RowTiles; ++rt) {
        const int row0 = block_row + rt * mma_rows;
        SPECDEC_UNROLL
        for (int tt = 0; tt < Tiles; ++tt)
          for (int r = 0; r < 4; ++r)
            partial[(warp * mma_rows + mma_d_row(lane, r)) * tokens + tt * mma_tokens + mma_d_col(lane, r)] =
                acc[rt][tt][r];
        th.sync();
        // A thread's outputs: idx = thread + 256 c. The residuals they add to are loaded before
        // any is stored (the stores may alias them as far as the compiler knows).
        constexpr int threads = warp_threads * mma_warps, each = (mma_rows * tokens + threads - 1) / threads;
        const auto output = [&](int c) -> float* {
          const int idx = th.thread() + c * threads, r = idx / tokens, t = idx % tokens;
          const bool mine = idx < mma_rows * tokens && row0 + r < a.out && t0 + t < a.n;
          return mine ? a.y + (t0 + t) * a.ldy + row0 + r : nullptr;
        };
        float residual[each];
        SPECDEC_UNROLL
        for (int c = 0; c < each; ++c) {
          float* y = output(c);
          residual[c] = y && a.accumulate ? *y : 0.0f;
        }
        SPECDEC_UNROLL
        for (int c = 0; c < each; ++c) {
          float* y = output(c);
          if (!y) continue;
          const int idx = th.thread() + c * threads, r = idx / tokens, t = idx % tokens;
          float v = partial[r * tokens + t];
          for (int p = 1; p < mma_warps; ++p) v = core::add_rn(v, partial[(p * mma_rows + r) * tokens + t]);
          *y = a.accumulate ? core::add_rn(residual[c], v) : v;
        }
        th.sync();  // the partials are rewritten by the next row tile or pass
      }
    }
  }
};

/// The tensor-core product `a` by one variant: <8, 2> for `trees`, else <1, 1> (the same bits).
template <class Launch>
void launch_mma_variant(bool trees, const ProductArgs& a, const bf16* x16, Launch launch) {
  if (trees) launch(MmaProduct<8, 2>{a, x16});
  else launch(MmaProduct<1, 1>{a, x16});
}

/// The tensor-core product `a` of n tokens as the target runs it: the variant for n.
template <class Launch>
void launch_mma_product(const ProductArgs& a, const bf16* x16, Launch launch) {
  launch_mma_variant(a.n > mma_tokens, a, x16, launch);
}

/// One block per row: rotates row t's q and k by RoPE at its node's position (base + depth[i],
/// node i of its tree) and writes its k and v rows at its sequence's cache slot base + i of this
/// layer (K: the cache's element type). cos_sin: [position][head_size / 2] pairs (cos, sin).
template <class K>
struct RopeStore {
  float* qkv;
  long long ld_qkv;
  const ForwardTrees* trees;
  const float* cos_sin;
  int rows, dim, kv_dim, head_size;  ///< rows: of the launch
  KvLayer<K> cache;

  LaunchShape shape() const { return {static_cast<unsigned>(rows), 1, 256, 0}; }
  template <class Thread>
  SPECDEC_HD void operator()(const Thread& th) const {
    using core::mul_rn;
    const int t = th.block_x();
    if (t >= trees->rows) return;  // a bucket's padding: no K/V written
    const ForwardTree& tree = trees->tree[trees->tree_of(t)];
    const int i = t - tree.first_row;
    float* row = qkv + t * ld_qkv;
    const int position = tree.base + tree.depth[i];
    const float* angles = cos_sin + static_cast<long long>(position) * head_size;  // head_size / 2 pairs
    const long long slot_offset = tree.cache_offset + static_cast<long long>(tree.base + i) * kv_dim;
    // Pairs of q, then of k; one thread per pair, `batch` pairs a thread loaded before any is
    // stored (the stores may alias the loads as far as the compiler knows).
    constexpr int batch = 8;
    const int pairs = (dim + kv_dim) / 2, threads = th.threads();
    for (int first = th.thread(); first < pairs; first += batch * threads) {
      float v0[batch], v1[batch], c[batch], s[batch];
      SPECDEC_UNROLL
      for (int b = 0; b < batch; ++b) {
        const int col = 2 * (first + b * threads);  // q columns [0, dim), k columns [dim, dim + kv_dim)
        if (col >= 2 * pairs) break;
        const int in_head = (col < dim ? col : col - dim) % head_size;
        c[b] = angles[in_head];
        s[b] = angles[in_head + 1];
        v0[b] = row[col];
        v1[b] = row[col + 1];
      }
      SPECDEC_UNROLL
      for (int b = 0; b < batch; ++b) {
        const int col = 2 * (first + b * threads);
        if (col >= 2 * pairs) break;
        const float r0 = core::sub_rn(mul_rn(v0[b], c[b]), mul_rn(v1[b], s[b]));
        const float r1 = core::add_rn(mul_rn(v0[b], s[b]), mul_rn(v1[b], c[b]));
        row[col] = r0;
        row[col + 1] = r1;
        if (col >= dim) {
          cache.k[slot_offset + col - dim] = to_cache<K>(r0);
          cache.k[slot_offset + col - dim + 1] = to_cache<K>(r1);
        }
      }
    }
    for (int first = th.thread(); first < kv_dim; first += batch * threads) {
      float v[batch];
      SPECDEC_UNROLL
      for (int b = 0; b < batch; ++b)
        if (first + b * threads < kv_dim) v[b] = row[dim + kv_dim + first + b * threads];
      SPECDEC_UNROLL
      for (int b = 0; b < batch; ++b)
        if (first + b * threads < kv_dim) cache.v[slot_offset + first + b * threads] = to_cache<K>(v[b]);
    }
  }
};

/// Attention for few rows, one block per (head, split, row): blocks (heads x splits, rows) of
/// attention_threads, thread i on position 128 s + i of its row's split s, SplitAttentionShared of
/// shared memory. Each block writes its split's partial (max, total, values) to `partials`, and
/// AttentionFold folds each row's splits: one node's attention to a long cache spreads over
/// heads x L / 128 blocks. The order of every sum is the file's rule.
template <class K>
struct SplitAttention {
  AttentionArgs a;
  KvLayer<K> cache;
  int rows, splits;  ///< rows of the launch; splits of the most positions one of them may attend to
  int split_stride;  ///< splits between two (row, head) partials
  float* partials;   ///< [row][head][split_stride][split_partial_floats(head_size)]

  LaunchShape shape() const {
    return {static_cast<unsigned>(a.heads * splits), static_cast<unsigned>(rows), attention_threads,
            static_cast<std::size_t>(SplitAttentionShared::bytes)};
  }
  template <class Thread>
  SPECDEC_HD void operator()(const Thread& th) const {
    using S = SplitAttentionShared;
    unsigned char* shared = th.shared();
    int* ancestors = reinterpret_cast<int*>(shared + S::ancestors);
    int* attended = reinterpret_cast<int*>(shared + S::attended);
    float* query = reinterpret_cast<float*>(shared + S::query);
    float* weights = reinterpret_cast<float*>(shared + S::weights);
    float* part = reinterpret_cast<float*>(shared + S::part);
    const int h = th.block_x() % a.heads, split = th.block_x() / a.heads, t = th.block_y(), tid = th.thread();
    if (t >= a.trees->rows) return;  // a bucket's padding (the whole block)
    const ForwardTree& tree = a.trees->tree[a.trees->tree_of(t)];
    const int i = t - tree.first_row, base = tree.base, first = split * attention_split;
    const int hs = a.head_size, group = a.heads / a.kv_heads, g = h / group;
    if (tid == 0) *attended = base + tree_ancestors(tree.mask, tree.words_per_row, i, ancestors);
    if (tid < hs) query[tid] = a.qkv[t * a.ld_qkv + h * hs + tid];
    th.sync();
    const int L = *attended;
    if (first >= L) return;  // past this row's splits (the whole block)
    const long long row_stride = static_cast<long long>(a.kv_heads) * hs;
    const K* k_cache = cache.k + tree.cache_offset + g * hs;
    const K* v_cache = cache.v + tree.cache_offset + g * hs;

    const int p = first + tid;
    const float score = p < L ? attention_score(query, k_cache + attended_slot(p, base, ancestors) * row_stride, hs, a.scale)
                              : core::float_from_bits(0xff800000u);  // -inf
    part[tid] = score;
    const float split_max = th.block_max(part);
    const float w = p < L ? core::exp_portable(core::sub_rn(score, split_max)) : 0.0f;
    weights[tid] = w;
    part[tid] = w;
    const float total = th.block_sum(part);  // its barrier also publishes every weight

    // Values: thread (my_part, e) over the split's p = my_part, my_part + parts, ...; `ahead`
    // positions' loads issued before their sums, which keep their order.
    const int parts = attention_threads / hs, e = tid % hs, my_part = tid / hs, end = min_of(L, first + attention_split);
    const auto value = [&](int q) { return to_float(v_cache[attended_slot(q, base, ancestors) * row_stride + e]); };
    constexpr int ahead = 32;
    float acc = 0.0f;
    int q = first + my_part;
    for (; q + (ahead - 1) * parts < end; q += ahead * parts) {
      float v[ahead];
      SPECDEC_UNROLL
      for (int j = 0; j < ahead; ++j) v[j] = value(q + j * parts);
      SPECDEC_UNROLL
      for (int j = 0; j < ahead; ++j) acc = fmaf(weights[q + j * parts - first], v[j], acc);
    }
    for (; q < end; q += parts) acc = fmaf(weights[q - first], value(q), acc);
    part[tid] = acc;  // part[my_part * hs + e]
    th.sync();
    if (tid < hs) {
      float* out = partials + split_partial_at(t, h, a.heads, split_stride, split, hs);
      if (tid == 0) {
        out[0] = split_max;
        out[1] = total;
      }
      out[2 + tid] = split_value(part + tid, hs);
    }
  }
};

/// The attention's second launch, after SplitAttention or TiledAttention: one block per (head, row)
/// of attention_threads, thread e of the head folds the row's splits in increasing order (the
/// file's rule) and writes value / total.
struct AttentionFold {
  AttentionArgs a;
  int rows, split_stride;
  const float* partials;  ///< SplitAttention's or TiledAttention's

  // Shared memory: the node's ancestors (as SplitAttention finds them), then how many positions it
  // attends to.
  static constexpr int attended_at = max_tree_nodes * 4;
  LaunchShape shape() const {
    return {static_cast<unsigned>(a.heads), static_cast<unsigned>(rows), attention_threads, attended_at + 16};
  }
  template <class Thread>
  SPECDEC_HD void operator()(const Thread& th) const {
    int* ancestors = reinterpret_cast<int*>(th.shared());
    int* attended = reinterpret_cast<int*>(th.shared() + attended_at);
    const int h = th.block_x(), t = th.block_y(), e = th.thread(), hs = a.head_size;
    if (t >= a.trees->rows) return;  // a bucket's padding (the whole block)
    const ForwardTree& tree = a.trees->tree[a.trees->tree_of(t)];
    if (e == 0) *attended = tree.base + tree_ancestors(tree.mask, tree.words_per_row, t - tree.first_row, ancestors);
    th.sync();
    if (e >= hs) return;
    const int stride = split_partial_floats(hs), splits = attention_splits(*attended);
    const float* partial = partials + split_partial_at(t, h, a.heads, split_stride, 0, hs);
    float run_max = partial[0], total = partial[1], value = partial[2 + e];
    // `batch` splits' loads issued before their folds, which keep their order.
    constexpr int batch = 8;
    for (int first = 1; first < splits; first += batch) {
      float m[batch], l[batch], v[batch];
      SPECDEC_UNROLL
      for (int b = 0; b < batch; ++b) {
        if (first + b >= splits) break;
        const float* split = partial + (first + b) * stride;
        m[b] = split[0];
        l[b] = split[1];
        v[b] = split[2 + e];
      }
      SPECDEC_UNROLL
      for (int b = 0; b < batch; ++b) {
        if (first + b >= splits) break;
        const SplitFold f = split_fold(run_max, m[b]);
        total = folded(total, l[b], f);
        value = folded(value, v[b], f);
        run_max = f.max;
      }
    }
    const long long at = t * static_cast<long long>(a.heads) * hs + h * hs + e;
    const float v = core::div_rn(value, total);
    a.out[at] = v;
    if (a.out16) a.out16[at] = synthetic::bf16_bits(v);
  }
};

/// Attention for many rows, one block per (KV head, split, tile of attention_queries queries of one
/// tree): blocks (KV heads x splits, the tiles of every tree in turn) of attention_threads,
/// tiled_attention_shared_bytes(head size) of shared memory. A block reads each cached prefix row
/// of its KV head and split once per pass (two: the split's max, then its weights and values) for
/// all its queries, 16 positions at a time, and writes each query's split partial as
/// SplitAttention does, for AttentionFold; a node's ancestors' rows (the tree's own slots) it
/// reads per node. The same sums in the same order as SplitAttention, so the same bits: which of
/// the two runs is a matter of speed only.
template <class K>
struct TiledAttention {
  AttentionArgs a;
  KvLayer<K> cache;
  int tile_blocks;   ///< of the launch: at least the trees' tiles (attention_tiles_of), the rest skipped
  int splits;        ///< splits of the most positions a row of the launch may attend to
  int split_stride;  ///< as SplitAttention's
  float* partials;   ///< as SplitAttention's

  LaunchShape shape() const {
    return {static_cast<unsigned>(a.kv_heads * splits), static_cast<unsigned>(tile_blocks), attention_threads,
            static_cast<std::size_t>(tiled_attention_shared_bytes(a.head_size))};
  }

  template <class Thread>
  SPECDEC_HD void operator()(const Thread& th) const {
    using core::add_rn;
    const int g = th.block_x() % a.kv_heads, s0 = th.block_x() / a.kv_heads * attention_split;
    const int tid = th.thread(), hs = a.head_size, group = a.heads / a.kv_heads;
    // This block's tree and tile; query q of the tile is query first_query + q of the tree, its
    // node (first_query + q) / group, its head g * group + (first_query + q) % group.
    const ForwardTrees& trees = *a.trees;
    int b = 0, tile = th.block_y();
    while (b < trees.count && tile >= attention_tiles(trees.tree_size(b), group))
      tile -= attention_tiles(trees.tree_size(b++), group);
    if (b == trees.count) return;  // past the trees' tiles: a bucket's padding (the whole block)
    const ForwardTree& tree = trees.tree[b];
    const int base = tree.base, first_query = tile * attention_queries;
    const int queries = min_of(attention_queries, trees.tree_size(b) * group - first_query);
    const int first_node = first_query / group;

    const TiledAttentionShared S(hs);
    unsigned char* shared = th.shared();
    float* ks = reinterpret_cast<float*>(shared + S.k);
    float* vs = reinterpret_cast<float*>(shared + S.v);
    float* qs = reinterpret_cast<float*>(shared + S.q);
    float* ws = reinterpret_cast<float*>(shared + S.w);
    float* lanes = reinterpret_cast<float*>(shared + S.lanes);  // [query][lane]
    float* maxs = reinterpret_cast<float*>(shared + S.max);
    float* totals = reinterpret_cast<float*>(shared + S.total);
    int* length = reinterpret_cast<int*>(shared + S.length);
    auto* ancestors = reinterpret_cast<std::uint16_t*>(shared + S.ancestors);  // [tile node][depth]

    const auto node_of = [&](int q) { return (first_query + q) / group - first_node; };  // within the tile
    const long long row_stride = static_cast<long long>(a.kv_heads) * hs;
    const K* k_cache = cache.k + tree.cache_offset + g * hs;
    const K* v_cache = cache.v + tree.cache_offset + g * hs;
    const int nodes = node_of(queries - 1) + 1;
    for (int j = tid; j < nodes; j += attention_threads) {
      const int count =
          tree_ancestors(tree.mask, tree.words_per_row, first_node + j, ancestors + j * max_tree_nodes);
      for (int q = 0; q < queries; ++q)
        if (node_of(q) == j) length[q] = base + count;
    }
    // Query q's row and head.
    const auto row_of = [&](int q) { return tree.first_row + first_node + node_of(q); };
    const auto head_of = [&](int q) { return g * group + (first_query + q) % group; };
    for (int idx = tid; idx < queries * hs; idx += attention_threads) {
      const int q = idx / hs, e = idx % hs;
      qs[q * S.stride + e] = a.qkv[row_of(q) * a.ld_qkv + head_of(q) * hs + e];
    }
    for (int idx = tid; idx < queries * attention_threads; idx += attention_threads) lanes[idx] = 0.0f;
    for (int q = tid; q < queries; q += attention_threads) maxs[q] = core::float_from_bits(0xff800000u);  // -inf
    th.sync();
    int longest = 0;
    for (int q = 0; q < queries; ++q) longest = max_of(longest, length[q]);
    if (s0 >= longest) return;  // past every query's splits (the whole block)
    const int s_end = min_of(s0 + attention_split, longest);

    // A query's attended position p at or past base: its node's ancestor's cache row.
    const auto tree_row = [&](int q, int p) {
      return (base + ancestors[node_of(q) * max_tree_nodes + (p - base)]) * row_stride;
    };
    // Stages the chunk's prefix rows of K (and V) from p0, as floats.
    const auto stage = [&](int p0, bool values) {
      const int staged = max_of(0, min_of(attention_chunk, base - p0));
      for (int idx = tid * 4; idx < staged * hs; idx += attention_threads * 4) {
        const int p = idx / hs, e = idx % hs;
        load4(ks + p * S.stride + e, k_cache + (p0 + p) * row_stride + e);
        if (values) load4(vs + p * S.stride + e, v_cache + (p0 + p) * row_stride + e);
      }
    };
    // The chunk's scores into ws; -inf past a query's positions.
    const auto scores = [&](int p0) {
      for (int idx = tid; idx < queries * attention_chunk; idx += attention_threads) {
        const int q = idx / attention_chunk, p = p0 + idx % attention_chunk;
        const float* query = qs + q * S.stride;
        ws[idx] = p >= length[q] ? core::float_from_bits(0xff800000u)  // -inf
                  : p < base     ? attention_score(query, ks + (p % attention_chunk) * S.stride, hs, a.scale)
                                 : attention_score(query, k_cache + tree_row(q, p), hs, a.scale);
      }
    };

    const int parts = attention_threads / hs, e_of = tid % hs, part_of = tid / hs;
    // Pass 1: each query's max score in the split.
    for (int p0 = s0; p0 < s_end; p0 += attention_chunk) {
      stage(p0, false);
      th.sync();
      scores(p0);
      th.sync();
      for (int q = tid; q < queries; q += attention_threads)
        for (int p = 0; p < attention_chunk; ++p) maxs[q] = fmaxf(maxs[q], ws[q * attention_chunk + p]);
      th.sync();
    }
    // Pass 2: weights exp(s - max) into the lanes (lane p % 128: one a position of the split), and
    // the value parts: output (q, e, part) sums the split's p = part, part + parts, ... (parts =
    // 128 / hs). Thread tid holds part tid / hs of element tid % hs for every query.
    float acc[attention_queries];
    for (float& x : acc) x = 0.0f;
    for (int p0 = s0; p0 < s_end; p0 += attention_chunk) {
      stage(p0, true);
      th.sync();
      scores(p0);
      th.sync();
      for (int idx = tid; idx < queries * attention_chunk; idx += attention_threads) {
        const int q = idx / attention_chunk, p = p0 + idx % attention_chunk;
        if (p >= length[q]) continue;
        const float w = core::exp_portable(core::sub_rn(ws[idx], maxs[q]));
        ws[idx] = w;
        lanes[q * attention_threads + p % attention_threads] = w;
      }
      th.sync();
      for (int q = 0; q < queries; ++q)
        for (int p = p0 + (part_of - p0 % parts + parts) % parts; p < min_of(p0 + attention_chunk, length[q]); p += parts)
          acc[q] = fmaf(ws[q * attention_chunk + (p - p0)],
                        p < base ? vs[(p % attention_chunk) * S.stride + e_of] : to_float(v_cache[tree_row(q, p) + e_of]),
                        acc[q]);
      th.sync();  // the next chunk rewrites the staged rows and the weights
    }
    // Each query's total: the pairwise tree over its 128 lanes (block_sum's order).
    for (int q = tid; q < queries; q += attention_threads) {
      float* part = lanes + q * attention_threads;
      for (int s = attention_threads / 2; s >= 1; s /= 2)
        for (int i = 0; i < s; ++i) part[i] = add_rn(part[i], part[i + s]);
      totals[q] = part[0];
    }
    th.sync();
    for (int q = 0; q < queries; ++q) lanes[q * attention_threads + tid] = acc[q];  // [query][part * hs + e]
    th.sync();
    // The partial of each query that reaches the split: its max, total and values.
    const int split = s0 / attention_split, stride = split_partial_floats(hs);
    for (int idx = tid; idx < queries * stride; idx += attention_threads) {
      const int q = idx / stride, f = idx % stride;
      if (s0 >= length[q]) continue;
      partials[split_partial_at(row_of(q), head_of(q), a.heads, split_stride, split, hs) + f] =
          f == 0 ? maxs[q] : f == 1 ? totals[q] : split_value(lanes + q * attention_threads + f - 2, hs);
    }
  }
};

/// Grid-stride over rows * hidden: out[t][j] = silu(h13[t][j]) * h13[t][hidden + j]; out16 (if
/// any) the same rounded to bf16, for a tensor-core product.
struct SwiGlu {
  const float* h13;
  int hidden, rows;
  float* out;
  bf16* out16 = nullptr;

  LaunchShape shape() const { return {stride_blocks(static_cast<long long>(rows) * hidden), 1, 256, 0}; }
  template <class Thread>
  SPECDEC_HD void operator()(const Thread& th) const {
    const long long total = static_cast<long long>(rows) * hidden;
    for (long long idx = th.block_x() * static_cast<long long>(th.threads()) + th.thread(); idx < total;
         idx += static_cast<long long>(th.blocks_x()) * th.threads()) {
      const long long t = idx / hidden, j = idx % hidden;
      const float a = h13[t * 2 * hidden + j], b = h13[t * 2 * hidden + hidden + j];
      const float v = core::mul_rn(core::div_rn(a, core::add_rn(1.0f, core::exp_portable(-a))), b);
      out[idx] = v;
      if (out16) out16[idx] = synthetic::bf16_bits(v);
    }
  }
};

/// Grid-stride over `count`: dst[i] = the synthetic weight (seed, kind, layer, first + i), stored
/// as W (bf16 rounded to nearest even).
template <class W>
struct FillSynthetic {
  W* dst;
  unsigned long long count;
  std::uint64_t seed;
  synthetic::tensor kind;
  int layer;

  LaunchShape shape() const {
    return {static_cast<unsigned>(std::min<unsigned long long>(std::max(1ull, (count + 255) / 256), 65535)), 1, 256, 0};
  }
  template <class Thread>
  SPECDEC_HD void operator()(const Thread& th) const {
    for (unsigned long long i = th.block_x() * static_cast<unsigned long long>(th.threads()) + th.thread(); i < count;
         i += static_cast<unsigned long long>(th.blocks_x()) * th.threads()) {
      const float w = synthetic::weight(seed, kind, layer, i);
      if constexpr (sizeof(W) == 2) dst[i] = synthetic::bf16_bits(w);
      else dst[i] = w;
    }
  }
};

}  // namespace specdec::kernels::llama

// Every kernel above that the device Llama launches, as X(type in specdec::kernels::llama; bf16 is
// spelled std::uint16_t so that the names resolve outside that namespace): their launches are
// compiled once in specdec::cuda_kernels (src/cuda_kernels.cu) and declared extern with
// SPECDEC_CUDA_KERNELS_EXTERN (targets/cuda_llama.hpp). A kernel missing here fails to link in a
// C++ file that uses CudaLlamaTarget with SPECDEC_CUDA_KERNELS_EXTERN.
#define SPECDEC_LLAMA_GRID_KERNELS(X)                                                                   \
  X(Embed<float>) X(Embed<std::uint16_t>) X(RmsNorm) X(Product<float>) X(Product<std::uint16_t>)        \
  X(MmaProduct<1, 1>) X(MmaProduct<8, 2>) X(RopeStore<float>) X(RopeStore<std::uint16_t>)               \
  X(SplitAttention<float>) X(SplitAttention<std::uint16_t>) X(AttentionFold) X(TiledAttention<float>)   \
  X(TiledAttention<std::uint16_t>) X(SwiGlu) X(FillSynthetic<float>) X(FillSynthetic<std::uint16_t>)
