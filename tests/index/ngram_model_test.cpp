// NgramModel and its build: every probability against a brute-force Katz model written from the
// definition (counts in maps, back-off weights from sums over the vocabulary), distributions that
// sum to 1 in seen and unseen contexts, top_k against a sort of the whole distribution, the
// discounts, file round trips, and the checks at open.
#include <catch2/catch.hpp>

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <iterator>
#include <map>
#include <random>
#include <string>
#include <vector>

#include <specdec/index/ngram_model.hpp>
#include <specdec/index/ngram_model_builder.hpp>
#include <specdec/index/token_file.hpp>

#include "support/datastore_files.hpp"
#include "support/temp_dir.hpp"

using namespace specdec;

namespace {

using Words = std::vector<std::uint32_t>;
using Tokens = std::vector<token_t>;

/// Katz's back-off trigram model by brute force, from the definition in ngram_model.hpp.
class ReferenceKatz {
 public:
  ReferenceKatz(const TokenDocuments& docs, int vocab, int cutoff) : vocab_(vocab) {
    Words doc;
    for (const std::uint32_t t : docs.text) {
      if (t != kDocumentEnd) {
        doc.push_back(t);
        continue;
      }
      for (std::size_t i = 0; i < doc.size(); ++i)
        for (std::size_t m = 1; m <= 3 && i + m <= doc.size(); ++m)
          ++count_[m][Words(doc.begin() + static_cast<std::ptrdiff_t>(i), doc.begin() + static_cast<std::ptrdiff_t>(i + m))];
      doc.clear();
    }
    for (int m = 1; m <= 3; ++m) {
      std::map<std::uint64_t, std::uint64_t> n;
      for (const auto& [gram, c] : count_[m]) {
        ++n[c];
        total_[m][Words(gram.begin(), gram.end() - 1)] += c;
      }
      discount_[m] = discounts(n, cutoff);
    }
  }

  /// P(w | h) for a context of 0..2 tokens.
  double p(const Words& h, std::uint32_t w) { return p(static_cast<int>(h.size()) + 1, h, w); }
  std::size_t effective_cutoff(int m) const { return discount_[m].size(); }
  std::uint64_t distinct(int m) const { return count_[m].size(); }
  std::uint64_t contexts(int m) const { return total_[m].size(); }

  /// Katz's d_r with the cut-off lowered until they are valid (written out from the formula).
  static std::vector<double> discounts(std::map<std::uint64_t, std::uint64_t> n, int cutoff) {
    for (int k = cutoff; k >= 1; --k) {
      if (n[1] == 0) return {};
      const double a = static_cast<double>(k + 1) * static_cast<double>(n[static_cast<std::uint64_t>(k + 1)]) / static_cast<double>(n[1]);
      std::vector<double> d;
      for (int r = 1; r <= k; ++r) {
        const auto nr = static_cast<double>(n[static_cast<std::uint64_t>(r)]);
        const double star = nr > 0 ? (r + 1) * static_cast<double>(n[static_cast<std::uint64_t>(r + 1)]) / nr : 0.0;
        d.push_back(nr > 0 ? (star / r - a) / (1 - a) : -1.0);
      }
      if (a < 1 && std::all_of(d.begin(), d.end(), [](double x) { return x > 0 && x <= 1; })) return d;
    }
    return {};
  }

 private:
  double p(int m, const Words& h, std::uint32_t w) {
    if (m == 0) return 1.0 / vocab_;
    const Words lower = h.empty() ? h : Words(h.begin() + 1, h.end());  // h without its first token
    const auto total = total_[m].find(h);
    if (total == total_[m].end()) return p(m - 1, lower, w);
    const auto [alpha, ml] = weight(m, h, lower, static_cast<double>(total->second));
    Words gram = h;
    gram.push_back(w);
    const auto c = count_[m].find(gram);
    if (c == count_[m].end()) return alpha * p(m - 1, lower, w);
    const auto r = static_cast<double>(c->second);
    const double d = ml || c->second > discount_[m].size() ? 1.0 : discount_[m][c->second - 1];
    return d * r / static_cast<double>(total->second);
  }

