// The shared file-format checks (include/specdec/io/file_format.hpp) and crafted files of the
// memory-mapped formats: token datastore, dense datastore, n-gram model. Each crafted file has
// its checksums recomputed, as an attacker would, so only the structural and payload checks
// stand between it and an out-of-bounds read. `open(b)` opens with the constructor's default
// (DatastoreVerify::values): what a user gets, and what must refuse every crafted value.
#include <catch2/catch.hpp>

#include <cmath>
#include <bit>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include <specdec/index/datastore_builder.hpp>
#include <specdec/index/dense_datastore.hpp>
#include <specdec/index/dense_datastore_builder.hpp>
#include <specdec/io/file_format.hpp>
#include <specdec/io/mapped_file.hpp>
#include <specdec/index/ngram_model.hpp>
#include <specdec/index/ngram_model_builder.hpp>
#include <specdec/index/token_datastore.hpp>

#include "support/datastore_files.hpp"
#include "support/temp_dir.hpp"

using namespace specdec;
using testing::poke;

namespace {

constexpr std::uint64_t k2to62 = std::uint64_t{1} << 62;

TokenDocuments small_documents(int vocab = 20) {
  TokenDocuments docs;
  std::mt19937_64 rng(7);
  for (int d = 0; d < 4; ++d) {
    std::vector<std::uint32_t> doc(10 + d);
    for (auto& t : doc) t = static_cast<std::uint32_t>(rng() % static_cast<std::uint64_t>(vocab));
    docs.add(doc);
  }
  return docs;
}

/// The error opening `bytes` (written to `dir`) as a File throws, "" when it opens.
template <class File>
std::string open_bytes(testing::TempDir& dir, const std::string& bytes, std::optional<DatastoreVerify> verify) {
  return testing::open_error<File>(dir.write("crafted.bin", bytes), verify);
}

template <class T>
T peek(const std::string& bytes, std::size_t offset) {
  T v;
  std::memcpy(&v, bytes.data() + offset, sizeof v);
  return v;
}

}  // namespace

// Version 1's FNV-1a step (h ^ w) * odd carried bit 63 of a word to bit 63 alone: flipping the
// sign bits of two odd-indexed floats (the high halves of two words) left the checksum unchanged
// (issue 49, defect d).
TEST_CASE("datastore checksum: two flipped sign bits change it", "[file_format][checksum]") {
  std::vector<float> values(16, 0.5f);
  const std::uint64_t before = datastore_checksum(values.data(), values.size() * sizeof(float));
  for (std::size_t a = 1; a < values.size(); a += 2)
    for (std::size_t b = a + 2; b < values.size(); b += 2) {
      std::vector<float> flipped = values;
      flipped[a] = -flipped[a];
      flipped[b] = -flipped[b];
      CHECK(datastore_checksum(flipped.data(), flipped.size() * sizeof(float)) != before);
    }
}

TEST_CASE("datastore checksum: every input bit changes about half of the output bits", "[file_format][checksum]") {
  std::mt19937_64 rng(5);
  std::vector<std::uint64_t> words(8);
  for (auto& w : words) w = rng();
  const std::uint64_t before = datastore_checksum(words.data(), words.size() * 8);
  double changed = 0;
  for (int bit = 0; bit < 512; ++bit) {
    std::vector<std::uint64_t> flipped = words;
    flipped[static_cast<std::size_t>(bit / 64)] ^= std::uint64_t{1} << (bit % 64);
    const int differ = std::popcount(datastore_checksum(flipped.data(), flipped.size() * 8) ^ before);
    CHECK(differ >= 10);  // no input bit reaches only a few output bits
    changed += differ;
  }
  CHECK(changed / 512 == Approx(32).margin(2));
  // Pieces hash as the whole.
  DatastoreChecksum pieces;
  const auto* bytes = reinterpret_cast<const unsigned char*>(words.data());
  pieces.add(bytes, 3);
  pieces.add(bytes + 3, 20);
  pieces.add(bytes + 23, 41);
  CHECK(pieces.value() == before);
}

