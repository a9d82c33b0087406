// TokenDatastore: a static text of token documents and its suffix array, in one file that is
// memory-mapped read-only and shared by every decoder that drafts from it (REST's datastore).
//
// File format, version 2 (all integers little-endian):
//   offset  0  char[8]  magic "SDTOKDS\0"
//           8  u32      version (2)
//          12  u32      header bytes (64)
//          16  u32      vocab_size: every token id is < vocab_size
//          20  u32      flags (0)
//          24  u64      text_length: words of the text (tokens plus one separator per document)
//          32  u64      documents
//          40  u64      suffixes: entries of the suffix array (= text_length - documents)
//          48  u64      payload checksum (datastore_checksum of the words below)
//          56  u64      header checksum (datastore_checksum of bytes 0..55)
//          64  u32[text_length]  the text: each document's tokens, then kDocumentEnd (0xFFFFFFFF)
//              u32[suffixes]     the suffix array: the text positions that hold a token (not a
//                                separator), sorted by the token sequence starting there
// The file's size must be exactly 64 + 4 * (text_length + suffixes).
//
// Why separators in the text: a query holds tokens only, and kDocumentEnd is larger than any
// token, so no match and no continuation crosses a document boundary, and the suffixes sort as if
// each document were on its own.
//
// Opening checks the header (magic, version, header checksum, not empty, the counts against each
// other and their overflow-safe sum against the file's size: io/file_format.hpp) and, by default
// (DatastoreVerify::values), every stored value in one sequential pass: every token below
// vocab_size, as many separators as documents, every suffix inside the text. DatastoreVerify::full
// adds the payload checksum and every suffix a token's position (random reads of the text);
// DatastoreVerify::header skips the payload (costs in docs/design.md#errors). Queries are
// memory-safe whatever the level. A reader never writes: the mapping is PROT_READ.
#pragma once

#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <utility>

#include <specdec/error.hpp>
#include <specdec/io/file_format.hpp>
#include <specdec/io/mapped_file.hpp>
#include <specdec/index/token_file.hpp>

namespace specdec {

inline constexpr char kDatastoreMagic[8] = {'S', 'D', 'T', 'O', 'K', 'D', 'S', '\0'};
inline constexpr std::uint32_t kDatastoreVersion = 2;

/// The 64-byte header of a datastore file (see the top of this file).
struct DatastoreHeader {
  char magic[8] = {};
  std::uint32_t version = 0;
  std::uint32_t header_bytes = 0;
  std::uint32_t vocab_size = 0;
  std::uint32_t flags = 0;
  std::uint64_t text_length = 0;
  std::uint64_t documents = 0;
  std::uint64_t suffixes = 0;
  std::uint64_t payload_checksum = 0;
  std::uint64_t header_checksum = 0;
};
static_assert(sizeof(DatastoreHeader) == 64 && std::endian::native == std::endian::little,
              "the datastore header is read in place as 64 little-endian bytes");

/// The checksum a header carries for its first 56 bytes.
inline std::uint64_t header_checksum(const DatastoreHeader& h) {
  return datastore_checksum(&h, offsetof(DatastoreHeader, header_checksum));
}

/// Positions [begin, end) of a TokenDatastore's suffix array.
struct SuffixRange {
  std::uint64_t begin = 0;
  std::uint64_t end = 0;
  std::uint64_t size() const { return end - begin; }
  bool empty() const { return begin == end; }
};

/// A datastore file, mapped read-only (see the top of this file). Immutable once open, so one
/// instance (e.g. a std::shared_ptr<const TokenDatastore>) serves any number of decoders and
/// threads.
class TokenDatastore {
 public:
  /// Maps `path` and checks it (`verify`). Throws specdec::error naming the file and what is wrong:
  /// missing, truncated, not a datastore, another version, bad checksum, empty.
  explicit TokenDatastore(const std::filesystem::path& path, DatastoreVerify verify = DatastoreVerify::values)
      : path_(path), file_(path, "datastore " + path.string(), sizeof(DatastoreHeader)) {
    check("datastore " + path.string(), verify);
  }

  const std::filesystem::path& path() const { return path_; }
  const DatastoreHeader& header() const { return *static_cast<const DatastoreHeader*>(file_.data()); }
  int vocab_size() const { return static_cast<int>(header().vocab_size); }
  std::uint64_t documents() const { return header().documents; }
  /// Tokens stored (separators not counted).
  std::uint64_t tokens() const { return header().suffixes; }
  std::size_t file_bytes() const { return file_.size(); }

  /// The text: documents, each ended by kDocumentEnd.
  std::span<const std::uint32_t> text() const {
    return {reinterpret_cast<const std::uint32_t*>(static_cast<const char*>(file_.data()) + sizeof(DatastoreHeader)),
            static_cast<std::size_t>(header().text_length)};
  }
  /// The suffix array: text positions sorted by the token sequence that starts there.
  std::span<const std::uint32_t> suffixes() const {
    return {text().data() + header().text_length, static_cast<std::size_t>(header().suffixes)};
  }

  /// The checksum of the payload as it is now (reads the whole file).
  std::uint64_t payload_checksum() const {
    return datastore_checksum(text().data(), (header().text_length + header().suffixes) * 4);
  }

