// Softmax statistics and the k most likely tokens of one logits row, in one pass for the ranking
// and one for the normaliser: what the drafters that run a model (EAGLE, staged) need from each
// row, instead of sorting the whole vocabulary. Host-only.
#pragma once

#include <cmath>

#include <specdec/config.hpp>

namespace specdec::core {

/// The row's largest logit and sum over v of exp(logits[v] - best) (in double, in id order);
/// softmax(v) = exp(logits[v] - best) / sum.
struct SoftmaxStats {
  float best = 0.0f;
  double sum = 0.0;
};

/// Writes to ids[0 .. min(k, vocab)) the tokens of the largest logits, most likely first (ties to
/// the lower id), and returns the row's softmax statistics. A NaN logit is never ranked above a
/// number; callers that must refuse non-finite rows check them.
inline SoftmaxStats softmax_top_k(const float* logits, int vocab, int k, token_t* ids) {
  int count = 0;
  for (int v = 0; v < vocab; ++v) {
    const float l = logits[v];
    if (count == k && !(l > logits[ids[count - 1]])) continue;
    int at = count < k ? count++ : k - 1;
    for (; at > 0 && l > logits[ids[at - 1]]; --at) ids[at] = ids[at - 1];
    ids[at] = v;
  }
  SoftmaxStats s;
  if (count == 0) return s;
  s.best = logits[ids[0]];
  for (int v = 0; v < vocab; ++v) s.sum += std::exp(static_cast<double>(logits[v] - s.best));
  return s;
}

}  // namespace specdec::core
