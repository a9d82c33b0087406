// Llama2cTokenizer: the llama2.c `tokenizer.bin` format (e.g. tok512.bin) with llama2.c's BPE.
//
// File format: int32 max_token_length, then for every token id in order: float score,
// int32 byte length, the piece's bytes (SentencePiece's "▁" already written as a space).
// Host-only.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <unordered_map>
#include <vector>

#include <specdec/config.hpp>
#include <specdec/error.hpp>
#include <specdec/io/file_format.hpp>

namespace specdec {

class Llama2cTokenizer {
 public:
  static constexpr token_t bos = 1;  ///< beginning of sequence
  static constexpr token_t eos = 2;  ///< end of sequence

  /// Reads a tokenizer file. When `expected_vocab_size` > 0 (the model's vocab_size) the file
  /// must hold exactly that many tokens. Throws specdec::error naming the file on a missing,
  /// truncated or malformed file.
  static Llama2cTokenizer load(const std::filesystem::path& path, int expected_vocab_size = 0) {
    const std::string name = "llama2.c tokenizer '" + path.string() + "'";
    if (const std::string problem = file_problem(path); !problem.empty()) throw error(name + ": " + problem);
    std::ifstream in(path, std::ios::binary);
    if (!in) throw error(name + ": cannot open it");
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::size_t at = 0;
    auto read_int = [&](const std::string& what) {
      if (bytes.size() - at < 4) throw error(name + ": truncated: " + what + " is cut off at byte " + std::to_string(at));
      std::int32_t v;
      std::memcpy(&v, bytes.data() + at, 4);
      at += 4;
      return v;
    };
    Llama2cTokenizer t;
    const std::int32_t max_length = read_int("the header");
    if (max_length < 1 || max_length > (1 << 16))
      throw error(name + ": not a llama2.c tokenizer: max_token_length " + std::to_string(max_length) +
                  " is not in [1, 65536]");
    while (at < bytes.size()) {
      const std::string id = "token " + std::to_string(t.pieces_.size());
      float score;
      const std::int32_t s = read_int(id + "'s score");
      std::memcpy(&score, &s, 4);
      const std::int32_t length = read_int(id + "'s length");
      if (length < 0 || length > max_length)
        throw error(name + ": " + id + " has length " + std::to_string(length) + ", outside [0, max_token_length " +
                    std::to_string(max_length) + "]");
      if (bytes.size() - at < static_cast<std::size_t>(length))
        throw error(name + ": truncated: " + id + "'s " + std::to_string(length) + " bytes are cut off");
      t.pieces_.emplace_back(bytes.data() + at, static_cast<std::size_t>(length));
      t.scores_.push_back(score);
      at += static_cast<std::size_t>(length);
    }
    if (t.pieces_.size() < 3)
      throw error(name + ": " + std::to_string(t.pieces_.size()) + " tokens; a vocabulary needs at least <unk>, BOS and EOS");
    if (expected_vocab_size > 0 && t.vocab_size() != expected_vocab_size)
      throw error(name + ": " + std::to_string(t.vocab_size()) + " tokens, but the model has vocab_size " +
                  std::to_string(expected_vocab_size));
    for (std::size_t i = 0; i < t.pieces_.size(); ++i) t.lookup_.emplace(t.pieces_[i], static_cast<token_t>(i));
    return t;
  }

  int vocab_size() const { return static_cast<int>(pieces_.size()); }
  /// The raw piece of `token` as stored in the file (e.g. " the", "<0x0A>").
  const std::string& piece(token_t token) const { return pieces_[checked(token)]; }

  /// llama2.c's encoding: optional BOS; a leading space (SentencePiece's dummy prefix) when the
  /// text is not empty; each UTF-8 character as its token, or its bytes as <0xXX> tokens when the
  /// vocabulary lacks it; then, repeatedly, the adjacent pair whose concatenation is the
  /// highest-scoring token is merged (leftmost on ties) until none is; optional EOS.
  /// O(n log n) in the text's length (a heap of candidate pairs), not llama2.c's rescan per merge.
  std::vector<token_t> encode(std::string_view text, bool add_bos = true, bool add_eos = false) const {
    std::vector<token_t> tokens;
    if (add_bos) tokens.push_back(bos);
    const std::size_t first = tokens.size();
    if (!text.empty()) tokens.push_back(find_piece(" "));
    std::string character;
    for (std::size_t i = 0; i < text.size(); ++i) {
      character += text[i];
      const bool continues = i + 1 < text.size() && (static_cast<unsigned char>(text[i + 1]) & 0xC0) == 0x80;
      if (continues && character.size() < 4) continue;
      if (auto it = lookup_.find(character); it != lookup_.end()) {
        tokens.push_back(it->second);
      } else {
        for (unsigned char byte : character) tokens.push_back(byte_token(byte));
      }
      character.clear();
    }
    merge_pairs(tokens, first);
    if (add_eos) tokens.push_back(eos);
    return tokens;
  }