TEST_CASE("FileLayout: offsets laid end to end, a sum or product past 2^64 refused", "[file_format]") {
  FileLayout ok(64);
  CHECK(ok.take(10, 4) == 64);
  CHECK(ok.take(3, 8) == 104);
  CHECK(ok.end() == 128);
  CHECK_NOTHROW(ok.check_size("f", 128));
  CHECK_THROWS_WITH(ok.check_size("f", 124), "f is truncated: 124 bytes, its header says 128");
  CHECK_THROWS_WITH(ok.check_size("f", 132), "f has trailing bytes: 132 bytes, its header says 128");

  FileLayout product(64);
  product.take(k2to62, 4);  // 2^64: wraps to 0 without the check
  CHECK(product.overflowed());
  CHECK_THROWS_WITH(product.check_size("f", 64), "f is damaged: its header's sizes add up to more than 2^64 bytes");
  FileLayout sum(10);
  sum.take(std::numeric_limits<std::uint64_t>::max() - 10, 1);
  CHECK_FALSE(sum.overflowed());
  sum.take(11, 1);
  CHECK(sum.overflowed());
  sum.take(1, 1);  // stays overflowed
  CHECK(sum.overflowed());
}

TEST_CASE("payload checks: ids below a bound, finite floats, allocations that fail", "[file_format]") {
  const std::vector<std::uint32_t> ids{0, 3, 9};
  CHECK_NOTHROW(detail::check_below(std::span<const std::uint32_t>(ids), 10, "f", "tokens"));
  CHECK_THROWS_WITH(detail::check_below(std::span<const std::uint32_t>(ids), 9, "f", "tokens"),
                    "f is damaged: its tokens [2] is 9, not below 9");
  for (const float bad : {std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::infinity(),
                          std::numeric_limits<float>::quiet_NaN()}) {
    const std::vector<float> v{1.0f, bad};
    CHECK_THROWS_WITH(detail::check_finite(std::span<const float>(v), "f", "weights"),
                      Catch::StartsWith("f is damaged: its weights [1] is ") && Catch::EndsWith("(not finite)"));
  }
  std::vector<double> big;
  CHECK_THROWS_WITH(detail::resize_or_refuse(big, std::uint64_t{1} << 62, "f"), Catch::StartsWith("f: cannot allocate"));
}

// Paths as people write them (issue 49): what a missing path probably meant is in the message.
TEST_CASE("file_problem: a missing path says why it may be missing", "[file_format]") {
  const testing::TempDir dir;
  const auto file = dir.write("model.bin", "x");
  CHECK(file_problem(file).empty());
  CHECK(file_problem(dir.path) == "is a directory, not a file");
  CHECK(file_problem(dir.path / "none.bin") == "no such file");
  CHECK(file_problem(file.string() + "/") == "no such file (" + file.string() + " is a file, not a directory)");
  CHECK(file_problem(file / "x.bin") == "no such file (" + file.string() + " is a file, not a directory)");
  CHECK(file_problem("~/specdec-none.bin") ==
        "no such file (~ is not expanded here, only by the shell in an unquoted word that starts with it: write $HOME)");
  CHECK_THROWS_WITH(MappedFile("~/specdec-none.bin", "f", 0), Catch::StartsWith("f cannot be opened (") &&
                                                                 Catch::EndsWith("; ~ is not expanded here, only by the "
                                                                                 "shell in an unquoted word that starts "
                                                                                 "with it: write $HOME)"));
}

