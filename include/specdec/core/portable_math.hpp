// Floating-point arithmetic that gives the same bits on the host and on a CUDA device, for the
// stochastic walks (core/sampling.hpp, core/rejection.hpp, core/conditional.hpp): every operation
// is one IEEE single-precision operation rounded to nearest, and exp/log are built from those.
//
// Why: a device's expf/log2f and the host's std::exp/std::log2 differ in the last bits, and
// compilers fuse a * b + c into one FMA (one rounding instead of two) when they may. Either
// difference can flip a sampling decision whose uniform lies within an ulp of its threshold.
// Device code therefore uses the __f*_rn intrinsics, which nvcc never fuses; host code relies on
// -ffp-contract=off, which the specdec::portable_fp CMake target adds (CMakeLists.txt;
// tests/core/portable_math_test.cpp checks it) and must not be built with -ffast-math or
// flush-to-zero.
#pragma once

#include <cstdint>
#include <cstring>

#include <specdec/config.hpp>

namespace specdec::core {

SPECDEC_HD inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

SPECDEC_HD inline float sub_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fsub_rn(a, b);
#else
  return a - b;
#endif
}

SPECDEC_HD inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

SPECDEC_HD inline float div_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}

SPECDEC_HD inline std::uint32_t float_bits(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

SPECDEC_HD inline float float_from_bits(std::uint32_t bits) {
  float x;
  std::memcpy(&x, &bits, sizeof x);
  return x;
}

/// e^x, within 2 ulp of the exact value (tests/core/portable_math_test.cpp measures it), with the
/// same bits on host and device. x < -86 (results below about 2^-124, -inf included) gives 0,
/// so no result is subnormal; x > 88.72283 gives +inf; NaN gives NaN. exp_portable(0) == 1.
///
/// Method: x = k ln2 + r with k = round(x / ln2) and |r| <= ln2 / 2 (Cody and Waite's two-part
/// ln2, so k * ln2_hi is exact), e^r by its Taylor polynomial of degree 7 (truncation below
/// 1e-8 relative), times 2^(k-1) made from k's bits, times 2 (both exact; k - 1 <= 127 keeps the
/// first factor finite). The special cases are integer masks rather than branches or float
/// selects, so that host loops over a row vectorise (GCC does not if-convert float compares
/// around trapping arithmetic).
SPECDEC_HD inline float exp_portable(float x) {
  constexpr std::uint32_t lowest = 0xc2ac0000u;   // -86.0f
  constexpr std::uint32_t highest = 0x42b17217u;  // 88.72283f
  const std::uint32_t bits = float_bits(x), magnitude = bits & 0x7fffffffu;
  const std::uint32_t negative = 0u - (bits >> 31);
  const std::uint32_t nan = 0u - static_cast<std::uint32_t>(magnitude > 0x7f800000u);
  const std::uint32_t low = ~nan & negative & (0u - static_cast<std::uint32_t>(magnitude > (lowest & 0x7fffffffu)));
  const std::uint32_t high = ~nan & ~negative & (0u - static_cast<std::uint32_t>(magnitude > highest));
  const std::uint32_t special = nan | low | high;
  const float clamped = float_from_bits((bits & ~special) | ((nan | low) & lowest) | (high & highest));
  constexpr float log2e = 1.44269504f, round_shift = 12582912.0f;  // 1.5 * 2^23: adding it rounds to an integer
  constexpr float ln2_hi = 0.693359375f, ln2_lo = -2.12194440e-4f;
  const float k = sub_rn(add_rn(mul_rn(clamped, log2e), round_shift), round_shift);  // in [-124, 128]
  const float r = sub_rn(sub_rn(clamped, mul_rn(k, ln2_hi)), mul_rn(k, ln2_lo));
  float p = 1.98412698e-4f;  // 1/7!
  p = add_rn(mul_rn(p, r), 1.38888889e-3f);
  p = add_rn(mul_rn(p, r), 8.33333333e-3f);
  p = add_rn(mul_rn(p, r), 4.16666667e-2f);
  p = add_rn(mul_rn(p, r), 1.66666667e-1f);
  p = add_rn(mul_rn(p, r), 0.5f);
  p = add_rn(mul_rn(p, r), 1.0f);
  p = add_rn(mul_rn(p, r), 1.0f);
  const float half_scale = float_from_bits(static_cast<std::uint32_t>(static_cast<int>(k) + 126) << 23);
  const std::uint32_t y = float_bits(mul_rn(mul_rn(p, half_scale), 2.0f));
  return float_from_bits((y & ~special) | (nan & bits) | (high & 0x7f800000u));
}

/// log2(x) for a positive normal x, within a few ulp (measured in the tests), same bits on host
/// and device. Method: x = m 2^e with m in [sqrt(1/2), sqrt(2)); ln m = 2 atanh(s) with
/// s = (m - 1) / (m + 1), |s| <= 0.172, by its series to s^9.
SPECDEC_HD inline float log2_portable(float x) {
  const std::uint32_t bits = float_bits(x);
  int exponent = static_cast<int>(bits >> 23) - 127;
  float m = float_from_bits((bits & 0x007fffffu) | 0x3f800000u);  // in [1, 2)
  if (m > 1.41421356f) {
    m = mul_rn(m, 0.5f);
    ++exponent;
  }
  const float s = div_rn(sub_rn(m, 1.0f), add_rn(m, 1.0f));
  const float s2 = mul_rn(s, s);
  float series = 1.11111111e-1f;
  series = add_rn(mul_rn(series, s2), 1.42857143e-1f);
  series = add_rn(mul_rn(series, s2), 2.00000000e-1f);
  series = add_rn(mul_rn(series, s2), 3.33333333e-1f);
  series = add_rn(mul_rn(series, s2), 1.0f);
  constexpr float two_log2e = 2.88539008f;  // 2 / ln 2
  return add_rn(static_cast<float>(exponent), mul_rn(mul_rn(s, two_log2e), series));
}

}  // namespace specdec::core
