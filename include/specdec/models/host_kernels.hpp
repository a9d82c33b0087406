// Host kernels of the weights-once transformer forward (models/llama_layer.hpp): packed weight
// matrices, a tiled matrix product that reads each weight once for all tokens of a call, the
// attention inner loops, and a small persistent thread pool.
//
// Reduction order (what makes a tree forward bit-exact): every output element is computed by the
// same sequence of IEEE operations whatever the number of tokens, the tile it falls in, the ISA
// path or the thread that runs it:
//   matmul:  y[i][r] = 0; then y[i][r] ⊕= W[r][j] * x[i][j] for j = 0, 1, ..., in - 1;
//   scores:  s = 0; s ⊕= q[e] * k[e] for e = 0 .. head_size - 1; then s / sqrt(head_size) (computed
//            as s * (1 / sqrt(head_size)) where sqrt(head_size) is a power of two: the same bits);
//   softmax: over a row s[0 .. T) (the node's sequence, position t = index in the row):
//            m = max (exact, so its order does not matter); e[t] = exp16(s[t] - m) (below);
//            the sum in a fixed blocked order that depends only on T: 16 lane sums a[l] = +0,
//            a[l] += e[t] for t ≡ l (mod 16) in increasing t; then a[l] += a[l + 8] (l < 8),
//            a[l] += a[l + 4] (l < 4), a[l] += a[l + 2] (l < 2), a[0] += a[1];
//   values:  o[e] = 0; o[e] ⊕= e[t] * v[t][e] for the node's sequence t in order; then o[e] / a[0]
//            (normalising the head_size outputs instead of the T weights: one division each);
//   swiglu:  a * (1 / (1 + exp16(-a))) * b.
// exp16(x): no libm; x clamped to [-87.3, 88.3], n = (x * log2(e) + 1.5·2^23) - 1.5·2^23 (round to
// nearest), r = (x - n * ln2_hi) - n * ln2_lo, p = Horner of exp's Taylor polynomial of degree 7
// in r (from the highest coefficient, each step q = c; q ⊕= p * r; p = q), result p * 2^n; 0 for
// x < -87.3. Within 1.2 ulp of exp (0.93 with the fused steps; libm's expf: 0.5).
// where a ⊕= b * c is one fused multiply-add (a single rounding) on the AVX2 and AVX-512 paths and
// a multiply, then an add, on the portable path. Vector lanes hold different output elements
// (outputs × tokens, or sequence slots), or the 16 softmax lane sums above (16 on every ISA: 1, 2
// or 4 vectors), never parts of one sum in another order, and a loop's leftover elements get the
// same operation as its lanes. So a result depends on the path a process runs (fused or not),
// never on the number of tokens or threads. Everything else multiplies and adds separately, which
// needs -ffp-contract=off (the specdec::portable_fp CMake target), as core/portable_math.hpp does;
// the fused operations are inline assembly, which that flag does not touch.
//
// ISA: chosen once per process at run time, AVX-512F, else AVX2, else portable (GCC/Clang vector
// extensions lowered to the baseline ISA), with __builtin_cpu_supports on x86-64 GCC/Clang.
// Defining SPECDEC_HOST_ISA_PORTABLE (CMake: -DSPECDEC_HOST_ISA=portable) forces the portable
// path.
//
// bf16 weights (WeightFormat::bf16, opt-in): matrices stored as bfloat16 (rounded to nearest even
// from the checkpoint's fp32) and multiplied with Intel AMX (TDPBF16PS), the matrix's inputs
// rounded to bf16 the same way, fp32 accumulation. Half the bytes per forward, and AMX computes
// a forward of many tokens at little more than the cost of reading the weights. It is another
// model's numbers than fp32 (as a checkpoint served in bf16 is), but a bit-exact one: y[i][r] is
// 0, then one TDPBF16PS per 32 inputs in increasing order, each a function of token i's row and
// column r alone (AMX computes every row of a tile independently), whatever the number of tokens
// or threads. Where the heads hold 16 values or a multiple of 32 (bf16_attention()), the KV cache
// is bf16 too (half the bytes a step reads) and attention runs on AMX: a score is the query,
// scaled by 1/sqrt(head_size) and rounded to bf16, times the key, one TDPBF16PS per 32 dimensions
// (all 16 of a head of 16) in order; the softmax as above; a value sum o[e] is 0, then one TDPBF16PS per 32 slots of the
// node's sequence in order, the weights exp(s - m) rounded to bf16, then o[e] / a[0]. Needs a CPU
// with AMX-BF16 and a Linux kernel that grants a process the tile state (arch_prctl); there is no
// other bf16 path, so elsewhere such a model refuses to load. Host-only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <new>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include <specdec/error.hpp>

#if __has_include(<sys/mman.h>)
#include <sys/mman.h>
#define SPECDEC_HOST_MMAP 1
#ifndef MAP_POPULATE
#define MAP_POPULATE 0
#endif
#else
#define SPECDEC_HOST_MMAP 0
#endif

#if !defined(SPECDEC_HOST_ISA_PORTABLE) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SPECDEC_HOST_ISA_X86 1
#include <immintrin.h>
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#define SPECDEC_HOST_AMX 1
#endif
#endif

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

}  // namespace specdec

namespace specdec::llama {

/// The allocator of packed weights and KV caches: a large block is mapped with its pages in place
/// (MAP_POPULATE: one system call, where touching a fresh page at a time costs a page fault each,
/// most of loading a model of a few MB); anything else, or without mmap, operator new. Blocks of
/// 2 MB or more ask for transparent huge pages first (where the system leaves them to madvise, as
/// Debian does): with 4 KB pages, streaming hundreds of MB of weights and a tree's attention
/// reading each head's keys a few lines at a time, KBs apart, kept missing the TLB.
template <class T>
struct PrefaultedAllocator {
  using value_type = T;
  static constexpr std::size_t mapped_from = std::size_t{1} << 16;  // bytes
  static constexpr std::size_t huge_from = std::size_t{2} << 20;    // bytes
  PrefaultedAllocator() = default;
  template <class U>
  PrefaultedAllocator(const PrefaultedAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
#if SPECDEC_HOST_MMAP
    if (n >= mapped_from / sizeof(T) && n <= static_cast<std::size_t>(-1) / sizeof(T)) {
      const std::size_t bytes = n * sizeof(T);
#if defined(MADV_HUGEPAGE)
      if (bytes >= huge_from) {
        void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        ::madvise(p, bytes, MADV_HUGEPAGE);  // advice: without huge pages, the same memory in 4 KB pages
        populate(static_cast<char*>(p), bytes);
        return static_cast<T*>(p);
      }
#endif
      void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      return static_cast<T*>(p);
    }
#endif
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
#if SPECDEC_HOST_MMAP
    if (n >= mapped_from / sizeof(T)) {
      ::munmap(p, n * sizeof(T));
      return;
    }
#endif
    std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const PrefaultedAllocator<U>&) const noexcept { return true; }

