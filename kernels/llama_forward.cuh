// The kernels of CudaLlamaTarget's forward (targets/cuda_llama.cuh): embedding, RMSNorm, the
// weight products, RoPE with the K/V write, tree attention, SwiGLU, and the synthetic weights'
// fill. Thin __global__ functions (templates, so any number of .cu files may include this) over
// the index math of llama_forward_core below, which is host-callable so that its bounds are the
// ones the target checks before each launch.
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
//    The tensor-core form (bf16 weights, CudaLlamaOptions::tensor_cores): the activations are
//    rounded to bf16 once, and output (o, t) is a chain of WMMA 16x16x16 products over k = 0, 16,
//    32, ... in increasing order into one fp32 accumulator; tokens go 16 at a time, each its own
//    column of the tile, and an MMA's column depends on that column's operands only.
//  - RMSNorm: thread i of 256 sums x[j]² for j = i, i + 256, ... in increasing j, then the pairwise
//    tree over the 256 partials in shared memory.
//  - attention of (node, head): the node's attended positions are the cached slots 0 .. base - 1,
//    then its ancestors root first and itself (from the tree's mask), L in all: the sequence a
//    single-token forward of its path attends to, in the same order. Thread i of 128 takes
//    positions p = i, i + 128, ...: scores (a sequential fmaf dot over the head, e = 0, 1, ...),
//    a max (exact in any order), exp and a sum in increasing p, then the pairwise tree over the
//    128 partials;
//    values: thread (e, part) with parts = 128 / head_size sums p = part, part + parts, ... in
//    increasing p, then the parts are added in increasing order. So the order is fixed by L,
//    head_size and the constant 128: a chunk of a FIXED number of positions per thread, never a
//    number of chunks chosen by size.
// Device code is compiled without fast math; expf, sqrtf and division are IEEE-rounded by nvcc's
// defaults, fmaf is explicit, and every kernel runs the same instructions whatever n is.
#pragma once

#include <algorithm>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <specdec/config.hpp>
#include <specdec/core/tree.hpp>
#include <specdec/models/synthetic_weights.hpp>

namespace specdec::kernels::llama {

inline constexpr int norm_threads = 256;
inline constexpr int attention_threads = 128;
inline constexpr int product_warps = 8;   // warps per block
inline constexpr int product_rows = 2;    // output rows per warp
inline constexpr int product_tokens = 8;  // tokens per pass over a row
inline constexpr int max_tree_nodes = 256;
inline constexpr int max_attended = 8192;  // positions an attention block holds scores for

inline constexpr int max_forward_trees = 64;  // trees (requests) in one forward

/// One tree of a forward: its arrays (device memory), where its rows start, and its sequence.
struct ForwardTree {
  const token_t* token = nullptr;
  const int* depth = nullptr;
  const std::uint32_t* mask = nullptr;  ///< ancestor mask, words_per_row words per node
  int words_per_row = 0;
  int base = 0;                         ///< positions cached for its sequence (its root's slot)
  int first_row = 0;                    ///< row of its node 0 in the forward's activations
  long long cache_offset = 0;           ///< floats from a layer's rows of sequence 0 to its sequence's
};

/// The trees of one forward, passed by value to the kernels (about 3 KB): rows are the trees'
/// nodes, tree after tree.
struct ForwardTrees {
  int count = 0;
  ForwardTree tree[max_forward_trees];

