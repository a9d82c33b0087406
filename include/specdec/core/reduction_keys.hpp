// 64-bit keys that turn the selections of the CUDA kernels into plain max-reductions (which CUB
// block reductions and any split of the work can do in any order), with the host able to check
// them: tests reduce keys over random splits and compare with core::argmax_row and
// core::find_suffix_matches.
#pragma once

#include <cstdint>
#include <cstring>

#include <specdec/config.hpp>
#include <specdec/core/suffix_match.hpp>

namespace specdec::core {

// ---- argmax of a logits row -----------------------------------------------------------------------

/// The key of a NaN entry: larger than every other key, so a row holding NaN reduces to it.
inline constexpr std::uint64_t nan_argmax_key = ~std::uint64_t{0};

/// Key of (value x at `index`): the larger key is the larger value and, for equal values, the
/// lower index; -0.0 and +0.0 are equal (argmax_row compares with >). Keys of a row reduce by max
/// to the key of argmax_row's answer, in any order and over any split of the row.
SPECDEC_HD inline std::uint64_t argmax_key(float x, int index) {
  if (x != x) return nan_argmax_key;
  if (x == 0.0f) x = 0.0f;
  std::uint32_t u;
#if defined(__CUDA_ARCH__)
  u = __float_as_uint(x);
#else
  std::memcpy(&u, &x, sizeof u);
#endif
  u = (u & 0x80000000u) ? ~u : (u | 0x80000000u);  // order-preserving map of floats to unsigned
  // +inf maps to 0xff800000, the largest non-NaN image, so no real key equals nan_argmax_key.
  return (static_cast<std::uint64_t>(u) << 32) | (0xffffffffu - static_cast<std::uint32_t>(index));
}

/// The token of a reduced key: -1 for NaN, and for 0 (an empty row: no key at all).
SPECDEC_HD inline token_t argmax_key_token(std::uint64_t key) {
  if (key == nan_argmax_key || key == 0u) return -1;
  return static_cast<token_t>(0xffffffffu - static_cast<std::uint32_t>(key & 0xffffffffu));
}

SPECDEC_HD inline std::uint64_t max_key(std::uint64_t a, std::uint64_t b) { return a > b ? a : b; }

/// max_key as the operator of a block reduction.
struct MaxKey {
  SPECDEC_HD std::uint64_t operator()(std::uint64_t a, std::uint64_t b) const { return max_key(a, b); }
};

// ---- top-k occurrences of a suffix match ----------------------------------------------------------

/// Key of an occurrence: the larger key ranks first (core::ranks_before: longer match, then more
/// recent). A real key has length >= 1, so it is never 0, the empty slot.
SPECDEC_HD inline std::uint64_t match_key(int length, int position) {
  return (static_cast<std::uint64_t>(length) << 32) | static_cast<std::uint32_t>(position);
}

SPECDEC_HD inline SuffixMatch match_of(std::uint64_t key) {
  return SuffixMatch{static_cast<int>(key & 0xffffffffu), static_cast<int>(key >> 32)};
}

/// The K largest keys seen, in descending order, 0 for empty slots. Every loop has a constant trip
/// count, so in a kernel the list stays in registers.
template <int K>
struct TopKeys {
  std::uint64_t key[K];

  SPECDEC_HD static TopKeys none() {
    TopKeys t;
    SPECDEC_UNROLL
    for (int i = 0; i < K; ++i) t.key[i] = 0u;
    return t;
  }

  /// Inserts a key (keys must be distinct: positions are).
  SPECDEC_HD void insert(std::uint64_t k) {
    if (k <= key[K - 1]) return;
    SPECDEC_UNROLL
    for (int i = 0; i < K; ++i) {
      if (k > key[i]) {
        const std::uint64_t displaced = key[i];
        key[i] = k;
        k = displaced;
      }
    }
  }
};

/// Merge of two top lists: associative and commutative (the K largest of the union), as block
/// reductions require.
struct MergeTopKeys {
  template <int K>
  SPECDEC_HD TopKeys<K> operator()(const TopKeys<K>& a, const TopKeys<K>& b) const {
    TopKeys<K> r = a;
    SPECDEC_UNROLL
    for (int i = 0; i < K; ++i) r.insert(b.key[i]);
    return r;
  }
};

}  // namespace specdec::core
