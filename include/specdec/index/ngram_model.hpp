// NgramModel: a Katz back-off trigram model over token ids, in one file that is memory-mapped
// read-only and shared by every decoder that drafts from it (NgramDrafter). Built by
// build_ngram_model (ngram_model_builder.hpp) or `specdec-ngram build`.
//
// The model. Counts come from documents of tokens (a token file, token_file.hpp); no n-gram
// crosses a document boundary and no padding symbol is added, so a document of n tokens gives n
// unigrams, n - 1 bigrams and n - 2 trigrams. For an order m (1, 2, 3) and a context h of m - 1
// tokens (h' = h without its first token; the order 0 model is uniform, 1/V):
//   c(h, w)    how often w followed h;  c(h) = sum over w of c(h, w) (for m = 1: the token count N)
//   P_m(w | h) = d_m(c(h, w)) · c(h, w) / c(h)       when c(h, w) > 0
//              = alpha(h) · P_{m-1}(w | h')             otherwise
//   alpha(h)   = beta(h) / D(h), the mass the discounts freed, over the lower order's mass of the
//                words not seen after h:  beta(h) = sum_w (1 - d_m(c(h, w))) c(h, w) / c(h),
//                D(h) = 1 - sum over w seen after h of P_{m-1}(w | h')
// so that every P_m(. | h) sums to 1. A context never seen (c(h) = 0) backs off entirely:
// P_m(w | h) = P_{m-1}(w | h'), alpha = 1.
//
// Discounts: Katz's Good-Turing discounts with a cut-off k, per order. With n_r the number of
// distinct m-grams seen exactly r times, r* = (r + 1) n_{r+1} / n_r and A = (k + 1) n_{k+1} / n_1,
//   d_r = (r* / r - A) / (1 - A)  for 1 <= r <= k,   d_r = 1 for r > k,
// which makes the mass freed at that order equal to Good-Turing's estimate of unseen events,
// n_1 / N_m. Small corpora can make these undefined (some n_r = 0) or out of range; then k is
// lowered to the largest value (possibly 0: no discounting) for which A < 1 and every d_r lies in
// (0, 1]. (k = 1 always gives d_1 = 0, since then A = 1* of r = 1: it comes out as no discounting.) The file
// records the k used per order (effective_cutoff) and the d_r.
//
// Where the freed mass cannot go: when the lower order gives the unseen words no mass (D(h) = 0:
// every word of the vocabulary was seen after h, or the lower order's support is no larger than
// what was seen), the context keeps its maximum-likelihood estimate c(h, w) / c(h) and
// alpha(h) = 0. Unseen unigrams: the unigram model backs off to the uniform distribution, so each
// of the U words never seen in the corpus gets beta / U (= n_1 / N / U when k >= 1); with no
// singletons in the corpus (n_1 = 0), or every word seen, the unigrams are maximum-likelihood
// and an unseen word has probability 0. Queries never return a word of probability 0.
//
// File format, version 2 (all integers little-endian, probabilities IEEE double):
//   offset  0  char[8]  magic "SDNGRAM\0"
//           8  u32      version (2)
//          12  u32      header bytes (112)
//          16  u32      vocab_size V: every token id is < V
//          20  u32      cutoff k asked for (1..kNgramMaxCutoff)
//          24  u32[3]   effective_cutoff of the unigram, bigram and trigram discounts (<= k)
//          36  u32      flags (0)
//          40  u64      tokens N
//          48  u64      documents
//          56  u64      unigrams: distinct tokens seen
//          64  u64      bigram_contexts: tokens followed by something (w2 with c(w2) > 0)
//          72  u64      bigrams B: distinct (w2, w) pairs
//          80  u64      trigram_contexts C: distinct (w1, w2) followed by something
//          88  u64      trigrams T: distinct (w1, w2, w) triples
//          96  u64      payload checksum (datastore_checksum of everything after the header)
//         104  u64      header checksum (of bytes 0..103)
//   then the payload, the 8-byte arrays first so that every array is aligned:
//     f64[3 k]   discounts d_1..d_k per order (unigram, bigram, trigram; 1 past effective_cutoff)
//     f64[V]     unigram probability by id
//     u64[V+1]   bigram offsets: w2's successors are bigram entries [off[w2], off[w2+1])
//     f64[V]     bigram alpha(w2) (1 for a token never followed by anything)
//     f64[B]     bigram entry probabilities P_2(w | w2)
//     u64[V+1]   trigram context offsets: the contexts (w1, .) are [first[w1], first[w1+1])
//     f64[C]     trigram alpha(w1, w2)
//     u64[C+1]   trigram offsets: context i's successors are trigram entries [off[i], off[i+1])
//     f64[T]     trigram entry probabilities P_3(w | w1, w2)
//     u32[V]     unigram order: every id, by probability (highest first, ties to the lower id)
//     u32[B]     bigram entry tokens
//     u32[B]     bigram by-id index: per context, the positions of its entries sorted by token
//     u32[C]     trigram context w2, ascending within each w1
//     u32[T]     trigram entry tokens
//     u32[T]     trigram by-id index
// Each context's entries are sorted by probability, highest first, ties to the lower id: a
// query's top k are read from the front of at most three lists. The file's size must be exactly
// what the header's counts give.
//
// Opening checks the header (magic, version, header checksum, counts against each other, their
// overflow-safe sum against the file's size: io/file_format.hpp) and every offset table (monotone,
// within its array): O(V + C), and by default (DatastoreVerify::values) every stored value:
// every probability finite and in [0, 1], discounts in (0, 1], alphas finite and >= 0, every
// token below V. DatastoreVerify::full adds the payload checksum; DatastoreVerify::header skips
// the values (costs in docs/design.md#errors). Queries are memory-safe on a damaged file opened
// with `header`: an id or index out of range reads as absent.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include <specdec/config.hpp>
#include <specdec/error.hpp>
#include <specdec/io/file_format.hpp>
#include <specdec/io/mapped_file.hpp>
#include <specdec/index/token_datastore.hpp>

