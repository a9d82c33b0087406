// The sampling front end shared by every stochastic verifier: a row of logits -> the sampling
// distribution p = weight / mass, and draws from it. Host and device run these same functions (no
// allocation, no exceptions), written over a lane executor (core/lanes.hpp) so that a CUDA block
// of 256 threads and the host's serial loop compute the same bits: float sums in the lane order,
// everything else with integers, exp/log from core/portable_math.hpp.
//
// A distribution is a RowWeights: the weights are recomputed from the logits row when needed
// (one exp), never stored, and their sum `mass` is computed once.
//
// Passes over the vocabulary: 1 (argmax, NaN/+inf check) + 1 (the mass); with top-k or top-p,
// + 1 (store the unfiltered weights) + 4 per filter (radix select, 8 bits per pass, integer
// histograms). Temperature 0 is greedy: 1 pass. A draw (sample_token, the end of a rejection
// walk) is 1 more pass: the exponential race.
#pragma once

#include <cmath>
#include <cstdint>

#include <specdec/config.hpp>
#include <specdec/core/lanes.hpp>
#include <specdec/core/philox.hpp>
#include <specdec/core/portable_math.hpp>
#include <specdec/core/reduction_keys.hpp>

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

/// Top-p measures mass in fixed point: a weight w in [0, 1] counts floor(w * 2^40), so that the
/// histograms are integer sums, the same in any order (vocabularies up to 2^24 tokens fit 64 bits).
inline constexpr float top_p_unit = 1099511627776.0f;  // 2^40

/// The sampling distribution of one row of logits (analyse_row fills it): p(v) = (*this)(v) / mass.
struct RowWeights {
  const float* logits = nullptr;
  float max_logit = 0.0f;
  float inverse_temperature = 0.0f;
  float min_p = 0.0f;
  std::uint32_t keep_from = 0;  ///< top-k/top-p: weights whose bit patterns are below become 0
  token_t best = -1;            ///< the argmax (ties to the lowest id)
  bool greedy = false;          ///< temperature 0: p is one-hot at `best`

  /// exp((x - max) / T), 0 below min_p (the best weight is 1, so this is min-p): the weight
  /// before top-k/top-p. The largest is exactly 1 (also when 1/T overflows). Selections are
  /// integer masks, as in exp_portable, so that host loops vectorise.
  SPECDEC_HD float unfiltered(int v) const {
    const float x = logits[v];
    const float w = exp_portable(mul_rn(sub_rn(x, max_logit), inverse_temperature));
    const std::uint32_t at_max = 0u - static_cast<std::uint32_t>(x == max_logit);
    const std::uint32_t dropped = 0u - static_cast<std::uint32_t>(w < min_p);
    return float_from_bits((float_bits(w) & ~(at_max | dropped)) | (at_max & 0x3f800000u));
  }

  SPECDEC_HD float operator()(int v) const {
    const std::uint32_t bits = float_bits(unfiltered(v));
    const std::uint32_t filtered = bits & (0u - static_cast<std::uint32_t>(bits >= keep_from));
    const std::uint32_t one_hot = 0x3f800000u & (0u - static_cast<std::uint32_t>(v == best));
    const std::uint32_t greedy_mask = 0u - static_cast<std::uint32_t>(greedy);
    return float_from_bits((greedy_mask & one_hot) | (~greedy_mask & filtered));
  }
};