  // (alpha, whether the context keeps maximum likelihood): D summed over the unseen words.
  std::pair<double, bool> weight(int m, const Words& h, const Words& lower, double total) {
    const auto key = std::make_pair(m, h);
    if (const auto it = weight_.find(key); it != weight_.end()) return it->second;
    double freed = 0, unseen_mass = 0;
    for (int w = 0; w < vocab_; ++w) {
      Words gram = h;
      gram.push_back(static_cast<std::uint32_t>(w));
      const auto c = count_[m].find(gram);
      if (c == count_[m].end()) {
        unseen_mass += p(m - 1, lower, static_cast<std::uint32_t>(w));
      } else if (c->second <= discount_[m].size()) {
        freed += (1 - discount_[m][c->second - 1]) * static_cast<double>(c->second) / total;
      }
    }
    const std::pair<double, bool> result = freed > 0 && unseen_mass > 0 ? std::make_pair(freed / unseen_mass, false)
                                                                        : std::make_pair(0.0, true);
    return weight_[key] = result;
  }

  int vocab_;
  std::map<Words, std::uint64_t> count_[4], total_[4];
  std::vector<double> discount_[4];
  std::map<std::pair<int, Words>, std::pair<double, bool>> weight_;
};

/// Documents of tokens drawn from a skewed distribution over [0, used) (so counts of every size
/// occur), lengths 1 to `max_length` (documents of 1 and 2 tokens hold no trigram).
TokenDocuments skewed_documents(std::uint64_t seed, int documents, int max_length, int used) {
  std::mt19937_64 rng(seed);
  std::vector<double> weights;
  for (int i = 0; i < used; ++i) weights.push_back(1.0 / (1 + i));
  std::discrete_distribution<int> token(weights.begin(), weights.end());
  TokenDocuments docs;
  for (int d = 0; d < documents; ++d) {
    Words doc(1 + rng() % static_cast<std::uint64_t>(max_length));
    for (auto& t : doc) t = static_cast<std::uint32_t>(token(rng));
    // A repeated phrase makes some trigram contexts nearly deterministic.
    if (d % 3 == 0) doc.insert(doc.end(), {1, 2, 3, 1, 2, 3});
    docs.add(doc);
  }
  return docs;
}

/// Every context of 0, 1 and 2 tokens over [0, vocab).
std::vector<Words> all_contexts(int vocab) {
  std::vector<Words> out{{}};
  for (std::uint32_t a = 0; a < static_cast<std::uint32_t>(vocab); ++a) {
    out.push_back({a});
    for (std::uint32_t b = 0; b < static_cast<std::uint32_t>(vocab); ++b) out.push_back({a, b});
  }
  return out;
}

Tokens as_tokens(const Words& w) { return Tokens(w.begin(), w.end()); }

/// The whole distribution after `context`, sorted as top_k promises: probability, then id.
std::vector<NgramCandidate> sorted_distribution(const NgramModel& model, const Tokens& context) {
  std::vector<NgramCandidate> all;
  for (token_t w = 0; w < model.vocab_size(); ++w)
    if (const double p = model.probability(context, w); p > 0) all.push_back({w, p});
  std::sort(all.begin(), all.end(), [](const NgramCandidate& a, const NgramCandidate& b) {
    return a.probability != b.probability ? a.probability > b.probability : a.token < b.token;
  });
  return all;
}

bool same(const std::vector<NgramCandidate>& a, const std::vector<NgramCandidate>& b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](const NgramCandidate& x, const NgramCandidate& y) {
    return x.token == y.token && x.probability == y.probability;
  });
}

}  // namespace