  /// The tree that `row` belongs to: the last whose first_row <= row.
  SPECDEC_HD int tree_of(int row) const {
    int b = 0;
    while (b + 1 < count && tree[b + 1].first_row <= row) ++b;
    return b;
  }
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

/// Attention of a forward's rows over one layer of the cache.
struct AttentionArgs {
  const float* qkv = nullptr;  ///< [n][ld_qkv]: q (rotated) at column 0
  long long ld_qkv = 0;
  /// This layer's rows of sequence 0: slot s, kv head g at (s * kv_heads + g) * head_size, plus
  /// the tree's cache_offset.
  const float* k_cache = nullptr;
  const float* v_cache = nullptr;
  ForwardTrees trees;
  int heads = 0, kv_heads = 0, head_size = 0;
  float scale = 0;  ///< 1 / sqrt(head_size)
  float* out = nullptr;  ///< [n][heads * head_size]
};

/// The cache slot of attended position p of a node: the prefix, then its ancestors' slots.
SPECDEC_HD inline int attended_slot(int p, int base, const int* ancestors) {
  return p < base ? p : base + ancestors[p - base];
}

/// Writes node i's ancestors (itself included), root first, to `ancestors`; returns how many.
SPECDEC_HD inline int tree_ancestors(const std::uint32_t* mask, int words, int i, int* ancestors) {
  int count = 0;
  for (int j = 0; j <= i; ++j)
    if (core::is_ancestor(mask, words, j, i)) ancestors[count++] = j;
  return count;
}

/// Dynamic shared memory of an attention launch whose nodes attend to at most `positions`.
SPECDEC_HD inline int attention_shared_bytes(int positions) { return positions * static_cast<int>(sizeof(float)); }

/// Head sizes the value pass splits evenly over the block, in whole 16-byte key loads.
SPECDEC_HD inline bool attention_head_size_ok(int head_size) {
  return head_size >= 4 && head_size <= attention_threads && attention_threads % head_size == 0;
}

// ---- kernels --------------------------------------------------------------------------------

/// Grid: one block per row. x[t] = embedding[token of row t] in fp32; a token outside the
/// vocabulary gets a row of NaN, which the verifier turns into an error (no read out of bounds).
template <class W>
__global__ void embed_kernel(const W* embedding, ForwardTrees trees, int vocab, int dim, float* x, long long ldx) {
  const int t = blockIdx.x;
  const ForwardTree& tree = trees.tree[trees.tree_of(t)];
  const token_t token = tree.token[t - tree.first_row];
  const bool ok = token >= 0 && token < vocab;
  const W* row = embedding + static_cast<long long>(ok ? token : 0) * dim;
  for (int j = threadIdx.x; j < dim; j += blockDim.x) x[t * ldx + j] = ok ? to_float(row[j]) : __int_as_float(0x7fc00000);
}

/// Grid: n blocks of norm_threads. out[t] = weight * (x[t] / rms(x[t])), eps 1e-5.
template <class Unused = void>
__global__ void rmsnorm_kernel(const float* x, long long ldx, const float* weight, int dim, float* out, long long ldo) {
  __shared__ float part[norm_threads];
  const int t = blockIdx.x, i = threadIdx.x;
  const float* xt = x + t * ldx;
  float ss = 0.0f;
  for (int j = i; j < dim; j += norm_threads) ss = fmaf(xt[j], xt[j], ss);
  part[i] = ss;
  __syncthreads();
  for (int s = norm_threads / 2; s >= 1; s /= 2) {
    if (i < s) part[i] += part[i + s];
    __syncthreads();
  }
  const float scale = 1.0f / sqrtf(part[0] / static_cast<float>(dim) + 1e-5f);
  for (int j = i; j < dim; j += norm_threads) out[t * ldo + j] = weight[j] * (scale * xt[j]);
}

/// Grid: ceil(out / (product_warps * product_rows)) blocks of product_warps warps. Each warp owns
/// product_rows rows and passes over them once per product_tokens tokens (later passes read the
/// rows from cache). CUDA-core fmaf, in the order the file's rule states.
template <class W>
__global__ void product_kernel(ProductArgs a) {
  constexpr int V = product_vector<W>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = (blockIdx.x * product_warps + warp) * product_rows;
  if (row0 >= a.out) return;  // the whole warp: no block barrier follows
  const W* w = static_cast<const W*>(a.w);
  for (int t0 = 0; t0 < a.n; t0 += product_tokens) {
    float acc[product_rows][product_tokens];
#pragma unroll
    for (int r = 0; r < product_rows; ++r)
#pragma unroll
      for (int t = 0; t < product_tokens; ++t) acc[r][t] = 0.0f;
    // Unrolled for loads in flight; the sums keep their order (k increasing per accumulator).
#pragma unroll 4
    for (int k = lane * V; k < a.in; k += 32 * V) {
      float wv[product_rows][V];
#pragma unroll
      for (int r = 0; r < product_rows; ++r) {
        alignas(16) W raw[V];
        if (row0 + r < a.out) *reinterpret_cast<uint4*>(raw) = *reinterpret_cast<const uint4*>(w + static_cast<long long>(row0 + r) * a.in + k);
        else *reinterpret_cast<uint4*>(raw) = make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int e = 0; e < V; ++e) wv[r][e] = to_float(raw[e]);
      }
#pragma unroll
      for (int t = 0; t < product_tokens; ++t) {
        if (t0 + t >= a.n) break;
        alignas(16) float xv[V];
        const float* xt = a.x + (t0 + t) * a.ldx + k;
#pragma unroll
        for (int e = 0; e < V; e += 4) *reinterpret_cast<float4*>(xv + e) = *reinterpret_cast<const float4*>(xt + e);
#pragma unroll
        for (int r = 0; r < product_rows; ++r)
#pragma unroll
          for (int e = 0; e < V; ++e) acc[r][t] = fmaf(wv[r][e], xv[e], acc[r][t]);
      }
    }
#pragma unroll
    for (int r = 0; r < product_rows; ++r)
#pragma unroll
      for (int t = 0; t < product_tokens; ++t) {
        float v = acc[r][t];
#pragma unroll
        for (int offset = 16; offset >= 1; offset /= 2) v += __shfl_xor_sync(0xffffffffu, v, offset);
        if (lane == 0 && row0 + r < a.out && t0 + t < a.n) {
          float* y = a.y + (t0 + t) * a.ldy + row0 + r;
          *y = a.accumulate ? *y + v : v;
        }
      }
  }
}

/// Launches product_kernel for `a` on `stream` (the one place its grid is computed); a launch
/// error is left for the caller's cudaGetLastError.
template <class W>
inline void launch_product(const ProductArgs& a, cudaStream_t stream) {
  constexpr int rows_per_block = product_warps * product_rows;
  const unsigned blocks = static_cast<unsigned>((a.out + rows_per_block - 1) / rows_per_block);
  product_kernel<W><<<blocks, 32 * product_warps, 0, stream>>>(a);
}

inline constexpr int tc_tile = 16;   // WMMA m16n16k16
inline constexpr int tc_warps = 4;   // warps per block, tc_tile output rows each

/// Grid-stride over n * in: x16[t][k] = bf16 of x[t][k] (nearest even, as synthetic::bf16_bits).
template <class Unused = void>
__global__ void to_bf16_kernel(const float* x, long long ldx, int in, int n, bf16* x16) {
  const long long total = static_cast<long long>(n) * in;
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x)
    x16[idx] = synthetic::bf16_bits(x[(idx / in) * ldx + idx % in]);
}

