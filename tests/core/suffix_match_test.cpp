#include <catch2/catch.hpp>

#include <limits>
#include <vector>

#include <specdec/core/suffix_match.hpp>

using namespace specdec;
using core::SuffixMatch;

namespace {

struct Found {
  std::vector<int> position, length;
};

Found find(const std::vector<token_t>& c, int limit, int k, int max_match = 10, int min_match = 1) {
  std::vector<SuffixMatch> out(static_cast<std::size_t>(k > 0 ? k : 1));
  const int n = core::find_suffix_matches(c.data(), static_cast<int>(c.size()), limit, max_match,
                                          min_match, k, out.data());
  Found f;
  for (int i = 0; i < n; ++i) {
    f.position.push_back(out[i].position);
    f.length.push_back(out[i].length);
  }
  return f;
}

using V = std::vector<int>;

}  // namespace

TEST_CASE("longest match first", "[core][suffix_match]") {
  //                          0  1  2  3  4  5  6  7  8  9
  const std::vector<token_t> c{1, 2, 3, 9, 2, 3, 7, 1, 2, 3};
  // Suffix ...1 2 3: p = 2 matches "1 2 3" (3), p = 5 matches "2 3" (2).
  const auto f = find(c, 10, 2);
  CHECK(f.position == V{2, 5});
  CHECK(f.length == V{3, 2});
  CHECK(find(c, 10, 1).position == V{2});
  CHECK(find(c, 10, 5).position == V{2, 5});  // only two occurrences exist
}

TEST_CASE("ties go to the most recent occurrence", "[core][suffix_match]") {
  const std::vector<token_t> c{5, 1, 6, 1, 7, 1, 8, 1};
  const auto f = find(c, 8, 2);
  CHECK(f.position == V{5, 3});
  CHECK(f.length == V{1, 1});
  CHECK(find(c, 8, 3).position == V{5, 3, 1});
}

TEST_CASE("no match, too short contexts and k = 0", "[core][suffix_match]") {
  CHECK(find({1, 2, 3, 4}, 4, 2).position.empty());
  CHECK(find({7}, 1, 2).position.empty());
  CHECK(find({7, 7}, 2, 0).position.empty());
  CHECK(find({}, 0, 2).position.empty());
  // min_match filters short matches.
  CHECK(find({1, 2, 9, 2}, 4, 2, 10, 2).position.empty());
  CHECK(find({1, 2, 9, 2}, 4, 2, 10, 1).position == V{1});
}

TEST_CASE("a match right before the root is an occurrence", "[core][suffix_match]") {
  // p = n - 2 is the last allowed end; its continuation is the root alone.
  const std::vector<token_t> c{3, 4, 4};
  const auto f = find(c, 3, 2);
  CHECK(f.position == V{1});
  CHECK(f.length == V{1});
  CHECK(core::continuation_end(1, 10, 3, 3) == 3);
  // Runs of one token: p = 3 matches 4 tokens (p + 1 caps it), p = 2 matches 3.
  const std::vector<token_t> run{4, 4, 4, 4, 4};
  const auto r = find(run, 5, 3);
  CHECK(r.position == V{3, 2, 1});
  CHECK(r.length == V{4, 3, 2});
}

TEST_CASE("the match length is capped", "[core][suffix_match]") {
  std::vector<token_t> c;
  for (int i = 0; i < 30; ++i) c.push_back(i);
  for (int i = 0; i < 30; ++i) c.push_back(i);
  const auto f = find(c, 60, 2, 10);
  CHECK(f.position == V{29});
  CHECK(f.length == V{10});
  CHECK(find(c, 60, 2, 16).length == V{16});
}

TEST_CASE("the search limit restricts occurrences to the prompt", "[core][suffix_match]") {
  //                          0  1  2  3  4  5  6  7
  const std::vector<token_t> c{1, 2, 5, 1, 2, 6, 1, 2};
  CHECK(find(c, 8, 2).position == V{4, 1});
  // Prompt of 4 tokens: p <= 2, so only p = 1 qualifies.
  CHECK(find(c, 4, 2).position == V{1});
  CHECK(core::continuation_end(1, 10, 8, 4) == 4);
  CHECK(core::continuation_end(1, 10, 8, 8) == 8);
  CHECK(core::continuation_end(1, 3, 8, 8) == 5);
  // Prompt of 2 tokens: p <= 0, and c[0] != root.
  CHECK(find(c, 2, 2).position.empty());
  // A limit beyond the context is clamped.
  CHECK(find(c, 100, 2).position == V{4, 1});
}

TEST_CASE("continuation_end with a length of INT_MAX is the search limit (p + 1 + length overflowed)", "[core][suffix_match][overflow]") {
  constexpr int huge = std::numeric_limits<int>::max();
  CHECK(core::continuation_end(1, huge, 8, 8) == 8);
  CHECK(core::continuation_end(5, huge - 5, 8, 4) == 4);
  CHECK(core::continuation_end(1, 3, 8, 8) == 5);
}
