// Building a TokenDatastore file from token documents: the suffix array and the file writer.
// Needs libdivsufsort (Debian libdivsufsort-dev, link -ldivsufsort); reading a datastore does not.
//
// Two suffix sorts (docs/drafters/rest.md compares them at 10M and 100M tokens):
//  - divsufsort: libdivsufsort sorts bytes, so the text is written big-endian, 4 bytes per token;
//    byte order then equals token order on suffixes that start at a multiple of 4, and the suffix
//    array of tokens is the byte suffix array's aligned entries divided by 4. Memory: 4 + 16 bytes
//    per token (bytes and 32-bit byte suffix array) beside the text; 32-bit indices limit the text
//    to 2^31 bytes (536M tokens).
//  - doubling: prefix doubling on the integer alphabet (Manber-Myers ranks, std::sort per round).
//    Memory: 24 bytes per token; time grows with log2 of the longest repeated passage.
// divsufsort is the default: it is faster at every size measured (see docs/performance.md).
#pragma once

#include <divsufsort.h>

#include <algorithm>
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
#include <specdec/index/token_datastore.hpp>
#include <specdec/index/token_file.hpp>

namespace specdec {

enum class SuffixSort {
  divsufsort,  ///< libdivsufsort on a big-endian byte encoding (default)
  doubling,    ///< prefix doubling on the integer alphabet
};

struct DatastoreBuildOptions {
  /// Every token must be < vocab_size; 0 takes the largest token + 1.
  int vocab_size = 0;
  SuffixSort sort = SuffixSort::divsufsort;
  /// Told what the build is doing, phase by phase (e.g. to print progress).
  std::function<void(std::string_view)> progress = nullptr;
};

namespace detail {

inline std::vector<std::uint32_t> suffix_array_divsufsort(std::span<const std::uint32_t> text) {
  const std::uint64_t bytes = 4 * static_cast<std::uint64_t>(text.size());
  if (bytes >= (std::uint64_t{1} << 31))
    throw error("datastore build: " + std::to_string(text.size()) +
                " words of text exceed divsufsort's 32-bit limit of 536870911 tokens");
  std::vector<sauchar_t> encoded(bytes);
  for (std::size_t i = 0; i < text.size(); ++i) {
    const std::uint32_t t = text[i];
    encoded[4 * i] = static_cast<sauchar_t>(t >> 24);
    encoded[4 * i + 1] = static_cast<sauchar_t>(t >> 16);
    encoded[4 * i + 2] = static_cast<sauchar_t>(t >> 8);
    encoded[4 * i + 3] = static_cast<sauchar_t>(t);
  }
  std::vector<std::uint32_t> sa(bytes);
  // int32 and uint32 may alias: divsufsort writes signed indices into the unsigned array.
  if (divsufsort(encoded.data(), reinterpret_cast<saidx_t*>(sa.data()), static_cast<saidx_t>(bytes)) != 0)
    throw error("datastore build: divsufsort failed on " + std::to_string(bytes) + " bytes");
  std::size_t kept = 0;
  for (const std::uint32_t b : sa)
    if (b % 4 == 0) sa[kept++] = b / 4;  // kept <= the index read: compacting in place is safe
  sa.resize(kept);
  return sa;
}

inline std::vector<std::uint32_t> suffix_array_doubling(std::span<const std::uint32_t> text) {
  const std::size_t n = text.size();
  std::vector<std::uint32_t> sa(n), rank(n);
  std::vector<std::uint64_t> key(n);
  std::iota(sa.begin(), sa.end(), 0u);
  for (std::size_t i = 0; i < n; ++i) key[i] = text[i];
  // Each round sorts by (rank of the first k tokens, rank of the next k), then ranks the result:
  // rank = the sorted position of the group's first member, so ranks stay < n.
  for (std::uint64_t k = 1;; k *= 2) {
    std::sort(sa.begin(), sa.end(), [&](std::uint32_t a, std::uint32_t b) {
      return key[a] != key[b] ? key[a] < key[b] : a < b;
    });
    std::size_t groups = 0;
    for (std::size_t j = 0; j < n; ++j) {
      if (j == 0 || key[sa[j]] != key[sa[j - 1]]) groups = j;
      rank[sa[j]] = static_cast<std::uint32_t>(groups);
    }
    bool distinct = true;
    for (std::size_t j = 1; j < n && distinct; ++j) distinct = key[sa[j]] != key[sa[j - 1]];
    if (distinct) break;
    for (std::size_t i = 0; i < n; ++i)
      key[i] = (std::uint64_t{rank[i]} << 32) | (i + k < n ? std::uint64_t{rank[i + k]} + 1 : 0);
  }
  return sa;
}

}  // namespace detail

/// The suffix array of a datastore text (documents each ended by kDocumentEnd): its token
/// positions (separators left out) sorted by the token sequence starting there.
inline std::vector<std::uint32_t> suffix_array(std::span<const std::uint32_t> text, SuffixSort sort) {
  if (text.size() >= kDocumentEnd)
    throw error("datastore build: " + std::to_string(text.size()) + " words of text exceed 32-bit positions");
  std::vector<std::uint32_t> sa =
      sort == SuffixSort::divsufsort ? detail::suffix_array_divsufsort(text) : detail::suffix_array_doubling(text);
  // Separators start no suffix a query can match.
  std::erase_if(sa, [&](std::uint32_t p) { return text[p] == kDocumentEnd; });
  return sa;
}

/// Writes the datastore of `docs` to `path` (through a temporary file renamed at the end, so a
/// reader of an older file at `path` keeps its mapping intact). Throws specdec::error for no
/// documents, a token >= vocab_size, or a file that cannot be written.
inline void build_datastore(const TokenDocuments& docs, const std::filesystem::path& path,
                            const DatastoreBuildOptions& options = {}) {
  const auto say = [&](std::string_view what) {
    if (options.progress) options.progress(what);
  };
  if (docs.documents == 0) throw error("datastore build: no documents (the datastore would be empty)");
  const std::uint64_t vocab = docs.vocabulary(options.vocab_size, "datastore build");
  say("sorting suffixes of " + std::to_string(docs.tokens()) + " tokens in " + std::to_string(docs.documents) +
      " documents (" + (options.sort == SuffixSort::divsufsort ? "divsufsort" : "prefix doubling") + ")");
  const std::vector<std::uint32_t> sa = suffix_array(docs.text, options.sort);

  say("writing " + path.string());
  DatastoreHeader h;
  std::copy(std::begin(kDatastoreMagic), std::end(kDatastoreMagic), h.magic);
  h.version = kDatastoreVersion;
  h.header_bytes = sizeof(DatastoreHeader);
  h.vocab_size = static_cast<std::uint32_t>(vocab);
  h.text_length = docs.text.size();
  h.documents = docs.documents;
  h.suffixes = sa.size();
  DatastoreChecksum sum;
  sum.add(docs.text.data(), docs.text.size() * 4);
  sum.add(sa.data(), sa.size() * 4);
  h.payload_checksum = sum.value();
  h.header_checksum = header_checksum(h);
  detail::write_then_rename(path, "datastore", [&](std::FILE* f) {
    return std::fwrite(&h, sizeof h, 1, f) == 1 &&
           std::fwrite(docs.text.data(), 4, docs.text.size(), f) == docs.text.size() &&
           std::fwrite(sa.data(), 4, sa.size(), f) == sa.size();
  });
  say("done");
}

}  // namespace specdec
