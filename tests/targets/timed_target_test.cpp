#include <catch2/catch.hpp>

#include <array>
#include <span>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/drafters/pld.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/targets/replay_target.hpp>
#include <specdec/targets/timed_target.hpp>
#include <specdec/testing/hash_target.hpp>
#include <specdec/testing/laid_out_tree.hpp>

using namespace specdec;

namespace {

constexpr int kVocab = 40;
constexpr token_t kStop = 2;

static_assert(Target<TimedTarget<ReplayTarget, HashTarget>>);
static_assert(RewindableTarget<TimedTarget<HashTarget, HashTarget&>>);
static_assert(!RewindableTarget<TimedTarget<ReplayTarget, HashTarget>>, "ReplayTarget cannot rewind");

std::vector<token_t> make_reference(int length, unsigned seed) {
  std::vector<token_t> r;
  unsigned x = seed;
  for (int i = 0; i < length; ++i) {
    x = x * 1103515245u + 12345u;
    r.push_back(static_cast<token_t>(3 + (x >> 16) % (kVocab - 3)));
  }
  r.push_back(kStop);
  return r;
}

/// The coster holds exactly the first `cached` tokens of `sequence`: its next forward equals a
/// fresh HashTarget's prefilled with them (a wrong commit would change the running hash).
void require_cache_holds(HashTarget& coster, std::span<const token_t> sequence, std::uint64_t seed) {
  const int cached = coster.cached();
  REQUIRE(cached >= 0);
  REQUIRE(static_cast<std::size_t>(cached) < sequence.size());
  HashTarget fresh(coster.vocab_size(), seed);
  fresh.prefill(sequence.first(static_cast<std::size_t>(cached)));
  const testing::LaidOutTree root({-1}, {sequence[static_cast<std::size_t>(cached)]});
  const std::vector<float> expected(fresh.forward(root.view(cached)).logits(0).begin(),
                                    fresh.forward(root.view(cached)).logits(0).end());
  const auto& out = coster.forward(root.view(cached));
  CHECK(std::vector<float>(out.logits(0).begin(), out.logits(0).end()) == expected);
}

}  // namespace

TEST_CASE("a timed replay gives the recorded tokens and the coster commits the same path", "[timed_target]") {
  const double error_rate = GENERATE(0.0, 0.3, 1.0);
  const std::vector<token_t> reference = make_reference(300, 7);
  const std::span<const token_t> prompt = std::span(reference).first(20);
  const std::vector<token_t> recorded(reference.begin() + 20, reference.end());

  TimedTarget<ReplayTarget, HashTarget> target(ReplayTarget(reference, kVocab, kStop), HashTarget(kVocab, 9));
  SpeculativeDecoder<TimedTarget<ReplayTarget, HashTarget>, OracleDrafter, ExactVerifier> decoder(
      target, DecoderOptions{.budget = 16}, OracleDrafter(reference, 6, error_rate, 2), ExactVerifier{});
  decoder.prefill(prompt);
  const std::array<token_t, 1> stop{kStop};
  CAPTURE(error_rate);
  CHECK(decoder.generate(1000, stop) == recorded);
  CHECK(target.coster().cached() == target.decider().cached());
  std::vector<token_t> sequence(reference);
  sequence.push_back(kStop);  // past the end the replay repeats the stop token
  require_cache_holds(target.coster(), sequence, 9);
}

TEST_CASE("with the exact verifier a timed target's output is the decider's greedy output", "[timed_target]") {
  const std::vector<token_t> prompt{5, 6, 7, 5, 6, 7, 5, 6};
  HashTarget decider_alone(kVocab, 3);
  const std::vector<token_t> greedy = decider_alone.generate(prompt, 120);

  HashTarget coster(kVocab, 11);  // held by reference: the caller keeps it
  TimedTarget<HashTarget, HashTarget&> target(HashTarget(kVocab, 3), coster);
  SpeculativeDecoder<TimedTarget<HashTarget, HashTarget&>, PldDrafter, ExactVerifier> decoder(
      target, DecoderOptions{.budget = 8}, PldDrafter{}, ExactVerifier{});
  decoder.prefill(prompt);
  CHECK(decoder.generate(120) == greedy);
  CHECK(coster.cached() == target.decider().cached());
  std::vector<token_t> sequence(prompt);
  sequence.insert(sequence.end(), greedy.begin(), greedy.end());
  require_cache_holds(coster, sequence, 11);

  target.rewind(static_cast<int>(prompt.size()));
  CHECK(coster.cached() == static_cast<int>(prompt.size()));
  CHECK(target.decider().cached() == static_cast<int>(prompt.size()));
}

TEST_CASE("a coster with a smaller vocabulary than the decider is refused", "[timed_target]") {
  CHECK_THROWS_WITH((TimedTarget<HashTarget, HashTarget>(HashTarget(64), HashTarget(32))),
                    "TimedTarget: the coster's vocabulary (32 tokens) is smaller than the decider's (64)");
}

TEST_CASE("a tree the decider refuses never reaches the coster", "[timed_target]") {
  TimedTarget<HashTarget, HashTarget> target(HashTarget(kVocab, 1), HashTarget(kVocab, 2));
  target.prefill(std::vector<token_t>{4, 5});
  const testing::LaidOutTree tree({-1, 0}, {6, kVocab + 3});
  CHECK_THROWS(target.forward(tree.view(2)));
  const testing::LaidOutTree root({-1}, {6});
  CHECK(target.coster().cached() == 2);
  CHECK_NOTHROW(target.forward(root.view(2)));
}