/// Grid: ceil(out / (tc_warps * tc_tile)) blocks of tc_warps warps; bf16 weights; a.x unused: the
/// activations come as x16 ([rows rounded up to tc_tile][in] bf16, 32-byte aligned). Each warp owns
/// tc_tile rows and reads past `out` up to the tile's end (the weight buffer has that slack); rows
/// past out and tokens past n are never written. in, the rows' offsets and x16 are multiples of
/// tc_tile elements (WMMA's 32-byte alignment), checked by the target.
template <class Unused = void>
__global__ void product_tc_kernel(ProductArgs a, const bf16* x16) {
  using namespace nvcuda;
  __shared__ alignas(32) float tile[tc_warps][tc_tile * tc_tile];  // WMMA stores need 32-byte alignment
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = (blockIdx.x * tc_warps + warp) * tc_tile;
  if (row0 >= a.out) return;  // the whole warp: only warp-level synchronisation follows
  const __nv_bfloat16* w = static_cast<const __nv_bfloat16*>(a.w) + static_cast<long long>(row0) * a.in;
  const __nv_bfloat16* x = reinterpret_cast<const __nv_bfloat16*>(x16);
  float* out = tile[warp];
  for (int t0 = 0; t0 < a.n; t0 += tc_tile) {
    wmma::fragment<wmma::accumulator, tc_tile, tc_tile, tc_tile, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < a.in; k += tc_tile) {
      // A: W[row0 + i][k + j], row-major; B: x[t0 + j][k + i], i.e. column j is token t0 + j.
      wmma::fragment<wmma::matrix_a, tc_tile, tc_tile, tc_tile, __nv_bfloat16, wmma::row_major> wa;
      wmma::fragment<wmma::matrix_b, tc_tile, tc_tile, tc_tile, __nv_bfloat16, wmma::col_major> xb;
      wmma::load_matrix_sync(wa, w + k, a.in);
      wmma::load_matrix_sync(xb, x + static_cast<long long>(t0) * a.in + k, a.in);
      wmma::mma_sync(acc, wa, xb, acc);
    }
    wmma::store_matrix_sync(out, acc, tc_tile, wmma::mem_row_major);  // out[r * 16 + c]: row r, token c
    __syncwarp();
    for (int e = lane; e < tc_tile * tc_tile; e += 32) {
      const int r = e / tc_tile, c = e % tc_tile;
      if (row0 + r < a.out && t0 + c < a.n) {
        float* y = a.y + (t0 + c) * a.ldy + row0 + r;
        *y = a.accumulate ? *y + out[e] : out[e];
      }
    }
    __syncwarp();  // the tile is rewritten by the next token group
  }
}

