// What specdec's binary file formats share (token datastore, dense datastore, n-gram model, EAGLE
// head, llama2.c checkpoint): the checksum, the header checks, size arithmetic that cannot wrap,
// and the payload checks (ids below a bound, floats finite) that keep a crafted file, whose
// checksums an attacker recomputes, from passing the checks and reading out of bounds.
//
// The rule every reader follows: each count is checked against the others and the layout's sum
// against the file's real length before anything past the header is read; a sum or product
// that would pass 2^64 refuses the file (FileLayout) instead of wrapping to a small size.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <new>
#include <span>
#include <stdexcept>
#include <string>
#include <system_error>
#include <vector>

#include <specdec/error.hpp>

namespace specdec {

/// The datastore checksum (format version 2 of the token and dense datastores and of the n-gram
/// model): over 8-byte little-endian words (a last partial word zero-padded), word i folded into
/// lane i mod 4 as lane = mix(lane ^ word), then the lanes and the byte count folded together the
/// same way. mix is a bijection whose every output bit depends on every input bit (xor-shift-
/// multiply, the SplitMix64 finaliser). Version 1 used FNV-1a's h = (h ^ word) * odd, where bit 63
/// of a word reaches bit 63 alone: flipping the sign bits of two odd-indexed floats left the sum
/// unchanged. Four lanes, so that four words are mixed at once (one chain took four times as long
/// as FNV-1a; the lanes take about 1.3 times).
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
    std::uint64_t h = bytes_;
    for (const std::uint64_t lane : copy.lanes_) h = avalanche(h ^ lane);
    return h;
  }

 private:
  static constexpr std::uint64_t avalanche(std::uint64_t x) {
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
  }
  void mix(const unsigned char* p) {
    std::uint64_t w;
    std::memcpy(&w, p, 8);
    std::uint64_t& lane = lanes_[words_++ & 3];
    lane = avalanche(lane ^ w);
  }
  std::uint64_t lanes_[4] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull, 0x9e3779b97f4a7c15ull, 0x7f4a7c159e3779b9ull};
  std::uint64_t words_ = 0;
  std::uint64_t bytes_ = 0;
  unsigned char buffer_[8] = {};
  std::size_t pending_ = 0;
};

inline std::uint64_t datastore_checksum(const void* data, std::size_t bytes) {
  DatastoreChecksum sum;
  sum.add(data, bytes);
  return sum.value();
}

/// How much of a memory-mapped file (token and dense datastores, n-gram model) opening checks.
/// The default, `values`, refuses a crafted file whose checksums were recomputed; `header` is the
/// opt-out for a huge file opened often; `full` adds what only catches accidental damage. Costs
/// (docs/design.md#errors): `values` and `full` read the whole file once, `header` reads the
/// header and the offset tables.
enum class DatastoreVerify {
  header,  ///< magic, version, sizes, header checksum, offset tables: every access memory-safe,
           ///< but a stored value may be out of range (a query then reads it as absent)
  values,  ///< also every stored value, in one sequential pass: ids below the vocabulary,
           ///< positions inside the text, floats finite, probabilities in range (the default)
  full,    ///< also the payload checksum and what needs random access (every suffix-array entry
           ///< the position of a token, not of a separator)
};

/// Byte offsets of a file's arrays laid end to end after its header: take() returns where the
/// next array starts. A product or sum past 2^64 saturates and marks the layout overflowed, which
/// check_size refuses: a crafted header cannot wrap its size into the file's real length.
class FileLayout {
 public:
  explicit FileLayout(std::uint64_t header_bytes) : end_(header_bytes) {}

  /// Reserves `count` elements of `element_bytes` each; returns the offset of the first.
  std::uint64_t take(std::uint64_t count, std::uint64_t element_bytes) {
    const std::uint64_t here = end_;
    std::uint64_t bytes = 0;
    if (__builtin_mul_overflow(count, element_bytes, &bytes) || __builtin_add_overflow(end_, bytes, &end_)) {
      overflowed_ = true;
      end_ = std::numeric_limits<std::uint64_t>::max();
    }
    return here;
  }
  std::uint64_t end() const { return end_; }
  bool overflowed() const { return overflowed_; }

