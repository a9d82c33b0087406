// Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers: as easy as 1, 2, 3", SC'11),
// a counter-based generator: the output is a pure function of (counter, key), so any thread can
// draw "the uniform for sequence s, position p, purpose k" directly, without shared state. That
// makes sampling reproducible from the seed, independent of the order of work, and safe to
// replay inside a CUDA graph.
#pragma once

#include <cstdint>

#include <specdec/config.hpp>

namespace specdec::core {

struct u32x4 {
  std::uint32_t x, y, z, w;
};

/// The Philox4x32 block function with 10 rounds: 128-bit counter, 64-bit key -> 128 random bits.
SPECDEC_HD inline u32x4 philox4x32_10(u32x4 counter, std::uint32_t key0, std::uint32_t key1) {
  constexpr std::uint32_t multiplier0 = 0xD2511F53u, multiplier1 = 0xCD9E8D57u;
  constexpr std::uint32_t weyl0 = 0x9E3779B9u, weyl1 = 0xBB67AE85u;  // key schedule increments
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += weyl0;
      key1 += weyl1;
    }
    const std::uint64_t product0 = static_cast<std::uint64_t>(multiplier0) * counter.x;
    const std::uint64_t product1 = static_cast<std::uint64_t>(multiplier1) * counter.z;
    const auto hi0 = static_cast<std::uint32_t>(product0 >> 32), lo0 = static_cast<std::uint32_t>(product0);
    const auto hi1 = static_cast<std::uint32_t>(product1 >> 32), lo1 = static_cast<std::uint32_t>(product1);
    counter = u32x4{hi1 ^ counter.y ^ key0, lo1, hi0 ^ counter.w ^ key1, lo0};
  }
  return counter;
}

/// What a random number is used for; part of the counter so different uses never share a draw.
enum class random_purpose : std::uint32_t {
  accept = 1,  ///< the uniform of an accept/reject test (index = the test's rank at that position)
  /// a draw from a distribution (the next/bonus token, core::race): indices 0..63 hold the lane
  /// race's uniforms (lane l: word l % 4 of index l / 4), index 64 + j / 4 word j % 4 the in-lane
  /// race's for the lane's j-th token
  sample = 2,
};

/// Identifies one stream of randomness: a run's seed and the sequence (request) it decodes.
struct RandomKey {
  std::uint64_t seed = 0;
  std::uint32_t sequence = 0;
};

/// 24 random bits as a float in [0, 1): exactly 0 is possible, 1 is not.
SPECDEC_HD inline float uniform_from_bits(std::uint32_t bits) {
  return static_cast<float>(bits >> 8) * (1.0f / 16777216.0f);
}

/// 23 random bits as a float strictly inside (0, 1): (2m + 1) / 2^24, exactly representable, so
/// its logarithm is finite (the exponential race of core::sample_token needs that).
SPECDEC_HD inline float open_uniform_from_bits(std::uint32_t bits) {
  return static_cast<float>(((bits >> 9) << 1) | 1u) * (1.0f / 16777216.0f);
}

/// The 128 random bits for (seed, sequence, position, purpose, index): Philox's counter is
/// (sequence, position, purpose, index), its key the 64-bit seed. `position` is the sequence
/// position of the token being decided, so the same decision draws the same numbers whatever the
/// shape of the tree around it.
SPECDEC_HD inline u32x4 random_bits(RandomKey key, int position, random_purpose purpose, std::uint32_t index) {
  const u32x4 counter{key.sequence, static_cast<std::uint32_t>(position), static_cast<std::uint32_t>(purpose), index};
  return philox4x32_10(counter, static_cast<std::uint32_t>(key.seed), static_cast<std::uint32_t>(key.seed >> 32));
}

/// The uniform in [0, 1) for (seed, sequence, position, purpose, index): the first word of
/// random_bits.
SPECDEC_HD inline float random_uniform(RandomKey key, int position, random_purpose purpose, std::uint32_t index) {
  return uniform_from_bits(random_bits(key, position, purpose, index).x);
}

}  // namespace specdec::core
