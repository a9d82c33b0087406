#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/context_tree.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

using namespace specdec;
using Catch::Matchers::Contains;

namespace {

constexpr int kVocab = 50;

/// A model whose next token is a fixed function of the last two tokens: its greedy output falls
/// into a loop, which context drafters can learn, and a wrong draft token leads elsewhere.
class BigramTarget {
 public:
  struct Output {
    std::vector<token_t> best;
    token_t argmax(node_t node) const { return best[node]; }
  };

  int vocab_size() const { return kVocab; }
  void prefill(std::span<const token_t> tokens) { cache_.assign(tokens.begin(), tokens.end()); }
  const Output& forward(const TreeView& tree) {
    REQUIRE(tree.base_position == static_cast<int>(cache_.size()));
    out_.best.resize(tree.size);
    token_.assign(tree.token, tree.token + tree.size);
    for (int i = 0; i < tree.size; ++i) {
      const token_t before = i == 0 ? (cache_.empty() ? 0 : cache_.back()) : tree.token[tree.parent[i]];
      out_.best[i] = next(before, tree.token[i]);
    }
    return out_;
  }
  void commit(std::span<const node_t> path) {
    for (node_t n : path) cache_.push_back(token_[n]);
  }

  static token_t next(token_t a, token_t b) {
    std::uint64_t h = static_cast<std::uint64_t>(a) * 0x9e3779b97f4a7c15ull ^ static_cast<std::uint64_t>(b + 7) * 0xbf58476d1ce4e5b9ull;
    h ^= h >> 29;
    return static_cast<token_t>(h % kVocab);
  }
  static std::vector<token_t> greedy(std::vector<token_t> prompt, int n) {
    std::vector<token_t> out;
    for (int i = 0; i < n; ++i) {
      const token_t a = prompt.size() >= 2 ? prompt[prompt.size() - 2] : 0;
      out.push_back(next(a, prompt.back()));
      prompt.push_back(out.back());
    }
    return out;
  }

 private:
  std::vector<token_t> cache_, token_;
  Output out_;
};
static_assert(Target<BigramTarget>);

std::vector<token_t> prompt_for(int seed) {
  std::vector<token_t> p;
  for (int i = 0; i < 4 + seed % 5; ++i) p.push_back((seed * 7 + i * 13) % kVocab);
  return p;
}

/// `period` distinct tokens repeated `times` times, then the first `extra` of them again.
std::vector<token_t> repeated(int period, int times, int extra) {
  std::vector<token_t> t;
  for (int r = 0; r < times; ++r)
    for (int k = 0; k < period; ++k) t.push_back(100 + k);
  for (int k = 0; k < extra; ++k) t.push_back(100 + k);
  return t;
}

DraftContext context_of(std::span<const token_t> tokens, int budget = 64, int max_depth = 64) {
  return DraftContext{tokens, static_cast<int>(tokens.size()), budget, max_depth, 1000};
}

std::vector<int> depths(const DraftTree& tree) {
  std::vector<int> d(tree.size(), 0);
  for (int i = 1; i < tree.size(); ++i) d[i] = d[tree.parent(i)] + 1;
  return d;
}

/// How many tokens of `expected` the tree holds as a chain from the root.
int chain_length(const DraftTree& tree, std::span<const token_t> expected) {
  node_t node = 0;
  int k = 0;
  while (k < static_cast<int>(expected.size()) && (node = tree.find_child(node, expected[k])) >= 0) ++k;
  return k;
}

DraftTree draft(ContextTreeDrafter& drafter, std::span<const token_t> tokens, int budget = 64, int max_depth = 64) {
  drafter.begin(tokens);
  DraftTree tree;
  tree.reset(tokens.back());
  drafter.propose(context_of(tokens, budget, max_depth), tree);
  return tree;
}

}  // namespace

