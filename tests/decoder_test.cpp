#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/empty.hpp>
#include <specdec/policies/drafters/fixed_tree.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/testing/hash_target.hpp>

#include "support/same_counters.hpp"

using namespace specdec;

namespace {

constexpr int kVocab = 50;
constexpr int kNew = 300;

std::vector<token_t> prompt_for(int seed) {
  std::vector<token_t> p;
  for (int i = 0; i < 3 + seed % 5; ++i) p.push_back((seed * 7 + i * 13) % kVocab);
  return p;
}

/// The reference every decoder must reproduce: prompt followed by plain greedy decoding.
std::vector<token_t> reference(const HashTarget& target, const std::vector<token_t>& prompt, int n) {
  std::vector<token_t> r = prompt;
  const auto g = target.generate(prompt, n + 80);
  r.insert(r.end(), g.begin(), g.end());
  return r;
}

template <class Decoder>
std::vector<token_t> run(Decoder& dec, const std::vector<token_t>& prompt, int n) {
  dec.prefill(prompt);
  return dec.generate(n);
}

/// A drafter that proposes a tree with a bad token, to test the decoder's checks.
struct OutOfVocabularyDrafter {
  static constexpr const char* name = "broken";
  void begin(std::span<const token_t>) {}
  void propose(const DraftContext& ctx, DraftTree& tree) { tree.add(0, ctx.vocab_size); }
  void observe(std::span<const token_t>) {}
};

/// A verifier that returns a path that is not a chain of the tree.
struct BrokenVerifier {
  static constexpr output_need needs = output_need::argmax;
  template <class Out>
  void verify(const TreeView&, const Out&, Verdict& v) const {
    v.path = {0, 5};
    v.next_token = 0;
  }
};

/// A drafter counting what it is told, to test the begin/observe protocol.
struct RecordingDrafter {
  static constexpr const char* name = "recording";
  std::vector<token_t>* seen;
  void begin(std::span<const token_t> prompt) { seen->assign(prompt.begin(), prompt.end()); }
  void propose(const DraftContext& ctx, DraftTree&) {
    REQUIRE(std::equal(ctx.tokens.begin(), ctx.tokens.end(), seen->begin(), seen->end()));
  }
  void observe(std::span<const token_t> t) { seen->insert(seen->end(), t.begin(), t.end()); }
};

}  // namespace

TEST_CASE("the pack splits into drafters and a verifier", "[decoder]") {
  using D = SpeculativeDecoder<HashTarget, EmptyDrafter, OracleDrafter, ExactVerifier>;
  STATIC_REQUIRE(D::num_drafters == 2);
  STATIC_REQUIRE(std::is_same_v<D::verifier_type, ExactVerifier>);
  STATIC_REQUIRE(std::is_same_v<D::drafters_type, std::tuple<EmptyDrafter, OracleDrafter>>);
  using Plain = SpeculativeDecoder<HashTarget, ExactVerifier>;
  STATIC_REQUIRE(Plain::num_drafters == 0);
  CHECK(D::names() == std::vector<std::string>{"empty", "oracle"});
}

TEST_CASE("empty drafter: plain greedy decoding, tau = 1", "[decoder][lossless]") {
  HashTarget target(kVocab, 3);
  SpeculativeDecoder<HashTarget, EmptyDrafter, ExactVerifier> dec(target);
  for (int s = 0; s < 5; ++s) {
    const auto prompt = prompt_for(s);
    CHECK(run(dec, prompt, kNew) == target.generate(prompt, kNew));
    CHECK(dec.stats().tau() == 1.0);
    CHECK(dec.stats().steps == kNew);
    CHECK(dec.stats().drafted_nodes == 0);
  }
}

TEST_CASE("no drafter at all is plain decoding", "[decoder][lossless]") {
  HashTarget target(kVocab, 4);
  SpeculativeDecoder<HashTarget, ExactVerifier> dec(target);
  const auto prompt = prompt_for(1);
  CHECK(run(dec, prompt, 50) == target.generate(prompt, 50));
}

