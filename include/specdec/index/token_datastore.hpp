// TokenDatastore: a static text of token documents and its suffix array, in one file that is
// memory-mapped read-only and shared by every decoder that drafts from it (REST's datastore).
//
// File format, version 1 (all integers little-endian):
//   offset  0  char[8]  magic "SDTOKDS\0"
//           8  u32      version (1)
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
// Opening checks the header (magic, version, sizes against the file's size, header checksum, not
// empty); the payload checksum is checked on request (DatastoreVerify::full), since it reads the
// whole file (measured in docs/performance.md). A reader never writes: the mapping is PROT_READ.
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
#include <specdec/index/mapped_file.hpp>
#include <specdec/index/token_file.hpp>

namespace specdec {

inline constexpr char kDatastoreMagic[8] = {'S', 'D', 'T', 'O', 'K', 'D', 'S', '\0'};
inline constexpr std::uint32_t kDatastoreVersion = 1;

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

/// The datastore checksum: 64-bit FNV-1a over 8-byte little-endian words (a last partial word
/// zero-padded), then the byte count. Word-wise, so hashing a 100M-token file costs one multiply
/// per 8 bytes.
class DatastoreChecksum {
 public:
  void add(const void* data, std::size_t bytes) {
    const auto* p = static_cast<const unsigned char*>(data);
    bytes_ += bytes;
    if (pending_ > 0) {  // finish a word started by the previous call
      const std::size_t take = std::min(bytes, 8 - pending_);
      std::memcpy(buffer_ + pending_, p, take);
      pending_ += take, p += take, bytes -= take;
      if (pending_ < 8) return;
      mix(buffer_);
      pending_ = 0;
    }
    for (; bytes >= 8; p += 8, bytes -= 8) mix(p);
    std::memcpy(buffer_, p, bytes);
    pending_ = bytes;
  }
  std::uint64_t value() const {
    DatastoreChecksum copy = *this;
    if (copy.pending_ > 0) {
      std::memset(copy.buffer_ + copy.pending_, 0, 8 - copy.pending_);
      copy.mix(copy.buffer_);
    }
    copy.hash_ = (copy.hash_ ^ bytes_) * kPrime;
    return copy.hash_;
  }

 private:
  static constexpr std::uint64_t kPrime = 0x100000001b3ull;
  void mix(const unsigned char* p) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    hash_ = (hash_ ^ w) * kPrime;
  }
  std::uint64_t hash_ = 0xcbf29ce484222325ull;
  std::uint64_t bytes_ = 0;
  unsigned char buffer_[8] = {};
  std::size_t pending_ = 0;
};

inline std::uint64_t datastore_checksum(const void* data, std::size_t bytes) {
  DatastoreChecksum sum;
  sum.add(data, bytes);
  return sum.value();
}

/// The checksum a header carries for its first 56 bytes.
inline std::uint64_t header_checksum(const DatastoreHeader& h) {
  return datastore_checksum(&h, offsetof(DatastoreHeader, header_checksum));
}

namespace detail {
/// The checks every specdec file header shares: magic, version, header size and checksum
/// (header_checksum(h), found by argument-dependent lookup). `kind` names the format in the error.
template <class Header>
void check_file_header(const Header& h, const char (&magic)[8], std::uint32_t version, const char* kind,
                       const std::string& who) {
  if (std::memcmp(h.magic, magic, sizeof magic) != 0) throw error(who + " is not a specdec " + kind + " (bad magic)");
  if (h.version != version)
    throw error(who + " has format version " + std::to_string(h.version) + ", this build reads version " +
                std::to_string(version));
  if (h.header_bytes != sizeof(Header))
    throw error(who + " has a header of " + std::to_string(h.header_bytes) + " bytes, expected " +
                std::to_string(sizeof(Header)));
  if (h.header_checksum != header_checksum(h)) throw error(who + " has a damaged header (header checksum mismatch)");
}
}  // namespace detail

/// How much of a datastore file open checks.
enum class DatastoreVerify {
  header,  ///< magic, version, sizes, header checksum: O(1)
  full,    ///< also the payload checksum: reads the whole file
};

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
  explicit TokenDatastore(const std::filesystem::path& path, DatastoreVerify verify = DatastoreVerify::header)
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
  /// `query`. A position past the text (a damaged file not fully verified) reads as empty.
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
    if (h.vocab_size == 0) throw error(who + " has vocab_size 0");
    if (h.suffixes != h.text_length - h.documents)
      throw error(who + " has " + std::to_string(h.suffixes) + " suffixes for " +
                  std::to_string(h.text_length - h.documents) + " tokens");
    const std::uint64_t expected = sizeof(DatastoreHeader) + 4 * (h.text_length + h.suffixes);
    if (file_bytes() != expected)
      throw error(who + (file_bytes() < expected ? " is truncated: " : " has trailing bytes: ") + std::to_string(file_bytes()) +
                  " bytes, its header says " + std::to_string(expected));
    if (text().back() != kDocumentEnd) throw error(who + " has a text that does not end with a document separator");
    if (verify == DatastoreVerify::full && payload_checksum() != h.payload_checksum)
      throw error(who + " is damaged (payload checksum mismatch)");
  }

  std::filesystem::path path_;
  MappedFile file_;
};

}  // namespace specdec