TEST_CASE("tree drafters are lossless with the exact verifier", "[tree][lossless]") {
  const int s = GENERATE(range(0, 4));
  const auto prompt = prompt_for(s);
  SECTION("structured target: drafts are often right") {
    BigramTarget target;
    const auto greedy = BigramTarget::greedy(prompt, 400);
    SpeculativeDecoder<BigramTarget, ContextTreeDrafter, ExactVerifier> dec(target);
    dec.prefill(prompt);
    CHECK(dec.generate(400) == greedy);
    CHECK(dec.stats().tau() > 2.0);
  }
  SECTION("hashed target: drafts are mostly wrong") {
    HashTarget target(kVocab, 11);
    SpeculativeDecoder<HashTarget, HistoryTreeDrafter, ExactVerifier> dec(target);
    for (int turn = 0; turn < 2; ++turn) {  // the second sequence drafts from the first one's output
      dec.prefill(prompt);
      CHECK(dec.generate(300) == target.generate(prompt, 300));
    }
  }
  SECTION("merged with another drafter under a small budget") {
    BigramTarget target;
    std::vector<token_t> reference = prompt;
    const auto greedy = BigramTarget::greedy(prompt, 300);
    reference.insert(reference.end(), greedy.begin(), greedy.end());
    SpeculativeDecoder<BigramTarget, OracleDrafter, ContextTreeDrafter, ExactVerifier> dec(
        target, DecoderOptions{.budget = 12}, OracleDrafter(reference, 6, 0.5, 2, s), ContextTreeDrafter{},
        ExactVerifier{});
    dec.prefill(prompt);
    CHECK(dec.generate(300) == greedy);
    CHECK(dec.stats().draft_nodes_per_step() <= 12.0);
  }
}

TEST_CASE("tree drafter: repeated text is drafted deep and first", "[tree]") {
  const auto tokens = repeated(20, 3, 5);  // the pattern continues with tokens 105, 106, ...
  const std::vector<token_t> continuation = {105, 106, 107, 108, 109, 110, 111, 112, 113, 114,
                                             115, 116, 117, 118, 119, 100, 101, 102, 103, 104};
  ContextTreeDrafter drafter;
  const DraftTree tree = draft(drafter, tokens);
  CHECK(chain_length(tree, continuation) == static_cast<int>(continuation.size()));
  // The repeated continuation is the most likely child at every level of the chain.
  node_t node = 0;
  for (token_t t : std::span(continuation).first(10)) {
    const node_t child = tree.find_child(node, t);
    for (int i = 1; i < tree.size(); ++i)
      if (tree.parent(i) == node) CHECK(tree.score(i) <= tree.score(child));
    node = child;
  }
  CHECK(tree.score(tree.find_child(0, 105)) > 0.5f);
}

TEST_CASE("tree drafter: the decoder accepts long drafts on looping text", "[tree]") {
  BigramTarget target;
  const auto prompt = prompt_for(1);
  const auto greedy = BigramTarget::greedy(prompt, 2000);
  SpeculativeDecoder<BigramTarget, ContextTreeDrafter, ExactVerifier> dec(target);
  dec.prefill(prompt);
  CHECK(dec.generate(2000) == greedy);
  // Once the output loops, every step should accept a long run.
  CHECK(dec.stats().tau() > 10.0);
}

