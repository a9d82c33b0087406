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
// walk) is 1 more pass: the exponential race's lane masses (then about vocab / 1024 + 64 Philox
// calls). With a row's RowStats known beforehand (the CUDA kernels' row-parallel pre-pass), the
// argmax pass is skipped, and without top-k/top-p the mass and race passes too.
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
  /// The 256 lane masses of these weights (ex.lane_sums of *this) when a RowStats gave them, else
  /// null: the race then needs no pass over the row.
  const float* lane_mass = nullptr;

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

/// The sampling distribution of a row from its largest argmax_key (the argmax pass's result),
/// before top-k/top-p (keep_from 0); greedy at temperature 0. The first part of analyse_row, and
/// what the row-parallel pre-pass sums its lane masses of.
SPECDEC_HD inline sampling_status weights_from_top_key(std::uint64_t top, const float* logits,
                                                       const SamplingParams& params, RowWeights* w) {
  // NaN has the largest key: a row holding NaN reports it, even where it also holds +inf.
  if (top == nan_argmax_key) return sampling_status::nan_logit;
  RowWeights row;
  row.logits = logits;
  row.best = argmax_key_token(top);
  row.max_logit = logits[row.best];
  if (row.max_logit == INFINITY) return sampling_status::infinite_logit;
  if (row.max_logit == -INFINITY) return sampling_status::no_finite_logit;
  if (params.temperature == 0.0f) {
    row.greedy = true;
  } else {
    row.inverse_temperature = div_rn(1.0f, params.temperature);
    row.min_p = params.min_p;
  }
  *w = row;
  return sampling_status::ok;
}

/// Whether top-k or top-p removes tokens from a row of `vocab` (a threshold must be selected).
SPECDEC_HD inline bool filters_on(const SamplingParams& params, int vocab) {
  return (params.top_k > 0 && params.top_k < vocab) || params.top_p < 1.0f;
}

/// What a walk needs of one logits row before it reaches it, computed for all rows at once by the
/// CUDA kernels' row-parallel pre-pass (so that the one block walking a tree reads a few hundred
/// entries of a row instead of the whole row, two or three times): the row's largest argmax_key
/// and, for one (temperature, min_p) without top-k/top-p, the lane masses of its weights, each
/// summed exactly as ex.lane_sums sums them. analyse_row and race use them when they apply, and
/// the bits stay those of the walk without them.
struct RowStats {
  std::uint64_t top_key = 0;        ///< max over the row of argmax_key (nan_argmax_key with NaN)
  float temperature = -1.0f;        ///< of lane_mass; -1: lane_mass not computed
  float min_p = 0.0f;               ///< of lane_mass
  float lane_mass[sampling_lanes];  ///< lane l: Σ w(v) over v = l, l + 256, ... in increasing v

  /// Whether lane_mass holds the weights a walk with `params` samples from.
  SPECDEC_HD bool has_lane_mass_for(const SamplingParams& params, int vocab) const {
    return temperature > 0.0f && temperature == params.temperature && min_p == params.min_p &&
           !filters_on(params, vocab);
  }
};

/// A walk's RowStats source when none are known: every row is analysed from its logits.
struct NoRowStats {
  SPECDEC_HD const RowStats* operator()(node_t) const { return nullptr; }
};

/// Lane `lane`'s mass of the weights `w` (no top-k/top-p): the sum ex.lane_sums computes for it.
SPECDEC_HD inline float lane_mass(const RowWeights& w, int vocab, int lane) {
  float s = 0.0f;
#if defined(__CUDA_ARCH__)
#pragma unroll 8  // the loads and exps of several entries in flight; the adds stay in order
#endif
  for (int v = lane; v < vocab; v += sampling_lanes) s = add_rn(s, w(v));
  return s;
}

/// The largest argmax_key of row[begin, end) (0 when empty): a split of the argmax pass.
SPECDEC_HD inline std::uint64_t top_key_of(const float* row, int begin, int end) {
  std::uint64_t best = 0;
  for (int v = begin; v < end; ++v) best = max_key(best, argmax_key(row[v], v));
  return best;
}