namespace specdec {

inline constexpr char kNgramMagic[8] = {'S', 'D', 'N', 'G', 'R', 'A', 'M', '\0'};
inline constexpr std::uint32_t kNgramVersion = 2;
/// The largest Good-Turing cut-off a model may be built with.
inline constexpr int kNgramMaxCutoff = 32;

/// The 112-byte header of an n-gram model file (see the top of this file).
struct NgramHeader {
  char magic[8] = {};
  std::uint32_t version = 0;
  std::uint32_t header_bytes = 0;
  std::uint32_t vocab_size = 0;
  std::uint32_t cutoff = 0;
  std::uint32_t effective_cutoff[3] = {};
  std::uint32_t flags = 0;
  std::uint64_t tokens = 0;
  std::uint64_t documents = 0;
  std::uint64_t unigrams = 0;
  std::uint64_t bigram_contexts = 0;
  std::uint64_t bigrams = 0;
  std::uint64_t trigram_contexts = 0;
  std::uint64_t trigrams = 0;
  std::uint64_t payload_checksum = 0;
  std::uint64_t header_checksum = 0;
};
static_assert(sizeof(NgramHeader) == 112 && std::endian::native == std::endian::little,
              "the n-gram header is read in place as 112 little-endian bytes");

/// The checksum a header carries for its first 104 bytes.
inline std::uint64_t header_checksum(const NgramHeader& h) {
  return datastore_checksum(&h, offsetof(NgramHeader, header_checksum));
}

/// Byte offsets of the payload's arrays, from a header's counts (the one place the layout is
/// spelled out; the builder writes in this order). Overflow-safe (io/file_format.hpp): a header
/// whose sizes pass 2^64 leaves `file` overflowed, which the reader refuses.
struct NgramLayout {
  std::uint64_t discounts, unigram_prob, bigram_offset, bigram_alpha, bigram_prob, trigram_first, trigram_alpha,
      trigram_offset, trigram_prob, unigram_order, bigram_token, bigram_by_id, trigram_w2, trigram_token,
      trigram_by_id;
  FileLayout file{sizeof(NgramHeader)};

