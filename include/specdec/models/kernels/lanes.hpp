// The vector lanes the fp32 kernels compute in (GCC/Clang vector extensions: v4f on the portable
// path, v8f on AVX2, v16f on AVX-512), the fused multiply-add, exp16 lane by lane, and lane
// reductions. Everything here is always inlined into the ISA entry points (isa.hpp): the
// by-value vector ABI never shows at a call boundary. Host-only.
#pragma once

#include <cstring>
#include <initializer_list>

#include <specdec/models/kernels/platform.hpp>

SPECDEC_HOST_KERNELS_BEGIN
namespace specdec::llama::detail {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

typedef float v16f __attribute__((vector_size(64)));
typedef float v8f __attribute__((vector_size(32)));
typedef float v4f __attribute__((vector_size(16)));

/// Floats in a vector of type V.
template <class V>
inline constexpr int lanes = static_cast<int>(sizeof(V) / sizeof(float));

// For constants (folded). Runtime scalars enter as the scalar operand of a vector operation
// (v * s): with GCC 12 under target("avx512f") a splat of a runtime value can become 16 masked
// broadcasts, the scalar operand one broadcast.
template <class V>
[[gnu::always_inline]] inline V splat(float s) {
  V v;
  for (int l = 0; l < lanes<V>; ++l) v[l] = s;
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
// c = a * b + c with one rounding (VFMADD231PS/SS). An intrinsic is that one instruction whatever
// -ffp-contract says: contraction is about a multiply and an add written apart. They need their
// target attributes (the intrinsics do), so they cannot be always_inline into the ISA-neutral
// helpers below (GCC refuses to inline them there); the ISA entry points are flatten (isa.hpp),
// which inlines them there, where the target includes theirs.
[[gnu::target("avx512f")]] inline void fused_multiply_add(v16f& c, const v16f& a, const v16f& b) {
  c = _mm512_fmadd_ps(a, b, c);
}
[[gnu::target("avx2,fma")]] inline void fused_multiply_add(v8f& c, const v8f& a, const v8f& b) {
  c = _mm256_fmadd_ps(a, b, c);
}
[[gnu::target("fma")]] inline void fused_multiply_add(float& c, const float& a, const float& b) {
  c = _mm_cvtss_f32(_mm_fmadd_ss(_mm_set_ss(a), _mm_set_ss(b), _mm_set_ss(c)));
}
// A float in memory in every lane (VBROADCASTSS from memory, or AVX-512's embedded broadcast).
[[gnu::target("avx512f")]] inline void broadcast(v16f& out, const float& b) {
  out = _mm512_set1_ps(b);
}
[[gnu::target("avx2")]] inline void broadcast(v8f& out, const float& b) {
  out = _mm256_broadcast_ss(&b);
}
#endif

// c += a * b, fused when F. b: a float in memory, broadcast to every lane.
template <bool F, class W>
[[gnu::always_inline]] inline void multiply_add(W& c, const W& a, const float& b) {
#if defined(SPECDEC_HOST_ISA_X86)
  if constexpr (F && sizeof(W) == sizeof(float)) {
    fused_multiply_add(c, a, b);
    return;
  } else if constexpr (F) {
    W bv;
    broadcast(bv, b);
    fused_multiply_add(c, a, bv);
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

// x = exp16(x) (see host_kernels.hpp), lane by lane.
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

#pragma GCC diagnostic pop

}  // namespace specdec::llama::detail
SPECDEC_HOST_KERNELS_END