/// Rounds x to bf16 into x16, then launches product_tc_kernel (the one place their grids are
/// computed); a launch error is left for the caller's cudaGetLastError.
inline void launch_product_tc(const ProductArgs& a, bf16* x16, cudaStream_t stream) {
  const long long elements = static_cast<long long>(a.n) * a.in;
  const unsigned convert_blocks = static_cast<unsigned>(std::min<long long>((elements + 255) / 256, 4096));
  to_bf16_kernel<><<<convert_blocks, 256, 0, stream>>>(a.x, a.ldx, a.in, a.n, x16);
  constexpr int rows_per_block = tc_warps * tc_tile;
  const unsigned blocks = static_cast<unsigned>((a.out + rows_per_block - 1) / rows_per_block);
  product_tc_kernel<><<<blocks, 32 * tc_warps, 0, stream>>>(a, x16);
}

/// Grid: one block per row. Rotates row t's q and k by RoPE at its node's position
/// (base + depth[i], node i of its tree) and writes its k and v rows at its sequence's cache slot
/// base + i of this layer. cos_sin: [position][head_size / 2] pairs (cos, sin).
template <class Unused = void>
__global__ void rope_store_kernel(float* qkv, long long ld_qkv, ForwardTrees trees, const float2* cos_sin, int dim,
                                  int kv_dim, int head_size, float* k_cache, float* v_cache) {
  const int t = blockIdx.x;
  const ForwardTree& tree = trees.tree[trees.tree_of(t)];
  const int i = t - tree.first_row;
  float* row = qkv + t * ld_qkv;
  const int position = tree.base + tree.depth[i];
  const float2* angles = cos_sin + static_cast<long long>(position) * (head_size / 2);
  const long long slot_offset = tree.cache_offset + static_cast<long long>(tree.base + i) * kv_dim;
  // Pairs of q, then of k; one thread per pair.
  for (int pair = threadIdx.x; pair < (dim + kv_dim) / 2; pair += blockDim.x) {
    const int col = 2 * pair;  // q columns [0, dim), k columns [dim, dim + kv_dim)
    const int in_head = (col < dim ? col : col - dim) % head_size;
    const float2 cs = angles[in_head / 2];
    const float v0 = row[col], v1 = row[col + 1];
    const float r0 = v0 * cs.x - v1 * cs.y, r1 = v0 * cs.y + v1 * cs.x;
    row[col] = r0;
    row[col + 1] = r1;
    if (col >= dim) {
      k_cache[slot_offset + col - dim] = r0;
      k_cache[slot_offset + col - dim + 1] = r1;
    }
  }
  for (int j = threadIdx.x; j < kv_dim; j += blockDim.x) v_cache[slot_offset + j] = row[dim + kv_dim + j];
}