  explicit NgramLayout(const NgramHeader& h) {
    const std::uint64_t v = h.vocab_size, b = h.bigrams, c = h.trigram_contexts, t = h.trigrams;
    discounts = file.take(3 * std::uint64_t{h.cutoff}, 8);
    unigram_prob = file.take(v, 8);
    bigram_offset = file.take(v + 1, 8);
    bigram_alpha = file.take(v, 8);
    bigram_prob = file.take(b, 8);
    trigram_first = file.take(v + 1, 8);
    trigram_alpha = file.take(c, 8);
    trigram_offset = file.take(c == std::uint64_t(-1) ? c : c + 1, 8);  // c + 1 saturates
    trigram_prob = file.take(t, 8);
    unigram_order = file.take(v, 4);
    bigram_token = file.take(b, 4);
    bigram_by_id = file.take(b, 4);
    trigram_w2 = file.take(c, 4);
    trigram_token = file.take(t, 4);
    trigram_by_id = file.take(t, 4);
  }
};

/// A next token and its probability under the model.
struct NgramCandidate {
  token_t token = 0;
  double probability = 0.0;
};

/// An n-gram model file, mapped read-only (see the top of this file). Immutable once open, so one
/// instance (e.g. a std::shared_ptr<const NgramModel>) serves any number of drafters and threads.
class NgramModel {
 public:
  /// Maps `path` and checks it (`verify`). Throws specdec::error naming the file and what is wrong:
  /// missing, truncated, not an n-gram model, another version, bad checksum, bad offsets.
  explicit NgramModel(const std::filesystem::path& path, DatastoreVerify verify = DatastoreVerify::values)
      : path_(path), file_(path, "n-gram model " + path.string(), sizeof(NgramHeader)) {
    check("n-gram model " + path.string(), verify);
  }

  const std::filesystem::path& path() const { return path_; }
  const NgramHeader& header() const { return *static_cast<const NgramHeader*>(file_.data()); }
  int vocab_size() const { return static_cast<int>(header().vocab_size); }
  std::size_t file_bytes() const { return file_.size(); }
  /// The Good-Turing discounts d_1..d_cutoff of an order (1 unigram, 2 bigram, 3 trigram).
  std::span<const double> discounts(int order) const {
    return array<double>(NgramLayout(header()).discounts, 3 * std::size_t{header().cutoff})
        .subspan(static_cast<std::size_t>(order - 1) * header().cutoff, header().cutoff);
  }

  /// The checksum of the payload as it is now (reads the whole file).
  std::uint64_t payload_checksum() const {
    return datastore_checksum(static_cast<const char*>(file_.data()) + sizeof(NgramHeader),
                              file_.size() - sizeof(NgramHeader));
  }

  /// P(w | context) under the model, from the context's last two tokens (fewer when it is
  /// shorter: the bigram or unigram distribution). 0 for w outside the vocabulary; a context
  /// token outside it counts as a context never seen. O(log) per order.
  double probability(std::span<const token_t> context, token_t w) const {
    if (w < 0 || w >= vocab_size()) return 0.0;
    const Levels levels = resolve(context);
    for (int l = 0; l < levels.count; ++l)
      if (const auto at = levels.list[l].find(static_cast<std::uint32_t>(w)))
        return levels.list[l].scale * levels.list[l].prob[*at];
    return levels.unigram_scale * unigram_prob()[static_cast<std::size_t>(w)];
  }

