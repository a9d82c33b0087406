#include <catch2/catch.hpp>

#include <algorithm>
#include <limits>
#include <map>
#include <random>
#include <unordered_map>
#include <vector>

#include <specdec/core/suffix_match.hpp>
#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/fixed_tree.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

using namespace specdec;

namespace {

using Tokens = std::vector<token_t>;

struct Found {
  std::vector<int> position, length;
  bool operator==(const Found&) const = default;
};

Found found(std::span<const core::SuffixMatch> matches) {
  Found f;
  for (const auto& m : matches) {
    f.position.push_back(m.position);
    f.length.push_back(m.length);
  }
  return f;
}

/// The rescanning reference of the rule.
Found reference(const Tokens& c, int limit, const CasdOptions& o) {
  std::vector<core::SuffixMatch> out(static_cast<std::size_t>(o.k));
  const int n = core::find_suffix_matches(c.data(), static_cast<int>(c.size()), limit, o.max_match, o.min_match,
                                          o.k, out.data());
  return found(std::span<const core::SuffixMatch>(out).first(static_cast<std::size_t>(n)));
}

template <casd_scope Scope>
Found casd(BasicCasdDrafter<Scope>& d, const Tokens& c, int prompt_length) {
  return found(d.find_matches(c, prompt_length));
}

Tokens random_tokens(std::mt19937_64& rng, int n, int vocab) {
  Tokens t(static_cast<std::size_t>(n));
  for (auto& x : t) x = static_cast<token_t>(rng() % static_cast<unsigned>(vocab));
  return t;
}

DraftContext context_of(const Tokens& c, int prompt_length, int max_depth = 64) {
  return DraftContext{c, prompt_length, /*budget=*/64, max_depth, /*vocab_size=*/1 << 20};
}

/// Every root-to-node path of `tree` as a token sequence, with the node's score.
std::map<Tokens, float> paths_of(const DraftTree& tree) {
  std::map<Tokens, float> paths;
  std::vector<Tokens> path(static_cast<std::size_t>(tree.size()));
  for (int i = 1; i < tree.size(); ++i) {
    path[static_cast<std::size_t>(i)] = path[static_cast<std::size_t>(tree.parent(i))];
    path[static_cast<std::size_t>(i)].push_back(tree.token(i));
    paths[path[static_cast<std::size_t>(i)]] = tree.score(i);
  }
  return paths;
}

/// The tree the rule asks for: the union of the occurrences' continuations (at most max_depth
/// deep), each prefix once, scored (m + 1) / (m + j + 1) by the longest match that drafts it.
std::map<Tokens, float> expected_paths(const Tokens& c, int limit, const CasdOptions& o, int max_depth) {
  std::map<Tokens, float> paths;
  const int n = static_cast<int>(c.size());
  std::vector<core::SuffixMatch> out(static_cast<std::size_t>(o.k));
  const int found = core::find_suffix_matches(c.data(), n, limit, o.max_match, o.min_match, o.k, out.data());
  for (int i = 0; i < found; ++i) {
    const auto [p, m] = out[static_cast<std::size_t>(i)];
    const int end = std::min(core::continuation_end(p, o.depth, n, limit), p + 1 + max_depth);
    Tokens prefix;
    for (int j = p + 1; j < end; ++j) {
      prefix.push_back(c[static_cast<std::size_t>(j)]);
      const float score = static_cast<float>(m + 1) / static_cast<float>(m + (j - p) + 1);
      auto [it, inserted] = paths.emplace(prefix, score);
      if (!inserted) it->second = std::max(it->second, score);
    }
  }
  return paths;
}

template <casd_scope Scope>
void check_random_contexts(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 300; ++trial) {
    CasdOptions o;
    o.k = 1 + static_cast<int>(rng() % 4);
    o.max_match = 1 + static_cast<int>(rng() % 12);
    o.min_match = 1 + static_cast<int>(rng() % static_cast<unsigned>(o.max_match));
    if (rng() % 2) o.min_match = 1;
    o.depth = 1 + static_cast<int>(rng() % 12);
    const int vocab = 2 + static_cast<int>(rng() % 5);
    const int prompt_length = 1 + static_cast<int>(rng() % 120);
    const Tokens all = random_tokens(rng, prompt_length + 200, vocab);
    const int max_depth = 1 + static_cast<int>(rng() % 16);

    // One drafter follows a sequence as a decoder would: begin(prompt), then the context grows by
    // a few tokens per step.
    BasicCasdDrafter<Scope> drafter(o);
    drafter.begin(std::span<const token_t>(all).first(static_cast<std::size_t>(prompt_length)));
    for (int n = prompt_length; n <= static_cast<int>(all.size()); n += 1 + static_cast<int>(rng() % 4)) {
      const Tokens c(all.begin(), all.begin() + n);
      const int limit = Scope == casd_scope::context ? n : prompt_length;
      INFO("trial " << trial << ", n " << n << ", k " << o.k << ", max_match " << o.max_match << ", min_match "
                    << o.min_match);
      REQUIRE(casd(drafter, c, prompt_length) == reference(c, limit, o));
      DraftTree tree;
      tree.reset(c.back());
      drafter.propose(context_of(c, prompt_length, max_depth), tree);
      REQUIRE(paths_of(tree) == expected_paths(c, limit, o, max_depth));
    }
  }
}

