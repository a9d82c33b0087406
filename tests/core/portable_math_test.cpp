#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>

#include <specdec/core/philox.hpp>
#include <specdec/core/portable_math.hpp>

using namespace specdec::core;

namespace {
// Error of `got` against the exact `want`, in ulps of the float nearest to `want`.
double ulps(float got, double want) {
  const float nearest = static_cast<float>(want);
  const float next = std::nextafter(std::fabs(nearest), std::numeric_limits<float>::infinity());
  return std::fabs(static_cast<double>(got) - want) / (static_cast<double>(next) - std::fabs(nearest));
}

// The float `steps` representable values above the finite x, as `steps` calls of
// nextafter(x, +inf) would give, in one step: the floats' bit patterns put in order (negatives
// reversed below the positives; -0 and +0 are one value, as nextafter counts them).
float up_by(float x, std::uint32_t steps) {
  constexpr std::uint32_t sign = 0x80000000u;
  std::uint32_t bits = 0;
  std::memcpy(&bits, &x, sizeof bits);
  const std::uint32_t key = ((bits & sign) ? sign - (bits & ~sign) : sign + bits) + steps;
  bits = key >= sign ? key - sign : sign | (sign - key);
  std::memcpy(&x, &bits, sizeof x);
  return x;
}
}  // namespace

TEST_CASE("exp_portable is within 2 ulp of exp over its whole range", "[core][portable_math]") {
  double worst_ulps = 0, worst_relative = 0;
  float worst_x = 0;
  long evaluated = 0;
  // every 61st float in [-86, 88.72]: about 37 million arguments, every binade of both signs
  for (float x = -86.0f; x <= 88.72f; ++evaluated) {
    const double want = std::exp(static_cast<double>(x));
    const float got = exp_portable(x);
    const double e = ulps(got, want);
    if (e > worst_ulps) {
      worst_ulps = e;
      worst_x = x;
    }
    worst_relative = std::max(worst_relative, std::fabs(got - want) / want);
    x = up_by(x, 61);
  }
  std::printf("exp_portable: %ld arguments in [-86, 88.72]; max error %.3f ulp (at %g), max relative error %.3g\n",
              evaluated, worst_ulps, worst_x, worst_relative);
  CHECK(worst_ulps <= 2.0);
  CHECK(worst_relative < 2.5e-7);
}

TEST_CASE("exp_portable's special values", "[core][portable_math][edge]") {
  const float inf = std::numeric_limits<float>::infinity();
  CHECK(exp_portable(0.0f) == 1.0f);  // the largest sampling weight is exactly 1
  CHECK(exp_portable(-0.0f) == 1.0f);
  CHECK(exp_portable(-inf) == 0.0f);
  CHECK(exp_portable(-86.01f) == 0.0f);  // no subnormal results
  CHECK(exp_portable(-86.0f) >= std::numeric_limits<float>::min());
  CHECK(exp_portable(88.8f) == inf);
  CHECK(exp_portable(88.72f) < inf);
  CHECK(exp_portable(88.72f) == Approx(std::exp(static_cast<double>(88.72f))).epsilon(3e-7));
  CHECK(std::isnan(exp_portable(std::nanf(""))));
}

TEST_CASE("log2_portable is within a few ulp of log2 on every uniform the race uses", "[core][portable_math]") {
  double worst = 0;
  for (std::uint32_t m = 0; m < (1u << 23); ++m) {
    const float u = open_uniform_from_bits(m << 9);
    worst = std::max(worst, ulps(log2_portable(u), std::log2(static_cast<double>(u))));
  }
  for (float x : {1e-30f, 0.1f, 3.0f, 1e30f, std::numeric_limits<float>::min()})
    worst = std::max(worst, ulps(log2_portable(x), std::log2(static_cast<double>(x))));
  std::printf("log2_portable: max error %.3f ulp over the 2^23 open uniforms and a few others\n", worst);
  CHECK(worst <= 4.0);
  CHECK(log2_portable(1.0f) == 0.0f);
  CHECK(log2_portable(0.5f) == -1.0f);
}

TEST_CASE("host float arithmetic is not contracted into FMA (the target builds with -ffp-contract=off)",
          "[core][portable_math]") {
  // (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24 rounds to 1 + 2^-11 (a tie, to even); minus that is 0 when
  // the product is rounded on its own, and 2^-24 when fused.
  volatile float a = 1.0f + 1.0f / 4096.0f, c = -(1.0f + 1.0f / 2048.0f);
  const float x = a, z = c;
  CHECK(add_rn(mul_rn(x, x), z) == 0.0f);
  CHECK(x * x + z == 0.0f);
}