  /// The `k` likeliest next tokens after `context` (its last two tokens, as probability()), into
  /// `out`: highest probability first, ties to the lower id, none of probability 0 (so fewer than
  /// k when fewer have a probability). A k-way merge of the trigram context's successors, the
  /// bigram context's (scaled by alpha) and the unigram order (scaled by both alphas), each read
  /// from its front and skipping the words a higher order already gave: no scan of the
  /// vocabulary, O(k + skipped) list reads and O(log) per skip test, and a lower list is only
  /// read while its scaled head could still be among the k.
  void top_k(std::span<const token_t> context, int k, std::vector<NgramCandidate>& out) const {
    out.clear();
    if (k <= 0) return;
    const Levels levels = resolve(context);
    const auto order = unigram_order();
    const auto uni = unigram_prob();
    const auto vocab = static_cast<std::uint32_t>(vocab_size());
    std::uint64_t at[3] = {0, 0, 0};  // next position in each list; index levels.count is the unigrams
    // A word's probability comes from the highest order that saw it: skip it in lower lists.
    const auto seen_above = [&](int level, std::uint32_t w) {
      for (int l = 0; l < level; ++l)
        if (levels.list[l].find(w)) return true;
      return false;
    };
    while (static_cast<int>(out.size()) < k) {
      int best = -1;
      std::uint32_t best_token = 0;
      double best_p = 0.0;
      const auto consider = [&](int level, std::uint32_t w, double p) {
        if (p > best_p || (p == best_p && p > 0.0 && w < best_token)) best = level, best_token = w, best_p = p;
      };
      // Higher orders first: a lower list whose head (skipped words included, so an upper bound)
      // is already below the best is not read this round. The alphas are mostly small, so the
      // long lower lists are rarely walked at all.
      for (int l = 0; l < levels.count; ++l) {
        const List& list = levels.list[l];
        if (at[l] < list.size && list.scale * list.prob[at[l]] < best_p) continue;
        while (at[l] < list.size && (list.token[at[l]] >= vocab || seen_above(l, list.token[at[l]]))) ++at[l];
        if (at[l] < list.size) consider(l, list.token[at[l]], list.scale * list.prob[at[l]]);
      }
      const int u = levels.count;
      const auto unigram = [&](std::uint64_t i) { return order[i] < vocab ? levels.unigram_scale * uni[order[i]] : 0.0; };
      if (at[u] < vocab && unigram(at[u]) >= best_p) {
        while (at[u] < vocab && (order[at[u]] >= vocab || seen_above(u, order[at[u]]))) ++at[u];
        if (at[u] < vocab) consider(u, order[at[u]], unigram(at[u]));
      }
      if (best < 0) break;
      out.push_back({static_cast<token_t>(best_token), best_p});
      ++at[best];
    }
  }

 private:
  // One context's successors: entries in probability order, `by_id` their positions by token.
  struct List {
    const std::uint32_t* token = nullptr;
    const double* prob = nullptr;
    const std::uint32_t* by_id = nullptr;
    std::uint64_t size = 0;
    double scale = 1.0;  // the product of the higher orders' alphas

    /// The position of w's entry, if w followed this context.
    std::optional<std::uint64_t> find(std::uint32_t w) const {
      std::uint64_t lo = 0, hi = size;
      while (lo < hi) {
        const std::uint64_t mid = lo + (hi - lo) / 2;
        const std::uint32_t i = by_id[mid];
        if (i >= size) return std::nullopt;  // only in a damaged file opened with DatastoreVerify::header
        if (token[i] < w) lo = mid + 1;
        else if (token[i] > w) hi = mid;
        else return i;
      }
      return std::nullopt;
    }
  };
  // The trigram and bigram lists of a context (highest order first) and the unigrams' scale.
  struct Levels {
    List list[2];
    int count = 0;
    double unigram_scale = 1.0;
  };