// The minimal drafter of docs/writing_a_drafter.md ("A complete example"), combined with CASD below.
// [custom_drafter]
/// Drafts a chain by following, from the root, the token that came after each token last time.
class LastSuccessorDrafter {
 public:
  static constexpr const char* name = "last_successor";

  explicit LastSuccessorDrafter(int depth = 4) : depth_(depth) {}

  void begin(std::span<const token_t> prompt) {
    successor_.clear();
    last_ = -1;
    observe(prompt);
  }

  void observe(std::span<const token_t> committed) {
    for (token_t t : committed) {
      if (last_ >= 0) successor_[last_] = t;
      last_ = t;
    }
  }

  void propose(const DraftContext& ctx, DraftTree& tree) {
    node_t node = 0;
    token_t t = tree.root_token();
    for (int d = 1; d <= std::min(depth_, ctx.max_depth); ++d) {
      const auto next = successor_.find(t);
      if (next == successor_.end()) break;
      t = next->second;
      node = tree.add(node, t, 1.0f / static_cast<float>(d + 1));  // scores fall with depth
    }
  }

 private:
  int depth_;
  std::unordered_map<token_t, token_t> successor_;
  token_t last_ = -1;
};

static_assert(check_drafter<LastSuccessorDrafter>());
// [custom_drafter]

}  // namespace

TEST_CASE("casd: occurrences equal the reference rule on random contexts, step after step", "[casd]") {
  check_random_contexts<casd_scope::context>(1);
}

TEST_CASE("casd_prompt: occurrences equal the reference rule on random contexts, step after step", "[casd]") {
  check_random_contexts<casd_scope::prompt>(2);
}

TEST_CASE("casd: hand-made contexts", "[casd]") {
  CasdDrafter d;
  SECTION("the longest match first, then a shorter one") {
    //        0  1  2  3  4  5  6  7  8  9
    Tokens c{1, 2, 3, 9, 2, 3, 7, 1, 2, 3};
    CHECK(casd(d, c, 3) == Found{{2, 5}, {3, 2}});
    DraftTree tree;
    tree.reset(3);
    d.propose(context_of(c, 3), tree);
    // Chains "9 2 3 7 1 2 3" (match 3, cut at the context's end) and "7 1 2 3" (match 2).
    CHECK(paths_of(tree).size() == 7 + 4);
    CHECK(tree.token(1) == 9);
    CHECK(tree.score(1) == Approx(4.0 / 5.0));  // (m + 1) / (m + j + 1), m = 3, j = 1
    CHECK(tree.score(8) == Approx(3.0 / 4.0));  // first node of the m = 2 chain
  }
  SECTION("ties go to the most recent occurrence") {
    Tokens c{5, 1, 6, 1, 7, 1, 8, 1};
    CHECK(casd(d, c, 1) == Found{{5, 3}, {1, 1}});
    DraftTree tree;
    tree.reset(1);
    d.propose(context_of(c, 1), tree);
    CHECK(tree.token(1) == 8);  // after p = 5 comes 8, drafted first
  }
  SECTION("no match: an empty draft") {
    Tokens c{1, 2, 3, 4};
    CHECK(casd(d, c, 2).position.empty());
    DraftTree tree;
    tree.reset(4);
    d.propose(context_of(c, 2), tree);
    CHECK(tree.size() == 1);
  }
  SECTION("a match ending just before the root drafts the one token after it") {
    Tokens c{4, 6, 2, 2};  // p = 2 = S - 2 matches "2"; its continuation is the root itself
    CHECK(casd(d, c, 2) == Found{{2}, {1}});
    DraftTree tree;
    tree.reset(2);
    d.propose(context_of(c, 2), tree);
    CHECK(paths_of(tree) == std::map<Tokens, float>{{{2}, 2.0f / 3.0f}});
  }
  SECTION("chains that share a prefix become one path") {
    Tokens c{1, 5, 6, 7, 2, 5, 6, 8, 3, 5};  // after "5": "6 7 2" at p = 1, "6 8 3" at p = 5
    CHECK(casd(d, c, 1) == Found{{5, 1}, {1, 1}});
    DraftTree tree;
    tree.reset(5);
    d.propose(context_of(c, 1), tree);
    const auto paths = paths_of(tree);
    CHECK(paths.count({6}) == 1);
    CHECK(paths.count({6, 8}) == 1);
    CHECK(paths.count({6, 7}) == 1);
    CHECK(std::count_if(paths.begin(), paths.end(), [](const auto& p) { return p.first.size() == 1; }) == 1);
  }
  SECTION("the draft is cut at the target's remaining depth") {
    Tokens c{1, 2, 3, 4, 5, 6, 1};
    DraftTree tree;
    tree.reset(1);
    d.propose(context_of(c, 1, /*max_depth=*/2), tree);
    CHECK(paths_of(tree) == std::map<Tokens, float>{{{2}, 2.0f / 3.0f}, {{2, 3}, 2.0f / 4.0f}});
  }
}