  /// The suffix-array positions whose suffixes start with `query` (in suffix order, which sorts
  /// them by what follows the query). O(|query| log N).
  SuffixRange find(std::span<const std::uint32_t> query) const {
    const auto sa = suffixes();
    std::uint64_t lo = 0, hi = sa.size();
    while (lo < hi) {  // first suffix >= query
      const std::uint64_t mid = lo + (hi - lo) / 2;
      if (compare(sa[mid], query) < 0) lo = mid + 1;
      else hi = mid;
    }
    if (lo == sa.size() || compare(sa[lo], query) != 0) return {lo, lo};
    std::uint64_t end = sa.size();
    for (std::uint64_t first = lo + 1; first < end;) {  // first suffix > query
      const std::uint64_t mid = first + (end - first) / 2;
      if (compare(sa[mid], query) == 0) first = mid + 1;
      else end = mid;
    }
    return {lo, end};
  }

  /// <0, 0 or >0 as the suffix at text position `pos` sorts before, starts with, or sorts after
  /// `query`. A position past the text (a damaged file opened with
  /// DatastoreVerify::header) reads as empty.
  int compare(std::uint64_t pos, std::span<const std::uint32_t> query) const {
    const auto t = text();
    const std::uint64_t left = pos < t.size() ? t.size() - pos : 0;
    for (std::size_t i = 0; i < query.size(); ++i) {
      if (i == left) return -1;
      const std::uint32_t a = t[pos + i];
      if (a != query[i]) return a < query[i] ? -1 : 1;
    }
    return 0;
  }

 private:
  void check(const std::string& who, DatastoreVerify verify) const {
    const DatastoreHeader& h = header();
    detail::check_file_header(h, kDatastoreMagic, kDatastoreVersion, "token datastore", who);
    if (h.text_length == 0 || h.documents == 0) throw error(who + " is empty (no documents)");
    if (h.text_length >= kDocumentEnd)
      throw error(who + " has " + std::to_string(h.text_length) + " words of text, more than 32-bit positions address");
    if (h.documents > h.text_length)
      throw error(who + " has " + std::to_string(h.documents) + " documents in " + std::to_string(h.text_length) +
                  " words of text (each document ends with a separator)");
    if (h.vocab_size == 0 || h.vocab_size > 0x7FFFFFFF)
      throw error(who + " has vocab_size " + std::to_string(h.vocab_size) + " (expected 1 to 2^31 - 1)");
    if (h.suffixes != h.text_length - h.documents)
      throw error(who + " has " + std::to_string(h.suffixes) + " suffixes for " +
                  std::to_string(h.text_length - h.documents) + " tokens");
    FileLayout layout(sizeof(DatastoreHeader));
    layout.take(h.text_length, 4);
    layout.take(h.suffixes, 4);
    layout.check_size(who, file_bytes());
    if (text().back() != kDocumentEnd) throw error(who + " has a text that does not end with a document separator");
    if (verify == DatastoreVerify::header) return;
    if (verify == DatastoreVerify::full && payload_checksum() != h.payload_checksum)
      throw error(who + " is damaged (payload checksum mismatch)");
    check_text(text(), h.vocab_size, h.documents, who);
    // Inside the text in one sequential pass; that each holds a token (not a separator) reads the
    // text at random, 10x the cost on a large file, so only the full check asks it.
    check_positions(suffixes(), text(), who, "suffix array entry", verify == DatastoreVerify::full);
  }

 public:
  /// Throws specdec::error starting with `who` unless `text` holds tokens below `vocab` and
  /// exactly `documents` separators (kDocumentEnd). Shared with DenseDatastore.
  static void check_text(std::span<const std::uint32_t> text, std::uint32_t vocab, std::uint64_t documents,
                         const std::string& who) {
    std::uint64_t separators = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == kDocumentEnd) ++separators;
      else if (text[i] >= vocab)
        throw error(who + " is damaged: its text [" + std::to_string(i) + "] is token " + std::to_string(text[i]) +
                    ", not below its vocab_size " + std::to_string(vocab));
    }
    if (separators != documents)
      throw error(who + " is damaged: its text holds " + std::to_string(separators) + " documents, its header says " +
                  std::to_string(documents));
  }
  /// Throws specdec::error starting with `who` unless every position (an array `what`) is a
  /// position of `text` that holds a token, not a separator (only inside the text unless
  /// `at_tokens`). Shared with DenseDatastore.
  static void check_positions(std::span<const std::uint32_t> positions, std::span<const std::uint32_t> text,
                              const std::string& who, const char* what, bool at_tokens = true) {
    for (std::size_t i = 0; i < positions.size(); ++i)
      if (positions[i] >= text.size() || (at_tokens && text[positions[i]] == kDocumentEnd))
        throw error(who + " is damaged: its " + what + " [" + std::to_string(i) + "] is " +
                    std::to_string(positions[i]) + ", not the position of a token in its text of " +
                    std::to_string(text.size()) + " words");
  }

 private:
  std::filesystem::path path_;
  MappedFile file_;
};

}  // namespace specdec