TEST_CASE("oracle chain: lossless and tau = chain length + 1", "[decoder][lossless]") {
  HashTarget target(kVocab, 5);
  for (int depth : {1, 4, 9}) {
    for (int s = 0; s < 4; ++s) {
      const auto prompt = prompt_for(s);
      SpeculativeDecoder<HashTarget, OracleDrafter, ExactVerifier> dec(
          target, OracleDrafter(reference(target, prompt, kNew), depth), ExactVerifier{});
      const int n = (depth + 1) * 30;  // a whole number of steps
      CHECK(run(dec, prompt, n) == target.generate(prompt, n));
      CHECK(dec.stats().tau() == Approx(depth + 1.0));
      CHECK(dec.stats().accepted_by_drafter[0].size() == static_cast<std::size_t>(depth + 1));
      CHECK(dec.stats().accepted_by_drafter[0][depth] == dec.stats().steps);
    }
  }
}

TEST_CASE("drafters of every shape are lossless", "[decoder][lossless]") {
  HashTarget target(kVocab, 6);
  // GENERATE, not a loop: Catch2 enters each SECTION once per run of the test case, so a loop
  // around sections would check only the first prompt.
  {
    const int s = GENERATE(range(0, 6));
    const auto prompt = prompt_for(s);
    const auto ref = reference(target, prompt, kNew);
    const auto greedy = target.generate(prompt, kNew);
    SECTION("noisy chain") {
      SpeculativeDecoder<HashTarget, OracleDrafter, ExactVerifier> dec(target, OracleDrafter(ref, 6, 0.2, 1, s),
                                                                      ExactVerifier{});
      CHECK(run(dec, prompt, kNew) == greedy);
      CHECK(dec.stats().tau() > 1.5);
    }
    SECTION("wide noisy tree") {
      SpeculativeDecoder<HashTarget, OracleDrafter, ExactVerifier> dec(target, OracleDrafter(ref, 5, 0.3, 4, s),
                                                                      ExactVerifier{});
      CHECK(run(dec, prompt, kNew) == greedy);
    }
    SECTION("always wrong") {
      SpeculativeDecoder<HashTarget, OracleDrafter, ExactVerifier> dec(target, OracleDrafter(ref, 8, 1.0, 3, s),
                                                                      ExactVerifier{});
      CHECK(run(dec, prompt, kNew) == greedy);
      CHECK(dec.stats().tau() == 1.0);
    }
    SECTION("budget cut") {
      SpeculativeDecoder<HashTarget, OracleDrafter, ExactVerifier> dec(
          target, DecoderOptions{.budget = 5}, OracleDrafter(ref, 12, 0.1, 3, s), ExactVerifier{});
      CHECK(run(dec, prompt, kNew) == greedy);
      CHECK(dec.stats().draft_nodes_per_step() <= 5.0);
    }
    SECTION("fixed tree of arbitrary tokens") {
      std::vector<node_t> parents;
      std::vector<token_t> tokens;
      for (int k = 0; k < 40; ++k) {
        parents.push_back(k / 3);
        tokens.push_back((k * 11 + s) % kVocab);
      }
      SpeculativeDecoder<HashTarget, FixedTreeDrafter, ExactVerifier> dec(
          target, DecoderOptions{.budget = 16}, FixedTreeDrafter(parents, tokens), ExactVerifier{});
      CHECK(run(dec, prompt, kNew) == greedy);
    }
    SECTION("several drafters merged") {
      SpeculativeDecoder<HashTarget, OracleDrafter, FixedTreeDrafter, OracleDrafter, ExactVerifier> dec(
          target, OracleDrafter(ref, 4, 0.5, 2, s), FixedTreeDrafter({0, 1}, {1, 2}),
          OracleDrafter(ref, 7, 0.2, 1, s + 100), ExactVerifier{});
      CHECK(run(dec, prompt, kNew) == greedy);
      const auto& st = dec.stats();
      REQUIRE(st.accepted_by_drafter.size() == 3);
      for (const auto& h : st.accepted_by_drafter)
        CHECK(std::accumulate(h.begin(), h.end(), std::int64_t{0}) == st.steps);
      CHECK(st.tau() > 1.5);
    }
  }
}

