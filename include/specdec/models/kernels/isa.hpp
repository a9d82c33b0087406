// The fp32 kernels of each ISA path as a table (Kernels: portable, AVX2, AVX-512F), and which one
// a forward runs: HostIsa, named by a target's options or by the environment variable
// SPECDEC_HOST_ISA (read once), else the best this CPU has. Choosing a table also checks that the
// code was compiled without contraction of a * b + c (host_kernels.hpp). Host-only.
#pragma once

#include <cstdlib>
#include <string>
#include <string_view>

#include <specdec/error.hpp>
#include <specdec/models/kernels/fp32_attention.hpp>
#include <specdec/models/kernels/fp32_elementwise.hpp>
#include <specdec/models/kernels/fp32_matmul.hpp>

namespace specdec::llama {

namespace detail {

// One ISA's kernels.
struct Kernels {
  const char* name;
  bool fused;  ///< whether a multiply-add is one fused operation (one rounding), see host_kernels.hpp
  void (*matmul)(const Matrix&, const float*, int, int, float*, int, int, int);
  void (*scores)(float* const*, const float* const*, int, const float*, std::size_t, int, int, int, float);
  void (*head_values)(float* const*, const float* const*, const float* const*, int, std::size_t, int, int, int);
  void (*node_values)(float* const*, const float* const*, int, const float*, std::size_t, int, int, int);
  float (*exp_sum)(float*, int);
  void (*swiglu)(float*, const float*, int);
  int (*argmax)(const float*, int);
};

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

// The entry points of one ISA: each kernel template instantiated for vector type V under the
// ISA's target attribute ATTR, with the matrix product's register tiles TILES (MatmulTiles);
// flatten, so that every call inside, the fused multiply-adds' (lanes.hpp) included, is inlined.
//
// Compiled once or in every translation unit: by default they are inline functions, compiled
// wherever a host model is used (a header library). They are most of the code a host model costs
// a translation unit, so a program of many such units may define SPECDEC_HOST_KERNELS_EXTERN in
// all of them (they then only declare the entry points) and compile one more unit that defines
// SPECDEC_HOST_KERNELS_IMPLEMENTATION and includes targets/llama2c_forward.hpp (CMake, in this
// project's build: link specdec::host_kernels, src/host_kernels.cpp). The same code with the same
// flags: the same bits.
//
// The model code that runs the kernels (models/llama_layer.hpp's decoder_layer and matmul,
// targets/llama2c_forward.hpp's TreeForward::run) goes the same way: SPECDEC_HOST_MODEL_INLINE
// prefixes its declarations and definitions, and SPECDEC_HOST_MODEL_DEFINED says whether this
// unit compiles the definitions.
#if defined(SPECDEC_HOST_KERNELS_EXTERN) && !defined(SPECDEC_HOST_KERNELS_IMPLEMENTATION)
#define SPECDEC_HOST_KERNEL(ATTR, SIGNATURE, ...) SIGNATURE;
#define SPECDEC_HOST_MODEL_INLINE
#define SPECDEC_HOST_MODEL_DEFINED 0
#elif defined(SPECDEC_HOST_KERNELS_IMPLEMENTATION)
#define SPECDEC_HOST_KERNEL(ATTR, SIGNATURE, ...) ATTR SIGNATURE { __VA_ARGS__ }
#define SPECDEC_HOST_MODEL_INLINE
#define SPECDEC_HOST_MODEL_DEFINED 1
#else
#define SPECDEC_HOST_KERNEL(ATTR, SIGNATURE, ...) ATTR inline SIGNATURE { __VA_ARGS__ }
#define SPECDEC_HOST_MODEL_INLINE inline
#define SPECDEC_HOST_MODEL_DEFINED 1
#endif
#define SPECDEC_HOST_KERNELS(NAME, ATTR, V, TILES)                                                                      \
  SPECDEC_HOST_KERNEL(ATTR,                                                                                           \
                      void NAME##_matmul(const Matrix& m, const float* x, int ldx, int n, float* y, int ldy, int c0,  \
                                         int c1),                                                                     \
                      matmul_impl<V, TILES>(m, x, ldx, n, y, ldy, c0, c1);)                                           \
  SPECDEC_HOST_KERNEL(ATTR,                                                                                           \
                      void NAME##_scores(float* const* s, const float* const* q, int nodes, const float* kt,          \
                                         std::size_t st, int hs, int t0, int t1, float r),                            \
                      if (exact_reciprocal(r)) scores_of_nodes<V, true>(s, q, nodes, kt, st, hs, t0, t1, r);          \
                      else scores_of_nodes<V, false>(s, q, nodes, kt, st, hs, t0, t1, r);)                            \
  SPECDEC_HOST_KERNEL(ATTR,                                                                                           \
                      void NAME##_head_values(float* const* o, const float* const* p, const float* const* v,          \
                                              int heads, std::size_t st, int hs, int t0, int t1),                     \
                      head_value_sums<V>(o, p, v, heads, st, hs, t0, t1);)                                            \
  SPECDEC_HOST_KERNEL(ATTR,                                                                                           \
                      void NAME##_node_values(float* const* o, const float* const* p, int nodes, const float* v,      \
                                              std::size_t st, int hs, int t0, int t1),                                \
                      node_value_sums<V>(o, p, nodes, v, st, hs, t0, t1);)                                            \
  SPECDEC_HOST_KERNEL(ATTR, float NAME##_exp_sum(float* s, int n), return exp_sum_impl<V>(s, n);)                     \
  SPECDEC_HOST_KERNEL(ATTR, void NAME##_swiglu(float* a, const float* b, int n), swiglu_impl<V>(a, b, n);)            \
  SPECDEC_HOST_KERNEL(ATTR, int NAME##_argmax(const float* row, int n), return argmax_impl<V>(row, n);)               \
  inline constexpr Kernels NAME##_kernels{#NAME, fused<V>, NAME##_matmul, NAME##_scores, NAME##_head_values,           \
                                          NAME##_node_values, NAME##_exp_sum, NAME##_swiglu, NAME##_argmax};

// Register tiles (fp32_matmul.hpp) within each ISA's vector registers: AVX-512 has 32 (4 vectors
// = 64 columns × 6 tokens = 24 accumulators), AVX2 and the portable path 16.
inline constexpr MatmulTiles portable_tiles{.one_token = {8, 1}, .two_tokens = {4, 2}, .many_tokens = {4, 2}};
SPECDEC_HOST_KERNELS(portable, __attribute__((flatten)), v4f, portable_tiles)
#if defined(SPECDEC_HOST_ISA_X86)
inline constexpr MatmulTiles avx2_tiles{.one_token = {8, 1}, .two_tokens = {4, 2}, .many_tokens = {2, 6}};
inline constexpr MatmulTiles avx512_tiles{.one_token = {4, 1}, .two_tokens = {4, 2}, .many_tokens = {4, 6}};
SPECDEC_HOST_KERNELS(avx2, __attribute__((flatten, target("avx2,fma"))), v8f, avx2_tiles)
SPECDEC_HOST_KERNELS(avx512, __attribute__((flatten, target("avx512f,avx2,fma"))), v16f, avx512_tiles)
#endif
#undef SPECDEC_HOST_KERNELS
#undef SPECDEC_HOST_KERNEL
#pragma GCC diagnostic pop

// Whether this code's compiler fused a * b + c written as a multiply and an add into one rounding
// (GCC and Clang do with -ffp-contract=fast, GCC's default for C++, wherever the target has FMA:
// in the AVX2 and AVX-512 entry points even when the translation unit is built without -mfma).
// (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 rounds to 1 + 2^-11; minus that is 0 when the product is
// rounded on its own, 2^-24 when fused. Not inlined, so that each is compiled for its own target.
[[gnu::noinline]] inline bool contracts_baseline() {
  volatile float a = 1.0f + 1.0f / 4096.0f, c = -(1.0f + 1.0f / 2048.0f);
  const float x = a, z = c;
  return x * x + z != 0.0f;
}
#if defined(SPECDEC_HOST_ISA_X86)
[[gnu::noinline, gnu::target("avx2,fma")]] inline bool contracts_with_fma() {
  volatile float a = 1.0f + 1.0f / 4096.0f, c = -(1.0f + 1.0f / 2048.0f);
  const float x = a, z = c;
  return x * x + z != 0.0f;
}
#endif

// Throws where this code was compiled with contraction (once per process: the answer is fixed).
inline void check_no_contraction() {
  static const bool contracts = [] {
#if defined(SPECDEC_HOST_ISA_X86)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && contracts_with_fma()) return true;
#endif
    return contracts_baseline();
  }();
  if (contracts)
    throw error("the host kernels were compiled with floating-point contraction, which breaks their bit-exactness: "
                "build with -ffp-contract=off (CMake: link specdec::host_models)");
}

}  // namespace detail

/// The fp32 kernel paths (host_kernels.hpp, "ISA"): `automatic` is the one SPECDEC_HOST_ISA names,
/// else the best this CPU has (AVX-512F, then AVX2 with FMA, then portable).
enum class HostIsa { automatic, portable, avx2, avx512 };

inline const char* host_isa_name(HostIsa isa) {
  switch (isa) {
    case HostIsa::portable: return "portable";
    case HostIsa::avx2: return "avx2";
    case HostIsa::avx512: return "avx512";
    default: return "auto";
  }
}

/// Why this process cannot run `isa`'s kernels, in one sentence ("" when it can).
inline std::string host_isa_unavailable(HostIsa isa) {
  if (isa == HostIsa::automatic || isa == HostIsa::portable) return "";
#if defined(SPECDEC_HOST_ISA_X86)
  if (isa == HostIsa::avx2 && !(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")))
    return "host ISA avx2 needs a CPU with AVX2 and FMA, and this one lacks them: choose portable or auto";
  if (isa == HostIsa::avx512 && !(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma")))
    return "host ISA avx512 needs a CPU with AVX-512F, and this one has none: choose avx2, portable or auto";
  return "";
#else
  return std::string("host ISA ") + host_isa_name(isa) +
         " is not in this build, which has only the portable kernels (SPECDEC_HOST_ISA_PORTABLE, or not x86-64 "
         "GCC/Clang): choose portable or auto";
#endif
}

/// The ISA a name denotes: auto, portable, avx2 or avx512; throws specdec::error otherwise.
inline HostIsa host_isa_named(std::string_view name) {
  for (HostIsa isa : {HostIsa::automatic, HostIsa::portable, HostIsa::avx2, HostIsa::avx512})
    if (name == host_isa_name(isa)) return isa;
  throw error("host ISA must be auto, portable, avx2 or avx512, got '" + std::string(name) + "'");
}

/// The ISA `automatic` stands for in this process: SPECDEC_HOST_ISA's (read once; unset or empty
/// is auto), else the best this CPU has. Throws specdec::error when the variable names no ISA
/// or one this process cannot run.
inline HostIsa default_host_isa() {
  static const HostIsa chosen = [] {
    const char* value = std::getenv("SPECDEC_HOST_ISA");
    const std::string name = value ? value : "";
    HostIsa isa = HostIsa::automatic;
    try {
      if (!name.empty()) isa = host_isa_named(name);
    } catch (const error&) {
      throw error("SPECDEC_HOST_ISA must be auto, portable, avx2 or avx512, got '" + name + "'");
    }
    if (const std::string why = host_isa_unavailable(isa); !why.empty())
      throw error("SPECDEC_HOST_ISA=" + name + ": " + why);
    if (isa != HostIsa::automatic) return isa;
#if defined(SPECDEC_HOST_ISA_X86)
    if (host_isa_unavailable(HostIsa::avx512).empty()) return HostIsa::avx512;
    if (host_isa_unavailable(HostIsa::avx2).empty()) return HostIsa::avx2;
#endif
    return HostIsa::portable;
  }();
  return chosen;
}

/// The kernels of `isa` (automatic: default_host_isa()). Throws specdec::error, one sentence,
/// where this process cannot run them or they were compiled with contraction.
inline const detail::Kernels& kernels(HostIsa isa) {
  detail::check_no_contraction();
  if (isa == HostIsa::automatic) isa = default_host_isa();
  if (const std::string why = host_isa_unavailable(isa); !why.empty()) throw error(why);
#if defined(SPECDEC_HOST_ISA_X86)
  if (isa == HostIsa::avx512) return detail::avx512_kernels;
  if (isa == HostIsa::avx2) return detail::avx2_kernels;
#endif
  return detail::portable_kernels;
}

/// The kernels of this process's default ISA (chosen once).
inline const detail::Kernels& kernels() {
  static const detail::Kernels& k = kernels(HostIsa::automatic);
  return k;
}

}  // namespace specdec::llama
