// Host kernels of the weights-once transformer forward (models/llama_layer.hpp): packed weight
// matrices, a tiled matrix product that reads each weight once for all tokens of a call, the
// attention inner loops, and a small persistent thread pool.
//
// Reduction order (what makes a tree forward bit-exact): every output element is computed by the
// same sequence of IEEE operations whatever the number of tokens, the tile it falls in, the ISA
// path or the thread that runs it:
//   matmul:  y[i][r] = 0; then y[i][r] += W[r][j] * x[i][j] for j = 0, 1, ..., in - 1;
//   scores:  s = 0; s += q[e] * k[e] for e = 0 .. head_size - 1; then s / sqrt(head_size);
//   softmax: max, std::exp(s - max) per element (libm's expf: the same function for every
//            element, so the same bits), sum in sequence order, then p / sum;
//   values:  o[e] = 0; o[e] += p[t] * v[t][e] for the node's sequence t in order.
// Vector lanes only ever hold different output elements (outputs × tokens, or sequence slots),
// never parts of one sum. Multiplies and adds are separate (no FMA): every ISA path gives the
// same bits as the portable one, so a result never depends on the machine. This needs
// -ffp-contract=off (the specdec::portable_fp CMake target), as core/portable_math.hpp does.
//
// ISA: chosen once per process at run time, AVX-512F, else AVX2, else portable (GCC/Clang vector
// extensions lowered to the baseline ISA), with __builtin_cpu_supports on x86-64 GCC/Clang.
// Defining SPECDEC_HOST_ISA_PORTABLE (CMake: -DSPECDEC_HOST_ISA=portable) forces the portable
// path. Host-only.
#pragma once

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <specdec/error.hpp>

#if !defined(SPECDEC_HOST_ISA_PORTABLE) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SPECDEC_HOST_ISA_X86 1
#endif

namespace specdec::llama {

/// W (stored [out][in] in checkpoints) kept transposed, [in][stride]: row j holds W[r][j] for
/// every output r, contiguous. Several matrices with the same input may share one (fused q/k/v,
/// w1/w3); each part starts at a multiple of 16 columns, and padding columns are zero.
struct Matrix {
  static constexpr int align = 16;
  int in = 0, stride = 0;
  std::vector<float> data;