TEST_CASE("ngram model: every probability equals a brute-force Katz model", "[ngram]") {
  testing::TempDir dir;
  int cases = 0;
  for (const int cutoff : {1, 3, 5}) {
    for (std::uint64_t seed = 1; seed <= 4; ++seed) {
      // Vocabulary 12, tokens 0..9 used: two words are never seen.
      const TokenDocuments docs = skewed_documents(seed * 31 + static_cast<std::uint64_t>(cutoff), 12, 40, 10);
      build_ngram_model(docs, dir.path / "m.ngram", {.vocab_size = 12, .cutoff = cutoff});
      const NgramModel model(dir.path / "m.ngram", DatastoreVerify::full);
      ReferenceKatz ref(docs, 12, cutoff);
      INFO("cutoff " << cutoff << " seed " << seed);
      for (int m = 1; m <= 3; ++m) CHECK(model.header().effective_cutoff[m - 1] == ref.effective_cutoff(m));
      CHECK(model.header().unigrams == ref.distinct(1));
      CHECK(model.header().bigrams == ref.distinct(2));
      CHECK(model.header().trigrams == ref.distinct(3));
      CHECK(model.header().bigram_contexts == ref.contexts(2));
      CHECK(model.header().trigram_contexts == ref.contexts(3));
      for (const Words& h : all_contexts(12)) {
        double sum = 0;
        for (std::uint32_t w = 0; w < 12; ++w) {
          const double got = model.probability(as_tokens(h), static_cast<token_t>(w)), want = ref.p(h, w);
          INFO("context size " << h.size() << " w " << w);
          CHECK(got == Approx(want).margin(1e-13).epsilon(1e-12));
          sum += got;
        }
        CHECK(sum == Approx(1.0).epsilon(1e-12));
        ++cases;
      }
    }
  }
  CHECK(cases == 3 * 4 * (1 + 12 + 144));
}

TEST_CASE("ngram model: distributions sum to 1 and top_k is their sorted head", "[ngram]") {
  testing::TempDir dir;
  std::mt19937_64 rng(5);
  // Vocabulary 600 of which 400 occur, with an unused tail: unseen unigrams, bigram and trigram
  // contexts seen and unseen, and context tokens outside the vocabulary.
  const TokenDocuments docs = skewed_documents(17, 300, 200, 400);
  build_ngram_model(docs, dir.path / "m.ngram", {.vocab_size = 600});
  const NgramModel model(dir.path / "m.ngram");
  std::vector<NgramCandidate> top;
  int seen_contexts = 0;
  for (int q = 0; q < 300; ++q) {
    Tokens context;
    if (q % 2 == 0) {  // a context from the text
      const std::size_t at = rng() % (docs.text.size() - 2);
      if (docs.text[at] == kDocumentEnd || docs.text[at + 1] == kDocumentEnd) continue;
      context = {static_cast<token_t>(docs.text[at]), static_cast<token_t>(docs.text[at + 1])};
      ++seen_contexts;
    } else {  // random ids, some never seen, some outside the vocabulary
      context = {static_cast<token_t>(rng() % 620), static_cast<token_t>(rng() % 620)};
    }
    if (q % 10 == 1) context.erase(context.begin());
    if (q % 10 == 3) context.clear();
    double sum = 0;
    for (token_t w = 0; w < 600; ++w) sum += model.probability(context, w);
    INFO("query " << q);
    CHECK(sum == Approx(1.0).epsilon(1e-12));
    const auto all = sorted_distribution(model, context);
    for (const int k : {1, 2, 5, 40}) {
      model.top_k(context, k, top);
      CHECK(same(top, std::vector<NgramCandidate>(all.begin(), all.begin() + std::min<std::ptrdiff_t>(k, std::ssize(all)))));
    }
  }
  CHECK(seen_contexts > 100);
  CHECK(model.probability(Tokens{1, 2}, 600) == 0.0);
  CHECK(model.probability(Tokens{1, 2}, -1) == 0.0);
  model.top_k(Tokens{1, 2}, 0, top);
  CHECK(top.empty());
  model.top_k(Tokens{1, 2}, 1000, top);
  CHECK(same(top, sorted_distribution(model, Tokens{1, 2})));
}