TEST_CASE("casd_prompt searches the prompt only, casd the whole context", "[casd]") {
  //        prompt: 0  1  2  3 | generated: 4  5  6  7
  const Tokens c{7, 8, 1, 2, 8, 3, 4, 8};
  CasdDrafter full;
  CasdPromptDrafter prompt;
  CHECK(casd(full, c, 4) == Found{{4, 1}, {1, 1}});  // the generated 8 at p = 4 is the most recent
  CHECK(casd(prompt, c, 4) == Found{{1}, {1}});      // only p = 1 lies in the prompt (p <= S - 2)
  DraftTree tree;
  tree.reset(8);
  prompt.propose(context_of(c, 4), tree);
  // The continuation of p = 1 is cut at S = 4: "1 2".
  CHECK(paths_of(tree) == std::map<Tokens, float>{{{1}, 2.0f / 3.0f}, {{1, 2}, 2.0f / 4.0f}});
}

TEST_CASE("casd: a long context (2^18 tokens) agrees with the reference as it grows", "[casd][long]") {
  std::mt19937_64 rng(3);
  const int n = 1 << 18;
  Tokens all = random_tokens(rng, n + 64, 500);
  for (int k = 0; k < 100; ++k) {  // repeated passages, so that long matches exist
    const std::size_t from = rng() % (n / 2), to = n / 2 + rng() % (n / 2);
    std::copy_n(all.begin() + static_cast<std::ptrdiff_t>(from), 30, all.begin() + static_cast<std::ptrdiff_t>(to));
  }
  CasdDrafter drafter;
  CasdPromptDrafter prompt_drafter;
  const int prompt_length = n / 2;
  drafter.begin(std::span<const token_t>(all).first(static_cast<std::size_t>(prompt_length)));
  prompt_drafter.begin(std::span<const token_t>(all).first(static_cast<std::size_t>(prompt_length)));
  for (int len = n; len <= n + 64; len += 8) {
    const Tokens c(all.begin(), all.begin() + len);
    REQUIRE(casd(drafter, c, prompt_length) == reference(c, len, CasdOptions{}));
    REQUIRE(casd(prompt_drafter, c, prompt_length) == reference(c, prompt_length, CasdOptions{}));
  }
}