  static int padded(int n) { return (n + align - 1) / align * align; }
  /// Packs `parts`, each a pointer to [out][in] floats and its `out`, side by side.
  static Matrix pack(int in, std::initializer_list<std::pair<const float*, int>> parts) {
    Matrix m;
    m.in = in;
    for (const auto& p : parts) m.stride += padded(p.second);
    m.data.assign(static_cast<std::size_t>(in) * static_cast<std::size_t>(m.stride), 0.0f);
    int column = 0;
    for (const auto& [w, out] : parts) {
      for (int r = 0; r < out; ++r)
        for (int j = 0; j < in; ++j)
          m.data[static_cast<std::size_t>(j) * m.stride + column + r] = w[static_cast<std::size_t>(r) * in + j];
      column += padded(out);
    }
    return m;
  }
};

namespace detail {

// The vector helpers below are always inlined into the ISA entry points: their by-value vector
// ABI never shows at a call boundary.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float v16f __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));

template <class V>
[[gnu::always_inline]] inline V splat(float s) {
  V v;
  for (std::size_t l = 0; l < sizeof(V) / sizeof(float); ++l) v[l] = s;
  return v;
}
template <class V>
[[gnu::always_inline]] inline V load(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
template <class V>
[[gnu::always_inline]] inline void store(float* p, const V& v) {
  std::memcpy(p, &v, sizeof v);
}

// TV vectors of columns × B tokens, accumulated in registers over the whole input.
template <class V, int TV, int B>
[[gnu::always_inline]] inline void tile(const float* w, int stride, int in, const float* x, int ldx, float* y, int ldy) {
  constexpr int L = sizeof(V) / sizeof(float);
  V acc[B][TV];
  _Pragma("GCC unroll 16") for (int b = 0; b < B; ++b) _Pragma("GCC unroll 16") for (int v = 0; v < TV; ++v) acc[b][v] = V{};
  for (int j = 0; j < in; ++j) {
    V wv[TV];
    _Pragma("GCC unroll 16") for (int v = 0; v < TV; ++v) wv[v] = load<V>(w + static_cast<std::size_t>(j) * stride + v * L);
    _Pragma("GCC unroll 16") for (int b = 0; b < B; ++b) {
      const V xb = splat<V>(x[static_cast<std::size_t>(b) * ldx + j]);
      _Pragma("GCC unroll 16") for (int v = 0; v < TV; ++v) acc[b][v] += wv[v] * xb;
    }
  }
  _Pragma("GCC unroll 16") for (int b = 0; b < B; ++b) _Pragma("GCC unroll 16") for (int v = 0; v < TV; ++v)
      store(y + static_cast<std::size_t>(b) * ldy + v * L, acc[b][v]);
}

template <class V, int TV, int B>
[[gnu::always_inline]] inline void tile_tokens(int nb, const float* w, int stride, int in, const float* x, int ldx,
                                               float* y, int ldy) {
  if (nb == B) tile<V, TV, B>(w, stride, in, x, ldx, y, ldy);
  else if constexpr (B > 1) tile_tokens<V, TV, B - 1>(nb, w, stride, in, x, ldx, y, ldy);
}
template <class V, int TV, int B>
[[gnu::always_inline]] inline void tile_columns(int tv, int nb, const float* w, int stride, int in, const float* x,
                                                int ldx, float* y, int ldy) {
  if (tv == TV) tile_tokens<V, TV, B>(nb, w, stride, in, x, ldx, y, ldy);
  else if constexpr (TV > 1) tile_columns<V, TV - 1, B>(tv, nb, w, stride, in, x, ldx, y, ldy);
}

// Columns [c0, c1) (multiples of 16) of y[n][ldy] = x[n][ldx] · m. Column tiles outer, token
// blocks inner: a tile's weights ([in][TV·L] floats) stay in L1/L2 for the next token block.
template <class V, int TV, int B>
[[gnu::always_inline]] inline void matmul_impl(const Matrix& m, const float* x, int ldx, int n, float* y, int ldy,
                                               int c0, int c1) {
  constexpr int L = sizeof(V) / sizeof(float);
  for (int c = c0; c < c1; c += TV * L) {
    const int tv = std::min(TV, (c1 - c) / L);
    for (int b = 0; b < n; b += B)
      tile_columns<V, TV, B>(tv, std::min(B, n - b), m.data.data() + c, m.stride, m.in,
                             x + static_cast<std::size_t>(b) * ldx, ldx, y + static_cast<std::size_t>(b) * ldy + c, ldy);
  }
}

// s[t] = (q · k_t) / sqrt_hs for t in [t0, t1), K transposed: kt[e * kt_stride + t].
template <class V>
[[gnu::always_inline]] inline void scores_impl(float* s, const float* q, const float* kt, std::size_t kt_stride, int hs,
                                               int t0, int t1, float sqrt_hs) {
  constexpr int L = sizeof(V) / sizeof(float);
  int t = t0;
  for (; t + L <= t1; t += L) {
    V acc = V{};
    for (int e = 0; e < hs; ++e) acc += splat<V>(q[e]) * load<V>(kt + e * kt_stride + t);
    store(s + t, acc / splat<V>(sqrt_hs));
  }
  for (; t < t1; ++t) {
    float acc = 0.0f;
    for (int e = 0; e < hs; ++e) acc += q[e] * kt[e * kt_stride + t];
    s[t] = acc / sqrt_hs;
  }
}

// For H heads h: o[h][e] += p[h][t] * v[h][t * v_stride + e] for t in [t0, t1) in order, e in
// [0, hs). The heads' sums are independent chains, interleaved to hide the adds' latency.
template <int H>
[[gnu::always_inline]] inline void values_h(float* const* o, const float* const* p, const float* const* v,
                                            std::size_t v_stride, int hs, int t0, int t1) {
  int e = 0;
  for (; e + 8 <= hs; e += 8) {
    v8f acc[H];
    _Pragma("GCC unroll 8") for (int h = 0; h < H; ++h) acc[h] = load<v8f>(o[h] + e);
    for (int t = t0; t < t1; ++t)
      _Pragma("GCC unroll 8") for (int h = 0; h < H; ++h) acc[h] += splat<v8f>(p[h][t]) * load<v8f>(v[h] + t * v_stride + e);
    _Pragma("GCC unroll 8") for (int h = 0; h < H; ++h) store(o[h] + e, acc[h]);
  }
  for (; e < hs; ++e)
    for (int h = 0; h < H; ++h)
      for (int t = t0; t < t1; ++t) o[h][e] += p[h][t] * v[h][t * v_stride + e];
}

[[gnu::always_inline]] inline void values_impl(float* const* o, const float* const* p, const float* const* v, int heads,
                                               std::size_t v_stride, int hs, int t0, int t1) {
  int h = 0;
  for (; h + 4 <= heads; h += 4) values_h<4>(o + h, p + h, v + h, v_stride, hs, t0, t1);
  for (; h + 2 <= heads; h += 2) values_h<2>(o + h, p + h, v + h, v_stride, hs, t0, t1);
  for (; h < heads; ++h) values_h<1>(o + h, p + h, v + h, v_stride, hs, t0, t1);
}

// s[0..n) = exp(s[t] - max) / sum, the sum in order.
[[gnu::always_inline]] inline void softmax_impl(float* s, int n) {
  float best = s[0];
  for (int t = 1; t < n; ++t) best = s[t] > best ? s[t] : best;
  for (int t = 0; t < n; ++t) s[t] = std::exp(s[t] - best);
  float sum = 0.0f;
  for (int t = 0; t < n; ++t) sum += s[t];
  for (int t = 0; t < n; ++t) s[t] = s[t] / sum;
}

// silu(a) * b, elementwise.
[[gnu::always_inline]] inline void swiglu_impl(float* a, const float* b, int n) {
  for (int e = 0; e < n; ++e) a[e] = a[e] * (1.0f / (1.0f + std::exp(-a[e]))) * b[e];
}

/// One ISA's kernels.
struct Kernels {
  const char* name;
  void (*matmul)(const Matrix&, const float*, int, int, float*, int, int, int);
  void (*scores)(float*, const float*, const float*, std::size_t, int, int, int, float);
  void (*values)(float* const*, const float* const*, const float* const*, int, std::size_t, int, int, int);
  void (*softmax)(float*, int);
  void (*swiglu)(float*, const float*, int);
};

#define SPECDEC_HOST_KERNELS(NAME, ATTR, V, TV, B)                                                                    \
  ATTR inline void NAME##_matmul(const Matrix& m, const float* x, int ldx, int n, float* y, int ldy, int c0, int c1) { \
    matmul_impl<V, TV, B>(m, x, ldx, n, y, ldy, c0, c1);                                                             \
  }                                                                                                                  \
  ATTR inline void NAME##_scores(float* s, const float* q, const float* kt, std::size_t st, int hs, int t0, int t1,    \
                                 float r) {                                                                          \
    scores_impl<V>(s, q, kt, st, hs, t0, t1, r);                                                                     \
  }                                                                                                                  \
  ATTR inline void NAME##_values(float* const* o, const float* const* p, const float* const* v, int heads,            \
                                 std::size_t st, int hs, int t0, int t1) {                                           \
    values_impl(o, p, v, heads, st, hs, t0, t1);                                                                     \
  }                                                                                                                  \
  ATTR inline void NAME##_softmax(float* s, int n) { softmax_impl(s, n); }                                           \
  ATTR inline void NAME##_swiglu(float* a, const float* b, int n) { swiglu_impl(a, b, n); }                          \
  inline constexpr Kernels NAME##_kernels{#NAME, NAME##_matmul, NAME##_scores, NAME##_values, NAME##_softmax,        \
                                          NAME##_swiglu};