TEST_CASE("token datastore: crafted files are refused, not read out of bounds", "[datastore][errors][crafted]") {
  testing::TempDir dir;
  build_datastore(small_documents(), dir.path / "good.bin", {.vocab_size = 20});
  const std::string good = testing::file_bytes(dir.path / "good.bin");
  const auto open = [&](const std::string& b, std::optional<DatastoreVerify> v = std::nullopt) {
    return open_bytes<TokenDatastore>(dir, b, v);
  };
  for (const auto v : {DatastoreVerify::header, DatastoreVerify::values, DatastoreVerify::full})
    REQUIRE(open(good, v).empty());
  const auto h = peek<DatastoreHeader>(good, 0);

  SECTION("more documents than the text holds, the suffix count wrapped to fit the file's size") {
    // documents + 2^62 makes suffixes = text_length - documents wrap to S - 2^62, and
    // 4 * (text_length + suffixes) wrap back to the file's real size: the old check passed it.
    std::string b = good;
    poke(b, offsetof(DatastoreHeader, documents), h.documents + k2to62);
    poke(b, offsetof(DatastoreHeader, suffixes), h.suffixes - k2to62);
    testing::seal<DatastoreHeader>(b);
    for (const auto v : {DatastoreVerify::header, DatastoreVerify::values, DatastoreVerify::full})
      CHECK_THAT(open(b, v), Catch::Contains(std::to_string(h.documents + k2to62) + " documents in " +
                                             std::to_string(h.text_length) + " words of text"));
  }
  SECTION("a token outside the vocabulary") {
    std::string b = good;
    poke(b, sizeof(DatastoreHeader), std::uint32_t{20});
    testing::seal<DatastoreHeader>(b);
    CHECK_THAT(open(b), Catch::Contains("its text [0] is token 20, not below its vocab_size 20"));
    CHECK_THAT(open(b, DatastoreVerify::full), Catch::Contains("its text [0] is token 20"));
    CHECK(open(b, DatastoreVerify::header).empty());  // the opt-out is memory-safe: REST stops a continuation there
  }
  SECTION("a suffix outside the text, or at a separator") {
    std::string b = good;
    const std::size_t sa = sizeof(DatastoreHeader) + 4 * h.text_length;
    poke(b, sa, static_cast<std::uint32_t>(h.text_length));
    testing::seal<DatastoreHeader>(b);
    for (const auto v : {DatastoreVerify::values, DatastoreVerify::full})
      CHECK_THAT(open(b, v), Catch::Contains("suffix array entry [0] is " + std::to_string(h.text_length) +
                                             ", not the position of a token"));
    CHECK_THAT(open(b), Catch::Contains("suffix array entry [0]"));
    b = good;
    poke(b, sa + 4, static_cast<std::uint32_t>(h.text_length - 1));  // the last separator
    testing::seal<DatastoreHeader>(b);
    CHECK_THAT(open(b, DatastoreVerify::full), Catch::Contains("suffix array entry [1] is"));
    // Inside the text: the default's sequential pass lets it through (memory-safe: a query
    // compares the separator as larger than any token); finding it needs the full check's
    // random reads of the text.
    CHECK(open(b).empty());
  }
  SECTION("separators that disagree with the document count") {
    std::string b = good;
    poke(b, sizeof(DatastoreHeader) + 4, kDocumentEnd);
    testing::seal<DatastoreHeader>(b);
    CHECK_THAT(open(b), Catch::Contains("its text holds " + std::to_string(h.documents + 1) + " documents"));
  }
  SECTION("a vocabulary beyond 32-bit token ids (a negative vocab_size() once)") {
    std::string b = good;
    poke(b, offsetof(DatastoreHeader, vocab_size), std::uint32_t{0x80000000});
    testing::reseal<DatastoreHeader>(b);
    CHECK_THAT(open(b, DatastoreVerify::header), Catch::Contains("has vocab_size 2147483648 (expected 1 to 2^31 - 1)"));
  }
}