TEST_CASE("generate honours stop tokens and max_new_tokens", "[decoder]") {
  HashTarget target(kVocab, 8);
  const auto prompt = prompt_for(2);
  const auto greedy = target.generate(prompt, 200);
  SpeculativeDecoder<HashTarget, OracleDrafter, ExactVerifier> dec(
      target, OracleDrafter(reference(target, prompt, 200), 7), ExactVerifier{});
  // Stop at the first occurrence of the 50th token's value.
  const token_t stop = greedy[49];
  const auto first = static_cast<std::size_t>(std::find(greedy.begin(), greedy.end(), stop) - greedy.begin());
  dec.prefill(prompt);
  const std::vector<token_t> stops{stop};
  const auto out = dec.generate(200, stops);
  CHECK(out == std::vector<token_t>(greedy.begin(), greedy.begin() + first + 1));
  dec.prefill(prompt);
  CHECK(dec.generate(13) == std::vector<token_t>(greedy.begin(), greedy.begin() + 13));
  CHECK(dec.context().size() >= prompt.size() + 13);  // the last step's extra tokens are kept
  dec.prefill(prompt);
  CHECK(dec.generate(0).empty());
}

TEST_CASE("drafters are told the prompt and every committed token", "[decoder]") {
  HashTarget target(kVocab, 9);
  std::vector<token_t> seen;
  const auto prompt = prompt_for(3);
  SpeculativeDecoder<HashTarget, RecordingDrafter, OracleDrafter, ExactVerifier> dec(
      target, RecordingDrafter{&seen}, OracleDrafter(reference(target, prompt, 100), 5), ExactVerifier{});
  dec.prefill(prompt);
  dec.generate(100);
  CHECK(std::equal(seen.begin(), seen.end(), dec.context().begin(), dec.context().end()));
}

TEST_CASE("statistics add up", "[decoder][stats]") {
  HashTarget target(kVocab, 10);
  const auto prompt = prompt_for(4);
  SpeculativeDecoder<HashTarget, OracleDrafter, ExactVerifier> dec(
      target, OracleDrafter(reference(target, prompt, 200), 6, 0.3, 2), ExactVerifier{});
  dec.prefill(prompt);
  dec.generate(200);
  const auto& st = dec.stats();
  std::int64_t steps = 0, tokens = 0;
  for (std::size_t k = 0; k < st.tokens_per_step.size(); ++k) {
    steps += st.tokens_per_step[k];
    tokens += static_cast<std::int64_t>(k) * st.tokens_per_step[k];
  }
  CHECK(steps == st.steps);
  CHECK(tokens == st.tokens);
  CHECK(st.tokens_per_step[0] == 0);
  CHECK(static_cast<std::size_t>(st.tokens) == dec.context().size() - prompt.size());
  CHECK(st.draft_seconds >= 0);
  CHECK(st.target_seconds > 0);
  DecodeStats sum;
  sum.add(st);
  sum.add(st);
  CHECK(sum.tau() == Approx(st.tau()));
  CHECK(sum.steps == 2 * st.steps);
}

TEST_CASE("bad input gets a clear error", "[decoder][errors]") {
  HashTarget target(kVocab, 11);
  SpeculativeDecoder<HashTarget, EmptyDrafter, ExactVerifier> dec(target);
  CHECK_THROWS_WITH(dec.step(), Catch::Contains("call prefill() first"));
  CHECK_THROWS_WITH(dec.prefill(std::vector<token_t>{}), Catch::Contains("prompt is empty"));
  CHECK_THROWS_WITH(dec.prefill(std::vector<token_t>{1, kVocab}),
                    Catch::Contains("prompt token 1 is 50, outside the vocabulary [0, 50)"));
  CHECK_THROWS_WITH(dec.prefill(std::vector<token_t>{-3}), Catch::Contains("prompt token 0 is -3"));
  dec.prefill(std::vector<token_t>{1});
  CHECK_THROWS_WITH(dec.generate(-1), Catch::Contains("max_new_tokens must be >= 0"));

  SpeculativeDecoder<HashTarget, EmptyDrafter, OutOfVocabularyDrafter, ExactVerifier> bad(target);
  bad.prefill(std::vector<token_t>{1, 2});
  CHECK_THROWS_WITH(bad.step(), Catch::Contains("drafter 1 (broken)") && Catch::Contains("outside the vocabulary"));

  SpeculativeDecoder<HashTarget, EmptyDrafter, BrokenVerifier> broken(target);
  broken.prefill(std::vector<token_t>{1, 2});
  CHECK_THROWS_WITH(broken.step(), Catch::Contains("verifier: accepted path entry 1"));

  SpeculativeDecoder<HashTarget, EmptyDrafter, ExactVerifier> negative(target, DecoderOptions{.budget = -2});
  CHECK_THROWS_WITH(negative.prefill(std::vector<token_t>{1}), Catch::Contains("budget must be >= 0, got -2"));
}

