// The decoder's backend step (step/backend_step.hpp) on the host backend: a BackendTarget decodes
// exactly what the host path decodes, its KV cache is compacted to the committed tokens, and
// failures surface as specdec::error. tests/kernels/backend_step_test.cpp runs the same cases on
// backend::cuda.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/testing/backend_hash_target.hpp>
#include <specdec/testing/hash_target.hpp>

#include "support/backend_decode.hpp"

using namespace specdec;
using testing::DecodeCase;
using testing::drafts;
using testing::verifier;

namespace {

testing::DecodeResult on_backend(const DecodeCase& c) {
  BackendHashTarget<> target(c.vocab, c.max_positions, c.seed);
  return testing::decode(target, c);
}
testing::DecodeResult on_host_path(const DecodeCase& c) {
  HashTarget target(c.vocab, c.seed);
  return testing::decode(target, c);
}


/// A backend target whose logits rows are all NaN (its cache is never read).
class NanTarget {
 public:
  using backend_type = backend::host;
  backend::host backend() const { return {}; }
  int vocab_size() const { return 8; }
  void prefill(std::span<const token_t>) {}
  LogitsRows forward(const TreeView& tree) {
    rows_.assign(static_cast<std::size_t>(tree.size) * 8, std::nanf(""));
    return {rows_.data(), 8};
  }
  core::KvCacheView kv_cache() { return {core::kv_layout(1, 256, 1, 1, 1), cache_, nullptr}; }

 private:
  std::vector<float> rows_;
  unsigned char cache_[256] = {};
};

}  // namespace

TEST_CASE("backend step: exact verification equals plain greedy decoding for every drafter set", "[backend_step][lossless]") {
  for (drafts d : {drafts::none, drafts::oracle_chain, drafts::oracle_wide, drafts::casd_and_oracle, drafts::sampled}) {
    for (std::uint64_t seed : {1u, 2u, 3u}) {
      DecodeCase c;
      c.seed = seed;
      c.drafter = d;
      c.prompt = {static_cast<token_t>(seed), 7, 9, 7, 9};
      const auto result = on_backend(c);
      INFO("drafter set " << static_cast<int>(d) << ", seed " << seed);
      REQUIRE(result.error.empty());
      const auto reference = testing::greedy_reference(c);
      REQUIRE(result.context.size() >= c.prompt.size() + c.new_tokens);
      CHECK(std::equal(result.context.begin(), result.context.end(), reference.begin()));
      if (d == drafts::none) CHECK(result.tau == 1.0);
      if (d == drafts::oracle_chain) CHECK(result.tau > 6.5);
    }
  }
}

TEST_CASE("backend step: sampling verifiers commit the same tokens as on the host path", "[backend_step][rejection][conditional]") {
  // Both paths run the same core walks with the same keys, so equality is exact, draft
  // distributions (add_sampled) included.
  for (verifier v : {verifier::rejection, verifier::conditional}) {
    for (drafts d : {drafts::oracle_wide, drafts::sampled}) {
      for (float temperature : {0.0f, 0.8f}) {
        DecodeCase c;
        c.check = v;
        c.drafter = d;
        c.temperature = temperature;
        INFO("verifier " << static_cast<int>(v) << ", drafters " << static_cast<int>(d) << ", T " << temperature);
        const auto device = on_backend(c);
        const auto host = on_host_path(c);
        REQUIRE(device.error.empty());
        CHECK(device.context == host.context);
        CHECK(device.tau == host.tau);
        if (v == verifier::rejection && temperature == 0.0f) {
          const auto reference = testing::greedy_reference(c);
          CHECK(std::equal(device.context.begin(), device.context.end(), reference.begin()));
        }
      }
    }
  }
}

TEST_CASE("backend step: the KV cache holds exactly the committed tokens after every step", "[backend_step][kv]") {
  DecodeCase c;
  c.seed = 9;
  c.prompt = {4, 5, 6};
  c.budget = 16;
  BackendHashTarget<> target(c.vocab, 1024, c.seed);
  const auto check = testing::check_cache_after_each_step(target, c, 40);
  CHECK(check.steps_matching == 40);
  CHECK(check.long_steps > 5);  // compaction moved rows in many steps
}

TEST_CASE("backend step: the tree shrinks to fit the cache, and a full cache is an error", "[backend_step]") {
  DecodeCase c;
  c.max_positions = 40;  // the prompt's 3 tokens leave 37 positions
  c.new_tokens = 100;
  const auto result = on_backend(c);
  CHECK(result.error.find("the target is full (40 positions)") != std::string::npos);
  // Every position was used: 40 cached plus the root that found no room.
  REQUIRE(result.context.size() == 41);
  const auto reference = testing::greedy_reference(c);
  CHECK(std::equal(result.context.begin(), result.context.end(), reference.begin()));
}

TEST_CASE("backend step: a bad logits row is a specdec::error naming the problem", "[backend_step]") {
  NanTarget target;
  const std::vector<token_t> prompt = {1, 2};
  SECTION("exact") {
    SpeculativeDecoder<NanTarget, ExactVerifier> dec(target);
    dec.prefill(prompt);
    CHECK_THROWS_WITH(dec.step(), Catch::Contains("a logits row on the accepted path contains NaN"));
    // The failed step may have touched the cache: the sequence must start again.
    CHECK_THROWS_WITH(dec.step(), Catch::Contains("call prefill() first"));
  }
  SECTION("rejection sampling") {
    SpeculativeDecoder<NanTarget, RejectionSampling> dec(target);
    dec.prefill(prompt);
    CHECK_THROWS_WITH(dec.step(), Catch::Contains("SpeculativeDecoder: the target's logits row after node 0 of the tree is unusable: a logit is NaN"));
  }
}

TEST_CASE("backend step: bad verifier parameters are refused before anything runs", "[backend_step][conditional]") {
  BackendHashTarget<> target(16, 128);
  SpeculativeDecoder<BackendHashTarget<>, ConditionalVerifier> dec(target, DecoderOptions{},
                                                                    ConditionalVerifier(ConditionalParams{0.1f, 0, 16}));
  const std::vector<token_t> prompt = {1, 2};
  dec.prefill(prompt);
  CHECK_THROWS_WITH(dec.step(), Catch::Contains("eos token 16 outside the vocabulary [0, 16)"));
}

TEST_CASE("backend step: a budget above the backend's node limit is refused at prefill", "[backend_step]") {
  BackendHashTarget<> target(16, 8192);
  SpeculativeDecoder<BackendHashTarget<>, ExactVerifier> dec(target, DecoderOptions{backend::max_compaction_nodes});
  const std::vector<token_t> prompt = {1, 2};
  CHECK_THROWS_WITH(dec.prefill(prompt), Catch::Contains("budget 2048 is above what a backend step verifies and "
                                                         "compacts (2047 draft nodes)"));
  CHECK_THROWS_WITH(dec.step(), Catch::Contains("call prefill() first"));
}

TEST_CASE("backend step: a budget of INT_MAX is refused at prefill (budget + 1 overflowed)", "[backend_step][overflow]") {
  // Issue 20: budget + 1 wrapped to INT_MIN, passed the limit check and asked for 16 EiB.
  BackendHashTarget<> target(16, 8192);
  SpeculativeDecoder<BackendHashTarget<>, ExactVerifier> dec(target, DecoderOptions{std::numeric_limits<int>::max()});
  const std::vector<token_t> prompt = {1, 2};
  CHECK_THROWS_WITH(dec.prefill(prompt), Catch::Contains("budget 2147483647 is above what a backend step verifies"));
}
