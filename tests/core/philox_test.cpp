#include <catch2/catch.hpp>

#include <set>

#include <specdec/core/philox.hpp>

using namespace specdec::core;

// Known answers of Random123's kat_vectors (lines "philox4x32 10 ...": counter, key, output).
TEST_CASE("philox4x32-10 matches the published known-answer vectors", "[core][philox]") {
  struct Case {
    u32x4 counter;
    std::uint32_t key0, key1;
    u32x4 expected;
  };
  const Case cases[] = {
      {{0u, 0u, 0u, 0u}, 0u, 0u, {0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}},
      {{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}, 0xffffffffu, 0xffffffffu,
       {0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}},
      {{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}, 0xa4093822u, 0x299f31d0u,
       {0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}},
  };
  for (const Case& c : cases) {
    const u32x4 out = philox4x32_10(c.counter, c.key0, c.key1);
    CHECK(out.x == c.expected.x);
    CHECK(out.y == c.expected.y);
    CHECK(out.z == c.expected.z);
    CHECK(out.w == c.expected.w);
  }
}

TEST_CASE("uniforms lie at or above 0 and below 1, reach 0, and differ by every part of the key", "[core][philox]") {
  CHECK(uniform_from_bits(0u) == 0.0f);
  CHECK(uniform_from_bits(0xffffffffu) < 1.0f);
  const RandomKey key{42, 7};
  const float base = random_uniform(key, 10, random_purpose::accept, 0);
  CHECK(base == random_uniform(key, 10, random_purpose::accept, 0));  // a pure function
  std::set<float> seen{base};
  seen.insert(random_uniform(RandomKey{43, 7}, 10, random_purpose::accept, 0));
  seen.insert(random_uniform(RandomKey{42 + (1ull << 32), 7}, 10, random_purpose::accept, 0));
  seen.insert(random_uniform(RandomKey{42, 8}, 10, random_purpose::accept, 0));
  seen.insert(random_uniform(key, 11, random_purpose::accept, 0));
  seen.insert(random_uniform(key, 10, random_purpose::sample, 0));
  seen.insert(random_uniform(key, 10, random_purpose::accept, 1));
  CHECK(seen.size() == 7);
  double sum = 0;
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const float u = random_uniform(key, i, random_purpose::sample, 0);
    REQUIRE(u >= 0.0f);
    REQUIRE(u < 1.0f);
    sum += u;
  }
  CHECK(sum / n == Approx(0.5).margin(0.005));
}
