// The dense datastore (DReSD): what the builder writes, the exact search against brute force, and
// one-line errors for bad files and bad build input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <specdec/index/dense_datastore.hpp>
#include <specdec/index/dense_datastore_builder.hpp>
#include <specdec/index/dense_search.hpp>

#include "support/datastore_files.hpp"
#include "support/temp_dir.hpp"

using namespace specdec;

namespace {

/// `docs` documents of 5..40 tokens and a feature per token: a random direction per token id
/// plus noise, so that features cluster by token as a model's do.
struct Corpus {
  TokenDocuments docs;
  std::vector<float> features;
  int dim = 0;
};

Corpus random_corpus(int docs, int dim, std::uint64_t seed, int vocab = 50) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> direction(static_cast<std::size_t>(vocab * dim));
  for (float& x : direction) x = normal(rng);
  Corpus c;
  c.dim = dim;
  for (int d = 0; d < docs; ++d) {
    std::vector<std::uint32_t> doc(5 + rng() % 36);
    for (auto& t : doc) {
      t = static_cast<std::uint32_t>(rng() % vocab);
      for (int i = 0; i < dim; ++i) c.features.push_back(3.0f * direction[t * dim + i] + normal(rng) + 0.5f * i);
    }
    c.docs.add(doc);
  }
  return c;
}

using testing::poke;

std::string open_error(const std::filesystem::path& path, std::optional<DatastoreVerify> verify = std::nullopt) {
  return testing::open_error<DenseDatastore>(path, verify);
}

void reseal(std::string& bytes) { testing::reseal<DenseDatastoreHeader>(bytes); }

/// Every key scored, sorted by ranks_before, the first k.
std::vector<DenseNeighbour> brute_force(const DenseDatastore& ds, std::span<const float> query, int k) {
  std::vector<DenseNeighbour> all;
  for (std::uint64_t i = 0; i < ds.keys(); ++i)
    all.push_back({detail::dense_dot(query.data(), ds.key(i).data(), ds.key_dim()), i});
  std::sort(all.begin(), all.end(), ranks_before);
  all.resize(std::min<std::size_t>(all.size(), static_cast<std::size_t>(k)));
  return all;
}

}  // namespace

TEST_CASE("dense datastore: keys are the projected features, values the text after them", "[dense]") {
  testing::TempDir dir;
  const Corpus c = random_corpus(40, 24, 1);
  const auto path = dir.path / "ds.bin";
  const DenseBuildSummary summary = build_dense_datastore(c.docs, c.features, c.dim, path, {.key_dim = 8, .seed = 3});
  const DenseDatastore ds(path, DatastoreVerify::full);
  REQUIRE(ds.keys() == c.docs.tokens());
  CHECK(summary.keys == ds.keys());
  CHECK(ds.documents() == 40);
  CHECK(ds.feature_dim() == 24);
  CHECK(ds.key_dim() == 8);
  CHECK(ds.vocab_size() <= 50);
  CHECK(summary.explained_variance > 0.3);
  CHECK(summary.explained_variance < 1.0);
  CHECK(ds.header().explained_variance == Approx(summary.explained_variance));

  // The axes are orthonormal; the mean and scale are the features' own.
  const auto comp = ds.components();
  for (int a = 0; a < 8; ++a)
    for (int b = 0; b < 8; ++b)
      CHECK(detail::dense_dot(&comp[a * 24], &comp[b * 24], 24) == Approx(a == b ? 1.0 : 0.0).margin(1e-5));
  double mean3 = 0;
  for (std::uint64_t i = 0; i < ds.keys(); ++i) mean3 += c.features[i * 24 + 3];
  CHECK(ds.mean()[3] == Approx(mean3 / static_cast<double>(ds.keys())).epsilon(1e-4));

  // Key i is the projection of feature i, bit for bit, and has norm 1; its value follows it.
  std::vector<float> key(8), scratch;
  std::uint64_t i = 0;
  for (std::size_t p = 0; p < c.docs.text.size(); ++p) {
    if (c.docs.text[p] == kDocumentEnd) continue;
    ds.projection().project({&c.features[i * 24], 24}, key, scratch);
    CHECK(std::equal(key.begin(), key.end(), ds.key(i).begin()));
    CHECK(detail::dense_dot(key.data(), key.data(), 8) == Approx(1.0f));
    const auto value = ds.continuation(i, 3);
    std::size_t expected = 0;
    while (expected < 3 && c.docs.text[p + 1 + expected] != kDocumentEnd) ++expected;
    REQUIRE(value.size() == expected);
    CHECK(std::equal(value.begin(), value.end(), c.docs.text.begin() + static_cast<std::ptrdiff_t>(p) + 1));
    ++i;
  }
}