/// Radix select over the unfiltered weights' bit patterns (RowWeights::unfiltered, stored in a
/// row: non-negative floats order as their bits), 8 bits per pass: the largest t such that the measure of {v : bits(w(v)) >= t}, among
/// the v with bits >= floor_bits, reaches the target. Measures are integers, so neither the
/// histograms nor the threshold depend on the order of the work: top_k > 0 counts tokens (target
/// top_k); else mass in units of 2^-40 (target ceil(top_p * the participants' mass), computed in
/// double). When the target cannot be reached, the smallest participating value.
template <class Ex>
SPECDEC_HD std::uint32_t select_threshold(Ex& ex, const float* unfiltered, int vocab, std::uint32_t floor_bits,
                                          int top_k, float top_p) {
  std::uint32_t prefix = 0, prefix_mask = 0;
  std::uint64_t above = 0, target = static_cast<std::uint64_t>(top_k);
  for (int shift = 24; shift >= 0; shift -= 8) {
    const auto* histogram = ex.histogram(vocab, [&](int v) {
      const std::uint32_t bits = float_bits(unfiltered[v]);
      if (bits < floor_bits || (bits & prefix_mask) != prefix) return Bin{};
      const std::uint64_t measure =
          top_k > 0 ? 1u : static_cast<std::uint64_t>(mul_rn(float_from_bits(bits), top_p_unit));
      return Bin{static_cast<int>((bits >> shift) & 255u), measure};
    });
    if (top_k == 0 && shift == 24) {  // the first pass sees every participant
      std::uint64_t total = 0;
      for (int b = 0; b < 256; ++b) total += histogram[b];
      const double exact = static_cast<double>(top_p) * static_cast<double>(total);
      target = static_cast<std::uint64_t>(exact);
      if (static_cast<double>(target) < exact) ++target;
    }
    int chosen = -1, lowest_nonempty = -1;
    for (int b = 255; b >= 0; --b) {
      if (histogram[b] == 0) continue;
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

/// Turns a row of logits into its sampling distribution (see SamplingParams) and, when `mass` is
/// not null, the sum of its weights (in the lane order). With top-k or top-p, the unfiltered
/// weights are stored in `scratch` (vocab floats; one pass) for the radix selects, so that their
/// passes read a row rather than recompute an exp per entry. On failure *w is unspecified.
template <class Ex>
SPECDEC_HD sampling_status analyse_row(Ex& ex, const float* logits, int vocab, const SamplingParams& params,
                                       RowWeights* w, float* mass, float* scratch) {
  if (!valid(params)) return sampling_status::bad_parameters;
  // NaN has the largest key: a row holding NaN reports it, even where it also holds +inf.
  const std::uint64_t top = ex.max_scan(vocab, [&](int v, std::uint64_t best) {
    const std::uint64_t k = argmax_key(logits[v], v);
    return k > best ? k : best;
  });
  if (top == nan_argmax_key) return sampling_status::nan_logit;
  RowWeights row;
  row.logits = logits;
  row.best = argmax_key_token(top);
  row.max_logit = logits[row.best];
  if (row.max_logit == INFINITY) return sampling_status::infinite_logit;
  if (row.max_logit == -INFINITY) return sampling_status::no_finite_logit;
  if (params.temperature == 0.0f) {
    row.greedy = true;
    *w = row;
    if (mass) *mass = 1.0f;
    return sampling_status::ok;
  }
  row.inverse_temperature = div_rn(1.0f, params.temperature);
  row.min_p = params.min_p;
  // Every filter keeps an upper set of weights, so all of them together are one threshold.
  const bool top_k_on = params.top_k > 0 && params.top_k < vocab, top_p_on = params.top_p < 1.0f;
  if (top_k_on || top_p_on) {
    ex.for_each(vocab, [&](int v) { scratch[v] = row.unfiltered(v); });
    ex.sync();
  }
  if (top_k_on) row.keep_from = select_threshold(ex, scratch, vocab, 0u, params.top_k, 1.0f);
  if (top_p_on) row.keep_from = select_threshold(ex, scratch, vocab, row.keep_from, 0, params.top_p);
  *w = row;
  if (mass) *mass = ex.sum(vocab, [&](int v) { return row(v); });
  return sampling_status::ok;
}

/// Turns a row of logits into sampling weights (see SamplingParams): w[v] >= 0, *mass = sum.
/// The largest weight is exactly 1 (w = exp((x - max) / T)). On failure w is unspecified.
SPECDEC_HD inline sampling_status sampling_weights(const float* logits, int vocab, const SamplingParams& params,
                                                   float* w, float* mass) {
  SerialLanes ex;
  RowWeights row;
  const sampling_status status = analyse_row(ex, logits, vocab, params, &row, mass, w);
  if (status != sampling_status::ok) return status;
  for (int v = 0; v < vocab; ++v) w[v] = row(v);
  return sampling_status::ok;
}

/// Draws token v with probability weight(v) / Σ weight, by an exponential race: the winner is
/// argmax_v weight(v) / E_v with E_v = -log2 U_v, U_v the open uniform of word v % 4 of
/// random_bits(key, position, sample, v / 4). The E_v are i.i.d. exponential (up to the constant
/// 1/ln 2, which does not change the argmax), so the winner is distributed exactly as the weights
/// (up to the 23-bit resolution of U), in one pass, whatever the order of the work. Ties go to the
/// lowest v; a weight of 0 never wins (a positive ratio that underflows still beats it); tokens
/// for which excluded(v) holds never win (checked only for a lane's new leader, so a few times
/// per lane). Returns -1 when no weight is positive.
///
/// Every weight must be at most max_weight (up to an ulp). Since -ln U >= 1 - U, a token's ratio
/// is at most max_weight * ln2 / (1 - U): when that bound (with a 1% margin over the rounding of
/// the computed ratio) is below the lane's leader, the token cannot win and its weight and
/// logarithm are not computed. Which tokens are skipped depends on the order of the work; the
/// winner does not.
template <class Ex, class Weight, class Excluded>
SPECDEC_HD token_t race(Ex& ex, int vocab, const Weight& weight, float max_weight, const Excluded& excluded,
                        RandomKey key, int position) {
  const float bound = mul_rn(max_weight, 0.7000786f);  // ln 2 * 1.01
  const int quads = (vocab + 3) / 4;
  const std::uint64_t top = ex.max_scan(quads, [&](int quad, std::uint64_t best) {
    const u32x4 r = random_bits(key, position, random_purpose::sample, static_cast<std::uint32_t>(quad));
    const std::uint32_t words[4] = {r.x, r.y, r.z, r.w};
    SPECDEC_UNROLL
    for (int j = 0; j < 4; ++j) {
      const int v = 4 * quad + j;
      if (v >= vocab) break;
      const float u = open_uniform_from_bits(words[j]);
      if (mul_rn(float_from_bits(static_cast<std::uint32_t>(best >> 32)), sub_rn(1.0f, u)) > bound) continue;
      const float w = weight(v);
      if (w <= 0.0f) continue;
      std::uint32_t bits = float_bits(div_rn(w, -log2_portable(u)));
      if (bits == 0) bits = 1;
      const std::uint64_t k = (static_cast<std::uint64_t>(bits) << 32) | (0xffffffffu - static_cast<std::uint32_t>(v));
      if (k > best && !excluded(v)) best = k;
    }
    return best;
  });
  return top == 0 ? -1 : static_cast<token_t>(0xffffffffu - static_cast<std::uint32_t>(top & 0xffffffffu));
}

/// race() over a row of weights: v with probability w[v] / Σ w, drawn with the uniforms of
/// (key, position, sample, ·); -1 when no weight is positive.
SPECDEC_HD inline token_t sample_from_weights(const float* w, int vocab, RandomKey key, int position) {
  float max_weight = 0.0f;
  for (int v = 0; v < vocab; ++v) max_weight = w[v] > max_weight ? w[v] : max_weight;
  SerialLanes ex;
  return race(ex, vocab, [&](int v) { return w[v]; }, max_weight, [](int) { return false; }, key, position);
}

/// Samples the token at sequence `position` from a row of logits: the draw that plain
/// (non-speculative) sampling makes (the race with (key, position, sample, ·); temperature 0: the
/// argmax). `work` holds vocab floats. Returns -1 with *status set when the row or the
/// parameters are bad.
template <class Ex>
SPECDEC_HD token_t sample_token(Ex& ex, const float* logits, int vocab, const SamplingParams& params, RandomKey key,
                                int position, float* work, sampling_status* status) {
  RowWeights row;
  *status = analyse_row(ex, logits, vocab, params, &row, nullptr, work);
  if (*status != sampling_status::ok) return -1;
  if (row.greedy) return row.best;
  return race(ex, vocab, row, 1.0f, [](int) { return false; }, key, position);
}

/// sample_token on the host (SerialLanes).
SPECDEC_HD inline int sample_token(const float* logits, int vocab, const SamplingParams& params, RandomKey key,
                                   int position, float* work, sampling_status* status) {
  SerialLanes ex;
  return sample_token(ex, logits, vocab, params, key, position, work, status);
}

}  // namespace specdec::core