  Levels resolve(std::span<const token_t> context) const {
    Levels out;
    const NgramLayout layout(header());
    const auto vocab = static_cast<std::uint64_t>(vocab_size());
    const auto in_vocab = [&](token_t t) { return t >= 0 && static_cast<std::uint64_t>(t) < vocab; };
    double scale = 1.0;
    if (context.size() >= 2 && in_vocab(context[context.size() - 2]) && in_vocab(context.back())) {
      const auto w1 = static_cast<std::uint64_t>(context[context.size() - 2]);
      const auto w2 = static_cast<std::uint32_t>(context.back());
      const auto first = array<std::uint64_t>(layout.trigram_first, vocab + 1);
      const auto w2s = array<std::uint32_t>(layout.trigram_w2, header().trigram_contexts);
      const auto begin = w2s.begin() + static_cast<std::ptrdiff_t>(first[w1]);
      const auto end = w2s.begin() + static_cast<std::ptrdiff_t>(first[w1 + 1]);
      const auto found = std::lower_bound(begin, end, w2);
      if (found != end && *found == w2) {
        const auto c = static_cast<std::uint64_t>(found - w2s.begin());
        const auto offset = array<std::uint64_t>(layout.trigram_offset, header().trigram_contexts + 1);
        out.list[out.count++] = {array<std::uint32_t>(layout.trigram_token, header().trigrams).data() + offset[c],
                                 array<double>(layout.trigram_prob, header().trigrams).data() + offset[c],
                                 array<std::uint32_t>(layout.trigram_by_id, header().trigrams).data() + offset[c],
                                 offset[c + 1] - offset[c], scale};
        scale *= array<double>(layout.trigram_alpha, header().trigram_contexts)[c];
      }
    }
    if (!context.empty() && in_vocab(context.back())) {
      const auto w2 = static_cast<std::uint64_t>(context.back());
      const auto offset = array<std::uint64_t>(layout.bigram_offset, vocab + 1);
      out.list[out.count++] = {array<std::uint32_t>(layout.bigram_token, header().bigrams).data() + offset[w2],
                               array<double>(layout.bigram_prob, header().bigrams).data() + offset[w2],
                               array<std::uint32_t>(layout.bigram_by_id, header().bigrams).data() + offset[w2],
                               offset[w2 + 1] - offset[w2], scale};
      scale *= array<double>(layout.bigram_alpha, vocab)[w2];
    }
    out.unigram_scale = scale;
    return out;
  }

  template <class T>
  std::span<const T> array(std::uint64_t offset, std::uint64_t count) const {
    return {reinterpret_cast<const T*>(static_cast<const char*>(file_.data()) + offset), static_cast<std::size_t>(count)};
  }
  std::span<const double> unigram_prob() const {
    return array<double>(NgramLayout(header()).unigram_prob, header().vocab_size);
  }
  std::span<const std::uint32_t> unigram_order() const {
    return array<std::uint32_t>(NgramLayout(header()).unigram_order, header().vocab_size);
  }

  void check(const std::string& who, DatastoreVerify verify) const {
    const NgramHeader& h = header();
    detail::check_file_header(h, kNgramMagic, kNgramVersion, "n-gram model", who);
    if (h.vocab_size == 0 || h.vocab_size > 0x7FFFFFFF)
      throw error(who + " has vocab_size " + std::to_string(h.vocab_size) + " (expected 1 to 2^31 - 1)");
    if (h.cutoff < 1 || h.cutoff > static_cast<std::uint32_t>(kNgramMaxCutoff))
      throw error(who + " has cutoff " + std::to_string(h.cutoff) + " (expected 1 to " +
                  std::to_string(kNgramMaxCutoff) + ")");
    for (const std::uint32_t k : h.effective_cutoff)
      if (k > h.cutoff)
        throw error(who + " has an effective cutoff of " + std::to_string(k) + " above its cutoff " +
                    std::to_string(h.cutoff));
    if (h.tokens == 0 || h.documents == 0) throw error(who + " is empty (no tokens)");
    if (h.documents > h.tokens)
      throw error(who + " has " + std::to_string(h.documents) + " documents of " + std::to_string(h.tokens) +
                  " tokens in all");
    if (h.unigrams > h.vocab_size || h.bigram_contexts > h.unigrams || h.trigram_contexts > h.bigrams ||
        h.bigrams > h.tokens || h.trigrams > h.tokens)
      throw error(who + " has counts that contradict each other (" + std::to_string(h.unigrams) + " unigrams, " +
                  std::to_string(h.bigram_contexts) + " bigram contexts, " + std::to_string(h.bigrams) + " bigrams, " +
                  std::to_string(h.trigram_contexts) + " trigram contexts, " + std::to_string(h.trigrams) +
                  " trigrams of " + std::to_string(h.tokens) + " tokens, vocab_size " + std::to_string(h.vocab_size) +
                  ")");
    const NgramLayout layout(h);
    layout.file.check_size(who, file_bytes());
    const std::uint64_t vocab = h.vocab_size;
    check_offsets(who, "bigram offsets", array<std::uint64_t>(layout.bigram_offset, vocab + 1), h.bigrams);
    check_offsets(who, "trigram context offsets", array<std::uint64_t>(layout.trigram_first, vocab + 1),
                  h.trigram_contexts);
    check_offsets(who, "trigram offsets", array<std::uint64_t>(layout.trigram_offset, h.trigram_contexts + 1),
                  h.trigrams);
    if (verify != DatastoreVerify::header) {
      if (verify == DatastoreVerify::full && payload_checksum() != h.payload_checksum)
        throw error(who + " is damaged (payload checksum mismatch)");
      // Probabilities in [0, 1], discounts in (0, 1], alphas finite and >= 0: an infinite or
      // negative value would make every query's ranking and perplexity meaningless.
      check_range(who, "discounts", array<double>(layout.discounts, 3 * std::uint64_t{h.cutoff}), 0.0, 1.0, false);
      check_range(who, "unigram probabilities", unigram_prob(), 0.0, 1.0, true);
      check_range(who, "bigram probabilities", array<double>(layout.bigram_prob, h.bigrams), 0.0, 1.0, true);
      check_range(who, "trigram probabilities", array<double>(layout.trigram_prob, h.trigrams), 0.0, 1.0, true);
      constexpr double kMax = std::numeric_limits<double>::max();
      check_range(who, "bigram alphas", array<double>(layout.bigram_alpha, vocab), 0.0, kMax, true);
      check_range(who, "trigram alphas", array<double>(layout.trigram_alpha, h.trigram_contexts), 0.0, kMax, true);
      detail::check_below(unigram_order(), vocab, who, "unigram order");
      detail::check_below(array<std::uint32_t>(layout.bigram_token, h.bigrams), vocab, who, "bigram tokens");
      detail::check_below(array<std::uint32_t>(layout.trigram_w2, h.trigram_contexts), vocab, who, "trigram contexts");
      detail::check_below(array<std::uint32_t>(layout.trigram_token, h.trigrams), vocab, who, "trigram tokens");
      check_index(who, "bigram by-id index", array<std::uint32_t>(layout.bigram_by_id, h.bigrams),
                  array<std::uint64_t>(layout.bigram_offset, vocab + 1));
      check_index(who, "trigram by-id index", array<std::uint32_t>(layout.trigram_by_id, h.trigrams),
                  array<std::uint64_t>(layout.trigram_offset, h.trigram_contexts + 1));
    }
  }

