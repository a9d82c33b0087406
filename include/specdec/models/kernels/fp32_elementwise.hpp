// The fp32 kernels of one row at a time: SwiGLU (silu(a) * b) and the argmax of a logits row.
// Templated on the vector type of an ISA path; isa.hpp instantiates them per ISA. Host-only.
#pragma once

#include <algorithm>

#include <specdec/models/kernels/lanes.hpp>

namespace specdec::llama::detail {

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

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
  constexpr int L = lanes<V>;
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
  constexpr int L = lanes<V>;
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

#pragma GCC diagnostic pop

}  // namespace specdec::llama::detail
