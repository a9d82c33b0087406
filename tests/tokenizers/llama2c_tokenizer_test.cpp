#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "support/data.hpp"

using namespace specdec;

namespace {

/// A vocabulary as the file holds it: pieces and scores by id.
struct Vocab {
  std::vector<std::string> pieces;
  std::vector<float> scores;

  std::string bytes() const {
    std::string out;
    auto put = [&](const void* p) { out.append(static_cast<const char*>(p), 4); };
    std::int32_t max_length = 1;
    for (const auto& p : pieces) max_length = std::max(max_length, static_cast<std::int32_t>(p.size()));
    put(&max_length);
    for (std::size_t i = 0; i < pieces.size(); ++i) {
      const auto length = static_cast<std::int32_t>(pieces[i].size());
      put(&scores[i]);
      put(&length);
      out += pieces[i];
    }
    return out;
  }
  static Vocab parse(const std::string& bytes) {
    Vocab v;
    std::size_t at = 4;
    while (at < bytes.size()) {
      float score;
      std::int32_t length;
      std::memcpy(&score, bytes.data() + at, 4);
      std::memcpy(&length, bytes.data() + at + 4, 4);
      v.scores.push_back(score);
      v.pieces.push_back(bytes.substr(at + 8, static_cast<std::size_t>(length)));
      at += 8 + static_cast<std::size_t>(length);
    }
    return v;
  }
};

/// llama2.c's merge loop as it was written (a rescan of every pair per merge), on the tokens of
/// the characters: the reference the heap-based encode() must equal.
std::vector<token_t> reference_merges(const Vocab& v, std::vector<token_t> tokens) {
  std::unordered_map<std::string, token_t> lookup;
  for (std::size_t i = 0; i < v.pieces.size(); ++i) lookup.emplace(v.pieces[i], static_cast<token_t>(i));
  for (;;) {
    float best_score = -1e10f;
    token_t best_id = -1;
    std::size_t best_at = 0;
    for (std::size_t i = 0; i + 1 < tokens.size(); ++i) {
      auto it = lookup.find(v.pieces[static_cast<std::size_t>(tokens[i])] + v.pieces[static_cast<std::size_t>(tokens[i + 1])]);
      if (it != lookup.end() && v.scores[static_cast<std::size_t>(it->second)] > best_score) {
        best_score = v.scores[static_cast<std::size_t>(it->second)];
        best_id = it->second;
        best_at = i;
      }
    }
    if (best_id < 0) break;
    tokens[best_at] = best_id;
    tokens.erase(tokens.begin() + static_cast<std::ptrdiff_t>(best_at) + 1);
  }
  return tokens;
}

std::filesystem::path write_temp(const std::string& name, const std::string& bytes) {
  const auto path = std::filesystem::temp_directory_path() / ("llama2c_tokenizer_test_" + name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

/// The tokens encode() merges: the dummy-prefix space, then each (here ASCII) character.
std::vector<token_t> characters(const Vocab& v, const std::string& text) {
  auto id = [&](char c) {
    auto it = std::find(v.pieces.begin(), v.pieces.end(), std::string(1, c));
    if (it == v.pieces.end()) {  // the byte token
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", static_cast<unsigned char>(c));
      it = std::find(v.pieces.begin(), v.pieces.end(), std::string(name));
    }
    REQUIRE(it != v.pieces.end());
    return static_cast<token_t>(it - v.pieces.begin());
  };
  std::vector<token_t> out{id(' ')};
  for (char c : text) out.push_back(id(c));
  return out;
}

}  // namespace

TEST_CASE("Llama2cTokenizer: heap-based merges equal llama2.c's rescanning loop (encode was quadratic)",
          "[tokenizer]") {
  // Issue 20: encode rescanned every pair per merge: 40 KB took 7 s, 160 KB over 100 s.
  // A small vocabulary with many tied scores (ties go to the leftmost pair), and merges that
  // build long pieces from shorter ones.
  std::mt19937 rng(20);
  Vocab v{{"<unk>", "<s>", "</s>", " ", "a", "b", "c"}, {0, 0, 0, 0, 0, 0, 0}};
  for (int k = 0; k < 60; ++k) {
    const std::string piece = v.pieces[3 + rng() % (v.pieces.size() - 3)] + v.pieces[3 + rng() % (v.pieces.size() - 3)];
    if (piece.size() > 8 || std::find(v.pieces.begin(), v.pieces.end(), piece) != v.pieces.end()) continue;
    v.pieces.push_back(piece);
    v.scores.push_back(static_cast<float>(rng() % 4));  // few distinct scores: many ties
  }
  v.pieces.push_back("zz");
  v.scores.push_back(-2e10f);  // at or below llama2.c's -1e10 start: never merged
  v.pieces.push_back("z");
  v.scores.push_back(0);
  const auto tok = Llama2cTokenizer::load(write_temp("ties.bin", v.bytes()));
  for (int round = 0; round < 300; ++round) {
    std::string text;
    for (int k = 0, n = static_cast<int>(rng() % 40); k < n; ++k) text += " abcz"[rng() % 5];
    if (text.empty()) continue;
    INFO("text '" << text << "'");
    REQUIRE(tok.encode(text, false) == reference_merges(v, characters(v, text)));
  }
}

TEST_CASE("Llama2cTokenizer: tok512 encodes as llama2.c does, also 160 KB of text", "[tokenizer]") {
  auto path = testing::data_file("models/tok512.bin");
  if (!path) return;
  std::ifstream in(*path, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const Vocab v = Vocab::parse(bytes);
  const auto tok = Llama2cTokenizer::load(*path, 512);
  std::mt19937 rng(7);
  const std::string words[] = {"Once", " upon", " a", " time", " the", " little", " girl", "\n", ".", " ", "  "};
  for (int round = 0; round < 50; ++round) {
    std::string text;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 60); k < n; ++k) text += words[rng() % std::size(words)];
    INFO("text '" << text << "'");
    REQUIRE(tok.encode(text, false) == reference_merges(v, characters(v, text)));
  }
  std::string large;
  while (large.size() < 160000) large += "Once upon a time, the little girl saw a big dog. ";
  CHECK(tok.decode(tok.encode(large)) == large);  // 0.03 s here; the rescanning loop took over 100 s
}