TEST_CASE("casd combines with other drafters and stays lossless", "[casd][lossless]") {
  HashTarget target(/*vocab_size=*/3, /*seed=*/5);
  const std::vector<Tokens> prompts{{0, 1, 2, 0, 1, 2, 0}, {2, 2, 1}, {1}};
  for (const Tokens& prompt : prompts) {
    const Tokens greedy = target.generate(prompt, 400);
    Tokens truth = prompt;
    truth.insert(truth.end(), greedy.begin(), greedy.end());
    SpeculativeDecoder<HashTarget, CasdDrafter, OracleDrafter, ExactVerifier> with_oracle(
        target, DecoderOptions{.budget = 24}, CasdDrafter{}, OracleDrafter(truth, 4, /*error_rate=*/0.5),
        ExactVerifier{});
    with_oracle.prefill(prompt);
    CHECK(with_oracle.generate(300) == Tokens(greedy.begin(), greedy.begin() + 300));

    SpeculativeDecoder<HashTarget, CasdPromptDrafter, FixedTreeDrafter, CasdDrafter, ExactVerifier> three(
        target, DecoderOptions{.budget = 8}, CasdPromptDrafter{},
        FixedTreeDrafter({0, 0, 1}, {0, 1, 2}), CasdDrafter(CasdOptions{.k = 3, .depth = 6}), ExactVerifier{});
    three.prefill(prompt);
    CHECK(three.generate(300) == Tokens(greedy.begin(), greedy.begin() + 300));
    // The same decoder, a second sequence: begin() starts the index over.
    three.prefill(prompts[0]);
    const Tokens again = target.generate(prompts[0], 100);
    CHECK(three.generate(100) == again);

    SpeculativeDecoder<HashTarget, LastSuccessorDrafter, CasdDrafter, ExactVerifier> custom(target);
    custom.prefill(prompt);
    CHECK(custom.generate(300) == Tokens(greedy.begin(), greedy.begin() + 300));

    // CASD's drafts were accepted at times (a 3-token vocabulary repeats a lot).
    const auto& accepted = with_oracle.stats().accepted_by_drafter[0];
    std::int64_t steps_with_casd_tokens = 0;
    for (std::size_t k = 1; k < accepted.size(); ++k) steps_with_casd_tokens += accepted[k];
    CHECK(steps_with_casd_tokens > 0);
  }
}

TEST_CASE("casd: options are validated", "[casd][errors]") {
  CHECK_THROWS_WITH(CasdDrafter(CasdOptions{.k = 0}), Catch::Contains("casd: k must be >= 1, got 0"));
  CHECK_THROWS_WITH(CasdDrafter(CasdOptions{.max_match = 0}), Catch::Contains("max_match must be >= 1, got 0"));
  CHECK_THROWS_WITH(CasdDrafter(CasdOptions{.max_match = 4, .min_match = 5}),
                    Catch::Contains("min_match must be in [1, max_match = 4], got 5"));
  CHECK_THROWS_WITH(CasdPromptDrafter(CasdOptions{.min_match = 0}), Catch::Contains("casd_prompt: min_match"));
  CHECK_THROWS_WITH(CasdDrafter(CasdOptions{.depth = 0}), Catch::Contains("depth must be >= 1, got 0"));
  STATIC_REQUIRE(std::string_view(CasdDrafter::name) == "casd");
  STATIC_REQUIRE(std::string_view(CasdPromptDrafter::name) == "casd_prompt");
  STATIC_REQUIRE(std::default_initializable<CasdDrafter>);
  STATIC_REQUIRE(std::default_initializable<CasdPromptDrafter>);
}

TEST_CASE("casd: a budget of INT_MAX drafts as a large one does (position + 1 + max_depth overflowed)", "[casd][overflow]") {
  // Issue 20: --budget 2147483647 made the continuation's end negative, so CASD proposed nothing.
  const Tokens c{1, 2, 3, 9, 2, 3, 7, 1, 2, 3};
  for (int depth : {10, std::numeric_limits<int>::max()}) {
    CasdDrafter huge(CasdOptions{.depth = depth}), large(CasdOptions{.depth = depth});
    DraftTree a, b;
    a.reset(3);
    b.reset(3);
    huge.propose(context_of(c, 3, std::numeric_limits<int>::max()), a);
    large.propose(context_of(c, 3, 1 << 20), b);
    CHECK(paths_of(a).size() == 7 + 4);
    CHECK(paths_of(a) == paths_of(b));
  }
}

TEST_CASE("casd: max_match is bounded (the index allocates per level)", "[casd][errors]") {
  CHECK_THROWS_WITH(CasdDrafter(CasdOptions{.max_match = std::numeric_limits<int>::max()}),
                    Catch::Contains("casd: max_match must be <= 1024, got 2147483647"));
  CHECK_NOTHROW(CasdDrafter(CasdOptions{.max_match = ContextIndex::max_depth_limit}));
}
