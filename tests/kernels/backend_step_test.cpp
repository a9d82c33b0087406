// The decoder's backend step on backend::cuda (BackendHashTarget on the device, verification and
// KV compaction by the CUDA kernels): the same cases as tests/backend_step_test.cpp, compared
// with plain greedy decoding and with the host path token for token.
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "kernels/device_decoder.hpp"

using namespace specdec;
using testing::DecodeCase;
using testing::drafts;
using testing::verifier;

TEST_CASE("GPU backend step: exact verification equals plain greedy decoding", "[gpu][backend_step][lossless]") {
  for (int vocab : {64, 32000}) {
    for (drafts d : {drafts::none, drafts::oracle_chain, drafts::oracle_wide, drafts::casd_and_oracle, drafts::sampled}) {
      DecodeCase c;
      c.vocab = vocab;
      c.drafter = d;
      c.new_tokens = vocab > 1000 ? 60 : 200;
      c.budget = 64;
      const auto result = testing::decode_on_device(c);
      INFO("vocab " << vocab << ", drafter set " << static_cast<int>(d) << ": " << result.error);
      REQUIRE(result.error.empty());
      const auto reference = testing::greedy_reference(c);
      CHECK(std::equal(result.context.begin(), result.context.end(), reference.begin()));
      if (d == drafts::oracle_chain) CHECK(result.tau > 6.0);
    }
  }
}

// Vocab 32000 takes the row-parallel launch shape (kernels::stochastic_launch), vocab 64 per tree.
TEST_CASE("GPU backend step: sampling verifiers commit what the host path commits", "[gpu][backend_step][rejection]") {
  for (int vocab : {64, 32000}) {
    for (verifier v : {verifier::rejection, verifier::conditional}) {
      for (float temperature : {0.0f, 0.8f}) {
        DecodeCase c;
        c.vocab = vocab;
        c.new_tokens = vocab > 1000 ? 60 : 200;
        c.check = v;
        c.drafter = drafts::sampled;
        c.temperature = temperature;
        HashTarget host_target(c.vocab, c.seed);
        const auto host = testing::decode(host_target, c);
        const auto device = testing::decode_on_device(c);
        INFO("vocab " << vocab << ", verifier " << static_cast<int>(v) << ", T " << temperature << ": " << device.error);
        REQUIRE(device.error.empty());
        CHECK(device.context == host.context);
      }
    }
  }
}

TEST_CASE("GPU backend step: the device KV cache holds exactly the committed tokens", "[gpu][backend_step][kv]") {
  DecodeCase c;
  c.budget = 16;
  const auto check = testing::check_cache_after_each_step_on_device(c, 30);
  CHECK(check.steps_matching == 30);
  CHECK(check.long_steps > 5);
}

TEST_CASE("GPU backend step: a full device cache is an error after the last position", "[gpu][backend_step]") {
  DecodeCase c;
  c.max_positions = 40;
  c.new_tokens = 100;
  const auto result = testing::decode_on_device(c);
  CHECK(result.error.find("the target is full (40 positions)") != std::string::npos);
  REQUIRE(result.context.size() == 41);
  const auto reference = testing::greedy_reference(c);
  CHECK(std::equal(result.context.begin(), result.context.end(), reference.begin()));
}
