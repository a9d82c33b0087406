// Brute-force reference of the CASD occurrence-selection rule (shared by the host CASD drafter's
// tests and the GPU kernel's parity tests).
//
// Context c[0..n) holds every committed token; c[n-1] is the root. Search limit S (n for CASD,
// the prompt length for CASD_prompt; clamped to n).
//  - An occurrence is an end position p with 0 <= p <= S - 2 and p < n - 1: something follows it
//    inside the searched part, and it is not the query itself.
//  - Its match length m(p) is the largest m <= min(max_match, p + 1) with
//    c[p-m+1 .. p] == c[n-m .. n-1] (0 when c[p] != c[n-1]).
//  - Candidates are occurrences with m(p) >= min_match (min_match < 1 is treated as 1). They are
//    ranked by m(p) descending, ties by p descending (most recent first); the first k are kept.
//  - Occurrence p drafts the continuation c[p+1 .. min(p+1+D, S)) (continuation_end()).
//
// O(S * max_match) per call: this is the rescanning baseline, not what a drafter should run per
// step on a long context. No allocation, no throw: it runs in a CUDA thread as well.
#pragma once

#include <specdec/config.hpp>

namespace specdec::core {

/// One selected occurrence: the end position p of the matched text and its match length m(p).
struct SuffixMatch {
  int position = -1;
  int length = 0;
};

/// True when occurrence a ranks before occurrence b (longer match first, then more recent).
SPECDEC_HD constexpr bool ranks_before(const SuffixMatch& a, const SuffixMatch& b) {
  return a.length != b.length ? a.length > b.length : a.position > b.position;
}

/// Writes the k best occurrences of the context's suffix (the CASD rule above) to out[0..k),
/// best first, and returns how many were written (<= k; 0 when nothing matches or k <= 0).
/// `out` must hold k entries.
SPECDEC_HD inline int find_suffix_matches(const token_t* context, int n, int search_limit,
                                          int max_match, int min_match, int k, SuffixMatch* out) {
  if (n < 2 || k <= 0 || max_match <= 0) return 0;
  if (min_match < 1) min_match = 1;
  const int limit = search_limit < n ? search_limit : n;
  const int last = limit - 2;  // p <= S - 2, and S <= n makes p < n - 1 hold as well
  const token_t* query_end = context + n - 1;
  int found = 0;
  for (int p = 0; p <= last; ++p) {
    const int cap = p + 1 < max_match ? p + 1 : max_match;
    int m = 0;
    while (m < cap && context[p - m] == query_end[-m]) ++m;
    if (m < min_match) continue;
    const SuffixMatch candidate{p, m};
    // Insertion into the ranked list; a candidate that does not beat the k-th is dropped.
    if (found == k && !ranks_before(candidate, out[k - 1])) continue;
    int slot = found < k ? found++ : k - 1;
    while (slot > 0 && ranks_before(candidate, out[slot - 1])) {
      out[slot] = out[slot - 1];
      --slot;
    }
    out[slot] = candidate;
  }
  return found;
}

/// End (exclusive) of the continuation drafted from occurrence p: min(p + 1 + length, S).
/// Compared as length < S - (p + 1): `length` is an option and may be as large as INT_MAX.
SPECDEC_HD constexpr int continuation_end(int position, int length, int n, int search_limit) {
  const int limit = search_limit < n ? search_limit : n;
  return length < limit - (position + 1) ? position + 1 + length : limit;
}

/// Score of the draft token `depth` tokens after an occurrence matched over `match_length` tokens:
/// (m + 1) / (m + depth + 1), the chance by Laplace's rule of succession that a copy which has
/// held for m tokens holds for `depth` more. Longer matches score higher; scores fall with depth.
SPECDEC_HD constexpr float copy_score(int match_length, int depth) {
  return static_cast<float>(match_length + 1) / static_cast<float>(match_length + depth + 1);
}

}  // namespace specdec::core