TEST_CASE("ngram model: the Katz discounts and their cut-off", "[ngram]") {
  // n_1..n_6 = 100, 40, 20, 12, 8, 6: A = 6 * 6 / 100 = 0.36 with k = 5.
  const std::vector<std::uint64_t> n{0, 100, 40, 20, 12, 8, 6};
  const auto d = katz_discounts(n, 5);
  REQUIRE(d.size() == 5);
  const double a = 0.36;
  for (int r = 1; r <= 5; ++r) {
    const double star = (r + 1) * static_cast<double>(n[static_cast<std::size_t>(r + 1)]) / static_cast<double>(n[static_cast<std::size_t>(r)]);
    CHECK(d[static_cast<std::size_t>(r - 1)] == Approx((star / r - a) / (1 - a)));
  }
  // The mass the discounts free is Good-Turing's estimate of the unseen: n_1 / N.
  double freed = 0, tokens = 0;
  for (int r = 1; r <= 6; ++r) {
    const double nr = static_cast<double>(n[static_cast<std::size_t>(r)]);
    tokens += r * nr;
    if (r <= 5) freed += (1 - d[static_cast<std::size_t>(r - 1)]) * r * nr;
  }
  CHECK(freed / tokens == Approx(100 / tokens));
  // No n_4: k = 5, 4 and 3 give d_3 <= 0; k = 2 remains.
  CHECK(katz_discounts(std::vector<std::uint64_t>{0, 10, 4, 2, 0, 1, 1}, 5).size() == 2);
  // k = 1 always gives d_1 = 0 (A = r* of the singletons): no discounting.
  CHECK(katz_discounts(std::vector<std::uint64_t>{0, 10, 4, 2}, 1).empty());
  CHECK(katz_discounts(std::vector<std::uint64_t>{0, 0, 5, 5}, 5).empty());  // no singletons
  CHECK(katz_discounts(std::vector<std::uint64_t>{0, 1, 5}, 1).empty());     // A = 10 >= 1
}

TEST_CASE("ngram model: the same documents give the same file, the reader maps it read-only", "[ngram]") {
  testing::TempDir dir;
  const TokenDocuments docs = skewed_documents(3, 40, 60, 50);
  build_ngram_model(docs, dir.path / "a.ngram", {.cutoff = 4});
  build_ngram_model(docs, dir.path / "b.ngram", {.cutoff = 4});
  const std::string bytes = testing::file_bytes(dir.path / "a.ngram");
  CHECK(bytes == testing::file_bytes(dir.path / "b.ngram"));
  ::chmod((dir.path / "a.ngram").c_str(), 0444);
  const NgramModel model(dir.path / "a.ngram", DatastoreVerify::full);
  CHECK(model.vocab_size() == 50);  // the largest token + 1
  CHECK(model.header().tokens == docs.tokens());
  CHECK(model.header().documents == 40);
  CHECK(model.header().cutoff == 4);
  CHECK(model.file_bytes() == bytes.size());
  CHECK(model.discounts(3).size() == 4);
  CHECK(model.payload_checksum() == model.header().payload_checksum);
  CHECK(testing::file_bytes(dir.path / "a.ngram") == bytes);
  // Written through a temporary file: none is left behind.
  CHECK(!std::filesystem::exists(dir.path / "a.ngram.tmp"));
}

namespace {

using testing::poke;

std::string open_error(const std::filesystem::path& path, std::optional<DatastoreVerify> verify = std::nullopt) {
  return testing::open_error<NgramModel>(path, verify);
}

void reseal(std::string& bytes) { testing::reseal<NgramHeader>(bytes); }

}  // namespace