namespace {
/// A HashTarget that counts its forwards and the tree nodes they ran.
struct CountingTarget : HashTarget {
  using HashTarget::HashTarget;
  int forwards = 0, nodes = 0;
  const Output& forward(const TreeView& tree) {
    ++forwards;
    nodes += tree.size;
    return HashTarget::forward(tree);
  }
};
}  // namespace

TEST_CASE("resume goes on from another context, keeping the common cache", "[decoder][resume][lossless]") {
  CountingTarget target(kVocab, 13);
  std::vector<token_t> seen;
  const auto prompt = prompt_for(2);
  const auto truth = reference(target, prompt, 400);
  SpeculativeDecoder<CountingTarget, RecordingDrafter, OracleDrafter, ExactVerifier> dec(
      target, RecordingDrafter{&seen}, OracleDrafter(truth, 4, 0.3, 7), ExactVerifier{});
  dec.prefill(prompt);
  dec.generate(40);
  const std::vector<token_t> before(dec.context().begin(), dec.context().end());

  // Cases: a prefix (rewind only), a prefix with another root (free), a fork two tokens back,
  // and an extension by other tokens (one forward feeds them).
  struct Case {
    const char* what;
    std::vector<token_t> context;
    int forwards;
  };
  std::vector<Case> cases;
  cases.push_back({"prefix", {before.begin(), before.end() - 10}, 0});
  cases.push_back({"another root", {before.begin(), before.end() - 5}, 0});
  cases.back().context.back() = (cases.back().context.back() + 1) % kVocab;
  cases.push_back({"fork", {before.begin(), before.end() - 3}, 1});
  cases.back().context.insert(cases.back().context.end() - 1, {7, 8, 9});
  cases.push_back({"extension", before, 1});
  cases.back().context.insert(cases.back().context.end(), {1, 2, 3, 4});
  for (const Case& c : cases) {
    INFO(c.what);
    dec.prefill(prompt);
    dec.generate(40);
    target.forwards = 0;
    dec.resume(c.context);
    CHECK(target.forwards == c.forwards);
    CHECK(target.cached() == static_cast<int>(c.context.size()) - 1);
    CHECK(std::equal(dec.context().begin(), dec.context().end(), c.context.begin(), c.context.end()));
    CHECK(seen == c.context);  // drafters began again on it
    // Going on from there is plain greedy decoding of the new context.
    const auto out = dec.generate(60);
    CHECK(out == target.generate(c.context, 60));
  }
}

TEST_CASE("resume errors", "[decoder][resume][errors]") {
  HashTarget target(kVocab, 14);
  SpeculativeDecoder<HashTarget, EmptyDrafter, ExactVerifier> dec(target);
  CHECK_THROWS_WITH(dec.resume(std::vector<token_t>{1, 2}), Catch::Contains("resume: call prefill() first"));
  dec.prefill(std::vector<token_t>{1, 2, 3});
  CHECK_THROWS_WITH(dec.resume(std::vector<token_t>{}), Catch::Contains("the context is empty"));
  CHECK_THROWS_WITH(dec.resume(std::vector<token_t>{1, kVocab}),
                    Catch::Contains("resume: token 1 is 50, outside the vocabulary [0, 50)"));
  // A refused resume leaves the decoder as it was.
  CHECK(dec.generate(20) == target.generate(std::vector<token_t>{1, 2, 3}, 20));
}

TEST_CASE("a target with few positions is never overrun", "[decoder]") {
  struct SmallTarget : HashTarget {
    using HashTarget::HashTarget;
    int max_positions() const { return 20; }
  };
  SmallTarget target(kVocab, 12);
  const std::vector<token_t> prompt{1, 2, 3};
  SpeculativeDecoder<SmallTarget, OracleDrafter, ExactVerifier> dec(
      target, OracleDrafter(reference(target, prompt, 40), 8), ExactVerifier{});
  dec.prefill(prompt);
  // 20 positions: the root at position 19 is the last one that can be forwarded.
  const auto out = dec.generate(17);
  CHECK(out == target.generate(prompt, 17));
  while (target.cached() < 20) dec.step();
  CHECK(target.cached() == 20);
  const auto all = target.generate(prompt, 18);
  CHECK(std::equal(dec.context().begin() + 3, dec.context().end(), all.begin(), all.end()));
  CHECK_THROWS_WITH(dec.step(), Catch::Contains("target is full (20 positions)"));
}