TEST_CASE("dense datastore: the same input and seed give the same file", "[dense]") {
  testing::TempDir dir;
  const Corpus c = random_corpus(30, 16, 2);
  build_dense_datastore(c.docs, c.features, c.dim, dir.path / "a.bin", {.key_dim = 4, .sample = 100, .seed = 5});
  build_dense_datastore(c.docs, c.features, c.dim, dir.path / "b.bin", {.key_dim = 4, .sample = 100, .seed = 5});
  build_dense_datastore(c.docs, c.features, c.dim, dir.path / "c.bin", {.key_dim = 4, .sample = 100, .seed = 6});
  CHECK(testing::file_bytes(dir.path / "a.bin") == testing::file_bytes(dir.path / "b.bin"));
  CHECK(testing::file_bytes(dir.path / "a.bin") != testing::file_bytes(dir.path / "c.bin"));
  CHECK(DenseDatastore(dir.path / "a.bin").header().sample == 100);
}

TEST_CASE("exact dense search equals a brute-force ranking", "[dense][search]") {
  testing::TempDir dir;
  Corpus c = random_corpus(60, 32, 4);
  // Duplicate features give tied keys: ties must go to the lower key.
  std::copy_n(c.features.begin(), 32 * 5, c.features.begin() + 32 * 100);
  build_dense_datastore(c.docs, c.features, c.dim, dir.path / "ds.bin", {.key_dim = 16});
  const auto ds = std::make_shared<const DenseDatastore>(dir.path / "ds.bin");
  const ExactDenseSearch search(ds);
  std::mt19937_64 rng(9);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<DenseNeighbour> found;
  std::vector<float> query(16);
  for (int q = 0; q < 40; ++q) {
    if (q % 2 == 0) {
      const auto k = ds->key(rng() % ds->keys());
      query.assign(k.begin(), k.end());
    } else {
      for (float& x : query) x = normal(rng);
    }
    for (const int k : {1, 5, 33, static_cast<int>(ds->keys()) + 3}) {
      search.search(query, k, found);
      INFO("query " << q << ", k " << k);
      CHECK(found == brute_force(*ds, query, k));
    }
  }
  const auto dup = ds->key(100);
  search.search(std::vector<float>(dup.begin(), dup.end()), 2, found);
  REQUIRE(found.size() == 2);
  CHECK(found[0].key == 0);  // key 0 holds the same feature as key 100
  CHECK(found[1].key == 100);
  CHECK_THROWS_WITH(search.search(std::vector<float>(15), 3, found),
                    "exact dense search: query of 15 floats, keys have 16");
}

TEST_CASE("dense datastore: self-retrieval is perfect when no dimension is dropped", "[dense][search]") {
  testing::TempDir dir;
  const Corpus c = random_corpus(20, 12, 5);
  build_dense_datastore(c.docs, c.features, c.dim, dir.path / "ds.bin", {.key_dim = 12});
  const auto ds = std::make_shared<const DenseDatastore>(dir.path / "ds.bin");
  const ExactDenseSearch search(ds);
  std::vector<DenseNeighbour> found;
  for (std::uint64_t i = 0; i < ds->keys(); ++i) {
    const auto k = ds->key(i);
    search.search(std::vector<float>(k.begin(), k.end()), 1, found);
    CHECK(found.at(0).key == i);
  }
}