 private:
#if SPECDEC_HOST_MMAP
  // The pages of a fresh mapping in place: one call where the kernel has MADV_POPULATE_WRITE
  // (Linux 5.14), else a write to each 4 KB page (a fault per huge page, or per page without).
  static void populate(char* p, std::size_t bytes) {
#if defined(MADV_POPULATE_WRITE)
    if (::madvise(p, bytes, MADV_POPULATE_WRITE) == 0) return;
#endif
    for (std::size_t at = 0; at < bytes; at += 4096) p[at] = 0;
  }
#endif
};

/// Why this process cannot multiply bf16 weights ("" when it can): AMX-BF16 missing, the kernel
/// refusing the tile state, or a build forced onto the portable kernels. Asks the kernel once.
inline const std::string& bf16_unavailable() {
  static const std::string why = [] {
#if defined(SPECDEC_HOST_AMX)
    if (!__builtin_cpu_supports("amx-tile") || !__builtin_cpu_supports("amx-bf16"))
      return std::string("bf16 weights need a CPU with AMX-BF16 (Intel Xeon 4th generation or later); this one has none");
    constexpr long request_permission = 0x1023, tile_data = 18;  // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
    if (syscall(SYS_arch_prctl, request_permission, tile_data) != 0)
      return std::string("bf16 weights need AMX, which this Linux kernel does not grant (arch_prctl "
                         "ARCH_REQ_XCOMP_PERM failed)");
    return std::string();
#elif defined(SPECDEC_HOST_ISA_PORTABLE)
    return std::string("bf16 weights need AMX, and this build forces the portable kernels (SPECDEC_HOST_ISA=portable)");
#else
    return std::string("bf16 weights need Intel AMX on x86-64 Linux");
#endif
  }();
  return why;
}

/// W (stored [out][in] in checkpoints) kept transposed, `stride` output columns, in tiles of 64
/// columns: tile c0 (a multiple of 64, width w = min(64, stride - c0)) is [in][w] at data + c0 * in,
/// so row j of a tile holds W[r][j] for its outputs r, contiguous, and a tile is one sequential
/// read (what the hardware prefetcher streams best when a call has few tokens). Several matrices
/// with the same input may share one (fused q/k/v, w1/w3); each part starts at a multiple of 16
/// columns, and padding columns are zero.
///
/// In bf16 (`format`), `bf16` holds the same tiles for AMX instead of `data`: the inputs padded
/// with zeros to a multiple of 32 (in_padded()); tile c0 is at bf16 + c0 * in_padded(), chunk k of
/// 32 inputs then block b of 16 columns (1 KB, AMX's B operand) at ((k * w / 16) + b) * 512: row
/// p of a block holds, for each of its 16 columns r, the pair W[r][32k + 2p], W[r][32k + 2p + 1].
struct Matrix {
  static constexpr int align = 16, tile = 64, bf16_chunk = 32;
  int in = 0, stride = 0;
  WeightFormat format = WeightFormat::fp32;
  std::vector<float, PrefaultedAllocator<float>> data;
  std::vector<std::uint16_t, PrefaultedAllocator<std::uint16_t>> bf16;

  int in_padded() const { return (in + bf16_chunk - 1) / bf16_chunk * bf16_chunk; }

  static int padded(int n) { return (n + align - 1) / align * align; }
  /// Where W[c][j] of column c's row j is, and the row length of its tile.
  std::size_t at(int c, int j) const {
    const int c0 = c / tile * tile;
    return static_cast<std::size_t>(c0) * in + static_cast<std::size_t>(j) * width(c) + (c - c0);
  }
  int width(int c) const { return std::min(tile, stride - c / tile * tile); }
  /// Packs `parts`, each a pointer to [out][in] floats and its `out`, side by side, in `format`
  /// (bf16: throws specdec::error saying why where this process cannot multiply it).
  static Matrix pack(int in, std::initializer_list<std::pair<const float*, int>> parts,
                     WeightFormat format = WeightFormat::fp32) {
    Matrix m;
    m.in = in;
    for (const auto& p : parts) m.stride += padded(p.second);
    m.data.assign(static_cast<std::size_t>(in) * static_cast<std::size_t>(m.stride), 0.0f);
    int column = 0;
    for (const auto& [w, out] : parts) {
      // Row r of the part is column c = column + r of its tile: written `width` floats apart.
      for (int r = 0; r < out; ++r) {
        const int c = column + r;
        float* dst = m.data.data() + m.at(c, 0);
        const std::size_t step = static_cast<std::size_t>(m.width(c));
        const float* src = w + static_cast<std::size_t>(r) * in;
        for (int j = 0; j < in; ++j) dst[static_cast<std::size_t>(j) * step] = src[j];
      }
      column += padded(out);
    }
    if (format == WeightFormat::bf16) m.to_bf16();
    return m;
  }

  /// fp32 rounded to the nearest bf16, ties to even (a NaN stays a NaN).
  static std::uint16_t round_to_bf16(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
    return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }

