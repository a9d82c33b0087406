#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <vector>

#include <specdec/index/context_index.hpp>

using namespace specdec;

namespace {

using Positions = std::vector<int>;

/// Reference by rescanning: every end position p < indexed whose last m tokens equal query's
/// last m tokens, newest first.
Positions scan(const std::vector<token_t>& seq, int indexed, const std::vector<token_t>& query, int m) {
  Positions out;
  if (m > static_cast<int>(query.size())) return out;
  for (int p = indexed - 1; p >= m - 1; --p) {
    bool equal = true;
    for (int j = 0; j < m && equal; ++j) equal = seq[p - j] == query[query.size() - 1 - j];
    if (equal) out.push_back(p);
  }
  return out;
}

/// The positions of one level read through the index's chains, newest first.
Positions chain(const ContextIndex& index, const Occurrences& level, int m) {
  Positions out;
  for (int p = level.latest; p >= 0; p = index.previous(p, m)) out.push_back(p);
  return out;
}

/// Checks `longest` and `levels`, the occurrences of `query`'s suffix among end positions before
/// `indexed`, against the rescanning reference.
void check_levels(const ContextIndex& index, const std::vector<token_t>& seq, int indexed,
                  const std::vector<token_t>& query, const std::vector<Occurrences>& levels, int longest) {
  const int deepest = std::min<int>(index.max_depth(), static_cast<int>(query.size()));
  REQUIRE(longest <= deepest);
  for (int m = 1; m <= longest; ++m) {
    const Positions expected = scan(seq, indexed, query, m);
    const Occurrences& level = levels[static_cast<std::size_t>(m - 1)];
    REQUIRE(chain(index, level, m) == expected);
    REQUIRE(level.count == static_cast<int>(expected.size()));
    REQUIRE(level.latest == expected.front());
    REQUIRE(level.earliest == expected.back());
  }
  if (longest < deepest) REQUIRE(scan(seq, indexed, query, longest + 1).empty());
}

/// Checks everything match() says about `query` against the rescanning reference.
void check_query(const ContextIndex& index, const std::vector<token_t>& seq, const std::vector<token_t>& query) {
  std::vector<Occurrences> levels(static_cast<std::size_t>(index.max_depth()));
  const int longest = index.match(query, levels);
  check_levels(index, seq, index.size(), query, levels, longest);
}

std::vector<token_t> random_tokens(std::mt19937_64& rng, int n, int vocab) {
  std::vector<token_t> t(static_cast<std::size_t>(n));
  for (auto& x : t) x = static_cast<token_t>(rng() % static_cast<unsigned>(vocab));
  return t;
}

}  // namespace

TEST_CASE("every level of every query agrees with a rescan, while tokens are appended", "[index]") {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 60; ++trial) {
    const int vocab = 2 + trial % 5;
    const int depth = 1 + trial % 7;
    const int n = 50 + static_cast<int>(rng() % 250);
    const auto seq = random_tokens(rng, n, vocab);
    ContextIndex index(depth);
    for (int p = 0; p < n; ++p) {
      index.append(seq[static_cast<std::size_t>(p)]);
      // The sequence's own suffix (present at the last position), one that ends one token later
      // (not indexed yet) and a random query.
      check_query(index, seq, std::vector<token_t>(seq.begin(), seq.begin() + p + 1));
      if (p + 1 < n) check_query(index, seq, std::vector<token_t>(seq.begin(), seq.begin() + p + 2));
      check_query(index, seq, random_tokens(rng, 1 + static_cast<int>(rng() % 12), vocab));
    }
  }
}

TEST_CASE("append_and_match and match_suffix answer the query of the sequence's own suffix", "[index]") {
  std::mt19937_64 rng(9);
  for (int trial = 0; trial < 40; ++trial) {
    const int vocab = 2 + trial % 4;
    const int depth = 1 + trial % 6;
    const auto seq = random_tokens(rng, 200, vocab);
    ContextIndex appended(depth), matched(depth);
    std::vector<Occurrences> levels(static_cast<std::size_t>(depth));
    for (int p = 0; p < 200; ++p) {
      const std::vector<token_t> prefix(seq.begin(), seq.begin() + p + 1);
      int longest = appended.append_and_match(seq[static_cast<std::size_t>(p)], levels);
      check_levels(appended, seq, p, prefix, levels, longest);
      // match_suffix catches up lazily (here every third step) and answers twice the same.
      if (p % 3 != 0) continue;
      for (int again = 0; again < 2; ++again) {
        std::fill(levels.begin(), levels.end(), Occurrences{});
        longest = matched.match_suffix(prefix, levels);
        REQUIRE(matched.size() == p + 1);
        check_levels(matched, seq, p, prefix, levels, longest);
      }
    }
  }
}