TEST_CASE("tree drafter: node budget, depth limit and scores", "[tree]") {
  const auto tokens = repeated(7, 4, 3);
  SECTION("at most the decoder's budget") {
    ContextTreeDrafter drafter;
    for (int budget : {1, 5, 30}) CHECK(draft(drafter, tokens, budget).size() - 1 <= budget);
    CHECK(draft(drafter, tokens, 64).size() - 1 == 64);
  }
  SECTION("at most budget nodes") {
    ContextTreeDrafter drafter(ContextTreeOptions{.budget = 10});
    CHECK(draft(drafter, tokens, 64).size() - 1 == 10);
  }
  SECTION("no deeper than max_depth") {
    ContextTreeDrafter drafter;
    for (int max_depth : {1, 3}) {
      const DraftTree tree = draft(drafter, tokens, 64, max_depth);
      const auto d = depths(tree);
      CHECK(*std::max_element(d.begin(), d.end()) == max_depth);
    }
    CHECK(draft(drafter, tokens, 64, 0).size() == 1);
  }
  SECTION("scores are probabilities that never grow along a path") {
    HistoryTreeDrafter drafter;
    drafter.begin(prompt_for(3));
    drafter.observe(repeated(9, 2, 0));  // remembered when draft() begins the next sequence
    const DraftTree tree = draft(drafter, tokens);
    REQUIRE(tree.size() > 1);
    for (int i = 1; i < tree.size(); ++i) {
      CHECK(tree.score(i) > 0.0f);
      CHECK(tree.score(i) <= 1.0f);
      if (tree.parent(i) > 0) CHECK(tree.score(i) <= tree.score(tree.parent(i)));
    }
  }
  SECTION("the same input gives the same tree") {
    ContextTreeDrafter a, b;
    const DraftTree ta = draft(a, tokens), tb = draft(b, tokens);
    CHECK(std::vector<node_t>(ta.parents().begin(), ta.parents().end()) ==
          std::vector<node_t>(tb.parents().begin(), tb.parents().end()));
    CHECK(std::vector<token_t>(ta.tokens().begin(), ta.tokens().end()) ==
          std::vector<token_t>(tb.tokens().begin(), tb.tokens().end()));
  }
}

TEST_CASE("tree drafter: nothing to match", "[tree]") {
  ContextTreeDrafter drafter;
  SECTION("an empty context drafts nothing") {
    DraftTree tree;
    tree.reset(0);
    drafter.propose(context_of({}), tree);
    CHECK(tree.size() == 1);
  }
  SECTION("a context of distinct tokens drafts only weak guesses") {
    std::vector<token_t> distinct;
    for (int k = 0; k < 40; ++k) distinct.push_back(k);
    const DraftTree tree = draft(drafter, distinct);
    for (int i = 1; i < tree.size(); ++i) CHECK(tree.score(i) < 0.2f);
  }
}

TEST_CASE("tree drafter: follows the context it is given", "[tree]") {
  ContextTreeDrafter drafter;
  drafter.begin(prompt_for(2));
  // propose() on a context it was not told about (no begin/observe): it indexes that context.
  const auto tokens = repeated(12, 2, 4);
  DraftTree tree;
  tree.reset(tokens.back());
  drafter.propose(context_of(tokens), tree);
  const std::vector<token_t> next = {104, 105, 106, 107, 108, 109};
  CHECK(chain_length(tree, next) == 6);
}

TEST_CASE("tree_history drafts from earlier outputs, tree does not", "[tree][history]") {
  std::vector<token_t> output;  // an earlier answer that said the same thing three times
  for (int r = 0; r < 3; ++r)
    for (token_t t = 300; t < 312; ++t) output.push_back(t);
  const std::vector<token_t> second_prompt = {1, 2, 3, 300, 301, 302};
  auto draft_second = [&](auto& drafter) {
    drafter.begin(std::vector<token_t>{1, 2, 3});
    drafter.observe(output);
    drafter.begin(second_prompt);  // the first sequence's output joins the history
    DraftTree tree;
    tree.reset(second_prompt.back());
    drafter.propose(context_of(second_prompt), tree);
    return tree;
  };
  HistoryTreeDrafter with_history;
  const DraftTree remembered = draft_second(with_history);
  const node_t next = remembered.find_child(0, 303);
  REQUIRE(next > 0);
  for (int i = 1; i < remembered.size(); ++i)
    if (remembered.parent(i) == 0) CHECK(remembered.score(i) <= remembered.score(next));
  CHECK(chain_length(remembered, std::vector<token_t>{303, 304, 305}) == 3);
  ContextTreeDrafter without;
  CHECK(draft_second(without).find_child(0, 303) < 0);
  CHECK(std::string(drafter_name<HistoryTreeDrafter>()) == "tree_history");
  CHECK(std::string(drafter_name<ContextTreeDrafter>()) == "tree");
}

