// TokenDatastore and its build: suffix arrays and search ranges against brute force (both sorts,
// random and repetitive text, ids >= 65536), token files, and the checks at open.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <specdec/index/datastore_builder.hpp>
#include <specdec/index/token_datastore.hpp>
#include <specdec/index/token_file.hpp>

#include "support/datastore_files.hpp"
#include "support/temp_dir.hpp"

using namespace specdec;

namespace {

using Words = std::vector<std::uint32_t>;

/// Documents of random tokens drawn from `alphabet`; `repeat` > 0 writes one random block that
/// many times per document (long repeated passages, the case that makes suffix sorting slow).
TokenDocuments random_documents(std::uint64_t seed, int documents, int length, const Words& alphabet, int repeat = 0) {
  std::mt19937_64 rng(seed);
  TokenDocuments docs;
  for (int d = 0; d < documents; ++d) {
    Words doc;
    const int block = repeat > 0 ? length / repeat : length;
    for (int i = 0; i < block; ++i) doc.push_back(alphabet[rng() % alphabet.size()]);
    for (int r = 1; r < repeat; ++r) doc.insert(doc.end(), doc.begin(), doc.begin() + block);
    docs.add(doc);
  }
  return docs;
}

/// Brute force: token positions sorted by their suffixes.
Words brute_suffix_array(const Words& text) {
  Words sa;
  for (std::uint32_t p = 0; p < text.size(); ++p)
    if (text[p] != kDocumentEnd) sa.push_back(p);
  std::sort(sa.begin(), sa.end(), [&](std::uint32_t a, std::uint32_t b) {
    return std::lexicographical_compare(text.begin() + a, text.end(), text.begin() + b, text.end());
  });
  return sa;
}

/// Brute force: every position where `query` occurs, ascending.
Words brute_occurrences(const Words& text, const Words& query) {
  Words out;
  for (std::size_t p = 0; p + query.size() <= text.size(); ++p)
    if (std::equal(query.begin(), query.end(), text.begin() + static_cast<std::ptrdiff_t>(p))) out.push_back(static_cast<std::uint32_t>(p));
  return out;
}

const Words kSmall = {0, 1, 2};
// Ids that byte-wise and u16 encodings confuse: >= 65536, differing only in high bytes.
const Words kWide = {3, 65535, 65536, 65537, 0x00010000 + 255, 0x00FF0000, 0x0000FFFF, 0x7FFFFFF0};

}  // namespace

TEST_CASE("suffix arrays of both sorts equal brute force", "[datastore]") {
  int cases = 0;
  for (const SuffixSort sort : {SuffixSort::divsufsort, SuffixSort::doubling}) {
    for (const Words* alphabet : {&kSmall, &kWide}) {
      for (const int repeat : {0, 3}) {
        for (std::uint64_t seed = 1; seed <= 5; ++seed) {
          const TokenDocuments docs = random_documents(seed, 1 + static_cast<int>(seed % 4), 60, *alphabet, repeat);
          INFO("sort " << int(sort) << " alphabet " << alphabet->size() << " repeat " << repeat << " seed " << seed);
          CHECK(suffix_array(docs.text, sort) == brute_suffix_array(docs.text));
          ++cases;
        }
      }
    }
  }
  CHECK(cases == 40);
}

TEST_CASE("find() ranges equal a brute-force scan", "[datastore]") {
  testing::TempDir dir;
  std::mt19937_64 rng(7);
  for (const Words* alphabet : {&kSmall, &kWide}) {
    for (const int repeat : {0, 4}) {
      const TokenDocuments docs = random_documents(rng(), 5, 400, *alphabet, repeat);
      build_datastore(docs, dir.path / "ds.bin");
      const TokenDatastore ds(dir.path / "ds.bin", DatastoreVerify::full);
      REQUIRE(ds.tokens() == docs.tokens());
      REQUIRE(ds.documents() == 5);
      for (int q = 0; q < 300; ++q) {
        // Half the queries are substrings of the text (many hits), half random (few or none).
        const std::size_t m = 1 + rng() % 12;
        Words query;
        if (q % 2 == 0) {
          const std::size_t at = rng() % (docs.text.size() - m);
          query.assign(docs.text.begin() + static_cast<std::ptrdiff_t>(at), docs.text.begin() + static_cast<std::ptrdiff_t>(at + m));
          if (std::count(query.begin(), query.end(), kDocumentEnd)) continue;
        } else {
          for (std::size_t i = 0; i < m; ++i) query.push_back((*alphabet)[rng() % alphabet->size()]);
        }
        const SuffixRange r = ds.find(query);
        Words found(ds.suffixes().begin() + static_cast<std::ptrdiff_t>(r.begin), ds.suffixes().begin() + static_cast<std::ptrdiff_t>(r.end));
        std::sort(found.begin(), found.end());
        CHECK(found == brute_occurrences(docs.text, query));
      }
    }
  }
}

TEST_CASE("token files: documents, separators, a missing last separator", "[datastore][token_file]") {
  testing::TempDir dir;
  const Words raw = {5, 6, kDocumentEnd, kDocumentEnd, 70000, kDocumentEnd, 8, 9, 10};  // empty doc, no last end
  {
    std::ofstream out(dir.path / "in.tokens", std::ios::binary);
    out.write(reinterpret_cast<const char*>(raw.data()), static_cast<std::streamsize>(raw.size() * 4));
  }
  TokenDocuments docs;
  read_token_file(dir.path / "in.tokens", docs);
  CHECK(docs.documents == 3);
  CHECK(docs.tokens() == 6);
  CHECK(docs.text == Words{5, 6, kDocumentEnd, 70000, kDocumentEnd, 8, 9, 10, kDocumentEnd});
  write_token_file(dir.path / "out.tokens", docs);
  TokenDocuments again;
  read_token_file(dir.path / "out.tokens", again);
  CHECK(again.text == docs.text);

  std::ofstream(dir.path / "odd.tokens", std::ios::binary) << "abcde";
  CHECK_THROWS_WITH(read_token_file(dir.path / "odd.tokens", docs), Catch::Matchers::Contains("5 bytes, not a multiple of 4"));
  CHECK_THROWS_WITH(read_token_file(dir.path / "none.tokens", docs), Catch::Matchers::Contains("none.tokens: no such file"));
  CHECK_THROWS_WITH(read_token_file(dir.path, docs), Catch::Matchers::Contains(": is a directory, not a file"));
}