// Tiles: 4 AVX-512 vectors (64 columns) × 6 tokens = 24 accumulators of 32 registers; AVX2 and
// the portable path have 16 registers.
SPECDEC_HOST_KERNELS(portable, , v4f, 4, 2)
#if defined(SPECDEC_HOST_ISA_X86)
SPECDEC_HOST_KERNELS(avx2, __attribute__((target("avx2"))), v8f, 2, 6)
SPECDEC_HOST_KERNELS(avx512, __attribute__((target("avx512f"))), v16f, 4, 6)
#endif
#undef SPECDEC_HOST_KERNELS
#pragma GCC diagnostic pop

}  // namespace detail

/// The kernels of the best ISA this machine has (chosen once).
inline const detail::Kernels& kernels() {
  static const detail::Kernels& k = []() -> const detail::Kernels& {
#if defined(SPECDEC_HOST_ISA_X86)
    if (__builtin_cpu_supports("avx512f")) return detail::avx512_kernels;
    if (__builtin_cpu_supports("avx2")) return detail::avx2_kernels;
#endif
    return detail::portable_kernels;
  }();
  return k;
}

/// A fixed set of threads that run parallel_for's shares: the caller runs share 0, threads()
/// - 1 persistent workers the rest. Shares are static ranges, so which thread computes an
/// element never changes its value (see the reduction order above).
class ThreadPool {
 public:
  static constexpr int max_threads = 256;

