// Token files: documents of token ids, the input of a TokenDatastore build (and the format of
// specbench's corpus token files).
//
// Format (version-free, no header, so any tool can write one, e.g. numpy's tofile):
//   a sequence of 32-bit little-endian unsigned integers; each document is its token ids followed
//   by the separator 0xFFFFFFFF (kDocumentEnd). The separator after the last document may be left
//   out; empty documents (two separators in a row) are skipped. The file size must be a multiple
//   of 4 bytes. Token ids are < 2^32 - 1; their vocabulary is not recorded here (the datastore
//   build is told it, or takes the largest id + 1).
#pragma once

#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <system_error>
#include <vector>

#include <specdec/error.hpp>
#include <specdec/io/file_format.hpp>

namespace specdec {

/// Ends a document in a token file and in a datastore's text.
inline constexpr std::uint32_t kDocumentEnd = 0xFFFFFFFFu;

/// Documents of tokens, laid out as in a token file: each document's tokens then kDocumentEnd,
/// every document non-empty and ended (the layout TokenDatastore stores).
struct TokenDocuments {
  std::vector<std::uint32_t> text;
  std::uint64_t documents = 0;

  /// Appends a document (skipped when empty).
  void add(std::span<const std::uint32_t> tokens) {
    if (tokens.empty()) return;
    text.insert(text.end(), tokens.begin(), tokens.end());
    text.push_back(kDocumentEnd);
    ++documents;
  }
  /// Tokens without the separators.
  std::uint64_t tokens() const { return text.size() - documents; }

  /// The vocabulary size a builder stores: `requested` when > 0 (every token must lie below it),
  /// else the largest token + 1. Throws specdec::error, prefixed with `who`, for a negative
  /// request, a token outside the requested vocabulary, or more than 2^31 - 1 tokens.
  std::uint64_t vocabulary(int requested, const std::string& who) const {
    if (requested < 0) throw error(who + ": vocab_size must be >= 0, got " + std::to_string(requested));
    std::uint64_t vocab = static_cast<std::uint64_t>(requested);
    std::uint32_t largest = 0;
    for (std::size_t i = 0; i < text.size(); ++i) {
      const std::uint32_t t = text[i];
      if (t == kDocumentEnd) continue;
      largest = std::max(largest, t);
      if (vocab > 0 && t >= vocab)
        throw error(who + ": token " + std::to_string(t) + " at position " + std::to_string(i) +
                    " is outside the vocabulary of " + std::to_string(vocab));
    }
    if (vocab == 0) vocab = std::uint64_t{largest} + 1;
    if (vocab > 0x7FFFFFFF) throw error(who + ": vocabulary of " + std::to_string(vocab) + " tokens exceeds 2^31 - 1");
    return vocab;
  }
};

namespace detail {
struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

inline File open_file(const std::filesystem::path& path, const char* mode, const char* what) {
  File f(std::fopen(path.c_str(), mode));
  if (!f) throw error(std::string(what) + " " + path.string() + " cannot be opened");
  return f;
}

/// Writes the `what` file `path` with `write(std::FILE*)` (true when every write succeeded) to
/// `path`.tmp, then renames that over `path`, so that no reader ever opens a half-written file.
template <class Write>
void write_then_rename(const std::filesystem::path& path, const char* what, Write write) {
  std::filesystem::path tmp = path;
  tmp += ".tmp";
  {
    File f = open_file(tmp, "wb", what);
    if (!write(f.get()) || std::fflush(f.get()) != 0)
      throw error(std::string(what) + " " + tmp.string() + " could not be written");
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) throw error(std::string(what) + " " + path.string() + " could not be written (" + ec.message() + ")");
}
}  // namespace detail

/// Appends the documents of the token file `path` to `into` (see the top of this file for the
/// format). Throws specdec::error when the file cannot be read or its size is not a multiple of 4.
inline void read_token_file(const std::filesystem::path& path, TokenDocuments& into) {
  static_assert(std::endian::native == std::endian::little, "token files are read as little-endian words");
  if (const std::string problem = file_problem(path); !problem.empty())
    throw error("token file " + path.string() + ": " + problem);
  std::error_code ec;
  const auto bytes = std::filesystem::file_size(path, ec);
  if (ec) throw error("token file " + path.string() + " cannot be read (" + ec.message() + ")");
  if (bytes % 4 != 0)
    throw error("token file " + path.string() + " has " + std::to_string(bytes) + " bytes, not a multiple of 4");
  detail::File f = detail::open_file(path, "rb", "token file");
  std::vector<std::uint32_t> words(bytes / 4);
  if (std::fread(words.data(), 4, words.size(), f.get()) != words.size())
    throw error("token file " + path.string() + " could not be read to its end");
  std::size_t begin = 0;
  for (std::size_t i = 0; i <= words.size(); ++i) {
    if (i < words.size() && words[i] != kDocumentEnd) continue;
    into.add(std::span<const std::uint32_t>(words).subspan(begin, i - begin));
    begin = i + 1;
  }
}

/// Writes `docs` as a token file. Throws specdec::error when it cannot be written.
inline void write_token_file(const std::filesystem::path& path, const TokenDocuments& docs) {
  static_assert(std::endian::native == std::endian::little, "token files are written as little-endian words");
  detail::File f = detail::open_file(path, "wb", "token file");
  if (std::fwrite(docs.text.data(), 4, docs.text.size(), f.get()) != docs.text.size() || std::fflush(f.get()) != 0)
    throw error("token file " + path.string() + " could not be written");
}

}  // namespace specdec