TEST_CASE("bad dense datastore files give one-line errors", "[dense][errors]") {
  testing::TempDir dir;
  const Corpus c = random_corpus(10, 8, 6);
  const auto good = dir.path / "good.bin";
  build_dense_datastore(c.docs, c.features, c.dim, good, {.key_dim = 4});
  const std::string bytes = testing::file_bytes(good);
  CHECK(open_error(good, DatastoreVerify::full).empty());

  const auto bad = dir.path / "bad.bin";
  auto expect = [&](const std::string& b, const std::string& message, std::optional<DatastoreVerify> verify = std::nullopt) {
    dir.write("bad.bin", b);
    const std::string what = open_error(bad, verify);
    INFO(what);
    CHECK(what.find(message) != std::string::npos);
    CHECK(what.find('\n') == std::string::npos);
  };
  SECTION("missing") { CHECK(open_error(dir.path / "none.bin").find("none.bin cannot be opened") != std::string::npos); }
  SECTION("shorter than a header") { expect(bytes.substr(0, 20), "is truncated: 20 bytes, the header alone has 128"); }
  SECTION("truncated payload") {
    expect(bytes.substr(0, bytes.size() - 4), "is truncated: " + std::to_string(bytes.size() - 4) +
                                                  " bytes, its header says " + std::to_string(bytes.size()));
  }
  SECTION("trailing bytes") { expect(bytes + "xxxx", "has trailing bytes"); }
  SECTION("a token datastore is not a dense one") {
    std::string b = bytes;
    std::memcpy(b.data(), kDatastoreMagic, 8);
    expect(b, "is not a specdec dense datastore (bad magic)");
  }
  SECTION("another version") {
    std::string b = bytes;
    poke(b, offsetof(DenseDatastoreHeader, version), std::uint32_t{1});
    reseal(b);
    expect(b, "has format version 1, this build reads version 2: rebuild it with this build's tools");
  }
  SECTION("damaged header") {
    std::string b = bytes;
    poke(b, offsetof(DenseDatastoreHeader, key_dim), std::uint32_t{3});
    expect(b, "damaged header (header checksum mismatch)");
  }
  SECTION("key_dim larger than feature_dim") {
    std::string b = bytes;
    poke(b, offsetof(DenseDatastoreHeader, key_dim), std::uint32_t{9});
    reseal(b);
    expect(b, "has key_dim 9 for feature_dim 8");
  }
  SECTION("damaged payload: found by a full check only") {
    std::string b = bytes;
    b[sizeof(DenseDatastoreHeader) + 5] ^= 1;
    expect(b, "is damaged (payload checksum mismatch)", DatastoreVerify::full);
    CHECK(open_error(bad, DatastoreVerify::header).empty());
    CHECK(open_error(bad).empty());  // a mean changed but finite: every value in range
  }
}

TEST_CASE("dense datastore build: bad input gives one-line errors and no file", "[dense][errors]") {
  testing::TempDir dir;
  const Corpus c = random_corpus(5, 8, 7);
  const auto out = dir.path / "x.bin";
  CHECK_THROWS_WITH(build_dense_datastore(c.docs, std::span(c.features).first(c.features.size() - 1), 8, out),
                    Catch::Matchers::Contains("feature floats for " + std::to_string(c.docs.tokens()) + " tokens of dim 8"));
  CHECK_THROWS_WITH(build_dense_datastore(c.docs, c.features, 8, out, {.key_dim = 9}),
                    "dense datastore build: key_dim must be in [1, 8], got 9");
  CHECK_THROWS_WITH(build_dense_datastore(c.docs, c.features, 8, out, {.key_dim = 4, .vocab_size = 3}),
                    Catch::Matchers::Contains("is outside the vocabulary of 3"));
  std::vector<float> nan = c.features;
  nan[8 * 2 + 1] = NAN;
  CHECK_THROWS_WITH(build_dense_datastore(c.docs, nan, 8, out, {.key_dim = 4}),
                    "dense datastore build: feature 2 has a non-finite value");
  CHECK(!std::filesystem::exists(out));
}