  explicit ThreadPool(int threads) : threads_(threads) {
    if (threads < 1 || threads > max_threads)
      throw error("threads must be in [1, " + std::to_string(max_threads) + "], got " + std::to_string(threads));
    for (int w = 1; w < threads; ++w) workers_.emplace_back([this, w] { work(w); });
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool() {
    stop_ = true;
    generation_.fetch_add(1);
    generation_.notify_all();
    for (auto& t : workers_) t.join();
  }

  int threads() const { return threads_; }

  /// Calls f(begin, end) on a split of [0, tasks) into threads() contiguous ranges.
  template <class F>
  void parallel_for(int tasks, F&& f) {
    if (threads_ == 1 || tasks <= 1) {
      if (tasks > 0) f(0, tasks);
      return;
    }
    // Every worker takes part (an empty range when tasks < threads), so no worker can still be
    // reading these fields when the next call writes them.
    job_ = [](void* c, int b, int e) { (*static_cast<std::remove_reference_t<F>*>(c))(b, e); };
    context_ = &f;
    tasks_ = tasks;
    pending_.store(threads_ - 1);
    generation_.fetch_add(1);
    generation_.notify_all();
    f(share(0), share(1));
    for (int spin = 0; pending_.load() != 0; ++spin)
      if (spin > 1000) std::this_thread::yield();
  }

 private:
  int share(int w) const { return static_cast<int>(static_cast<long>(tasks_) * w / threads_); }

  void work(int w) {
    unsigned seen = 0;
    for (;;) {
      for (int spin = 0; generation_.load() == seen && spin < 20000; ++spin) {}
      generation_.wait(seen);
      seen = generation_.load();
      if (stop_) return;
      job_(context_, share(w), share(w + 1));
      pending_.fetch_sub(1);
    }
  }

  int threads_;
  std::vector<std::thread> workers_;
  std::atomic<unsigned> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  void (*job_)(void*, int, int) = nullptr;
  void* context_ = nullptr;
  int tasks_ = 0;
};

}  // namespace specdec::llama