TEST_CASE("ngram model: bad files give one-line errors naming them", "[ngram][errors]") {
  testing::TempDir dir;
  const auto good = dir.path / "good.ngram";
  build_ngram_model(skewed_documents(3, 10, 50, 30), good, {.vocab_size = 40});
  const std::string bytes = testing::file_bytes(good);
  CHECK(open_error(good, DatastoreVerify::full).empty());

  const auto bad = dir.path / "bad.ngram";
  auto expect = [&](const std::string& b, const std::string& message, std::optional<DatastoreVerify> verify = std::nullopt) {
    dir.write("bad.ngram", b);
    const std::string what = open_error(bad, verify);
    INFO(what);
    CHECK(what.find(message) != std::string::npos);
    CHECK(what.find("n-gram model " + bad.string()) == 0);
  };
  SECTION("missing") { CHECK(open_error(dir.path / "none.ngram").find("none.ngram cannot be opened") != std::string::npos); }
  SECTION("shorter than a header") { expect(bytes.substr(0, 20), "is truncated: 20 bytes, the header alone has 112"); }
  SECTION("truncated payload") {
    expect(bytes.substr(0, bytes.size() - 4),
           "is truncated: " + std::to_string(bytes.size() - 4) + " bytes, its header says " + std::to_string(bytes.size()));
  }
  SECTION("trailing bytes") { expect(bytes + "xxxx", "has trailing bytes"); }
  SECTION("not an n-gram model") {
    std::string b = bytes;
    b[0] = 'X';
    expect(b, "is not a specdec n-gram model (bad magic)");
  }
  SECTION("another version") {
    std::string b = bytes;
    poke(b, offsetof(NgramHeader, version), std::uint32_t{1});
    reseal(b);
    expect(b, "has format version 1, this build reads version 2: rebuild it with this build's tools");
  }
  SECTION("damaged header") {
    std::string b = bytes;
    poke(b, offsetof(NgramHeader, vocab_size), std::uint32_t{7});
    expect(b, "damaged header (header checksum mismatch)");
  }
  SECTION("a header whose counts do not fit the file") {
    std::string b = bytes;
    poke(b, offsetof(NgramHeader, trigrams), std::uint64_t{1} << 50);
    reseal(b);
    expect(b, "has counts that contradict each other");
    poke(b, offsetof(NgramHeader, trigrams), reinterpret_cast<const NgramHeader*>(bytes.data())->trigrams + 1);
    reseal(b);
    expect(b, "is truncated");
  }
  SECTION("cut-offs out of range") {
    std::string b = bytes;
    poke(b, offsetof(NgramHeader, cutoff), std::uint32_t{0});
    reseal(b);
    expect(b, "has cutoff 0 (expected 1 to 32)");
    b = bytes;
    poke(b, offsetof(NgramHeader, effective_cutoff) + 8, std::uint32_t{9});
    reseal(b);
    expect(b, "has an effective cutoff of 9 above its cutoff 5");
  }
  SECTION("vocabulary 0") {
    std::string b = bytes;
    poke(b, offsetof(NgramHeader, vocab_size), std::uint32_t{0});
    reseal(b);
    expect(b, "has vocab_size 0");
  }
  SECTION("empty") {
    std::string b = bytes;
    poke(b, offsetof(NgramHeader, tokens), std::uint64_t{0});
    reseal(b);
    expect(b, "is empty (no tokens)");
  }
  SECTION("damaged payload: found by a full check only") {
    std::string b = bytes;
    b[bytes.size() - 3] ^= 1;  // a by-id index entry
    expect(b, "is damaged (payload checksum mismatch)", DatastoreVerify::full);
    CHECK(open_error(bad, DatastoreVerify::header).empty());
    // The entry is now past its context's list: the default's value checks refuse it too.
    CHECK_THAT(open_error(bad), Catch::Contains("its trigram by-id index [") && Catch::Contains("entries"));
  }
  SECTION("damaged offsets: found by every open") {
    std::string b = bytes;
    const NgramHeader& h = *reinterpret_cast<const NgramHeader*>(bytes.data());
    const NgramLayout layout(h);
    poke(b, layout.bigram_offset + 8 * 5, std::uint64_t{1} << 33);
    expect(b, "is damaged (its bigram offsets are not a table of " + std::to_string(h.bigrams) + " entries)");
    b = bytes;
    poke(b, layout.trigram_offset + 8 * h.trigram_contexts, h.trigrams + 1);
    expect(b, "is damaged (its trigram offsets are not a table");
    b = bytes;
    poke(b, layout.trigram_first, std::uint64_t{1});
    expect(b, "is damaged (its trigram context offsets are not a table");
  }
}

TEST_CASE("ngram model: the builder refuses bad input", "[ngram][errors]") {
  testing::TempDir dir;
  const TokenDocuments docs = skewed_documents(3, 4, 20, 30);
  CHECK_THROWS_WITH(build_ngram_model(TokenDocuments{}, dir.path / "e.ngram"),
                    "n-gram build: no documents (the model would be empty)");
  CHECK(!std::filesystem::exists(dir.path / "e.ngram"));
  CHECK_THROWS_WITH(build_ngram_model(docs, dir.path / "v.ngram", {.vocab_size = 5}),
                    Catch::Matchers::Contains("is outside the vocabulary of 5"));
  CHECK_THROWS_WITH(build_ngram_model(docs, dir.path / "c.ngram", {.cutoff = 0}),
                    "n-gram build: cutoff must be in [1, 32], got 0");
  CHECK_THROWS_WITH(build_ngram_model(docs, dir.path / "c.ngram", {.cutoff = 33}),
                    "n-gram build: cutoff must be in [1, 32], got 33");
  CHECK_THROWS_WITH(build_ngram_model(docs, dir.path / "none/x.ngram"), Catch::Matchers::Contains("cannot be opened"));
}