  // A by-id index holds, per context, positions inside that context's list (offsets checked).
  static void check_index(const std::string& who, const char* what, std::span<const std::uint32_t> index,
                          std::span<const std::uint64_t> offsets) {
    for (std::size_t c = 0; c + 1 < offsets.size(); ++c) {
      const std::uint64_t size = offsets[c + 1] - offsets[c];
      for (std::uint64_t j = offsets[c]; j < offsets[c + 1]; ++j)
        if (index[j] >= size)
          throw error(who + " is damaged: its " + what + " [" + std::to_string(j) + "] is " + std::to_string(index[j]) +
                      ", not below its context's " + std::to_string(size) + " entries");
    }
  }

  // Every value must be finite and in [lo, hi] (in (lo, hi] unless `lo_included`).
  static void check_range(const std::string& who, const char* what, std::span<const double> values, double lo,
                          double hi, bool lo_included) {
    detail::check_finite(values, who, what);
    for (std::size_t i = 0; i < values.size(); ++i)
      if (values[i] > hi || values[i] < lo || (!lo_included && values[i] == lo))
        throw error(who + " is damaged: its " + what + " [" + std::to_string(i) + "] is " + std::to_string(values[i]) +
                    ", outside " + (lo_included ? "[" : "(") + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  }

  // An offset table must start at 0, never decrease and end at the size of what it indexes.
  static void check_offsets(const std::string& who, const char* what, std::span<const std::uint64_t> offsets,
                            std::uint64_t size) {
    bool ok = offsets.front() == 0 && offsets.back() == size;
    for (std::size_t i = 1; ok && i < offsets.size(); ++i) ok = offsets[i - 1] <= offsets[i];
    if (!ok) throw error(who + " is damaged (its " + what + " are not a table of " + std::to_string(size) + " entries)");
  }

  std::filesystem::path path_;
  MappedFile file_;
};

}  // namespace specdec