 private:
  // Re-lays the fp32 tiles out as AMX's bf16 blocks (see above) and frees them.
  void to_bf16() {
    if (!bf16_unavailable().empty()) throw error(bf16_unavailable());
    const int in_pad = in_padded();
    bf16.assign(static_cast<std::size_t>(in_pad) * static_cast<std::size_t>(stride), 0);
    for (int c = 0; c < stride; ++c) {
      const int c0 = c / tile * tile, blocks = width(c) / align, b = (c - c0) / align, r = c % align;
      std::uint16_t* tile_start = bf16.data() + static_cast<std::size_t>(c0) * in_pad;
      for (int j = 0; j < in; ++j) {
        const int k = j / bf16_chunk, p = j % bf16_chunk / 2, half = j % 2;
        tile_start[(static_cast<std::size_t>(k) * blocks + b) * 512 + p * 32 + r * 2 + half] = round_to_bf16(data[at(c, j)]);
      }
    }
    decltype(data)().swap(data);
    format = WeightFormat::bf16;
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
typedef int v16i __attribute__((vector_size(64)));
typedef int v8i __attribute__((vector_size(32)));
typedef int v4i __attribute__((vector_size(16)));

// For constants (folded). Runtime scalars enter as the scalar operand of a vector operation
// (v * s): with GCC 12 under target("avx512f") a splat of a runtime value can become 16 masked
// broadcasts, the scalar operand one broadcast.
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

// Whether the kernels of path V (the vector type of the ISA entry point) fuse multiplies and adds:
// AVX2 and AVX-512 do, with one rounding (twice the products a cycle of a multiply and an add);
// the portable path multiplies, then adds.
template <class V>
inline constexpr bool fused = sizeof(V) > sizeof(v4f);

#if defined(SPECDEC_HOST_ISA_X86)
// The fused operations, as inline assembly, so that GCC emits them whatever -ffp-contract says,
// and in functions without a target attribute. W: float, v8f (VEX) or v16f (EVEX). The operands
// are copied to locals so that the caller's accumulators stay in registers (an array element as
// an asm operand would make the array live in memory); by reference, so that no vector crosses a
// call boundary by value (-Wpsabi).
template <class W>
[[gnu::always_inline]] inline void fused_multiply_add(W& c, const W& a, const W& b) {
  W r = c;
  const W x = a, y = b;
  if constexpr (sizeof(W) == sizeof(v16f)) asm("vfmadd231ps %2, %1, %0" : "+v"(r) : "v"(x), "v"(y));
  else if constexpr (sizeof(W) == sizeof(v8f)) asm("vfmadd231ps %2, %1, %0" : "+x"(r) : "x"(x), "x"(y));
  else asm("vfmadd231ss %2, %1, %0" : "+x"(r) : "x"(x), "x"(y));
  c = r;
}
template <class W>
[[gnu::always_inline]] inline void broadcast(W& out, const float& b) {
  if constexpr (sizeof(W) == sizeof(v16f)) asm("vbroadcastss %1, %0" : "=v"(out) : "m"(b));
  else asm("vbroadcastss %1, %0" : "=x"(out) : "m"(b));
}
#endif

// c += a * b, fused when F. b: a float in memory, broadcast to every lane (on AVX-512 by the
// multiply-add itself).
template <bool F, class W>
[[gnu::always_inline]] inline void multiply_add(W& c, const W& a, const float& b) {
#if defined(SPECDEC_HOST_ISA_X86)
  if constexpr (F && sizeof(W) == sizeof(v16f)) {
    W r = c;
    const W x = a;
    asm("vfmadd231ps %2%{1to16%}, %1, %0" : "+v"(r) : "v"(x), "m"(b));
    c = r;
    return;
  } else if constexpr (F && sizeof(W) == sizeof(v8f)) {
    W bv;
    broadcast(bv, b);
    fused_multiply_add(c, a, bv);
    return;
  } else if constexpr (F) {
    static_assert(sizeof(W) == sizeof(float));
    fused_multiply_add(c, a, b);
    return;
  }
#endif
  c = c + a * b;
}

// c += a * b, all three vectors, fused when F.
template <bool F, class W>
[[gnu::always_inline]] inline void multiply_add_vectors(W& c, const W& a, const W& b) {
#if defined(SPECDEC_HOST_ISA_X86)
  if constexpr (F) {
    fused_multiply_add(c, a, b);
    return;
  }
#endif
  c = c + a * b;
}

// c[v] += a[v] * b for v < N, b broadcast once (fused) or a scalar operand (portable: with GCC 12
// a splat of a runtime value can become 16 masked broadcasts, the scalar operand one broadcast).
template <bool F, int N, class W>
[[gnu::always_inline]] inline void multiply_add_all(W* c, const W* a, const float& b) {
#if defined(SPECDEC_HOST_ISA_X86)
  if constexpr (F && sizeof(W) != sizeof(v4f)) {
    W bv;
    broadcast(bv, b);
    _Pragma("GCC unroll 16") for (int v = 0; v < N; ++v) fused_multiply_add(c[v], a[v], bv);
    return;
  }
#endif
  _Pragma("GCC unroll 16") for (int v = 0; v < N; ++v) c[v] = c[v] + a[v] * b;
}

// Where a register tile works: weight rows [j0, j1) from w (rows `stride` floats apart), the
// tokens' inputs x (rows ldx apart) and outputs y (ldy apart). Each output is its own chain of
// multiply-adds over j in order: it starts at zero where j0 is 0 and otherwise goes on from the
// value y holds, so splitting the rows changes no bit. Row j also prefetches `lines` cache lines
// into L2 from ahead + (j - j0) · lines · 64 bytes on (a prefetch never faults, past the end of
// the matrix included).
struct TileRows {
  const float* w;
  int stride, j0, j1;
  const float* x;
  int ldx;
  float* y;
  int ldy;
  const char* ahead;
  int lines;
};

// TV vectors of columns × B tokens in registers over t's rows.
template <class V, int TV, int B>
[[gnu::always_inline]] inline void tile(const TileRows& t) {
  constexpr int L = sizeof(V) / sizeof(float);
  V acc[B][TV];
  _Pragma("GCC unroll 16") for (int b = 0; b < B; ++b) _Pragma("GCC unroll 16") for (int v = 0; v < TV; ++v)
      acc[b][v] = t.j0 == 0 ? V{} : load<V>(t.y + static_cast<std::size_t>(b) * t.ldy + v * L);
  const char* ahead = t.ahead;
  for (int j = t.j0; j < t.j1; ++j) {
    for (int l = 0; l < t.lines; ++l, ahead += 64) __builtin_prefetch(ahead, 0, 2);
    const float* row = t.w + static_cast<std::size_t>(j) * t.stride;
    V wv[TV];
    _Pragma("GCC unroll 16") for (int v = 0; v < TV; ++v) wv[v] = load<V>(row + v * L);
    _Pragma("GCC unroll 16") for (int b = 0; b < B; ++b)
        multiply_add_all<fused<V>, TV>(acc[b], wv, t.x[static_cast<std::size_t>(b) * t.ldx + j]);
  }
  _Pragma("GCC unroll 16") for (int b = 0; b < B; ++b) _Pragma("GCC unroll 16") for (int v = 0; v < TV; ++v)
      store(t.y + static_cast<std::size_t>(b) * t.ldy + v * L, acc[b][v]);
}

// tile<V, tv, nb> for a tv ≤ TV and an nb ≤ B known at run time.
template <class V, int TV, int B>
[[gnu::always_inline]] inline void tile_tokens(int nb, const TileRows& t) {
  if (nb == B) tile<V, TV, B>(t);
  else if constexpr (B > 1) tile_tokens<V, TV, B - 1>(nb, t);
}
template <class V, int TV, int B>
[[gnu::always_inline]] inline void tile_columns(int tv, int nb, const TileRows& t) {
  if (tv == TV) tile_tokens<V, TV, B>(nb, t);
  else if constexpr (TV > 1) tile_columns<V, TV - 1, B>(tv, nb, t);
}

// Columns [c0, c1) (multiples of 64, or c1 = stride) of y[n][ldy] = x[n][ldx] · m, one of m's
// tiles (64 columns) at a time, its rows in chunks of 64 (16 KB of weights). A register tile
// keeps tokens × vectors sums in flight, at least 8 to cover a multiply-add's latency on two
// pipes: one token (plain decoding) TV1 vectors, two TV2, more TV vectors × blocks of up to B
// tokens, the blocks as even as they come (8 tokens: 4 + 4, not 6 + 2). Every register tile and
// block reads the chunk in turn (from L1 after the first), and each of these passes prefetches
// its share of the next chunk's lines into L2, so that the weights stream from memory once, in
// order, and keep streaming while the chunk computes (m's tiles are consecutive in memory, so the
// next chunk is the next 16 KB). TV·L divides 64, so a register tile never straddles two of m's
// tiles.
template <class V, int TV, int B, int TV1, int TV2>
[[gnu::always_inline]] inline void matmul_impl(const Matrix& m, const float* x, int ldx, int n, float* y, int ldy,
                                               int c0, int c1) {
  constexpr int L = sizeof(V) / sizeof(float), chunk = 64;
  static_assert(Matrix::tile % (TV * L) == 0 && Matrix::tile % (TV1 * L) == 0 && Matrix::tile % (TV2 * L) == 0);
  if (n <= 0) return;
  const int columns = (n == 1 ? TV1 : n == 2 ? TV2 : TV) * L;
  const int blocks = (n + B - 1) / B;
  for (int c = c0; c < c1; c += Matrix::tile) {
    const int width = m.width(c);
    const float* w = m.data.data() + m.at(c, 0);
    const int passes = (width + columns - 1) / columns * blocks;
    const int lines = (width / 16 + passes - 1) / passes;  // a row of width floats: width / 16 lines
    for (int j0 = 0; j0 < m.in; j0 += chunk) {
      const int j1 = std::min(m.in, j0 + chunk);
      const char* next = reinterpret_cast<const char*>(w + static_cast<std::size_t>(j1) * width);
      int pass = 0;
      for (int k = 0, b = 0; k < blocks; ++k) {
        const int end = n * (k + 1) / blocks;
        for (int cc = 0; cc < width; cc += columns, ++pass) {
          const TileRows t{w + cc, width, j0, j1, x + static_cast<std::size_t>(b) * ldx, ldx,
                           y + static_cast<std::size_t>(b) * ldy + c + cc, ldy,
                           next + static_cast<std::size_t>(pass) * chunk * lines * 64, lines};
          const int tv = std::min(columns, width - cc) / L;
          if (n == 1) tile_columns<V, TV1, 1>(tv, 1, t);
          else if (n == 2) tile_columns<V, TV2, 2>(tv, 2, t);
          else tile_columns<V, TV, B>(tv, end - b, t);
        }
        b = end;
      }
    }
  }
}

// A register tile of a tree's attention: N nodes × T vectors of slots (scores) or of a head's
// elements (values), so that each key or value vector loaded serves N nodes. Two loads (a vector
// and a node's broadcast) per multiply-add left the single-node kernels far below the FMA peak.
template <class V>
inline constexpr int tile_nodes = sizeof(V) == sizeof(v16f) ? 4 : 2;

// s[n][t] for N nodes and T vectors of slots from slot t on: each slot's sum over e in order,
// each key vector loaded once for the N nodes.
template <class V, bool Mul, int N, int T>
[[gnu::always_inline]] inline void score_tile(float* const* s, const float* const* q, const float* kt,
                                              std::size_t kt_stride, int hs, int t, float inv, float sqrt_hs) {
  constexpr int L = sizeof(V) / sizeof(float);
  V acc[N][T] = {};
  for (int e = 0; e < hs; ++e) {
    const float* k = kt + e * kt_stride + t;
    V kv[T];
    _Pragma("GCC unroll 8") for (int v = 0; v < T; ++v) kv[v] = load<V>(k + v * L);
    _Pragma("GCC unroll 8") for (int n = 0; n < N; ++n) multiply_add_all<fused<V>, T>(acc[n], kv, q[n][e]);
  }
  _Pragma("GCC unroll 8") for (int n = 0; n < N; ++n) _Pragma("GCC unroll 8") for (int v = 0; v < T; ++v)
      store(s[n] + t + v * L, Mul ? acc[n][v] * inv : acc[n][v] / sqrt_hs);
}

// s[t] = (q · k_t) / sqrt_hs for t in [t0, t1), K transposed: kt[e * kt_stride + t]. With Mul,
// sqrt_hs is a power of two (head size 4, 16, 64, ...) and the division a multiplication by
// its reciprocal: the same real number, so the same rounded result, for every operand.
template <class V, bool Mul>
[[gnu::always_inline]] inline void scores_impl(float* s, const float* q, const float* kt, std::size_t kt_stride, int hs,
                                               int t0, int t1, float sqrt_hs) {
  constexpr int L = sizeof(V) / sizeof(float);
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

// scores_impl for `nodes` nodes (rows s[n], queries q[n]) over the same slots: whole tiles of
// nodes and vectors, the rest node by node. Each score is the same sum as scores_impl's.
template <class V, bool Mul>
[[gnu::always_inline]] inline void scores_nodes_impl(float* const* s, const float* const* q, int nodes, const float* kt,
                                                     std::size_t kt_stride, int hs, int t0, int t1, float sqrt_hs) {
  constexpr int L = sizeof(V) / sizeof(float), N = tile_nodes<V>, T = 4;
  const float inv = 1.0f / sqrt_hs;
  int n = 0;
  for (; n + N <= nodes; n += N) {
    int t = t0;
    for (; t + T * L <= t1; t += T * L) score_tile<V, Mul, N, T>(s + n, q + n, kt, kt_stride, hs, t, inv, sqrt_hs);
    for (; t + L <= t1; t += L) score_tile<V, Mul, N, 1>(s + n, q + n, kt, kt_stride, hs, t, inv, sqrt_hs);
    for (int m = n; m < n + N; ++m) scores_impl<V, Mul>(s[m], q[m], kt, kt_stride, hs, t, t1, sqrt_hs);
  }
  for (; n < nodes; ++n) scores_impl<V, Mul>(s[n], q[n], kt, kt_stride, hs, t0, t1, sqrt_hs);
}

// Whether x is a power of two whose reciprocal is a normal float.
inline bool exact_reciprocal(float x) {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  const std::uint32_t exponent = u >> 23;  // sign bit included: positive only
  return (u & 0x7fffffu) == 0 && exponent >= 2 && exponent <= 252;
}

// For H heads h: o[h][e] += p[h][t] * v[h][t * v_stride + e] for e in [e0, e0 + lanes of W), t in
// [t0, t1) in order. The heads' sums are independent chains, interleaved to hide the adds' latency.
template <int H, class W, bool F>
[[gnu::always_inline]] inline void values_chunk(float* const* o, const float* const* p, const float* const* v,
                                                std::size_t v_stride, int e, int t0, int t1) {
  W acc[H];
  _Pragma("GCC unroll 8") for (int h = 0; h < H; ++h) acc[h] = load<W>(o[h] + e);
  for (int t = t0; t < t1; ++t)
    _Pragma("GCC unroll 8") for (int h = 0; h < H; ++h) multiply_add<F>(acc[h], load<W>(v[h] + t * v_stride + e), p[h][t]);
  _Pragma("GCC unroll 8") for (int h = 0; h < H; ++h) store(o[h] + e, acc[h]);
}

// The same for e in [0, hs): chunks of 16 lanes where V has 16, then of 8, then one by one.
template <int H, class V>
[[gnu::always_inline]] inline void values_h(float* const* o, const float* const* p, const float* const* v,
                                            std::size_t v_stride, int hs, int t0, int t1) {
  int e = 0;
  if constexpr (sizeof(V) >= sizeof(v16f))
    for (; e + 16 <= hs; e += 16) values_chunk<H, v16f, fused<V>>(o, p, v, v_stride, e, t0, t1);
  for (; e + 8 <= hs; e += 8) values_chunk<H, v8f, fused<V>>(o, p, v, v_stride, e, t0, t1);
  for (; e < hs; ++e)
    for (int h = 0; h < H; ++h)
      for (int t = t0; t < t1; ++t) multiply_add<fused<V>>(o[h][e], v[h][t * v_stride + e], p[h][t]);
}

template <class V>
[[gnu::always_inline]] inline void values_impl(float* const* o, const float* const* p, const float* const* v, int heads,
                                               std::size_t v_stride, int hs, int t0, int t1) {
  int h = 0;
  for (; h + 8 <= heads; h += 8) values_h<8, V>(o + h, p + h, v + h, v_stride, hs, t0, t1);
  for (; h + 4 <= heads; h += 4) values_h<4, V>(o + h, p + h, v + h, v_stride, hs, t0, t1);
  for (; h + 2 <= heads; h += 2) values_h<2, V>(o + h, p + h, v + h, v_stride, hs, t0, t1);
  for (; h < heads; ++h) values_h<1, V>(o + h, p + h, v + h, v_stride, hs, t0, t1);
}

// o[n][e ..] += p[n][t] * v[t * v_stride + e ..] for N nodes and P vectors of W lanes, t in
// [t0, t1) in order: values_chunk's sums, each value vector loaded once for N nodes.
template <class W, bool F, int N, int P>
[[gnu::always_inline]] inline void value_tile(float* const* o, const float* const* p, const float* v,
                                              std::size_t v_stride, int e, int t0, int t1) {
  constexpr int L = sizeof(W) / sizeof(float);
  W acc[N][P];
  _Pragma("GCC unroll 8") for (int n = 0; n < N; ++n) _Pragma("GCC unroll 8") for (int c = 0; c < P; ++c)
      acc[n][c] = load<W>(o[n] + e + c * L);
  for (int t = t0; t < t1; ++t) {
    W vv[P];
    _Pragma("GCC unroll 8") for (int c = 0; c < P; ++c) vv[c] = load<W>(v + t * v_stride + e + c * L);
    _Pragma("GCC unroll 8") for (int n = 0; n < N; ++n) multiply_add_all<F, P>(acc[n], vv, p[n][t]);
  }
  _Pragma("GCC unroll 8") for (int n = 0; n < N; ++n) _Pragma("GCC unroll 8") for (int c = 0; c < P; ++c)
      store(o[n] + e + c * L, acc[n][c]);
}

// The last r < N nodes in one tile of r.
template <class W, bool F, int N, int P>
[[gnu::always_inline]] inline void value_rest(float* const* o, const float* const* p, int r, const float* v,
                                              std::size_t v_stride, int e, int t0, int t1) {
  if constexpr (N > 1) {
    if (r == N - 1) value_tile<W, F, N - 1, P>(o, p, v, v_stride, e, t0, t1);
    else value_rest<W, F, N - 1, P>(o, p, r, v, v_stride, e, t0, t1);
  }
}

template <class W, bool F, int N, int P>
[[gnu::always_inline]] inline void value_tiles(float* const* o, const float* const* p, int nodes, const float* v,
                                               std::size_t v_stride, int e, int t0, int t1) {
  int n = 0;
  for (; n + N <= nodes; n += N) value_tile<W, F, N, P>(o + n, p + n, v, v_stride, e, t0, t1);
  if (n < nodes) value_rest<W, F, N, P>(o + n, p + n, nodes - n, v, v_stride, e, t0, t1);
}

// One head's values for `nodes` nodes (outputs o[n], weights p[n]) over the same slots, in the
// lane widths of values_h: 4 vectors of V's lanes at a time, then one, then 8 lanes, then one.
template <class V>
[[gnu::always_inline]] inline void values_nodes_impl(float* const* o, const float* const* p, int nodes, const float* v,
                                                     std::size_t v_stride, int hs, int t0, int t1) {
  constexpr int L = sizeof(V) / sizeof(float), N = tile_nodes<V>;
  constexpr bool F = fused<V>;
  int e = 0;
  for (; e + 4 * L <= hs; e += 4 * L) value_tiles<V, F, N, 4>(o, p, nodes, v, v_stride, e, t0, t1);
  for (; e + L <= hs; e += L) value_tiles<V, F, 2 * N, 1>(o, p, nodes, v, v_stride, e, t0, t1);
  if constexpr (sizeof(V) >= sizeof(v16f))
    for (; e + 8 <= hs; e += 8) value_tiles<v8f, F, 2 * N, 1>(o, p, nodes, v, v_stride, e, t0, t1);
  for (; e < hs; ++e)
    for (int n = 0; n < nodes; ++n)
      for (int t = t0; t < t1; ++t) multiply_add<F>(o[n][e], v[t * v_stride + e], p[n][t]);
}

// x = exp16(x) (see the top of this file), lane by lane.
template <class V>
[[gnu::always_inline]] inline void exp_lanes(V& x) {
  using I = decltype(x < x);
  const V lo = splat<V>(-87.3f), hi = splat<V>(88.3f), magic = splat<V>(12582912.0f);
  const V xc = x < lo ? lo : (x > hi ? hi : x);
  const V n = (xc * splat<V>(1.44269504f) + magic) - magic;
  // ln2_hi has 9 significant bits, so n * ln2_hi (|n| <= 127) and the subtraction are exact.
  const V r = (xc - n * splat<V>(0.693359375f)) - n * splat<V>(-2.12194440e-4f);
  V p = splat<V>(1.0f / 5040.0f);
  for (const float c : {1.0f / 720.0f, 1.0f / 120.0f, 1.0f / 24.0f, 1.0f / 6.0f, 0.5f, 1.0f, 1.0f}) {
    V next = splat<V>(c);
    multiply_add_vectors<fused<V>>(next, p, r);  // p * r + c: one rounding where the path fuses
    p = next;
  }
  const I bits = (__builtin_convertvector(n, I) + 127) << 23;
  V scale;
  std::memcpy(&scale, &bits, sizeof scale);
  x = x < lo ? V{} : p * scale;
}

// Lane reductions in registers: halves folded onto each other, so the sum adds lane l + w to lane
// l for w = L/2, L/4, ..., 1 (the order the softmax's denominator is defined with). Templates, so
// that they exist only inside the ISA entry points.
template <class V>
[[gnu::always_inline]] inline v4f max_halves(const V& v) {
  if constexpr (sizeof(V) == sizeof(v16f)) {
    const v8f lo = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7),
              hi = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
    return max_halves(lo > hi ? lo : hi);
  } else if constexpr (sizeof(V) == sizeof(v8f)) {
    const v4f lo = __builtin_shufflevector(v, v, 0, 1, 2, 3), hi = __builtin_shufflevector(v, v, 4, 5, 6, 7);
    return max_halves(lo > hi ? lo : hi);
  } else {
    const v4f a = __builtin_shufflevector(v, v, 2, 3, 0, 1), b = v > a ? v : a;
    const v4f c = __builtin_shufflevector(b, b, 1, 0, 3, 2);
    return b > c ? b : c;
  }
}
template <class V>
[[gnu::always_inline]] inline float sum_halves(const V& v) {
  if constexpr (sizeof(V) == sizeof(v16f))
    return sum_halves(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7) +
                      __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15));
  else if constexpr (sizeof(V) == sizeof(v8f))
    return sum_halves(__builtin_shufflevector(v, v, 0, 1, 2, 3) + __builtin_shufflevector(v, v, 4, 5, 6, 7));
  else {
    const v4f a = v + __builtin_shufflevector(v, v, 2, 3, 0, 1);
    return a[0] + a[1];
  }
}

// s[0 .. n) = exp16(s[t] - max); returns their sum, in 16 lanes (see the top of this file): the
// softmax's denominator. V holds L of the 16 lanes (P vectors), so every ISA adds the same numbers
// in the same order: a[l] += a[l + 8] is acc[q] += acc[q + P/2] while P > 1, then sum_halves.
template <class V>
[[gnu::always_inline]] inline float exp_sum_impl(float* s, int n) {
  constexpr int L = sizeof(V) / sizeof(float), P = 16 / L;
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

// a[0 .. L) = silu(a) * b.
template <class V>
[[gnu::always_inline]] inline void swiglu_lanes(float* a, const float* b) {
  const V x = load<V>(a), one = splat<V>(1.0f);
  V e = -x;
  exp_lanes(e);
  store(a, x * (one / (one + e)) * load<V>(b));
}

// silu(a) * b, elementwise.
template <class V>
[[gnu::always_inline]] inline void swiglu_impl(float* a, const float* b, int n) {
  constexpr int L = sizeof(V) / sizeof(float);
  int e = 0;
  for (; e + L <= n; e += L) swiglu_lanes<V>(a + e, b + e);
  if (e < n) {
    float x[L] = {}, y[L] = {};
    std::copy(a + e, a + n, x);
    std::copy(b + e, b + n, y);
    swiglu_lanes<V>(x, y);
    std::copy_n(x, n - e, a + e);
  }
}

// Index of the largest of row[0 .. n), the lowest of equal ones (core::argmax_row's answer: -0 and
// +0 are equal); -1 when a value is NaN or infinite. One pass: each lane keeps its first largest
// value and its index (as a float, exact in segments of 2^23), then the lanes' lowest index of the
// largest wins. x * 0 is NaN exactly where x is NaN or infinite, so a sum of them tells.
template <class V>
[[gnu::always_inline]] inline int argmax_segment(const float* row, int n) {
  constexpr int L = sizeof(V) / sizeof(float);
  V best = -splat<V>(__builtin_inff()), at = splat<V>(-1.0f), index{}, poison{};
  for (int l = 0; l < L; ++l) index[l] = static_cast<float>(l);
  int t = 0;
  for (; t + L <= n; t += L, index += static_cast<float>(L)) {
    const V x = load<V>(row + t);
    poison += x * 0.0f;
    at = x > best ? index : at;
    best = x > best ? x : best;
  }
  float top = 0.0f;
  int found = -1;
  for (int l = 0; l < L; ++l) {
    if (poison[l] != 0.0f) return -1;
    const int lane_at = static_cast<int>(at[l]);
    if (lane_at >= 0 && (found < 0 || best[l] > top || (best[l] == top && lane_at < found))) top = best[l], found = lane_at;
  }
  for (; t < n; ++t) {
    const float x = row[t];
    if (x * 0.0f != 0.0f) return -1;
    if (found < 0 || x > top) top = x, found = t;
  }
  return found;
}
template <class V>
[[gnu::always_inline]] inline int argmax_impl(const float* row, int n) {
  constexpr int segment = 1 << 23;
  int found = -1;
  for (int s0 = 0; s0 < n; s0 += segment) {
    const int at = argmax_segment<V>(row + s0, std::min(segment, n - s0));
    if (at < 0) return -1;
    if (found < 0 || row[s0 + at] > row[found]) found = s0 + at;
  }
  return found;
}

// One ISA's kernels.
struct Kernels {
  const char* name;
  bool fused;  ///< whether a multiply-add is one fused operation (one rounding), see the top
  void (*matmul)(const Matrix&, const float*, int, int, float*, int, int, int);
  void (*scores)(float* const*, const float* const*, int, const float*, std::size_t, int, int, int, float);
  void (*values)(float* const*, const float* const*, const float* const*, int, std::size_t, int, int, int);
  void (*values_nodes)(float* const*, const float* const*, int, const float*, std::size_t, int, int, int);
  float (*exp_sum)(float*, int);
  void (*swiglu)(float*, const float*, int);
  int (*argmax)(const float*, int);
};

#define SPECDEC_HOST_KERNELS(NAME, ATTR, V, TV, B, TV1, TV2)                                                           \
  ATTR inline void NAME##_matmul(const Matrix& m, const float* x, int ldx, int n, float* y, int ldy, int c0, int c1) { \
    matmul_impl<V, TV, B, TV1, TV2>(m, x, ldx, n, y, ldy, c0, c1);                                                   \
  }                                                                                                                  \
  ATTR inline void NAME##_scores(float* const* s, const float* const* q, int nodes, const float* kt, std::size_t st,  \
                                 int hs, int t0, int t1, float r) {                                                  \
    if (exact_reciprocal(r)) scores_nodes_impl<V, true>(s, q, nodes, kt, st, hs, t0, t1, r);                         \
    else scores_nodes_impl<V, false>(s, q, nodes, kt, st, hs, t0, t1, r);                                            \
  }                                                                                                                  \
  ATTR inline void NAME##_values(float* const* o, const float* const* p, const float* const* v, int heads,            \
                                 std::size_t st, int hs, int t0, int t1) {                                           \
    values_impl<V>(o, p, v, heads, st, hs, t0, t1);                                                                  \
  }                                                                                                                  \
  ATTR inline void NAME##_values_nodes(float* const* o, const float* const* p, int nodes, const float* v,             \
                                       std::size_t st, int hs, int t0, int t1) {                                     \
    values_nodes_impl<V>(o, p, nodes, v, st, hs, t0, t1);                                                            \
  }                                                                                                                  \
  ATTR inline float NAME##_exp_sum(float* s, int n) { return exp_sum_impl<V>(s, n); }                              \
  ATTR inline void NAME##_swiglu(float* a, const float* b, int n) { swiglu_impl<V>(a, b, n); }                       \
  ATTR inline int NAME##_argmax(const float* row, int n) { return argmax_impl<V>(row, n); }                          \
  inline constexpr Kernels NAME##_kernels{#NAME, fused<V>, NAME##_matmul, NAME##_scores, NAME##_values,               \
                                          NAME##_values_nodes, NAME##_exp_sum, NAME##_swiglu, NAME##_argmax};