TEST_CASE("repetitive sequences: one token repeated, and a random text written twice", "[index]") {
  std::mt19937_64 rng(3);
  const std::vector<token_t> same(200, 4);
  const auto twice = [&] {
    auto t = random_tokens(rng, 150, 50);
    t.insert(t.end(), t.begin(), t.end());
    return t;
  }();
  for (const auto* seq : {&same, &twice}) {
    ContextIndex index(10);
    index.append(*seq);
    for (int end = 1; end <= static_cast<int>(seq->size()); end += 7)
      check_query(index, *seq, std::vector<token_t>(seq->begin(), seq->begin() + end));
  }
}

TEST_CASE("a hand-made sequence", "[index]") {
  //                          0  1  2  3  4  5  6  7
  const std::vector<token_t> c{1, 2, 3, 1, 2, 9, 1, 2};
  ContextIndex index(4);
  index.append(c);
  std::vector<Occurrences> levels(4);
  // Query "... 1 2": "2" ends at 1, 4, 7; "1 2" at 1, 4, 7; "x 1 2" for x = 9 only at 7.
  const std::vector<token_t> query{9, 1, 2};
  REQUIRE(index.match(query, levels) == 3);
  CHECK(chain(index, levels[0], 1) == Positions{7, 4, 1});
  CHECK(chain(index, levels[1], 2) == Positions{7, 4, 1});
  CHECK(chain(index, levels[2], 3) == Positions{7});
  CHECK(levels[2].count == 1);
  // A token never seen matches nothing.
  CHECK(index.match(std::vector<token_t>{2, 5}, levels) == 0);
  // The empty query matches nothing.
  CHECK(index.match(std::vector<token_t>{}, levels) == 0);
}

TEST_CASE("catch_up indexes only what is new and starts over for another sequence", "[index]") {
  std::mt19937_64 rng(11);
  const auto seq = random_tokens(rng, 300, 4);
  ContextIndex index(5);
  for (int n = 0; n <= 300; n += 37) {
    index.catch_up(std::span<const token_t>(seq).first(static_cast<std::size_t>(n)));
    REQUIRE(index.size() == n);
  }
  index.catch_up(seq);
  REQUIRE(index.size() == 300);
  check_query(index, seq, std::vector<token_t>(seq.end() - 8, seq.end()));

  // A shorter sequence, and one whose token at the last indexed position differs: re-indexed.
  index.catch_up(std::span<const token_t>(seq).first(120));
  REQUIRE(index.size() == 120);
  check_query(index, seq, std::vector<token_t>(seq.begin() + 100, seq.begin() + 120));
  auto other = seq;
  other[119] = 3 - other[119];
  index.catch_up(other);
  REQUIRE(index.size() == 300);
  check_query(index, other, std::vector<token_t>(other.begin() + 110, other.begin() + 122));

  index.reset();
  REQUIRE(index.size() == 0);
  REQUIRE(index.node_count() == 0);
  index.catch_up(seq);
  check_query(index, seq, std::vector<token_t>(seq.end() - 8, seq.end()));
}

TEST_CASE("bad arguments are refused with the value in the message", "[index]") {
  CHECK_THROWS_WITH(ContextIndex(0), Catch::Contains("max_depth must be >= 1, got 0"));
  ContextIndex index(4);
  index.append(std::vector<token_t>{1, 2, 3});
  std::vector<Occurrences> two(2);
  CHECK_THROWS_WITH(index.match(std::vector<token_t>{1, 2, 3}, two), Catch::Contains("needs 3"));
  CHECK_THROWS_WITH(index.append_and_match(4, two), Catch::Contains("needs 4"));
  CHECK_THROWS_WITH(index.match_suffix(std::vector<token_t>{1, 2, 3}, two), Catch::Contains("needs 3"));
  CHECK_NOTHROW(index.match(std::vector<token_t>{2, 3}, two));
  CHECK_THROWS_WITH(index.previous(3, 1), Catch::Contains("ends at position 3"));
  CHECK_THROWS_WITH(index.previous(1, 3), Catch::Contains("no n-gram of 3 tokens"));
  CHECK_THROWS_WITH(index.previous(2, 5), Catch::Contains("max_depth 4"));
}

TEST_CASE("a 1M-token context: queries agree with a rescan", "[index][long]") {
  // No rescan happens inside the index: this checks exactness at a realistic size (the cost per
  // step is measured in bench/drafters_bench.cpp).
  std::mt19937_64 rng(5);
  const int n = 1 << 20;
  auto seq = random_tokens(rng, n, 1000);
  // Copies of earlier spans, so that long matches exist.
  for (int k = 0; k < 200; ++k) {
    const std::size_t from = rng() % (n / 2), to = n / 2 + rng() % (n / 2 - 64);
    std::copy_n(seq.begin() + static_cast<std::ptrdiff_t>(from), 40, seq.begin() + static_cast<std::ptrdiff_t>(to));
  }
  ContextIndex index(10);
  index.reserve(n);
  index.append(seq);
  for (int q = 0; q < 6; ++q) {
    const int end = n / 2 + static_cast<int>(rng() % (n / 2));
    check_query(index, seq, std::vector<token_t>(seq.begin() + end - 12, seq.begin() + end));
  }
  check_query(index, seq, std::vector<token_t>(seq.end() - 12, seq.end()));
}
