// Synthetic Llama weights from a counter-based generator: weight (tensor, index) of a seed is a
// pure function of the three, so a device fills a 7B model's tensors in place (no file, no
// host-to-device copy) and the host recomputes any element to check it. Also the bf16 rounding
// both sides store them with. Host and device (SPECDEC_HD); no allocation, no throw.
//
// The values: matrices (embedding, projections, classifier) uniform on ±0.02·√3 (standard
// deviation 0.02, the scale specdec-synth-model writes), norm weights uniform on 1 ± 0.1. Each is
// an odd multiple of 2^-23 of the half-range, rounded once (one multiply, or one multiply and one
// add for norms): the same float on any IEEE machine and in any order of generation.
#pragma once

#include <cstdint>
#include <cstring>

#include <specdec/config.hpp>
#include <specdec/core/philox.hpp>
#include <specdec/core/portable_math.hpp>

namespace specdec::synthetic {

/// The tensors of a Llama layer stack; the generator's stream of a tensor is tensor_id(kind, layer).
enum class tensor : std::uint32_t {
  embedding = 0,
  rms_att,
  wq,
  wk,
  wv,
  wo,
  rms_ffn,
  w1,
  w2,
  w3,
  rms_final,
  classifier,
};

inline constexpr float matrix_sd = 0.02f;
inline constexpr float matrix_half_range = 0.034641016f;  // matrix_sd * sqrt(3)
inline constexpr float norm_half_range = 0.1f;

/// The stream of `kind` in `layer` (0 for the tensors outside the layers): kinds in the low byte,
/// so every (kind, layer) of a model with < 2^24 layers has its own id.
SPECDEC_HD constexpr std::uint32_t tensor_id(tensor kind, int layer = 0) {
  return static_cast<std::uint32_t>(kind) | static_cast<std::uint32_t>(layer) << 8;
}

SPECDEC_HD constexpr bool is_norm(tensor kind) {
  return kind == tensor::rms_att || kind == tensor::rms_ffn || kind == tensor::rms_final;
}

/// 32 random bits for element `index` of tensor `id`: word index % 4 of one Philox block, whose
/// counter is (id, index / 4 split in two 32-bit halves, a constant naming this purpose).
SPECDEC_HD inline std::uint32_t weight_bits(std::uint64_t seed, std::uint32_t id, std::uint64_t index) {
  constexpr std::uint32_t purpose = 0x5EED0001u;  // keeps these blocks apart from sampling's
  const std::uint64_t block = index / 4;
  const core::u32x4 r = core::philox4x32_10(
      core::u32x4{id, static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), purpose},
      static_cast<std::uint32_t>(seed), static_cast<std::uint32_t>(seed >> 32));
  switch (index % 4) {
    case 0: return r.x;
    case 1: return r.y;
    case 2: return r.z;
    default: return r.w;
  }
}

/// An odd integer in [-(2^23 - 1), 2^23 - 1] from 23 random bits, as an exact float: symmetric
/// about 0, never 0.
SPECDEC_HD inline float centred_odd(std::uint32_t bits) {
  const std::int32_t k = static_cast<std::int32_t>(bits >> 9);  // [0, 2^23)
  return static_cast<float>(2 * k + 1 - (1 << 23));
}

/// Weight `index` of tensor `kind` in `layer`, for `seed` (fp32; see bf16_bits for storage).
SPECDEC_HD inline float weight(std::uint64_t seed, tensor kind, int layer, std::uint64_t index) {
  const float u = centred_odd(weight_bits(seed, tensor_id(kind, layer), index));
  constexpr float two_to_minus_23 = 1.0f / 8388608.0f;
  // Rounded apart on the device too (nvcc would fuse 1 + u * c into one FMA: other bits than the host's).
  if (is_norm(kind)) return core::add_rn(1.0f, core::mul_rn(u, norm_half_range * two_to_minus_23));
  return u * (matrix_half_range * two_to_minus_23);
}

/// fp32 rounded to the nearest bf16, ties to even (a NaN stays a quiet NaN): the upper 16 bits.
SPECDEC_HD inline std::uint16_t bf16_bits(float f) {
#if defined(__CUDA_ARCH__)
  const std::uint32_t u = __float_as_uint(f);
#else
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
#endif
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/// The float a bf16 holds (exact).
SPECDEC_HD inline float bf16_value(std::uint16_t b) {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

}  // namespace specdec::synthetic