// Tiles: 4 AVX-512 vectors (64 columns) × 6 tokens = 24 accumulators of 32 registers; AVX2 and
// the portable path have 16 registers. One token or two: 8 vectors × 1 or 4 × 2 (AVX-512: 4 × 1,
// a matrix tile's row, and 4 × 2).
SPECDEC_HOST_KERNELS(portable, , v4f, 4, 2, 8, 4)
#if defined(SPECDEC_HOST_ISA_X86)
SPECDEC_HOST_KERNELS(avx2, __attribute__((target("avx2,fma"))), v8f, 2, 6, 8, 4)
SPECDEC_HOST_KERNELS(avx512, __attribute__((target("avx512f"))), v16f, 4, 6, 4, 4)
#endif
#undef SPECDEC_HOST_KERNELS
#pragma GCC diagnostic pop

#if defined(SPECDEC_HOST_AMX)
// AMX tile registers of the bf16 product: tmm0-3 accumulate `rows` tokens × 16 columns (fp32),
// tmm4 holds the tokens' 32 inputs of a chunk (bf16), tmm5-7 the weights' blocks.
struct alignas(64) AmxTileConfig {
  std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};

// GCC 12 does not count LDTILECFG's operand as read memory and may drop the stores that fill it
// (all of them, where it sees the values at compile time): the empty asm makes them happen.
[[gnu::target("amx-tile")]] inline void amx_load(const AmxTileConfig& config) {
  asm volatile("" : : "r"(&config) : "memory");
  _tile_loadconfig(&config);
}