namespace {
/// A HashTarget with its own plain decoding loop (a PlainDecodingTarget), counting its decode()
/// calls; `bad` makes decode() return a token outside the vocabulary.
struct PlainHashTarget : HashTarget {
  using HashTarget::HashTarget;
  int decode_calls = 0;
  bool bad = false;
  std::vector<token_t> decode(token_t last, int n, std::span<const token_t> stop) {
    ++decode_calls;
    const node_t none = -1, root = 0;
    const int depth = 0;
    const std::uint32_t mask = 1;
    std::vector<token_t> out;
    for (int i = 0; i < n; ++i) {
      const TreeView tree{.size = 1, .words_per_row = 1, .base_position = cached(), .parent = &none, .token = &last,
                          .depth = &depth, .mask = &mask, .first_child = &none, .next_sibling = &none};
      last = forward(tree).argmax(0);
      commit(std::span<const node_t>(&root, 1));
      out.push_back(bad ? vocab_size() : last);
      if (std::find(stop.begin(), stop.end(), last) != stop.end()) break;
    }
    return out;
  }
};
static_assert(PlainDecodingTarget<PlainHashTarget> && !PlainDecodingTarget<HashTarget>);
// Plain runs need the target's own loop and a greedy verifier (a sampling one draws the root's
// next token from the logits).
static_assert(SpeculativeDecoder<PlainHashTarget, OracleDrafter, ExactVerifier>::runs_plainly);
static_assert(!SpeculativeDecoder<HashTarget, OracleDrafter, ExactVerifier>::runs_plainly);
static_assert(!SpeculativeDecoder<PlainHashTarget, OracleDrafter, RejectionSampling>::runs_plainly);

/// The exact verifier, counting its calls.
struct CountingVerifier : ExactVerifier {
  int* calls;
  template <class Out>
  void verify(const TreeView& tree, const Out& out, Verdict& verdict) const {
    ++*calls;
    ExactVerifier::verify(tree, out, verdict);
  }
};

/// A cost model under which no draft node ever pays: the automatic budget pauses its drafters.
struct DearNodes {
  double step_seconds(int nodes, int) const { return nodes; }
};
}  // namespace

TEST_CASE("plain runs: generate() gives root-only steps to the target's own loop", "[decoder][plain_runs][lossless]") {
  const auto prompt = prompt_for(3);
  const auto decode = [&](DecoderOptions options, int n, std::vector<token_t> stop, int* verifications, int* decodes) {
    PlainHashTarget target(kVocab, 21);
    const auto truth = reference(target, prompt, n);
    SpeculativeDecoder<PlainHashTarget, OracleDrafter, CountingVerifier> dec(
        target, options, OracleDrafter(truth, 4, 1.0, 2, 5), CountingVerifier{{}, verifications});
    dec.prefill(prompt);
    const auto out = dec.generate(n, stop);
    CHECK(std::equal(dec.context().begin(), dec.context().end(), truth.begin()));  // lossless
    CHECK(target.cached() == static_cast<int>(dec.context().size()) - 1);
    CHECK(dec.last_verdict().next_token == dec.context().back());
    CHECK(dec.last_tree().size() == 1);
    *decodes = target.decode_calls;
    return std::make_pair(out, dec.stats());
  };

  SECTION("budget 0: one call for all the tokens, none for the verifier") {
    int verified = 0, decoded = 0, verified_by_step = 0, decoded_by_step = 0;
    const auto [out, stats] = decode({.budget = 0}, 120, {}, &verified, &decoded);
    const auto [by_step, by_step_stats] =
        decode({.budget = 0, .plain_runs = false}, 120, {}, &verified_by_step, &decoded_by_step);
    CHECK(out == by_step);
    CHECK(out.size() == 120);
    CHECK(decoded == 1);
    CHECK(verified == 0);
    CHECK(decoded_by_step == 0);
    CHECK(verified_by_step == 120);
    testing::check_same_counters(stats, by_step_stats);
    CHECK(stats.tokens_per_step == std::vector<std::int64_t>{0, 120});
    CHECK(stats.accepted_by_drafter == std::vector<std::vector<std::int64_t>>{{120}});
    CHECK(stats.target_seconds > 0);
  }
  SECTION("a stop token ends the run where a step would end") {
    PlainHashTarget probe(kVocab, 21);
    const token_t stop = probe.generate(prompt, 60)[41];
    int verified = 0, decoded = 0, verified_by_step = 0, decoded_by_step = 0;
    const auto [out, stats] = decode({.budget = 0}, 120, {stop}, &verified, &decoded);
    const auto [by_step, by_step_stats] =
        decode({.budget = 0, .plain_runs = false}, 120, {stop}, &verified_by_step, &decoded_by_step);
    CHECK(out == by_step);
    CHECK(out.back() == stop);
    CHECK(out.size() <= 42);
    testing::check_same_counters(stats, by_step_stats);
  }
  SECTION("the automatic budget's pauses, counted down by the runs") {
    // Measured times would make the pause's length depend on the machine; the model's do not.
    const DecoderOptions automatic{.budget = 8, .cost = DearNodes{}, .measured_pause = false};
    DecoderOptions by_steps = automatic;
    by_steps.plain_runs = false;
    int verified = 0, decoded = 0, verified_by_step = 0, decoded_by_step = 0;
    const auto [out, stats] = decode(automatic, 300, {}, &verified, &decoded);
    const auto [by_step, by_step_stats] = decode(by_steps, 300, {}, &verified_by_step, &decoded_by_step);
    CHECK(out == by_step);
    testing::check_same_counters(stats, by_step_stats);
    CHECK(stats.paused_steps > 200);
    CHECK(decoded > 3);
    CHECK(verified == stats.steps - stats.paused_steps);  // the drafting steps only
    CHECK(verified_by_step == stats.steps);
  }
}

