// Building an NgramModel file from token documents: counting, Katz's estimates and the writer
// (the model and the file format are described at the top of ngram_model.hpp).
//
// Counting sorts: every bigram of the text as a 64-bit key, every trigram as three 32-bit ids, so
// a build needs about 8 + 12 bytes per token beside the text and is dominated by the two sorts
// (measured in docs/drafters/ngram.md). The estimates then take one pass per order, lower orders
// first: a context's back-off weight needs the lower order's final probabilities of what it saw.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <numeric>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <specdec/error.hpp>
#include <specdec/index/ngram_model.hpp>
#include <specdec/index/token_datastore.hpp>
#include <specdec/index/token_file.hpp>

namespace specdec {

struct NgramBuildOptions {
  /// Every token must be < vocab_size; 0 takes the largest token + 1.
  int vocab_size = 0;
  /// Katz's Good-Turing cut-off k: counts above it are not discounted (1..kNgramMaxCutoff).
  int cutoff = 5;
  /// Told what the build is doing, phase by phase (e.g. to print progress).
  std::function<void(std::string_view)> progress = nullptr;
};

/// Katz's discounts d_1..d_k from counts of counts (count_of_counts[r] = how many distinct n-grams
/// were seen r times; entries past the end count 0) with the cut-off lowered to the largest k <=
/// `cutoff` for which A = (k + 1) n_{k+1} / n_1 < 1 and every d_r lies in (0, 1]. The result's size
/// is that k (0: no discounting).
inline std::vector<double> katz_discounts(std::span<const std::uint64_t> count_of_counts, int cutoff) {
  const auto n = [&](int r) {
    return static_cast<std::size_t>(r) < count_of_counts.size() ? static_cast<double>(count_of_counts[static_cast<std::size_t>(r)]) : 0.0;
  };
  std::vector<double> d;
  for (int k = cutoff; k >= 1 && n(1) > 0; --k) {
    const double a = (k + 1) * n(k + 1) / n(1);
    d.clear();
    for (int r = 1; r <= k && a < 1.0; ++r) {
      if (n(r) == 0) break;
      const double ratio = ((r + 1) * n(r + 1) / n(r)) / r;  // r* / r
      const double dr = (ratio - a) / (1.0 - a);
      if (!(dr > 0.0 && dr <= 1.0)) break;
      d.push_back(dr);
    }
    if (static_cast<int>(d.size()) == k) return d;
  }
  return {};
}

namespace detail {

// One order's contexts in CSR form: context i's successors are [offset[i], offset[i+1]), by id.
struct NgramCounts {
  std::vector<std::uint64_t> offset{0};
  std::vector<std::uint32_t> token;
  std::vector<std::uint64_t> count;
  std::vector<double> prob;   // filled by the estimate, by id
  std::vector<double> alpha;  // per context
};

// Katz's estimate of one context's successors (see ngram_model.hpp): probabilities into `prob`,
// returns alpha. `lower[i]` is the lower order's probability of successor i and `lower_support`
// how many words the lower order gives any mass to; when it gives the unseen words none, or the
// discounts freed nothing, the context keeps its maximum-likelihood estimate and alpha = 0.
inline double katz_estimate(std::span<const std::uint64_t> counts, std::span<const double> lower,
                            std::uint64_t lower_support, std::span<const double> discounts, std::span<double> prob) {
  std::uint64_t total = 0;
  for (const std::uint64_t c : counts) total += c;
  long double freed = 0, lower_seen = 0;
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const std::uint64_t r = counts[i];
    const double d = r <= discounts.size() ? discounts[r - 1] : 1.0;
    prob[i] = d * static_cast<double>(r) / static_cast<double>(total);
    freed += static_cast<long double>(1.0 - d) * static_cast<long double>(r) / static_cast<long double>(total);
    lower_seen += lower[i];
  }
  const long double room = 1.0L - lower_seen;
  if (freed > 0 && lower_support > counts.size() && room > 0) return static_cast<double>(freed / room);
  for (std::size_t i = 0; i < counts.size(); ++i)
    prob[i] = static_cast<double>(counts[i]) / static_cast<double>(total);
  return 0.0;
}

// Distinct n-grams per count r <= limit (index r), from the counts of one order.
inline std::vector<std::uint64_t> count_of_counts(std::span<const std::uint64_t> counts, int limit) {
  std::vector<std::uint64_t> n(static_cast<std::size_t>(limit) + 1, 0);
  for (const std::uint64_t c : counts)
    if (c <= static_cast<std::uint64_t>(limit)) ++n[c];
  return n;
}

// A context's entries in probability order (highest first, ties to the lower id), and for each
// entry in id order its position in that order.
inline void probability_order(const NgramCounts& in, std::vector<std::uint32_t>& token, std::vector<double>& prob,
                              std::vector<std::uint32_t>& by_id) {
  token.resize(in.token.size());
  prob.resize(in.token.size());
  by_id.resize(in.token.size());
  std::vector<std::uint32_t> perm;
  for (std::size_t c = 0; c + 1 < in.offset.size(); ++c) {
    const std::uint64_t begin = in.offset[c], size = in.offset[c + 1] - begin;
    perm.resize(size);
    std::iota(perm.begin(), perm.end(), 0u);
    std::sort(perm.begin(), perm.end(), [&](std::uint32_t a, std::uint32_t b) {
      const double pa = in.prob[begin + a], pb = in.prob[begin + b];
      return pa != pb ? pa > pb : in.token[begin + a] < in.token[begin + b];
    });
    for (std::uint32_t p = 0; p < size; ++p) {
      token[begin + p] = in.token[begin + perm[p]];
      prob[begin + p] = in.prob[begin + perm[p]];
      by_id[begin + perm[p]] = p;
    }
  }
}

}  // namespace detail