[[gnu::target("amx-tile,amx-bf16")]] inline void amx_configure(int rows) {
  AmxTileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = static_cast<std::uint8_t>(t < 5 ? rows : 16);
    config.bytes_per_row[t] = 64;
  }
  amx_load(config);
}

// Columns [c0, c1) (multiples of 64, or c1 = stride) of y[n][ldy] = xa[n][in_padded] · m, m in
// bf16 and xa its inputs in bf16. Tokens in blocks of 16 inside a tile of 64 columns: a tile's
// weights stay in L2 for the next block.
[[gnu::target("amx-tile,amx-bf16")]] inline void amx_matmul(const Matrix& m, const std::uint16_t* xa, int n, float* y,
                                                           int ldy, int c0, int c1) {
  const int in_pad = m.in_padded(), chunks = in_pad / Matrix::bf16_chunk;
  const long lda = static_cast<long>(in_pad) * 2, ldc = static_cast<long>(ldy) * 4;
  int configured = 0;
  for (int c = c0; c < c1; c += Matrix::tile) {
    const int blocks = m.width(c) / Matrix::align;
    const std::uint16_t* w = m.bf16.data() + static_cast<std::size_t>(c) * in_pad;
    for (int t = 0; t < n; t += 16) {
      const int rows = std::min(16, n - t);
      if (rows != configured) amx_configure(configured = rows);
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      const std::uint16_t* a = xa + static_cast<std::size_t>(t) * in_pad;
      for (int k = 0; k < chunks; ++k) {
        _tile_loadd(4, a + k * Matrix::bf16_chunk, lda);
        const std::uint16_t* b = w + static_cast<std::size_t>(k) * blocks * 512;
        _tile_loadd(5, b, 64);
        _tile_dpbf16ps(0, 4, 5);
        if (blocks > 1) {
          _tile_loadd(6, b + 512, 64);
          _tile_dpbf16ps(1, 4, 6);
        }
        if (blocks > 2) {
          _tile_loadd(7, b + 1024, 64);
          _tile_dpbf16ps(2, 4, 7);
        }
        if (blocks > 3) {
          _tile_loadd(5, b + 1536, 64);
          _tile_dpbf16ps(3, 4, 5);
        }
      }
      float* out = y + static_cast<std::size_t>(t) * ldy + c;
      _tile_stored(0, out, ldc);
      if (blocks > 1) _tile_stored(1, out + 16, ldc);
      if (blocks > 2) _tile_stored(2, out + 32, ldc);
      if (blocks > 3) _tile_stored(3, out + 48, ldc);
    }
  }
  _tile_release();
}