  /// Throws specdec::error starting with `who` unless a file of `file_bytes` holds exactly this
  /// layout.
  void check_size(const std::string& who, std::uint64_t file_bytes) const {
    if (overflowed_) throw error(who + " is damaged: its header's sizes add up to more than 2^64 bytes");
    if (file_bytes != end_)
      throw error(who + (file_bytes < end_ ? " is truncated: " : " has trailing bytes: ") + std::to_string(file_bytes) +
                  " bytes, its header says " + std::to_string(end_));
  }

 private:
  std::uint64_t end_;
  bool overflowed_ = false;
};

/// Why `path` may be missing, for a message: a ~ that no shell expanded (quoted, or after
/// --option=), or a file's name followed by / as if it were a directory ("" when neither).
inline std::string missing_path_note(const std::filesystem::path& path) {
  const std::string text = path.string();
  if (text == "~" || text.starts_with("~/"))
    return "~ is not expanded here, only by the shell in an unquoted word that starts with it: write $HOME";
  std::error_code ec;
  for (std::filesystem::path part = path.parent_path(); !part.empty() && part != part.root_path();
       part = part.parent_path())
    if (std::filesystem::is_regular_file(part, ec)) return part.string() + " is a file, not a directory";
  return "";
}

/// Why `path` cannot be opened as a file, for a message ("" when it is a regular file): "no such
/// file" (missing_path_note tells why where it can), "is a directory, not a file" or "is not a
/// regular file" (a device, FIFO or socket).
inline std::string file_problem(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::file_status st = std::filesystem::status(path, ec);
  if (!std::filesystem::exists(st)) {
    const std::string note = missing_path_note(path);
    return note.empty() ? "no such file" : "no such file (" + note + ")";
  }
  if (std::filesystem::is_directory(st)) return "is a directory, not a file";
  if (!std::filesystem::is_regular_file(st)) return "is not a regular file";
  return "";
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
                std::to_string(version) + ": rebuild it with this build's tools");
  if (h.header_bytes != sizeof(Header))
    throw error(who + " has a header of " + std::to_string(h.header_bytes) + " bytes, expected " +
                std::to_string(sizeof(Header)));
  if (h.header_checksum != header_checksum(h)) throw error(who + " has a damaged header (header checksum mismatch)");
}

/// Throws specdec::error starting with `who` unless every value of `values` (an array `what`)
/// is below `limit`.
template <class T>
void check_below(std::span<const T> values, std::uint64_t limit, const std::string& who, const char* what) {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (static_cast<std::uint64_t>(values[i]) >= limit)
      throw error(who + " is damaged: its " + what + " [" + std::to_string(i) + "] is " + std::to_string(values[i]) +
                  ", not below " + std::to_string(limit));
}

/// Throws specdec::error starting with `who` unless every value of `values` (an array `what`) is
/// finite: NaN and +-inf alike (an infinite weight or probability decodes garbage).
template <class T>
void check_finite(std::span<const T> values, const std::string& who, const char* what) {
  for (std::size_t i = 0; i < values.size(); ++i)
    if (!std::isfinite(values[i]))
      throw error(who + " is damaged: its " + what + " [" + std::to_string(i) + "] is " + std::to_string(values[i]) +
                  " (not finite)");
}

/// v.resize(n), with a failed allocation reported as a specdec::error starting with `who`
/// (a one-line input error, not std::bad_alloc).
template <class T>
void resize_or_refuse(std::vector<T>& v, std::uint64_t n, const std::string& who) {
  try {
    if (n > v.max_size()) throw std::length_error("too large");
    v.resize(static_cast<std::size_t>(n));
  } catch (const std::bad_alloc&) {
    throw error(who + ": cannot allocate " + std::to_string(n * sizeof(T)) + " bytes");
  } catch (const std::length_error&) {
    throw error(who + ": cannot allocate " + std::to_string(n) + " elements of " + std::to_string(sizeof(T)) + " bytes");
  }
}

}  // namespace detail
}  // namespace specdec