/// Writes the Katz back-off trigram model of `docs` to `path` (through a temporary file renamed at
/// the end, so a reader of an older file at `path` keeps its mapping intact). Throws
/// specdec::error for no documents, a token >= vocab_size, a cut-off out of range, or a file that
/// cannot be written.
inline void build_ngram_model(const TokenDocuments& docs, const std::filesystem::path& path,
                              const NgramBuildOptions& options = {}) {
  const auto say = [&](std::string_view what) {
    if (options.progress) options.progress(what);
  };
  if (docs.documents == 0) throw error("n-gram build: no documents (the model would be empty)");
  if (options.cutoff < 1 || options.cutoff > kNgramMaxCutoff)
    throw error("n-gram build: cutoff must be in [1, " + std::to_string(kNgramMaxCutoff) + "], got " +
                std::to_string(options.cutoff));
  const std::uint64_t vocab = docs.vocabulary(options.vocab_size, "n-gram build");
  const std::span<const std::uint32_t> text = docs.text;
  const int k = options.cutoff;

  say("counting n-grams of " + std::to_string(docs.tokens()) + " tokens in " + std::to_string(docs.documents) +
      " documents");
  std::vector<std::uint64_t> unigram(vocab, 0);
  for (const std::uint32_t t : text)
    if (t != kDocumentEnd) ++unigram[t];
  detail::NgramCounts bi, tri;
  {
    std::vector<std::uint64_t> keys;  // w2 << 32 | w
    for (std::size_t i = 0; i + 1 < text.size(); ++i)
      if (text[i] != kDocumentEnd && text[i + 1] != kDocumentEnd) keys.push_back(std::uint64_t{text[i]} << 32 | text[i + 1]);
    std::sort(keys.begin(), keys.end());
    bi.offset.assign(vocab + 1, 0);
    for (std::size_t i = 0; i < keys.size();) {
      std::size_t j = i;
      while (j < keys.size() && keys[j] == keys[i]) ++j;
      ++bi.offset[(keys[i] >> 32) + 1];
      bi.token.push_back(static_cast<std::uint32_t>(keys[i]));
      bi.count.push_back(j - i);
      i = j;
    }
    std::partial_sum(bi.offset.begin(), bi.offset.end(), bi.offset.begin());
  }
  std::vector<std::uint32_t> tri_w2;
  std::vector<std::uint64_t> tri_first(vocab + 1, 0);
  {
    std::vector<std::array<std::uint32_t, 3>> keys;
    for (std::size_t i = 0; i + 2 < text.size(); ++i)
      if (text[i] != kDocumentEnd && text[i + 1] != kDocumentEnd && text[i + 2] != kDocumentEnd)
        keys.push_back({text[i], text[i + 1], text[i + 2]});
    std::sort(keys.begin(), keys.end());
    for (std::size_t i = 0; i < keys.size();) {
      std::size_t j = i;
      while (j < keys.size() && keys[j] == keys[i]) ++j;
      if (i == 0 || keys[i][0] != keys[i - 1][0] || keys[i][1] != keys[i - 1][1]) {  // a new context
        if (i > 0) tri.offset.push_back(tri.token.size());
        tri_w2.push_back(keys[i][1]);
        ++tri_first[keys[i][0] + 1];
      }
      tri.token.push_back(keys[i][2]);
      tri.count.push_back(j - i);
      i = j;
    }
    if (!tri.token.empty()) tri.offset.push_back(tri.token.size());
    std::partial_sum(tri_first.begin(), tri_first.end(), tri_first.begin());
  }

  say("estimating (Katz back-off, Good-Turing cut-off " + std::to_string(k) + ")");
  const std::vector<double> d1 = katz_discounts(detail::count_of_counts(unigram, k + 1), k);
  const std::vector<double> d2 = katz_discounts(detail::count_of_counts(bi.count, k + 1), k);
  const std::vector<double> d3 = katz_discounts(detail::count_of_counts(tri.count, k + 1), k);

  // Unigrams back off to the uniform distribution over the vocabulary.
  std::vector<std::uint32_t> seen;
  std::vector<std::uint64_t> seen_count;
  for (std::uint32_t w = 0; w < vocab; ++w)
    if (unigram[w] > 0) seen.push_back(w), seen_count.push_back(unigram[w]);
  std::vector<double> seen_prob(seen.size());
  const std::vector<double> uniform(seen.size(), 1.0 / static_cast<double>(vocab));
  const double unigram_alpha = detail::katz_estimate(seen_count, uniform, vocab, d1, seen_prob);
  std::vector<double> unigram_prob(vocab, unigram_alpha / static_cast<double>(vocab));
  for (std::size_t i = 0; i < seen.size(); ++i) unigram_prob[seen[i]] = seen_prob[i];
  const std::uint64_t unigram_support = unigram_alpha > 0 ? vocab : seen.size();

  std::vector<double> lower;
  bi.prob.resize(bi.token.size());
  bi.alpha.assign(vocab, 1.0);
  std::vector<std::uint64_t> bigram_support(vocab, unigram_support);
  std::uint64_t bigram_contexts = 0;
  for (std::uint64_t w2 = 0; w2 < vocab; ++w2) {
    const std::uint64_t begin = bi.offset[w2], size = bi.offset[w2 + 1] - begin;
    if (size == 0) continue;
    ++bigram_contexts;
    lower.resize(size);
    for (std::uint64_t i = 0; i < size; ++i) lower[i] = unigram_prob[bi.token[begin + i]];
    bi.alpha[w2] = detail::katz_estimate(std::span(bi.count).subspan(begin, size), lower, unigram_support, d2,
                                         std::span(bi.prob).subspan(begin, size));
    if (bi.alpha[w2] == 0.0) bigram_support[w2] = size;
  }

  tri.prob.resize(tri.token.size());
  tri.alpha.assign(tri_w2.size(), 0.0);
  for (std::uint64_t w1 = 0; w1 < vocab; ++w1) {
    for (std::uint64_t c = tri_first[w1]; c < tri_first[w1 + 1]; ++c) {
      const std::uint32_t w2 = tri_w2[c];
      const std::uint64_t begin = tri.offset[c], size = tri.offset[c + 1] - begin;
      // Every trigram's last two tokens are a bigram of the same document: its probability is an entry.
      const auto successors = std::span(bi.token).subspan(bi.offset[w2], bi.offset[w2 + 1] - bi.offset[w2]);
      lower.resize(size);
      for (std::uint64_t i = 0; i < size; ++i) {
        const auto at = std::lower_bound(successors.begin(), successors.end(), tri.token[begin + i]);
        lower[i] = bi.prob[bi.offset[w2] + static_cast<std::uint64_t>(at - successors.begin())];
      }
      tri.alpha[c] = detail::katz_estimate(std::span(tri.count).subspan(begin, size), lower, bigram_support[w2], d3,
                                           std::span(tri.prob).subspan(begin, size));
    }
  }

  std::vector<std::uint32_t> unigram_order(vocab);
  std::iota(unigram_order.begin(), unigram_order.end(), 0u);
  std::sort(unigram_order.begin(), unigram_order.end(), [&](std::uint32_t a, std::uint32_t b) {
    return unigram_prob[a] != unigram_prob[b] ? unigram_prob[a] > unigram_prob[b] : a < b;
  });
  std::vector<std::uint32_t> bi_token, bi_by_id, tri_token, tri_by_id;
  std::vector<double> bi_prob, tri_prob;
  detail::probability_order(bi, bi_token, bi_prob, bi_by_id);
  detail::probability_order(tri, tri_token, tri_prob, tri_by_id);
  std::vector<double> discounts(3 * static_cast<std::size_t>(k), 1.0);
  for (int order = 0; order < 3; ++order) {
    const std::vector<double>& d = order == 0 ? d1 : order == 1 ? d2 : d3;
    std::copy(d.begin(), d.end(), discounts.begin() + order * k);
  }

  say("writing " + path.string());
  NgramHeader h;
  std::copy(std::begin(kNgramMagic), std::end(kNgramMagic), h.magic);
  h.version = kNgramVersion;
  h.header_bytes = sizeof(NgramHeader);
  h.vocab_size = static_cast<std::uint32_t>(vocab);
  h.cutoff = static_cast<std::uint32_t>(k);
  h.effective_cutoff[0] = static_cast<std::uint32_t>(d1.size());
  h.effective_cutoff[1] = static_cast<std::uint32_t>(d2.size());
  h.effective_cutoff[2] = static_cast<std::uint32_t>(d3.size());
  h.tokens = docs.tokens();
  h.documents = docs.documents;
  h.unigrams = seen.size();
  h.bigram_contexts = bigram_contexts;
  h.bigrams = bi.token.size();
  h.trigram_contexts = tri_w2.size();
  h.trigrams = tri.token.size();
  // The payload in NgramLayout's order, checksummed as it is written.
  struct Part {
    const void* data;
    std::size_t bytes;
  };
  const auto part = [](const auto& v) { return Part{v.data(), v.size() * sizeof(v[0])}; };
  const Part parts[] = {part(discounts), part(unigram_prob), part(bi.offset), part(bi.alpha), part(bi_prob),
                        part(tri_first), part(tri.alpha), part(tri.offset), part(tri_prob), part(unigram_order),
                        part(bi_token), part(bi_by_id), part(tri_w2), part(tri_token), part(tri_by_id)};
  DatastoreChecksum sum;
  for (const Part& p : parts) sum.add(p.data, p.bytes);
  h.payload_checksum = sum.value();
  h.header_checksum = header_checksum(h);
  detail::write_then_rename(path, "n-gram model", [&](std::FILE* f) {
    bool ok = std::fwrite(&h, sizeof h, 1, f) == 1;
    for (const Part& p : parts) ok = ok && std::fwrite(p.data, 1, p.bytes, f) == p.bytes;
    return ok;
  });
  say("done");
}

}  // namespace specdec