// Attention in bf16 on AMX (llama_layer.hpp's attend_bf16): the tiles of one call, for heads of
// hs values. tmm0 scores (16 nodes × 16 slots), tmm1 queries (16 nodes × a chunk of kc = min(hs,
// 32) dimensions), tmm2 keys (kc / 2 dimension pairs × 16 slots); tmm3 outputs (16 nodes × 16
// values), tmm4 weights (16 nodes × 32 slots), tmm5 values (16 slot pairs × 16 values); tmm6 and
// tmm7 one node's outputs and weights.
[[gnu::target("amx-tile,amx-bf16")]] inline void amx_attention_configure(int hs) {
  const int kc = std::min(hs, 32);
  AmxTileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = static_cast<std::uint8_t>(t == 2 ? kc / 2 : t >= 6 ? 1 : 16);
    config.bytes_per_row[t] = static_cast<std::uint16_t>(t == 1 ? kc * 2 : 64);
  }
  amx_load(config);
}

// s[i][t] (row i at s + i * lds) = q[i] · k[t] for the 16 rows of q (bf16, hs each) and slots t
// in [0, t1) rounded up to 16; kp holds the head's keys as bf16 pairs, pair row r (dimensions 2r,
// 2r + 1) at kp + r * slots.
[[gnu::target("amx-tile,amx-bf16")]] inline void amx_scores(float* s, long lds, const std::uint16_t* q, int hs,
                                                           const std::uint32_t* kp, long slots, int t1) {
  const int kc = std::min(hs, 32);
  for (int t = 0; t < t1; t += 16) {
    _tile_zero(0);
    for (int d = 0; d < hs; d += kc) {
      _tile_loadd(1, q + d, hs * 2);
      _tile_loadd(2, kp + static_cast<std::size_t>(d / 2) * slots + t, slots * 4);
      _tile_dpbf16ps(0, 1, 2);
    }
    _tile_stored(0, s + t, lds * 4);
  }
}

