// The definitions of llama_layer.hpp's functions: included by it where they are compiled (every
// translation unit of a header-only build, or the one that defines
// SPECDEC_HOST_KERNELS_IMPLEMENTATION: models/kernels/isa.hpp). Not to be included on its own.
#pragma once

#include <specdec/models/llama_layer.hpp>

namespace specdec::llama {

namespace detail {

SPECDEC_HOST_MODEL_INLINE void matmul(ThreadPool* pool, const Matrix& m, const float* x, int ldx, int n, float* y,
                                      int ldy, const Kernels& k) {
  const int groups = (m.stride + Matrix::tile - 1) / Matrix::tile;
  if (m.format == WeightFormat::bf16) {  // Matrix::pack made it only where AMX can multiply it
#if defined(SPECDEC_HOST_AMX)
    // The inputs in bf16 once for all threads, rows padded with zeros to in_padded(). The
    // caller's thread owns the scratch: it grows to the largest call, then is reused.
    thread_local std::vector<std::uint16_t> inputs;
    const int in_pad = m.in_padded();
    if (inputs.size() < static_cast<std::size_t>(n) * in_pad) inputs.resize(static_cast<std::size_t>(n) * in_pad);
    for (int i = 0; i < n; ++i) {
      std::uint16_t* row = inputs.data() + static_cast<std::size_t>(i) * in_pad;
      const float* xi = x + static_cast<std::size_t>(i) * ldx;
      for (int j = 0; j < m.in; ++j) row[j] = Matrix::round_to_bf16(xi[j]);
      std::fill(row + m.in, row + in_pad, std::uint16_t{0});
    }
    // A pointer, not the name: in a worker, `inputs` would be that thread's own (empty) vector.
    const std::uint16_t* xa = inputs.data();
    auto part = [&](int g0, int g1) {
      if (g0 < g1) amx_matmul(m, xa, n, y, ldy, g0 * Matrix::tile, std::min(g1 * Matrix::tile, m.stride));
    };
    if (pool) pool->parallel_for(groups, part);
    else part(0, groups);
    return;
#else
    throw error(bf16_unavailable());
#endif
  }
  auto part = [&](int g0, int g1) {
    if (g0 < g1) k.matmul(m, x, ldx, n, y, ldy, g0 * Matrix::tile, std::min(g1 * Matrix::tile, m.stride));
  };
  if (pool) pool->parallel_for(groups, part);
  else part(0, groups);
}

template <class F>
void parallel(ThreadPool* pool, int tasks, F&& f) {
  if (pool) pool->parallel_for(tasks, f);
  else f(0, tasks);
}

// Into L2, the keys and values of kv heads [g0, g1) at slots [t0, t1): the next block of a tree's
// attention. A head's keys are hs rows of a few lines, KBs apart, and its values a piece of each
// slot's row: strides the hardware prefetchers do not follow across pages.
inline void prefetch_lines(const float* from, const float* to) {
  for (const char* at = reinterpret_cast<const char*>(from); at < reinterpret_cast<const char*>(to); at += 64)
    __builtin_prefetch(at, 0, 2);
}
inline void prefetch_keys(const KvView& kv, int g0, int g1, int hs, int t0, int t1) {
  for (int e = g0 * hs; e < g1 * hs; ++e) {
    const float* row = kv.kt + static_cast<std::size_t>(e) * kv.slots;
    prefetch_lines(row + t0, row + t1);
  }
}
inline void prefetch_values(const KvView& kv, int g0, int g1, int hs, int t0, int t1) {
  for (int t = t0; t < t1; ++t) {
    const float* row = kv.v + static_cast<std::size_t>(t) * kv.v_stride;
    prefetch_lines(row + g0 * hs, row + g1 * hs);
  }
}

// What tokens [n0, n1) of `b` see (see the top of this file): token n0 + j the cached slots [0,
// contiguous[j]), then extras[j] slots, its ancestors' and its own, root first, at extra + j *
// depth. Returns the largest contiguous[j].
inline int visible_slots(const LayerBatch& b, int depth, int* extra, int n0, int n1, int* contiguous, int* extras) {
  int most = 0;
  for (int i = n0; i < n1; ++i) {
    const int local = i - n0;
    int* list = extra + static_cast<std::size_t>(local) * depth;
    int count = 0;
    if (b.chain) {
      contiguous[local] = b.cached + i + 1;
    } else {
      contiguous[local] = b.cached;
      for (int slot = b.first_slot + i; slot >= 0 && count < depth; slot = b.up[slot - b.cached]) list[count++] = slot;
      std::reverse(list, list + count);
    }
    extras[local] = count;
    most = std::max(most, contiguous[local]);
  }
  return most;
}

// A node's row holds its ancestors' scores at their slots' places (past its `contiguous` cached
// slots' scores): moves them to their places in its sequence. list[a] >= contiguous + a and grows
// with a, so no score is overwritten before it is read.
inline void ancestors_in_sequence(float* row, int contiguous, const int* list, int count) {
  for (int a = 0; a < count; ++a) row[contiguous + a] = row[list[a]];
}

#if defined(SPECDEC_HOST_AMX)
// attend() where the cache is bf16 (KvView): every head's scores of a block of nodes in one AMX
// product over the slots they see, their queries scaled by 1/sqrt(head_size) and rounded to bf16;
// the softmax as on the fp32 path (exp_sum); the weights rounded to bf16 and the values summed on
// AMX, o[e] = 0, then one TDPBF16PS per 32 slots of the node's sequence in order, then o[e] / sum.
// The chunks all nodes of the block see in the cache run as one product; a node's last chunks
// (its ancestors, or the end of its cached slots) run on its row alone, with a tile of its slots'
// values gathered here: the same operands, so the same bits, as its path's single-token forward.
inline void attend_bf16(const LlamaConfig& c, const LayerBatch& b, const KvView& kv, LayerScratch& s, int region,
                        int row0, int g0, int g1, int i0, int i1, const Kernels& k) {
  const int dim = c.dim, hs = c.head_size(), group = c.kv_group();
  const float scale = 1.0f / std::sqrt(static_cast<float>(hs));
  const std::size_t seq = static_cast<std::size_t>(s.seq), nodes = LayerScratch::node_block;
  const long slots = kv.slots, pair_stride = 2L * c.kv_dim();
  constexpr int nb = LayerScratch::node_block;
  int contiguous[nb], extras[nb], length[nb];
  const std::size_t r = static_cast<std::size_t>(region), uhs = static_cast<std::size_t>(hs);
  int* extra = s.extra.data() + r * s.extra_per_thread(c) + static_cast<std::size_t>(g0) * nb * s.depth;
  float* scores = s.scores.data() + r * s.scores_per_thread(c);
  float* sums = s.sums.data() + r * LayerScratch::sums_per_thread(c);
  std::uint16_t* queries = s.queries16.data() + r * nodes * uhs;
  std::uint16_t* weights = s.weights16.data() + r * nodes * seq;
  float* outputs = s.outputs.data() + r * nodes * uhs;
  std::uint16_t* tile = s.values16.data() + r * 16 * 32;
  auto q_of = [&](int i, int h) { return s.att.data() + static_cast<std::size_t>(row0 + i) * dim + h * hs; };
  amx_attention_configure(hs);
  for (int n0 = i0; n0 < i1; n0 += nb) {
    const int n1 = std::min(i1, n0 + nb), count = n1 - n0;
    const int most = visible_slots(b, s.depth, extra, n0, n1, contiguous, extras);
    // The slots the block's scores need: the cached ones, and in a tree its nodes' own (all below
    // s.seq: LayerScratch::reserve).
    const int end = b.chain ? most : std::max(most, b.first_slot + n1);
    int shared = most / 32;  // chunks of 32 cached slots that every node sees whole
    for (int j = 0; j < count; ++j) {
      length[j] = contiguous[j] + extras[j];
      shared = std::min(shared, contiguous[j] / 32);
    }
    for (int h = g0 * group; h < g1 * group; ++h) {
      const int g = h / group;
      const std::uint16_t* values = kv.vp + static_cast<std::size_t>(g) * uhs * 2;
      float* rows = scores + static_cast<std::size_t>(h) * nodes * seq;
      for (int j = 0; j < count; ++j)
        for (int e = 0; e < hs; ++e) queries[j * uhs + e] = Matrix::round_to_bf16(q_of(n0 + j, h)[e] * scale);
      amx_scores(rows, static_cast<long>(seq), queries, hs, kv.kp + static_cast<std::size_t>(g) * uhs / 2 * slots, slots,
                 end);
      for (int j = 0; j < count; ++j) {
        float* row = rows + j * seq;
        const int* list = extra + static_cast<std::size_t>(j) * s.depth;
        ancestors_in_sequence(row, contiguous[j], list, extras[j]);
        sums[j] = k.exp_sum(row, length[j]);
        std::uint16_t* w = weights + j * seq;
        for (int t = 0; t < length[j]; ++t) w[t] = Matrix::round_to_bf16(row[t]);
        std::fill(w + length[j], w + (length[j] + 31) / 32 * 32, std::uint16_t{0});
      }
      amx_values(outputs, hs, weights, static_cast<long>(seq), values, pair_stride, hs, shared);
      for (int j = 0; j < count; ++j) {
        const int* list = extra + static_cast<std::size_t>(j) * s.depth;
        // Value e of the node's t-th slot (0 past its sequence).
        auto value = [&](int t, int e) -> std::uint16_t {
          if (t >= length[j]) return 0;
          return kv.values_of(t < contiguous[j] ? t : list[t - contiguous[j]])[2 * (g * hs + e)];
        };
        for (int chunk = shared; chunk * 32 < length[j]; ++chunk)
          for (int e0 = 0; e0 < hs; e0 += 16) {
            for (int u = 0; u < 16; ++u) {
              const int t = chunk * 32 + 2 * u;
              std::uint16_t* pair = tile + u * 32;
              if (t + 1 < contiguous[j]) {
                std::copy_n(kv.values_of(t) + 2 * (g * hs + e0), 32, pair);  // t even: slots t, t + 1
              } else {
                for (int e = 0; e < 16; ++e) pair[2 * e] = value(t, e0 + e), pair[2 * e + 1] = value(t + 1, e0 + e);
              }
            }
            amx_values_row(outputs + j * uhs + e0, weights + j * seq + chunk * 32, tile);
          }
        float* out = q_of(n0 + j, h);
        for (int e = 0; e < hs; ++e) out[e] = outputs[j * uhs + e] / sums[j];
      }
    }
  }
  amx_release();
}
#endif

// Attention of tokens [i0, i1) of sequence `b` (rows row0 + i of s.att) for the query heads of kv
// heads [g0, g1), with the scores and ancestor lists of thread region `region`, on kernels `k`.
inline void attend(const LlamaConfig& c, const LayerBatch& b, const KvView& kv, LayerScratch& s, int region,
                   int row0, int g0, int g1, int i0, int i1, const Kernels& k) {
  if (kv.kp) {
#if defined(SPECDEC_HOST_AMX)
    attend_bf16(c, b, kv, s, region, row0, g0, g1, i0, i1, k);
    return;
#else
    throw error(bf16_unavailable());
#endif
  }
  const int dim = c.dim, hs = c.head_size(), group = c.kv_group();
  const float sqrt_hs = std::sqrt(static_cast<float>(hs));
  const std::size_t seq = static_cast<std::size_t>(s.seq);
  constexpr int nb = LayerScratch::node_block;
  // Per node of the block: its cached slots [0, contiguous) and its ancestor slots (this task's list).
  int contiguous[nb], extras[nb];
  int* extra = s.extra.data() + static_cast<std::size_t>(region) * s.extra_per_thread(c) + static_cast<std::size_t>(g0) * nb * s.depth;
  float* scores = s.scores.data() + static_cast<std::size_t>(region) * s.scores_per_thread(c);
  float* sums = s.sums.data() + static_cast<std::size_t>(region) * LayerScratch::sums_per_thread(c);
  auto q_of = [&](int i, int h) { return s.att.data() + static_cast<std::size_t>(row0 + i) * dim + h * hs; };
  auto row = [&](int local, int h) { return scores + (static_cast<std::size_t>(h) * nb + local) * seq; };
  auto kt_of = [&](int h) { return kv.kt + static_cast<std::size_t>(h / group) * hs * kv.slots; };
  auto v_of = [&](int h) { return kv.v + static_cast<std::size_t>(h / group) * hs; };
  const int h0 = g0 * group, h1 = g1 * group;
  constexpr int max_heads = 64;  // heads per head_values() call
  float* o[max_heads];
  const float* p[max_heads];
  const float* v[max_heads];

  for (int n0 = i0; n0 < i1; n0 += nb) {
    const int n1 = std::min(i1, n0 + nb);
    const int most = visible_slots(b, s.depth, extra, n0, n1, contiguous, extras);
    // Scores: cached slots in blocks (outer), then heads, then nodes; then the ancestors. A
    // head's block of keys (64 slots × head_size) stays in L1 for all the nodes, where the whole
    // block (every head) would come from L2 for each node. One node alone reads every row once
    // anyway: no blocks (each score is its own sum, and a value sum runs over the slots in order
    // either way, so blocks change no result).
    const bool lone = n1 - n0 == 1;
    const int block = lone ? std::max(most, 1) : LayerScratch::slot_block;
    // The nodes [i, j) whose cached slots all run past this block's end or to the same slot t1
    // (every node of a tree; in a chain, each node but those that see the whole block) go to the
    // kernels together, so that a key or value vector loaded serves all of them.
    auto same_end = [&](int i, int t0, int& t1) {
      t1 = std::min(t0 + block, contiguous[i - n0]);
      int j = i + 1;
      while (j < n1 && std::min(t0 + block, contiguous[j - n0]) == t1) ++j;
      return j;
    };
    float* rows[nb];
    const float* queries[nb];
    float* outputs[nb];
    const float* weights[nb];
    // Prefetching pays where the layer's cached K/V come from beyond L2 (1 MB or more); it costs
    // a few percent where they are at hand.
    const std::size_t layer_cache_bytes = static_cast<std::size_t>(most) * c.kv_dim() * 2 * sizeof(float);
    const bool prefetch = !lone && layer_cache_bytes >= (std::size_t{1} << 20);
    for (int t0 = 0; t0 < most; t0 += block) {
      const int next_end = std::min(most, t0 + 2 * block);
      for (int h = h0; h < h1; ++h) {
        if (prefetch && h % group == 0 && t0 + block < most)
          prefetch_keys(kv, h / group, h / group + 1, hs, t0 + block, next_end);
        for (int i = n0, j, t1; i < n1; i = j) {
          j = same_end(i, t0, t1);
          if (t0 >= t1) continue;
          for (int m = i; m < j; ++m) rows[m - i] = row(m - n0, h), queries[m - i] = q_of(m, h);
          k.scores(rows, queries, j - i, kt_of(h), kv.slots, hs, t0, t1, sqrt_hs);
        }
      }
    }
    // A tree's slots, ancestors' and own: every node of the block scores all slots from the
    // block's lowest ancestor to its last node, each score at its slot's place in the node's row
    // (past the cached ones), in one call per head; then ancestors_in_sequence. One call of the
    // tiled kernel instead of one per ancestor; each score is the same sum either way.
    if (!b.chain) {
      int lo = b.first_slot + n1;
      for (int i = n0; i < n1; ++i)
        if (extras[i - n0] > 0) lo = std::min(lo, extra[static_cast<std::size_t>(i - n0) * s.depth]);
      for (int h = h0; h < h1; ++h) {
        for (int m = n0; m < n1; ++m) rows[m - n0] = row(m - n0, h), queries[m - n0] = q_of(m, h);
        k.scores(rows, queries, n1 - n0, kt_of(h), kv.slots, hs, lo, b.first_slot + n1, sqrt_hs);
      }
    }
    for (int i = n0; i < n1; ++i) {
      const int local = i - n0;
      const int* list = extra + static_cast<std::size_t>(local) * s.depth;
      for (int h = h0; h < h1; ++h) {
        float* r = row(local, h);
        ancestors_in_sequence(r, contiguous[local], list, extras[local]);
        sums[h * nb + local] = k.exp_sum(r, contiguous[local] + extras[local]);
      }
    }
    // Values: the queries are spent, so each head's output overwrites its query in s.att.
    for (int i = n0; i < n1; ++i) std::fill_n(q_of(i, h0), (h1 - h0) * hs, 0.0f);
    // The same order for the values: a block's rows of a head stay in L1 for all the nodes, which
    // node_values() takes together when they are two or more and make at least 8 independent sums
    // of 16 floats (to hide the adds' latency). Otherwise (a lone node, few nodes of small heads)
    // each node's heads go to head_values() a few at a time, their 16-float pieces as separate "heads",
    // for 8 sums. No element's sum changes: each is still o[e] += e[t] * v[t][e] over t in order.
    const int pieces = hs % 16 == 0 ? std::min(hs / 16, max_heads) : 1, piece = hs / pieces;
    const int heads_at_once = std::clamp(8 / pieces, 1, max_heads / pieces);
    auto node_alone = [&](int i, int t0, int t1) {
      for (int hg = h0; hg < h1; hg += heads_at_once) {
        int count = 0;
        for (int h = hg; h < std::min(h1, hg + heads_at_once); ++h)
          for (int c = 0; c < pieces; ++c, ++count)
            o[count] = q_of(i, h) + c * piece, p[count] = row(i - n0, h), v[count] = v_of(h) + c * piece;
        k.head_values(o, p, v, count, kv.v_stride, piece, t0, t1);
      }
    };
    for (int t0 = 0; t0 < most; t0 += block) {
      const int next_end = std::min(most, t0 + 2 * block);
      if (prefetch && t0 + block < most) prefetch_values(kv, g0, g1, hs, t0 + block, next_end);
      for (int i = n0, j, t1; i < n1; i = j) {
        j = same_end(i, t0, t1);
        if (t0 >= t1) continue;
        if (j - i < 2 || (j - i) * pieces < 8) {
          for (int m = i; m < j; ++m) node_alone(m, t0, t1);
          continue;
        }
        for (int h = h0; h < h1; ++h) {
          for (int m = i; m < j; ++m) outputs[m - i] = q_of(m, h), weights[m - i] = row(m - n0, h);
          k.node_values(outputs, weights, j - i, v_of(h), kv.v_stride, hs, t0, t1);
        }
      }
    }
    for (int i = n0; i < n1; ++i) {
      const int local = i - n0;
      const int* list = extra + static_cast<std::size_t>(local) * s.depth;
      for (int a = 0; a < extras[local]; ++a)
        for (int hb = h0; hb < h1; hb += max_heads) {
          const int heads = std::min(max_heads, h1 - hb);
          for (int h = 0; h < heads; ++h)
            o[h] = q_of(i, hb + h), p[h] = row(local, hb + h) + contiguous[local] + a,
            v[h] = v_of(hb + h) + static_cast<std::size_t>(list[a]) * kv.v_stride;
          k.head_values(o, p, v, heads, 0, hs, 0, 1);
        }
      // The softmax's normalisation, on the outputs (see host_kernels.hpp).
      for (int h = h0; h < h1; ++h) {
        float* out = q_of(i, h);
        const float sum = sums[h * nb + local];
        for (int e = 0; e < hs; ++e) out[e] = out[e] / sum;
      }
    }
  }
}

}  // namespace detail

SPECDEC_HOST_MODEL_INLINE void decoder_layer(const LayerWeights& w, const LlamaConfig& c,
                                             std::span<const LayerBatch> sequences, std::span<const KvView> caches,
                                             LayerScratch& s, ThreadPool* pool, const detail::Kernels& k) {
  const int dim = c.dim, kv_dim = c.kv_dim(), hs = c.head_size(), hidden = c.hidden_dim;
  const int qs = w.wqkv.stride, k_at = Matrix::padded(dim), v_at = k_at + Matrix::padded(kv_dim);
  const int hs13 = w.w13.stride, b_at = Matrix::padded(hidden), ld_tmp = Matrix::padded(dim);
  auto at = [](std::vector<float>& v, int i, int ld) { return v.data() + static_cast<std::size_t>(i) * ld; };
  float* const x_all = sequences.empty() ? nullptr : sequences[0].x;
  int n = 0;
  for (const LayerBatch& b : sequences) n += b.n;

  for (int i = 0; i < n; ++i) rmsnorm(at(s.xb, i, dim), x_all + static_cast<std::size_t>(i) * dim, w.rms_att.data(), dim);
  detail::matmul(pool, w.wqkv, s.xb.data(), dim, n, s.qkv.data(), qs, k);
  int row0 = 0;
  for (std::size_t seq = 0; seq < sequences.size(); ++seq) {
    const LayerBatch& b = sequences[seq];
    const KvView& kv = caches[seq];
    for (int i = 0; i < b.n; ++i) {
      float* q = at(s.qkv, row0 + i, qs);
      const float* cs = b.rope + static_cast<std::size_t>(i) * hs;
      rope(q, dim, hs, cs);
      rope(q + k_at, kv_dim, hs, cs);
      std::copy_n(q, dim, at(s.att, row0 + i, dim));  // the queries; attend() replaces them by its outputs
    }
    // K/V into the cache (KvView's layouts). The tokens' slots are consecutive, so a row of the
    // transposed keys is written in one run.
    const std::size_t slots = static_cast<std::size_t>(kv.slots);
    auto key = [&](int i, int e) { return at(s.qkv, row0 + i, qs)[k_at + e]; };
    auto value = [&](int i, int e) { return at(s.qkv, row0 + i, qs)[v_at + e]; };
    if (kv.kp) {
      for (int r = 0; r < kv_dim / 2; ++r) {
        std::uint32_t* pairs = kv.kp + static_cast<std::size_t>(r) * slots + b.first_slot;
        for (int i = 0; i < b.n; ++i)
          pairs[i] = Matrix::round_to_bf16(key(i, 2 * r)) | std::uint32_t{Matrix::round_to_bf16(key(i, 2 * r + 1))} << 16;
      }
      for (int i = 0; i < b.n; ++i) {
        std::uint16_t* v = kv.values_of(b.first_slot + i);
        for (int e = 0; e < kv_dim; ++e) v[2 * e] = Matrix::round_to_bf16(value(i, e));
      }
    } else {
      for (int e = 0; e < kv_dim; ++e) {
        float* kt = kv.kt + static_cast<std::size_t>(e) * slots + b.first_slot;
        for (int i = 0; i < b.n; ++i) kt[i] = key(i, e);
      }
      for (int i = 0; i < b.n; ++i)
        std::copy_n(at(s.qkv, row0 + i, qs) + v_at, kv_dim, kv.v + static_cast<std::size_t>(b.first_slot + i) * kv.v_stride);
    }
    row0 += b.n;
  }
  // Attention: (sequence, kv head) pairs split over the threads, each with its own scratch region.
  const int pairs = static_cast<int>(sequences.size()) * c.n_kv_heads;
  const int regions = std::min(pool ? pool->threads() : 1, std::max(pairs, 1));
  detail::parallel(pool, regions, [&](int r0, int r1) {
    for (int r = r0; r < r1; ++r) {
      const int p1 = static_cast<int>(static_cast<long>(pairs) * (r + 1) / regions);
      for (int p = static_cast<int>(static_cast<long>(pairs) * r / regions); p < p1;) {
        const int seq = p / c.n_kv_heads, g0 = p % c.n_kv_heads, g1 = std::min(c.n_kv_heads, g0 + p1 - p);
        const LayerBatch& b = sequences[static_cast<std::size_t>(seq)];
        const int row0 = static_cast<int>((b.x - x_all) / dim);
        detail::attend(c, b, caches[static_cast<std::size_t>(seq)], s, r, row0, g0, g1, 0, b.n, k);
        p += g1 - g0;
      }
    }
  });
  detail::matmul(pool, w.wo, s.att.data(), dim, n, s.tmp.data(), ld_tmp, k);
  for (int i = 0; i < n; ++i) {
    float* x = x_all + static_cast<std::size_t>(i) * dim;
    const float* o = at(s.tmp, i, ld_tmp);
    for (int e = 0; e < dim; ++e) x[e] += o[e];
    rmsnorm(at(s.xb, i, dim), x, w.rms_ffn.data(), dim);
  }
  detail::matmul(pool, w.w13, s.xb.data(), dim, n, s.h13.data(), hs13, k);
  for (int i = 0; i < n; ++i) k.swiglu(at(s.h13, i, hs13), at(s.h13, i, hs13) + b_at, hidden);
  detail::matmul(pool, w.w2, s.h13.data(), hs13, n, s.tmp.data(), ld_tmp, k);
  for (int i = 0; i < n; ++i) {
    float* x = x_all + static_cast<std::size_t>(i) * dim;
    const float* o = at(s.tmp, i, ld_tmp);
    for (int e = 0; e < dim; ++e) x[e] += o[e];
  }
}

SPECDEC_HOST_MODEL_INLINE void decoder_layer(const LayerWeights& w, const LlamaConfig& c, const LayerBatch& batch,
                                             const KvView& kv, LayerScratch& s, ThreadPool* pool,
                                             const detail::Kernels& k) {
  decoder_layer(w, c, std::span<const LayerBatch>(&batch, 1), std::span<const KvView>(&kv, 1), s, pool, k);
}

}  // namespace specdec::llama