TEST_CASE("tree drafter: candidates() are what propose() scores", "[tree][history]") {
  std::vector<token_t> output;
  for (int r = 0; r < 3; ++r)
    for (token_t t = 300; t < 312; ++t) output.push_back(t);
  const std::vector<token_t> second_prompt = {1, 2, 3, 300, 301, 302, 1, 2};
  auto prepare = [&](HistoryTreeDrafter& drafter) {
    drafter.begin(std::vector<token_t>{1, 2, 3});
    drafter.observe(output);
    drafter.begin(second_prompt);
  };
  auto propose = [&](HistoryTreeDrafter& drafter) {
    DraftTree tree;
    tree.reset(second_prompt.back());
    drafter.propose(context_of(second_prompt), tree);
    return tree;
  };
  // The output joins the history at once: candidates(), like propose(), takes a drafting step's slice.
  const ContextTreeOptions whole_output{.history_catch_up = 100};
  HistoryTreeDrafter inspected(whole_output), untouched(whole_output);
  prepare(inspected);
  prepare(untouched);
  const auto deep = inspected.candidates(false);
  const ContextTreeOptions options;
  CHECK(static_cast<int>(deep.size()) <= 2 * options.node_contexts * options.node_breadth);
  const auto at_root = inspected.candidates(true);
  const std::vector<HistoryTreeDrafter::Candidate> root(at_root.begin(), at_root.end());
  CHECK(root.size() >= deep.size());
  const DraftTree tree = propose(inspected);
  int children = 0;
  for (int i = 1; i < tree.size(); ++i) {
    if (tree.parent(i) != 0) continue;
    ++children;
    const auto c = std::find_if(root.begin(), root.end(), [&](const auto& c) { return c.token == tree.token(i); });
    REQUIRE(c != root.end());
    CHECK(c->probability == tree.score(i));
    CHECK(c->features.size() == static_cast<std::size_t>(HistoryTreeDrafter::feature_count));
  }
  CHECK(children >= 2);  // 3, which followed "1 2" before, and guesses from the history
  // Inspecting the candidates changes nothing propose() drafts.
  const DraftTree reference = propose(untouched);
  REQUIRE(reference.size() == tree.size());
  for (int i = 1; i < tree.size(); ++i) {
    CHECK(reference.parent(i) == tree.parent(i));
    CHECK(reference.token(i) == tree.token(i));
    CHECK(reference.score(i) == tree.score(i));
  }
}

TEST_CASE("tree_history: an output joins the history a slice per drafting step", "[tree][history]") {
  std::vector<token_t> output;  // 100 tokens: 300..309 ten times
  for (int r = 0; r < 10; ++r)
    for (token_t t = 300; t < 310; ++t) output.push_back(t);
  HistoryTreeDrafter drafter(ContextTreeOptions{.history_catch_up = 40});
  const auto history = drafter.shared_state();
  drafter.begin(std::vector<token_t>{1, 2, 3});
  drafter.observe(output);
  std::vector<token_t> context = {4, 5, 300, 301};
  drafter.begin(context);
  CHECK(history->tokens.size() == 0);  // waiting: no step has drafted
  CHECK(history->size() == 101);       // the separator and the output
  // Steps that do not ask the drafter (the automatic budget's pause) leave it waiting.
  drafter.observe(std::vector<token_t>{302});
  context.push_back(302);
  CHECK(history->tokens.size() == 0);
  DraftTree tree;
  for (int expected : {40, 80, 101, 101}) {
    tree.reset(context.back());
    drafter.propose(context_of(context), tree);
    CHECK(history->tokens.size() == expected);
    CHECK(history->size() == 101);
  }
  CHECK(history->pending.empty());
  // It drafts the output's continuation from the history, as a drafter that saw it whole at once.
  HistoryTreeDrafter at_once(ContextTreeOptions{.history_catch_up = 1000});
  at_once.begin(std::vector<token_t>{1, 2, 3});
  at_once.observe(output);
  at_once.begin(context);
  DraftTree reference;
  reference.reset(context.back());
  at_once.propose(context_of(context), reference);
  CHECK(chain_length(tree, std::vector<token_t>{303, 304, 305}) == 3);
  CHECK(std::vector<token_t>(tree.tokens().begin(), tree.tokens().end()) ==
        std::vector<token_t>(reference.tokens().begin(), reference.tokens().end()));
  // A drafter asked for no nodes drafts nothing and lets the history wait.
  HistoryTreeDrafter idle;
  idle.begin(std::vector<token_t>{1, 2, 3});
  idle.observe(output);
  idle.begin(context);
  DraftContext none = context_of(context);
  none.budget = 0;
  DraftTree empty;
  empty.reset(context.back());
  idle.propose(none, empty);
  CHECK(empty.size() == 1);
  CHECK(idle.shared_state()->tokens.size() == 0);
}