// o[i][e] (row i at o + i * ldo) = the sum over slots [0, 32 · chunks) of p[i][t] v[t][e], for
// the 16 rows of p (bf16, ldp apart): 0, then one TDPBF16PS per chunk of 32 slots in order. vp
// holds the head's values by slot pairs, pair u (slots 2u, 2u + 1) at vp + u * pair_stride, value
// e's two at 2e and 2e + 1.
[[gnu::target("amx-tile,amx-bf16")]] inline void amx_values(float* o, long ldo, const std::uint16_t* p, long ldp,
                                                           const std::uint16_t* vp, long pair_stride, int hs,
                                                           int chunks) {
  for (int e = 0; e < hs; e += 16) {
    _tile_zero(3);
    for (int c = 0; c < chunks; ++c) {
      _tile_loadd(4, p + c * 32, ldp * 2);
      _tile_loadd(5, vp + static_cast<std::size_t>(c) * 16 * pair_stride + e * 2, pair_stride * 2);
      _tile_dpbf16ps(3, 4, 5);
    }
    _tile_stored(3, o + e, ldo * 4);
  }
}

// o[0 .. 16) += one node's chunk: p its 32 weights (bf16), b the chunk's 16 slot pairs of 16
// values (64 bytes a pair): the step amx_values takes for a row, on that row alone.
[[gnu::target("amx-tile,amx-bf16")]] inline void amx_values_row(float* o, const std::uint16_t* p,
                                                               const std::uint16_t* b) {
  _tile_loadd(6, o, 64);
  _tile_loadd(7, p, 64);
  _tile_loadd(5, b, 64);
  _tile_dpbf16ps(6, 7, 5);
  _tile_stored(6, o, 64);
}

[[gnu::target("amx-tile")]] inline void amx_release() { _tile_release(); }
#endif

}  // namespace detail

/// Whether a model of these weights and head size keeps its K/V cache in bf16 and runs attention
/// on AMX (llama_layer.hpp): bf16 weights and heads of 16 values or a multiple of 32.
inline bool bf16_attention(WeightFormat format, int head_size) {
  return format == WeightFormat::bf16 && (head_size == 16 || (head_size > 0 && head_size % 32 == 0));
}

/// The kernels of the best ISA this machine has (chosen once).
inline const detail::Kernels& kernels() {
  static const detail::Kernels& k = []() -> const detail::Kernels& {
#if defined(SPECDEC_HOST_ISA_X86)
    if (__builtin_cpu_supports("avx512f")) return detail::avx512_kernels;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return detail::avx2_kernels;
#endif
    return detail::portable_kernels;
  }();
  return k;
}

}  // namespace specdec::llama