TEST_CASE("dense datastore: crafted files are refused, not read out of bounds", "[dense][errors][crafted]") {
  testing::TempDir dir;
  const TokenDocuments docs = small_documents();
  const int dim = 4;
  std::vector<float> features;
  std::mt19937_64 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (std::uint64_t i = 0; i < docs.tokens() * dim; ++i) features.push_back(normal(rng));
  build_dense_datastore(docs, features, dim, dir.path / "good.bin", {.key_dim = 2, .seed = 1});
  const std::string good = testing::file_bytes(dir.path / "good.bin");
  const auto open = [&](const std::string& b, std::optional<DatastoreVerify> v = std::nullopt) {
    return open_bytes<DenseDatastore>(dir, b, v);
  };
  for (const auto v : {DatastoreVerify::header, DatastoreVerify::values, DatastoreVerify::full})
    REQUIRE(open(good, v).empty());
  const auto h = peek<DenseDatastoreHeader>(good, 0);
  const std::size_t floats = sizeof(DenseDatastoreHeader);
  const std::size_t text = floats + 4 * (2 * dim + 2 * dim + h.keys * 2);

  SECTION("more documents than the text holds, the key count wrapped to fit the file's size") {
    std::string b = good;
    poke(b, offsetof(DenseDatastoreHeader, documents), h.documents + k2to62);
    poke(b, offsetof(DenseDatastoreHeader, keys), h.keys - k2to62);
    testing::seal<DenseDatastoreHeader>(b);
    for (const auto v : {DatastoreVerify::header, DatastoreVerify::values, DatastoreVerify::full})
      CHECK_THAT(open(b, v), Catch::Contains("documents in " + std::to_string(h.text_length) + " words of text"));
  }
  SECTION("a feature too wide for any model") {
    std::string b = good;
    poke(b, offsetof(DenseDatastoreHeader, feature_dim), std::uint32_t{1} << 31);
    testing::reseal<DenseDatastoreHeader>(b);
    CHECK_THAT(open(b, DatastoreVerify::header), Catch::Contains("need 1 <= key_dim <= feature_dim <= 1048576"));
  }
  SECTION("non-finite statistics, components or keys") {
    for (const std::size_t at : {floats, floats + 4 * dim, floats + 4 * (2 * dim), text - 4}) {
      for (const float bad : {std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
        std::string b = good;
        poke(b, at, bad);
        testing::seal<DenseDatastoreHeader>(b);
        CHECK_THAT(open(b), Catch::Contains("(not finite)"));
      }
    }
  }
  SECTION("a token outside the vocabulary, a key position outside the text") {
    std::string b = good;
    poke(b, text, std::uint32_t{h.vocab_size});
    testing::seal<DenseDatastoreHeader>(b);
    CHECK_THAT(open(b), Catch::Contains("its text [0] is token " + std::to_string(h.vocab_size)));
    // Opened with the opt-out, the continuation stops at the bad token instead of drafting it.
    const DenseDatastore ds(dir.path / "crafted.bin", DatastoreVerify::header);
    for (std::uint64_t i = 0; i < ds.keys(); ++i)
      for (const std::uint32_t t : ds.continuation(i, 100)) CHECK(t < h.vocab_size);
    b = good;
    poke(b, b.size() - 4, std::uint32_t{0xFFFFFFF0});
    testing::seal<DenseDatastoreHeader>(b);
    CHECK_THAT(open(b), Catch::Contains("key position [" + std::to_string(h.keys - 1) + "] is 4294967280"));
  }
}

TEST_CASE("ngram model: crafted files are refused", "[ngram][errors][crafted]") {
  testing::TempDir dir;
  build_ngram_model(small_documents(), dir.path / "good.ngram", {.vocab_size = 20, .cutoff = 3});
  const std::string good = testing::file_bytes(dir.path / "good.ngram");
  const auto open = [&](const std::string& b, std::optional<DatastoreVerify> v = std::nullopt) {
    return open_bytes<NgramModel>(dir, b, v);
  };
  for (const auto v : {DatastoreVerify::header, DatastoreVerify::values, DatastoreVerify::full})
    REQUIRE(open(good, v).empty());
  const auto h = peek<NgramHeader>(good, 0);
  const NgramLayout layout(h);

  SECTION("+-inf or NaN probabilities (an +inf unigram made the perplexity 0)") {
    for (const double bad : {std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(),
                             std::numeric_limits<double>::quiet_NaN()}) {
      for (const std::uint64_t at : {layout.unigram_prob, layout.bigram_prob, layout.trigram_prob, layout.bigram_alpha,
                                     layout.trigram_alpha, layout.discounts}) {
        std::string b = good;
        poke(b, at, bad);
        testing::seal<NgramHeader>(b);
        CHECK_THAT(open(b), Catch::Contains("(not finite)"));
      }
    }
  }
  SECTION("probabilities outside [0, 1], negative alphas") {
    std::string b = good;
    poke(b, layout.unigram_prob, 1.5);
    testing::seal<NgramHeader>(b);
    CHECK_THAT(open(b), Catch::Contains("its unigram probabilities [0] is 1.500000, outside [0.000000, 1.000000]"));
    b = good;
    poke(b, layout.bigram_alpha, -0.5);
    testing::seal<NgramHeader>(b);
    CHECK_THAT(open(b), Catch::Contains("its bigram alphas [0] is -0.500000"));
  }
  SECTION("tokens outside the vocabulary") {
    std::string b = good;
    poke(b, layout.bigram_token, std::uint32_t{20});
    testing::seal<NgramHeader>(b);
    CHECK_THAT(open(b), Catch::Contains("its bigram tokens [0] is 20, not below 20"));
  }
  SECTION("counts that contradict each other, or overflow") {
    std::string b = good;
    poke(b, offsetof(NgramHeader, trigrams), h.tokens + 1);
    testing::reseal<NgramHeader>(b);
    CHECK_THAT(open(b, DatastoreVerify::header), Catch::Contains("has counts that contradict each other"));
    b = good;
    poke(b, offsetof(NgramHeader, documents), h.tokens + 1);
    testing::reseal<NgramHeader>(b);
    CHECK_THAT(open(b, DatastoreVerify::header), Catch::Contains("documents of " + std::to_string(h.tokens)));
    b = good;  // every count at its largest consistent value: the sizes pass 2^64
    for (const auto field : {offsetof(NgramHeader, tokens), offsetof(NgramHeader, bigrams),
                             offsetof(NgramHeader, trigram_contexts), offsetof(NgramHeader, trigrams)})
      poke(b, field, std::numeric_limits<std::uint64_t>::max() / 2);
    testing::reseal<NgramHeader>(b);
    CHECK_THAT(open(b, DatastoreVerify::header), Catch::Contains("sizes add up to more than 2^64 bytes"));
  }
}
