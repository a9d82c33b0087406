#include <catch2/catch.hpp>

#include <limits>
#include <map>
#include <random>
#include <vector>

#include <specdec/index/continuation_automaton.hpp>

using namespace specdec;
using index::ContinuationAutomaton;

namespace {

/// Does `text` end at position `end` of `seq`?
bool ends_at(const std::vector<token_t>& seq, int end, std::span<const token_t> text) {
  if (end + 1 < static_cast<int>(text.size())) return false;
  for (std::size_t k = 0; k < text.size(); ++k)
    if (seq[end - k] != text[text.size() - 1 - k]) return false;
  return true;
}

/// Brute force: the longest suffix of `query`, of at most `most` tokens, that occurs in `seq`
/// (ending anywhere).
int longest_occurring_suffix(const std::vector<token_t>& seq, const std::vector<token_t>& query,
                             int most = std::numeric_limits<int>::max()) {
  int best = 0;
  for (int length = 1; length <= std::min(static_cast<int>(query.size()), most); ++length) {
    const std::span<const token_t> suffix(query.data() + query.size() - length, length);
    bool found = false;
    for (int end = 0; end < static_cast<int>(seq.size()) && !found; ++end) found = ends_at(seq, end, suffix);
    if (found) best = length;
  }
  return best;
}

/// A random sequence over a small alphabet; some draws copy an earlier stretch, as text does.
std::vector<token_t> random_sequence(std::mt19937& rng, int n, int alphabet) {
  std::vector<token_t> seq;
  for (int i = 0; i < n; ++i)
    seq.push_back(i > 8 && rng() % 3 == 0 ? seq[i - 1 - rng() % 8] : static_cast<token_t>(rng() % alphabet));
  return seq;
}

/// Matches `query` through extend() and checks the match and its continuations (counts, total,
/// most recent, order) against a brute-force count over `seq`. Returns the match.
ContinuationAutomaton::Match check_query(const ContinuationAutomaton& a, const std::vector<token_t>& seq,
                                         const std::vector<token_t>& query, int most = std::numeric_limits<int>::max()) {
  ContinuationAutomaton::Match m;
  for (token_t t : query) m = a.extend(m, t);
  const int length = longest_occurring_suffix(seq, query, most);
  REQUIRE(m.length == length);
  // What followed the matched suffix, counted by brute force.
  const std::span<const token_t> suffix(query.data() + query.size() - length, length);
  std::map<token_t, int> followers;
  int recent = -1;
  for (int end = length - 1; end + 1 < static_cast<int>(seq.size()); ++end) {
    if (end >= 0 && !ends_at(seq, end, suffix)) continue;
    ++followers[seq[end + 1]];
    recent = end + 1;
  }
  int total = 0;
  for (const auto& [token, count] : followers) {
    CHECK(a.count(m.state, token) == count);
    total += count;
  }
  CHECK(a.continued(m.state) == total);
  CHECK(a.recent_continuation(m.state) == recent);
  const auto conts = a.continuations(m.state);
  CHECK(conts.size() == followers.size());
  for (std::size_t k = 1; k < conts.size(); ++k) CHECK(conts[k - 1].count >= conts[k].count);
  for (const auto& c : conts) CHECK(a.continuation(m.state, c.token) == &c);
  return m;
}

}  // namespace

TEST_CASE("continuation automaton agrees with brute force", "[index]") {
  // Small alphabets make long repeats; large ones give states more continuations than a linear
  // scan handles (they are hashed).
  const int alphabet = GENERATE(2, 3, 5, 20, 60);
  std::mt19937 rng(static_cast<unsigned>(alphabet));
  const auto seq = random_sequence(rng, alphabet > 10 ? 600 : 150, alphabet);
  ContinuationAutomaton a;
  std::vector<token_t> prefix;
  for (token_t t : seq) {
    a.append(t);
    prefix.push_back(t);
    // suffix_match: the longest suffix that also ends before the last position.
    const std::vector<token_t> head(prefix.begin(), prefix.end() - 1);
    CHECK(a.suffix_match().length == longest_occurring_suffix(head, prefix));
  }
  REQUIRE(a.size() == static_cast<int>(seq.size()));
  CHECK(std::equal(seq.begin(), seq.end(), a.tokens().begin(), a.tokens().end()));

  for (int q = 0; q < 100; ++q) {
    std::vector<token_t> query;
    for (int k = 0, n = static_cast<int>(rng() % 7); k < n; ++k) query.push_back(static_cast<token_t>(rng() % alphabet));
    check_query(a, seq, query);
  }
}