/// Grid: (heads, rows) blocks of attention_threads, attention_shared_bytes(the most positions a
/// row attends to) bytes of dynamic shared memory. The order of every sum is the file's rule.
template <class Unused = void>
__global__ void attention_kernel(AttentionArgs a) {
  extern __shared__ float scores[];
  __shared__ int ancestors[max_tree_nodes];
  __shared__ int attended;
  __shared__ float part[attention_threads];
  __shared__ float query[attention_threads];
  const int h = blockIdx.x, t = blockIdx.y, tid = threadIdx.x;
  const ForwardTree& tree = a.trees.tree[a.trees.tree_of(t)];
  const int i = t - tree.first_row, base = tree.base;
  const int hs = a.head_size, group = a.heads / a.kv_heads, g = h / group;
  if (tid == 0) attended = base + tree_ancestors(tree.mask, tree.words_per_row, i, ancestors);
  if (tid < hs) query[tid] = a.qkv[t * a.ld_qkv + h * hs + tid];
  __syncthreads();
  const int L = attended;
  const long long row_stride = static_cast<long long>(a.kv_heads) * hs;
  const float* k_cache = a.k_cache + tree.cache_offset;
  const float* v_cache = a.v_cache + tree.cache_offset;

  float best = -__int_as_float(0x7f800000);  // -inf
  for (int p = tid; p < L; p += attention_threads) {
    const float* k = k_cache + attended_slot(p, base, ancestors) * row_stride + g * hs;
    float s = 0.0f;
    // 16-byte loads of the key (head_size % 4 == 0; rows start on 16 bytes), summed in e order.
    for (int e = 0; e < hs; e += 4) {
      const float4 k4 = *reinterpret_cast<const float4*>(k + e);
      s = fmaf(query[e], k4.x, s);
      s = fmaf(query[e + 1], k4.y, s);
      s = fmaf(query[e + 2], k4.z, s);
      s = fmaf(query[e + 3], k4.w, s);
    }
    s *= a.scale;
    scores[p] = s;
    best = fmaxf(best, s);
  }
  part[tid] = best;
  __syncthreads();
  for (int s = attention_threads / 2; s >= 1; s /= 2) {
    if (tid < s) part[tid] = fmaxf(part[tid], part[tid + s]);
    __syncthreads();
  }
  const float max_score = part[0];
  __syncthreads();  // everyone has read part[0] before it is reused

  float sum = 0.0f;
  for (int p = tid; p < L; p += attention_threads) {
    const float e = expf(scores[p] - max_score);
    scores[p] = e;
    sum += e;
  }
  part[tid] = sum;
  __syncthreads();
  for (int s = attention_threads / 2; s >= 1; s /= 2) {
    if (tid < s) part[tid] += part[tid + s];
    __syncthreads();
  }
  const float total = part[0];
  __syncthreads();

  const int parts = attention_threads / hs, e = tid % hs, my_part = tid / hs;
  float acc = 0.0f;
  for (int p = my_part; p < L; p += parts) {
    const float* v = v_cache + attended_slot(p, base, ancestors) * row_stride + g * hs;
    acc = fmaf(scores[p], v[e], acc);
  }
  part[tid] = acc;  // part[my_part * hs + e]
  __syncthreads();
  if (tid < hs) {
    float o = 0.0f;
    for (int q = 0; q < parts; ++q) o += part[q * hs + tid];
    a.out[t * static_cast<long long>(a.heads) * hs + h * hs + tid] = o / total;
  }
}

/// Grid-stride over n * hidden: out[t][j] = silu(h13[t][j]) * h13[t][hidden + j].
template <class Unused = void>
__global__ void swiglu_kernel(const float* h13, int hidden, int n, float* out) {
  const long long total = static_cast<long long>(n) * hidden;
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x) {
    const long long t = idx / hidden, j = idx % hidden;
    const float a = h13[t * 2 * hidden + j], b = h13[t * 2 * hidden + hidden + j];
    out[idx] = a / (1.0f + expf(-a)) * b;
  }
}

/// Grid-stride over `count`: dst[i] = the synthetic weight (seed, kind, layer, first + i), stored
/// as W (bf16 rounded to nearest even).
template <class W>
__global__ void fill_synthetic_kernel(W* dst, unsigned long long count, std::uint64_t seed, synthetic::tensor kind,
                                      int layer) {
  for (unsigned long long i = blockIdx.x * static_cast<unsigned long long>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<unsigned long long>(gridDim.x) * blockDim.x) {
    const float w = synthetic::weight(seed, kind, layer, i);
    if constexpr (sizeof(W) == 2) dst[i] = synthetic::bf16_bits(w);
    else dst[i] = w;
  }
}

}  // namespace specdec::kernels::llama