namespace {

using testing::poke;

std::string open_error(const std::filesystem::path& path, std::optional<DatastoreVerify> verify = std::nullopt) {
  return testing::open_error<TokenDatastore>(path, verify);
}

void reseal(std::string& bytes) { testing::reseal<DatastoreHeader>(bytes); }

}  // namespace

TEST_CASE("bad datastore files give one-line errors", "[datastore][errors]") {
  testing::TempDir dir;
  const auto good = dir.path / "good.bin";
  build_datastore(random_documents(3, 3, 50, kWide), good, {.vocab_size = 0x7FFFFFF1});
  const std::string bytes = testing::file_bytes(good);
  CHECK(open_error(good, DatastoreVerify::full).empty());
  CHECK(TokenDatastore(good).vocab_size() == 0x7FFFFFF1);

  const auto bad = dir.path / "bad.bin";
  auto expect = [&](const std::string& b, const std::string& message, std::optional<DatastoreVerify> verify = std::nullopt) {
    dir.write("bad.bin", b);
    const std::string what = open_error(bad, verify);
    INFO(what);
    CHECK(what.find(message) != std::string::npos);
  };
  SECTION("missing") { CHECK(open_error(dir.path / "none.bin").find("none.bin cannot be opened") != std::string::npos); }
  SECTION("shorter than a header") { expect(bytes.substr(0, 20), "is truncated: 20 bytes, the header alone has 64"); }
  SECTION("truncated payload") {
    expect(bytes.substr(0, bytes.size() - 4), "is truncated: " + std::to_string(bytes.size() - 4) + " bytes, its header says " + std::to_string(bytes.size()));
  }
  SECTION("trailing bytes") { expect(bytes + "xxxx", "has trailing bytes"); }
  SECTION("not a datastore") {
    std::string b = bytes;
    b[0] = 'X';
    expect(b, "is not a specdec token datastore");
  }
  SECTION("another version") {
    std::string b = bytes;
    poke(b, offsetof(DatastoreHeader, version), std::uint32_t{1});
    reseal(b);
    expect(b, "has format version 1, this build reads version 2: rebuild it with this build's tools");
  }
  SECTION("damaged header") {
    std::string b = bytes;
    poke(b, offsetof(DatastoreHeader, vocab_size), std::uint32_t{7});
    expect(b, "damaged header (header checksum mismatch)");
  }
  SECTION("damaged payload: found by a full check only") {
    std::string b = bytes;
    b[sizeof(DatastoreHeader) + 5] ^= 1;
    expect(b, "is damaged (payload checksum mismatch)", DatastoreVerify::full);
    CHECK(open_error(bad, DatastoreVerify::header).empty());
    CHECK(open_error(bad).empty());  // a token changed within the vocabulary: every value in range
  }
  SECTION("empty") {
    std::string b = bytes.substr(0, sizeof(DatastoreHeader));
    poke(b, offsetof(DatastoreHeader, text_length), std::uint64_t{0});
    poke(b, offsetof(DatastoreHeader, documents), std::uint64_t{0});
    poke(b, offsetof(DatastoreHeader, suffixes), std::uint64_t{0});
    reseal(b);
    expect(b, "is empty (no documents)");
    CHECK_THROWS_WITH(build_datastore(TokenDocuments{}, dir.path / "empty.bin"), Catch::Matchers::Contains("no documents"));
    CHECK(!std::filesystem::exists(dir.path / "empty.bin"));
  }
  SECTION("a token outside the vocabulary is refused at build") {
    CHECK_THROWS_WITH(build_datastore(random_documents(3, 1, 50, kWide), dir.path / "v.bin", {.vocab_size = 1000}),
                      Catch::Matchers::Contains("outside the vocabulary of 1000"));
  }
}

TEST_CASE("a reader maps the file read-only and never modifies it", "[datastore]") {
  testing::TempDir dir;
  const auto path = dir.path / "ro.bin";
  build_datastore(random_documents(9, 4, 200, kSmall), path);
  ::chmod(path.c_str(), 0444);  // opening must not need write permission
  const std::string before = testing::file_bytes(path);
  const auto mtime = std::filesystem::last_write_time(path);
  {
    const TokenDatastore a(path, DatastoreVerify::full), b(path);  // two readers share the file
    CHECK(a.find(Words{0, 1}).size() == b.find(Words{0, 1}).size());
    CHECK(a.payload_checksum() == a.header().payload_checksum);
  }
  CHECK(testing::file_bytes(path) == before);
  CHECK(std::filesystem::last_write_time(path) == mtime);
}

TEST_CASE("the checksum does not depend on how the bytes are split", "[datastore]") {
  const std::string s = "the quick brown fox jumps over the lazy dog";
  DatastoreChecksum parts;
  parts.add(s.data(), 3);
  parts.add(s.data() + 3, 11);
  parts.add(s.data() + 14, s.size() - 14);
  CHECK(parts.value() == datastore_checksum(s.data(), s.size()));
  CHECK(datastore_checksum(s.data(), s.size()) != datastore_checksum(s.data(), s.size() - 1));
}