  /// The text of `token` following `previous`: the leading space after BOS is dropped and a
  /// byte token <0xXX> becomes that byte (as in llama2.c).
  std::string decode(token_t previous, token_t token) const {
    std::string_view p = piece(token);
    if (previous == bos && !p.empty() && p[0] == ' ') p.remove_prefix(1);
    unsigned int byte = 0;
    char tail = 0;
    if (p.size() == 6 && std::sscanf(std::string(p).c_str(), "<0x%02X>%c", &byte, &tail) == 1)
      return std::string(1, static_cast<char>(byte));
    return std::string(p);
  }

  /// The text of `tokens` (BOS and EOS produce nothing); `previous` is the token before them.
  std::string decode(std::span<const token_t> tokens, token_t previous = -1) const {
    std::string text;
    for (token_t t : tokens) {
      if (t != bos && t != eos) text += decode(previous, t);
      previous = t;
    }
    return text;
  }

 private:
  std::size_t checked(token_t token) const {
    if (token < 0 || token >= vocab_size())
      throw error("Llama2cTokenizer: token " + std::to_string(token) + " outside the vocabulary [0, " +
                  std::to_string(vocab_size()) + ")");
    return static_cast<std::size_t>(token);
  }
  // The merges of encode() from tokens[first..]: the best pair (highest score, then leftmost) is
  // taken from a heap; pairs whose sides have changed since they were pushed are skipped, and
  // positions keep their order, so "leftmost" is the smallest left position.
  void merge_pairs(std::vector<token_t>& tokens, std::size_t first) const {
    const std::size_t n = tokens.size();
    if (n < first + 2) return;
    struct Pair {
      float score;
      std::size_t left, right;
      token_t left_token, right_token, merged;
      bool operator<(const Pair& o) const { return score != o.score ? score < o.score : left > o.left; }
    };
    std::vector<std::size_t> next(n), prev(n);
    for (std::size_t i = first; i < n; ++i) {
      next[i] = i + 1;  // n: none
      prev[i] = i == first ? n : i - 1;
    }
    std::vector<Pair> heap;
    std::string joined;
    auto push = [&](std::size_t left, std::size_t right) {
      if (left >= n || right >= n) return;
      joined = pieces_[static_cast<std::size_t>(tokens[left])];
      joined += pieces_[static_cast<std::size_t>(tokens[right])];
      const auto it = lookup_.find(joined);
      // llama2.c starts its search at -1e10: pairs scoring no more (or NaN) are never merged.
      if (it == lookup_.end() || !(scores_[static_cast<std::size_t>(it->second)] > -1e10f)) return;
      heap.push_back(Pair{scores_[static_cast<std::size_t>(it->second)], left, right, tokens[left], tokens[right], it->second});
      std::push_heap(heap.begin(), heap.end());
    };
    for (std::size_t i = first; i + 1 < n; ++i) push(i, i + 1);
    std::vector<bool> gone(n, false);
    while (!heap.empty()) {
      std::pop_heap(heap.begin(), heap.end());
      const Pair p = heap.back();
      heap.pop_back();
      if (gone[p.left] || gone[p.right] || next[p.left] != p.right || tokens[p.left] != p.left_token ||
          tokens[p.right] != p.right_token)
        continue;  // stale: a side was merged away or changed
      tokens[p.left] = p.merged;
      gone[p.right] = true;
      next[p.left] = next[p.right];
      if (next[p.right] < n) prev[next[p.right]] = p.left;
      push(prev[p.left], p.left);
      push(p.left, next[p.left]);
    }
    std::size_t out = first;
    for (std::size_t i = first; i < n; ++i)
      if (!gone[i]) tokens[out++] = tokens[i];
    tokens.resize(out);
  }

  token_t find_piece(const std::string& piece) const {
    auto it = lookup_.find(piece);
    if (it == lookup_.end()) throw error("Llama2cTokenizer: the vocabulary has no token for '" + piece + "'");
    return it->second;
  }
  token_t byte_token(unsigned char byte) const {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", byte);
    return find_piece(name);
  }

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::unordered_map<std::string, token_t> lookup_;  // piece -> its first id
};

}  // namespace specdec