TEST_CASE("plain runs: a bounded target, and a target's bad tokens", "[decoder][plain_runs]") {
  struct SmallPlainTarget : PlainHashTarget {
    using PlainHashTarget::PlainHashTarget;
    int max_positions() const { return 20; }
  };
  SmallPlainTarget target(kVocab, 12);
  const std::vector<token_t> prompt{1, 2, 3};
  SpeculativeDecoder<SmallPlainTarget, EmptyDrafter, ExactVerifier> dec(target, DecoderOptions{.budget = 0});
  dec.prefill(prompt);
  CHECK(dec.generate(16) == target.generate(prompt, 16));
  // 20 positions: the root at position 19 is the last one the run forwards, then the step refuses.
  CHECK_THROWS_WITH(dec.generate(5), Catch::Contains("target is full (20 positions)"));
  CHECK(target.cached() == 20);
  const auto all = target.generate(prompt, 18);
  CHECK(std::equal(dec.context().begin() + 3, dec.context().end(), all.begin(), all.end()));

  target.bad = true;
  dec.prefill(prompt);
  CHECK_THROWS_WITH(dec.generate(5),
                    Catch::Contains("the target's decode(): token 0 is 50, outside the vocabulary [0, 50)"));
  CHECK_THROWS_WITH(dec.step(), Catch::Contains("call prefill() first"));
}

// DecodeStats::tokens counted the tokens of the last step past generate()'s cut, so throughput
// from the stats was too high (issue 49: 502 tokens in the stats against 490 returned).
TEST_CASE("decoder: output_tokens counts the tokens handed out, tokens all that were committed", "[decoder][stats]") {
  HashTarget target(kVocab);
  const std::vector<token_t> prompt = prompt_for(3);
  // A right chain of 8: every step commits 9 tokens.
  SpeculativeDecoder<HashTarget, OracleDrafter, ExactVerifier> dec(target, OracleDrafter(reference(target, prompt, 60), 8),
                                                                   ExactVerifier{});
  dec.prefill(prompt);
  CHECK(dec.generate(20).size() == 20);
  CHECK(dec.stats().tokens == 27);
  CHECK(dec.stats().output_tokens == 20);
  CHECK(dec.step().size() == 9);  // step() hands out all it commits
  CHECK(dec.stats().tokens == 36);
  CHECK(dec.stats().output_tokens == 29);
  DecodeStats sum = dec.stats();
  sum.add(dec.stats());
  CHECK(sum.output_tokens == 58);
}
