// The sampling front end shared by every stochastic verifier, and the rejection-sampling steps
// built on it. Host and device run these same functions (no allocation, no exceptions).
//
// A distribution is kept *unnormalised*: weights w[0..vocab) and their sum `mass`, p = w / mass.
// That saves the normalising pass, and removing a rejected one-hot proposal costs O(1)
// (mass -= w[x]; w[x] = 0).
//
// Passes over the vocabulary to turn a row of logits into weights: 1 (max, and NaN/+inf check)
// + 1 (exp, min-p, sum) + 4 per enabled top-k/top-p filter (radix select on 8 bits at a time)
// + 1 (apply the filters) when a filter is on. Temperature 0 is greedy: 1 pass.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include <specdec/config.hpp>
#include <specdec/core/philox.hpp>

namespace specdec::core {

/// How the target's logits become the distribution tokens are sampled from.
/// Order: temperature, top-k, top-p (measured on the top-k distribution), min-p.
struct SamplingParams {
  float temperature = 1.0f;  ///< 0 = greedy (argmax, ties to the lowest id); must be >= 0
  int top_k = 0;             ///< keep the k most likely tokens (and ties with the k-th); 0 = off
  float top_p = 1.0f;        ///< keep the most likely tokens whose mass reaches top_p; 1 = off; in (0, 1]
  float min_p = 0.0f;        ///< drop tokens less likely than min_p * the most likely one; 0 = off; in [0, 1]
};

enum class sampling_status : int {
  ok = 0,
  nan_logit,       ///< a logit is NaN
  infinite_logit,  ///< a logit is +inf (-inf is allowed: it masks the token)
  no_finite_logit, ///< every logit is -inf: nothing can be sampled
  bad_parameters,  ///< see check_sampling_params
};

SPECDEC_HD constexpr const char* to_string(sampling_status s) {
  switch (s) {
    case sampling_status::ok: return "ok";
    case sampling_status::nan_logit: return "a logit is NaN";
    case sampling_status::infinite_logit: return "a logit is +inf";
    case sampling_status::no_finite_logit: return "every logit is -inf";
    case sampling_status::bad_parameters:
      return "bad sampling parameters (need temperature >= 0, top_k >= 0, 0 < top_p <= 1, 0 <= min_p <= 1)";
  }
  return "unknown sampling status";
}

SPECDEC_HD inline bool valid(const SamplingParams& params) {
  return params.temperature >= 0.0f && params.top_k >= 0 && params.top_p > 0.0f && params.top_p <= 1.0f &&
         params.min_p >= 0.0f && params.min_p <= 1.0f;
}

SPECDEC_HD inline std::uint32_t float_bits(float x) {
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return bits;
}

/// Radix select over non-negative weights: the largest bit pattern t such that the measure of
/// {v : bits(w[v]) >= t} reaches `target`, where the measure of v is 1 (count) or w[v] (mass).
/// Only v with bits(w[v]) >= floor_bits take part. Four passes of a 256-bin histogram. When
/// rounding keeps the total below `target`, the smallest participating value is returned.
template <bool by_mass>
SPECDEC_HD std::uint32_t select_threshold(const float* w, int vocab, float target, std::uint32_t floor_bits) {
  std::uint32_t prefix = 0, prefix_mask = 0;
  float above = 0.0f;  // measure of the values already known to lie above the current prefix
  for (int shift = 24; shift >= 0; shift -= 8) {
    float histogram[256];
    for (int b = 0; b < 256; ++b) histogram[b] = 0.0f;
    for (int v = 0; v < vocab; ++v) {
      const std::uint32_t bits = float_bits(w[v]);
      if (bits < floor_bits || (bits & prefix_mask) != prefix) continue;
      histogram[(bits >> shift) & 255u] += by_mass ? w[v] : 1.0f;
    }
    int chosen = -1, lowest_nonempty = -1;
    for (int b = 255; b >= 0; --b) {
      if (histogram[b] <= 0.0f) continue;
      lowest_nonempty = b;
      if (above + histogram[b] >= target) {
        chosen = b;
        break;
      }
      above += histogram[b];
    }
    if (chosen < 0) chosen = lowest_nonempty < 0 ? 0 : lowest_nonempty;
    prefix |= static_cast<std::uint32_t>(chosen) << shift;
    prefix_mask |= 255u << shift;
  }
  return prefix;
}

/// Turns a row of logits into sampling weights (see SamplingParams): w[v] >= 0, *mass = sum.
/// The largest weight is exactly 1 (w = exp((x - max) / T)). On failure w is unspecified.
SPECDEC_HD inline sampling_status sampling_weights(const float* logits, int vocab, const SamplingParams& params,
                                                   float* w, float* mass) {
  if (!valid(params)) return sampling_status::bad_parameters;
  float max_logit = -INFINITY;
  int best = -1;
  for (int v = 0; v < vocab; ++v) {
    const float x = logits[v];
    if (x != x) return sampling_status::nan_logit;
    if (x == INFINITY) return sampling_status::infinite_logit;
    if (x > max_logit) {
      max_logit = x;
      best = v;
    }
  }
  if (best < 0) return sampling_status::no_finite_logit;
  if (params.temperature == 0.0f) {
    for (int v = 0; v < vocab; ++v) w[v] = v == best ? 1.0f : 0.0f;
    *mass = 1.0f;
    return sampling_status::ok;
  }
  const float inverse_temperature = 1.0f / params.temperature;
  float total = 0.0f;
  for (int v = 0; v < vocab; ++v) {
    float weight = std::exp((logits[v] - max_logit) * inverse_temperature);
    if (weight < params.min_p) weight = 0.0f;  // the best weight is 1, so this is min-p
    w[v] = weight;
    total += weight;
  }
  const bool top_k_on = params.top_k > 0 && params.top_k < vocab;
  const bool top_p_on = params.top_p < 1.0f;
  if (top_k_on || top_p_on) {
    // Every filter keeps an upper set of weights, so all of them together are one threshold.
    std::uint32_t keep_from = 0;
    if (top_k_on) keep_from = select_threshold<false>(w, vocab, static_cast<float>(params.top_k), 0u);
    if (top_p_on) {
      float kept = total;
      if (top_k_on) {
        kept = 0.0f;
        for (int v = 0; v < vocab; ++v)
          if (float_bits(w[v]) >= keep_from) kept += w[v];
      }
      keep_from = select_threshold<true>(w, vocab, params.top_p * kept, keep_from);
    }
    total = 0.0f;
    for (int v = 0; v < vocab; ++v) {
      if (float_bits(w[v]) < keep_from) w[v] = 0.0f;
      total += w[v];
    }
  }
  *mass = total;
  return sampling_status::ok;
}

/// Draws from p = w / mass with the uniform u in [0, 1): the first token whose running sum
/// exceeds u * mass. Tokens of weight 0 are never returned, not even for u = 0.
SPECDEC_HD inline int sample_from_weights(const float* w, float mass, int vocab, float u) {
  const float target = u * mass;
  float running = 0.0f;
  int last_positive = -1;
  for (int v = 0; v < vocab; ++v) {
    if (w[v] <= 0.0f) continue;
    running += w[v];
    last_positive = v;
    if (running > target) return v;
  }
  return last_positive;  // u * mass rounded above the sum
}

/// Samples the token at sequence `position` from a row of logits: the draw that plain
/// (non-speculative) sampling makes, with the uniform (key, position, sample, 0). `work` holds
/// vocab floats. Returns -1 with *status set when the row or the parameters are bad.
SPECDEC_HD inline int sample_token(const float* logits, int vocab, const SamplingParams& params, RandomKey key,
                                   int position, float* work, sampling_status* status) {
  float mass = 0.0f;
  *status = sampling_weights(logits, vocab, params, work, &mass);
  if (*status != sampling_status::ok) return -1;
  return sample_from_weights(work, mass, vocab, random_uniform(key, position, random_purpose::sample, 0));
}

/// One rejection-sampling test (Leviathan et al. 2023; Chen et al. 2023). Token x was proposed
/// by a drafter with probability q[x] (q == nullptr: a fixed, one-hot proposal, q[x] = 1).
/// Accepts with probability min(1, p(x) / q(x)) using u in [0, 1). On rejection, p becomes the
/// residual norm(max(0, p - q)) in place, which is what the next proposal (or the final draw)
/// must be tested against for the result to be distributed exactly as p.
SPECDEC_HD inline bool rejection_test(float* w, float* mass, int vocab, const float* q, int x, float u) {
  const float qx = q ? q[x] : 1.0f;
  if (u * qx * *mass < w[x]) return true;  // u < p(x) / q(x), without dividing
  if (!q) {
    *mass -= w[x];
    w[x] = 0.0f;
    if (*mass <= 0.0f) {  // rounding: recompute rather than trust a drifting sum
      float total = 0.0f;
      for (int v = 0; v < vocab; ++v) total += w[v];
      *mass = total;
    }
    return false;
  }
  const float inverse_mass = 1.0f / *mass;
  float residual_mass = 0.0f;
  for (int v = 0; v < vocab; ++v) residual_mass += std::fmax(0.0f, w[v] * inverse_mass - q[v]);
  // A rejection with an empty residual only happens through rounding when p == q: the exact
  // rejection probability is 0 there, so keeping p is as good as any choice.
  if (residual_mass <= 0.0f) return false;
  for (int v = 0; v < vocab; ++v) w[v] = std::fmax(0.0f, w[v] * inverse_mass - q[v]);
  *mass = residual_mass;
  return false;
}

}  // namespace specdec::core