TEST_CASE("tree drafter: candidates() see the tokens observe() queued", "[tree][history]") {
  const std::vector<token_t> prompt = {1, 2, 3, 4, 1, 2};
  const std::vector<token_t> committed = {3, 4, 1};
  std::vector<token_t> whole = prompt;
  whole.insert(whole.end(), committed.begin(), committed.end());
  HistoryTreeDrafter observed, begun;
  observed.begin(prompt);
  observed.observe(committed);
  begun.begin(whole);
  for (bool root : {true, false}) {
    const auto a = observed.candidates(root);
    const std::vector<HistoryTreeDrafter::Candidate> seen(a.begin(), a.end());
    const auto b = begun.candidates(root);
    REQUIRE(seen.size() == b.size());
    for (std::size_t i = 0; i < b.size(); ++i) {
      CHECK(seen[i].token == b[i].token);
      CHECK(seen[i].probability == b[i].probability);
    }
  }
  CHECK(observed.candidates(true).front().token == 2);  // "1" was followed by 2, twice
}

TEST_CASE("tree drafter: history that does not fit is forgotten", "[tree][history]") {
  HistoryTreeDrafter drafter(ContextTreeOptions{.history_tokens = 8});
  const std::vector<token_t> long_output = {300, 301, 302, 303, 304, 305, 306, 307, 308, 309};
  drafter.begin(std::vector<token_t>{1});
  drafter.observe(long_output);  // 10 tokens + separator > 8: not remembered
  const std::vector<token_t> prompt = {2, 300, 301, 302};
  drafter.begin(prompt);
  DraftTree tree;
  tree.reset(prompt.back());
  drafter.propose(context_of(prompt), tree);
  CHECK(tree.find_child(0, 303) < 0);
}

TEST_CASE("tree drafter: options are validated", "[tree][errors]") {
  auto make = [](ContextTreeOptions o) { return ContextTreeDrafter(o); };
  CHECK_THROWS_WITH(make({.budget = 0}), Contains("budget must be >= 1, got 0"));
  CHECK_THROWS_WITH(make({.root_breadth = -1}), Contains("root_breadth must be >= 1, got -1"));
  CHECK_THROWS_WITH(make({.history_breadth = 0}), Contains("history_breadth must be >= 1, got 0"));
  CHECK_THROWS_WITH(make({.node_breadth = 0}), Contains("node_breadth must be >= 1, got 0"));
  CHECK_THROWS_WITH(make({.node_contexts = 0}), Contains("node_contexts must be >= 1, got 0"));
  CHECK_THROWS_WITH(make({.min_probability = 1.0f}), Contains("min_probability must be in [0, 1), got 1"));
  CHECK_THROWS_WITH(make({.min_probability = -0.5f}), Contains("min_probability must be in [0, 1), got -0.5"));
  CHECK_THROWS_WITH(make({.history_tokens = 0}), Contains("history_tokens must be >= 1, got 0"));
  CHECK_THROWS_WITH(make({.history_catch_up = 0}), Contains("history_catch_up must be >= 1, got 0"));
  CHECK_THROWS_AS(HistoryTreeDrafter(ContextTreeOptions{.budget = 0}), error);
  CHECK_NOTHROW(make({}));
  ContextTreeDrafter drafter;
  CHECK_THROWS_WITH(drafter.begin(std::vector<token_t>{1, -3}), Contains("token -3 is negative"));
}