TEST_CASE("continuation automaton: a match taken before appends is moved to the state holding its text", "[index]") {
  // Matches of every query taken at every length of the sequence, then followed while it grows:
  // current() must name the state that a fresh match of the same text finds (appends split states).
  const int alphabet = GENERATE(2, 3, 20);
  std::mt19937 rng(static_cast<unsigned>(alphabet) + 7);
  const auto seq = random_sequence(rng, 300, alphabet);
  ContinuationAutomaton a;
  std::vector<std::pair<std::vector<token_t>, ContinuationAutomaton::Match>> taken;
  int moved = 0;
  for (token_t t : seq) {
    a.append(t);
    std::vector<token_t> query;
    for (int k = 0, n = 1 + static_cast<int>(rng() % 6); k < n; ++k) query.push_back(static_cast<token_t>(rng() % alphabet));
    ContinuationAutomaton::Match m;
    for (token_t q : query) m = a.extend(m, q);
    taken.emplace_back(query, m);
    for (auto& [text, match] : taken) {
      const auto now = a.current(match);
      CHECK(now.length == match.length);
      // the same text, matched afresh down to its length, is in the same state
      ContinuationAutomaton::Match fresh;
      for (std::size_t k = text.size() - static_cast<std::size_t>(match.length); k < text.size(); ++k) fresh = a.extend(fresh, text[k]);
      REQUIRE(fresh.length == match.length);
      CHECK(now.state == fresh.state);
      moved += now.state != match.state;
      match = now;
    }
  }
  CHECK(moved > 0);  // some appends did split a matched state
}

TEST_CASE("continuation automaton: back-off, unseen tokens and reuse", "[index]") {
  ContinuationAutomaton a;
  for (token_t t : {5, 6, 7, 5, 6, 8, 5, 6}) a.append(t);
  auto m = a.suffix_match();  // "5 6" occurred twice before, followed by 7 and 8
  CHECK(m.length == 2);
  CHECK(a.continued(m.state) == 2);
  CHECK(a.count(m.state, 7) == 1);
  CHECK(a.count(m.state, 8) == 1);
  CHECK(a.tokens()[a.recent_continuation(m.state)] == 8);
  // Shorter contexts: "6" always follows "5", so it shares the state of "5 6" and the next shorter
  // context is the empty one (every token counts there); then none.
  CHECK(a.extend({}, 6).state == m.state);
  m = a.shorter(m);
  CHECK(m.length == 0);
  CHECK(a.continued(m.state) == 8);
  CHECK(a.count(m.state, 5) == 3);
  CHECK(a.shorter(m).state == -1);
  // A token that never occurs leads back to the empty context.
  CHECK(a.extend(a.suffix_match(), 1234).length == 0);
  CHECK(a.continuation(0, 1234) == nullptr);
  // Reuse after clear(), with token ids far apart.
  a.clear();
  CHECK(a.size() == 0);
  CHECK(a.suffix_match().length == 0);
  CHECK(a.continued(0) == 0);
  for (token_t t : {1 << 30, 3, 1 << 30, 3}) a.append(t);
  CHECK(a.suffix_match().length == 2);
  CHECK(a.count(a.extend({}, 1 << 30).state, 3) == 2);
}

TEST_CASE("continuation automaton: contexts bounded by max_context agree with brute force (appends on periodic text were quadratic)",
          "[index]") {
  // Issue 20: every append counted a continuation on the whole suffix chain, which in a token run
  // or a repeated line is as long as the run. Matches are now the longest suffix of at most
  // max_context tokens, with exact counts; the sequences below repeat far past the bound.
  const int most = GENERATE(1, 2, 3, 5);
  std::mt19937 rng(static_cast<unsigned>(most));
  std::vector<token_t> seq = random_sequence(rng, 60, 3);
  for (int k = 0; k < 40; ++k) seq.push_back(7);                                 // a run
  for (int k = 0; k < 60; ++k) seq.push_back(static_cast<token_t>(k % 3));       // a repeated line
  for (const token_t t : random_sequence(rng, 60, 4)) seq.push_back(t);
  ContinuationAutomaton a(most);
  CHECK(a.max_context() == most);
  std::vector<token_t> prefix;
  for (token_t t : seq) {
    a.append(t);
    prefix.push_back(t);
    const std::vector<token_t> head(prefix.begin(), prefix.end() - 1);
    REQUIRE(a.suffix_match().length == longest_occurring_suffix(head, prefix, most));
  }
  for (int q = 0; q < 200; ++q) {
    std::vector<token_t> query;
    for (int k = 0, n = static_cast<int>(rng() % 9); k < n; ++k)
      query.push_back(rng() % 4 == 0 ? 7 : static_cast<token_t>(rng() % 4));
    const ContinuationAutomaton::Match m = check_query(a, seq, query, most);
    const int length = m.length;
    // Every shorter context's counts too.
    for (ContinuationAutomaton::Match s = a.shorter(m); s.state >= 0; s = a.shorter(s)) {
      CHECK(s.length < length);
      int continued = 0;
      for (const auto& c : a.continuations(s.state)) continued += c.count;
      CHECK(a.continued(s.state) == continued);
    }
  }
  CHECK_THROWS_WITH(ContinuationAutomaton(0), "ContinuationAutomaton: max_context must be >= 1, got 0");
}

// The regression (quadratic appends on periodic text) is timed in context_tree_bench's Periodic
// rows; here, that the match stays bounded by max_context on a 200k-token run, as appends rely on.
TEST_CASE("continuation automaton: a 200k-token run keeps its match within max_context", "[index]") {
  ContinuationAutomaton a;
  for (int k = 0; k < 200000; ++k) a.append(5);
  const auto m = a.suffix_match();
  CHECK(m.length == a.max_context());
  CHECK(a.count(m.state, 5) == 200000 - a.max_context());  // ends at max_context - 1 .. n - 2
  CHECK(a.continued(0) == 200000);  // the empty context: every token followed it
}