/// Turns a row of logits into its sampling distribution (see SamplingParams) and, when `mass` is
/// not null, the sum of its weights (in the lane order). With top-k or top-p, the unfiltered
/// weights are stored in `scratch` (vocab floats; one pass) for the radix selects, so that their
/// passes read a row rather than recompute an exp per entry. `known` (optional): the row's
/// RowStats, which replace the argmax pass and, where they apply, the mass pass (and give
/// w->lane_mass); the results are the same bits. On failure *w is unspecified.
template <class Ex>
SPECDEC_HD sampling_status analyse_row(Ex& ex, const float* logits, int vocab, const SamplingParams& params,
                                       RowWeights* w, float* mass, float* scratch, const RowStats* known = nullptr) {
  if (!valid(params)) return sampling_status::bad_parameters;
  const std::uint64_t top = known ? known->top_key : ex.max_scan(vocab, [&](int v, std::uint64_t best) {
    const std::uint64_t k = argmax_key(logits[v], v);
    return k > best ? k : best;
  });
  RowWeights row;
  const sampling_status status = weights_from_top_key(top, logits, params, &row);
  if (status != sampling_status::ok) return status;
  if (row.greedy) {
    *w = row;
    if (mass) *mass = 1.0f;
    return sampling_status::ok;
  }
  if (known && known->has_lane_mass_for(params, vocab)) {
    row.lane_mass = known->lane_mass;
    *w = row;
    // Lane l of this sum adds 0 + lane_mass[l], then the lane tree: the mass, bit for bit.
    if (mass) *mass = ex.sum(sampling_lanes, [&](int l) { return row.lane_mass[l]; });
    return sampling_status::ok;
  }
  // Every filter keeps an upper set of weights, so all of them together are one threshold.
  const bool top_k_on = params.top_k > 0 && params.top_k < vocab, top_p_on = params.top_p < 1.0f;
  if (top_k_on || top_p_on) {
    // Other threads may still be reading scratch (a walk's residual at the previous node): with
    // RowStats no reduction has passed a barrier since then.
    ex.sync();
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

/// The tokens a race must not draw: none (see race).
struct NoExclusion {
  SPECDEC_HD bool contains(int) const { return false; }
  SPECDEC_HD bool in_lane(int) const { return false; }
};

/// Philox indices of the race (purpose `sample`): the lane race takes word l % 4 of index l / 4
/// for lane l (indices 0..63); the race inside the winning lane word j % 4 of index
/// in_lane_race_base + j / 4 for its j-th entry, v = lane + 256 j.
inline constexpr std::uint32_t in_lane_race_base = sampling_lanes / 4;

/// The key of one contestant of an exponential race: weight / E with E = -log2 U (an exponential
/// variable up to the constant 1/ln 2, which does not change the argmax), U the open uniform of
/// `bits`; ties to the lowest id, and a positive ratio that underflows still beats a weight of 0
/// (whose key is 0: never a winner).
SPECDEC_HD inline std::uint64_t race_key(float weight, std::uint32_t bits, int id) {
  if (weight <= 0.0f) return 0;
  std::uint32_t ratio = float_bits(div_rn(weight, -log2_portable(open_uniform_from_bits(bits))));
  if (ratio == 0) ratio = 1;
  return (static_cast<std::uint64_t>(ratio) << 32) | (0xffffffffu - static_cast<std::uint32_t>(id));
}

SPECDEC_HD inline int race_key_id(std::uint64_t key) {
  return static_cast<int>(0xffffffffu - static_cast<std::uint32_t>(key & 0xffffffffu));
}

/// Draws token v with probability w(v) / Σ w, w(v) = weight(v) but 0 where excluded.contains(v),
/// by an exponential race in two levels, exact in distribution and independent of the order of
/// the work (one pass over the row, then about vocab / 1024 + 64 Philox calls):
///  1. the lane masses S_l = Σ w(v) over lane l's entries (v % 256 == l) in increasing v, as
///     ex.lane_sums (bit for bit the same on every executor). A lane holding an excluded token
///     (excluded.in_lane(l)) is summed again with its excluded entries as 0, so S_l is exactly the
///     lane-order sum of w, and S_l > 0 if and only if the lane holds a positive w(v);
///  2. the lane race: lane l wins with probability S_l / Σ S, as the argmax of S_l / E_l over the
///     lanes with S_l > 0 (ties to the lowest lane);
///  3. the race inside the winning lane: argmax of w(v) / E_j over its entries v = l + 256 j with
///     w(v) > 0 (ties to the lowest v), so v wins with probability w(v) / S_l.
/// So P(v) = S_l / Σ S · w(v) / S_l = w(v) / Σ w, up to the float rounding of the S_l (relative
/// vocab / 256 · 2^-24) and the 23-bit resolution of the uniforms. The E are independent: the two
/// races draw disjoint Philox indices (in_lane_race_base), and the in-lane uniforms are the same
/// for every lane, which is fine because only the winner's are used. Step 3 always finds a token
/// (S_l > 0 means a positive w(v) in that lane), so no fallback is needed. Returns -1 when no
/// weight is positive.
///
/// `excluded` must be cheap for a few tokens: contains(v) is asked for the winning lane's entries
/// and in_lane(l) for each of the 256 lanes (NoExclusion when nothing is excluded).
/// `known_lane_mass` (optional): step 1's lane masses of `weight`, already summed (RowWeights::
/// lane_mass); the race then reads only the lanes holding excluded tokens and the winning lane.
template <class Ex, class Weight, class Excluded>
SPECDEC_HD token_t race(Ex& ex, int vocab, const Weight& weight, const Excluded& excluded, RandomKey key,
                        int position, const float* known_lane_mass = nullptr) {
  float* lane_mass = known_lane_mass ? ex.load_lanes(known_lane_mass) : ex.lane_sums(vocab, weight);
  ex.for_each(sampling_lanes, [&](int lane) {
    if (!excluded.in_lane(lane)) return;
    float s = 0.0f;
    for (int v = lane; v < vocab; v += sampling_lanes) s = add_rn(s, excluded.contains(v) ? 0.0f : weight(v));
    lane_mass[lane] = s;
  });
  ex.sync();
  const std::uint64_t top_lane = ex.max_scan(sampling_lanes / 4, [&](int quad, std::uint64_t best) {
    const u32x4 r = random_bits(key, position, random_purpose::sample, static_cast<std::uint32_t>(quad));
    const std::uint32_t words[4] = {r.x, r.y, r.z, r.w};
    SPECDEC_UNROLL
    for (int i = 0; i < 4; ++i) {
      const std::uint64_t k = race_key(lane_mass[4 * quad + i], words[i], 4 * quad + i);
      best = k > best ? k : best;
    }
    return best;
  });
  if (top_lane == 0) return -1;
  const int lane = race_key_id(top_lane);
  const int entries = (vocab - lane + sampling_lanes - 1) / sampling_lanes;
  const std::uint64_t top = ex.max_scan((entries + 3) / 4, [&](int quad, std::uint64_t best) {
    const u32x4 r = random_bits(key, position, random_purpose::sample, in_lane_race_base + static_cast<std::uint32_t>(quad));
    const std::uint32_t words[4] = {r.x, r.y, r.z, r.w};
    SPECDEC_UNROLL
    for (int i = 0; i < 4; ++i) {
      const int v = lane + sampling_lanes * (4 * quad + i);
      if (v >= vocab) break;
      if (excluded.contains(v)) continue;
      const std::uint64_t k = race_key(weight(v), words[i], v);
      best = k > best ? k : best;
    }
    return best;
  });
  return race_key_id(top);
}

/// race() over a row of weights: v with probability w[v] / Σ w, drawn with the uniforms of
/// (key, position, sample, ·); -1 when no weight is positive.
SPECDEC_HD inline token_t sample_from_weights(const float* w, int vocab, RandomKey key, int position) {
  SerialLanes ex;
  return race(ex, vocab, [&](int v) { return w[v]; }, NoExclusion{}, key, position);
}

/// Samples the token at sequence `position` from a row of logits: the draw that plain
/// (non-speculative) sampling makes (the race with (key, position, sample, ·); temperature 0: the
/// argmax). `work` holds vocab floats. Returns -1 with *status set when the row or the
/// parameters are bad.
template <class Ex>
SPECDEC_HD token_t sample_token(Ex& ex, const float* logits, int vocab, const SamplingParams& params, RandomKey key,
                                int position, float* work, sampling_status* status, const RowStats* known = nullptr) {
  RowWeights row;
  *status = analyse_row(ex, logits, vocab, params, &row, nullptr, work, known);
  if (*status != sampling_status::ok) return -1;
  if (row.greedy) return row.best;
  return race(ex, vocab, row, NoExclusion{}, key, position, row.lane_mass);
}

/// sample_token on the host (SerialLanes).
SPECDEC_HD inline int sample_token(const float* logits, int vocab, const SamplingParams& params, RandomKey key,
                                   int position, float* work, sampling_status* status) {
  SerialLanes ex;
  return sample_token(ex, logits, vocab, params, key, position, work, status);
}

}  // namespace specdec::core
