// PerSlotTarget: a plain Target per slot makes a BatchTarget, and SpeculativeBatch decodes it
// losslessly (one forward per request: the fallback for a model that is not a BatchTarget).
#include <catch2/catch.hpp>

#include <map>
#include <vector>

#include <specdec/batch_decoder.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/context_tree.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/targets/per_slot.hpp>
#include <specdec/testing/hash_target.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "support/stories260k.hpp"

using namespace specdec;

namespace {

/// Decodes `prompts` (max_new_tokens each) through `batch`, a new request joining whenever a slot
/// is free; returns each request's output, in prompt order.
template <class Batch>
std::vector<std::vector<token_t>> decode_all(Batch& batch, const std::vector<std::vector<token_t>>& prompts, int max_new_tokens) {
  std::vector<std::vector<token_t>> out(prompts.size());
  std::map<request_id, std::size_t> prompt_of;
  std::size_t next = 0;
  RequestOptions options;
  options.max_new_tokens = max_new_tokens;
  options.budget = 8;
  while (next < prompts.size() || batch.active() > 0) {
    while (next < prompts.size() && batch.active() < batch.capacity()) {
      options.speculate = next % 3 != 2;
      prompt_of[batch.add(prompts[next], options)] = next;
      ++next;
    }
    for (const RequestUpdate& u : batch.step()) {
      auto& o = out[prompt_of.at(u.id)];
      o.insert(o.end(), u.tokens.begin(), u.tokens.end());
    }
  }
  return out;
}

}  // namespace

TEST_CASE("PerSlotTarget of HashTargets: each request equals its own greedy decoding", "[batch][per_slot][lossless]") {
  STATIC_REQUIRE(BatchTarget<PerSlotTarget<HashTarget>>);
  std::vector<HashTarget> targets;
  for (int s = 0; s < 3; ++s) targets.emplace_back(30, 4);
  PerSlotTarget<HashTarget> target(std::move(targets));
  SpeculativeBatch<PerSlotTarget<HashTarget>, CasdDrafter, ContextTreeDrafter, ExactVerifier> batch(target, 3);
  std::vector<std::vector<token_t>> prompts;
  for (int p = 0; p < 10; ++p) prompts.push_back({p % 30, (p * 7) % 30, (p * 13 + 5) % 30, p % 30});
  const auto out = decode_all(batch, prompts, 60);
  const HashTarget reference(30, 4);
  for (std::size_t p = 0; p < prompts.size(); ++p) CHECK(out[p] == reference.generate(prompts[p], 60));
  CHECK_THROWS_WITH(target.prefill(3, prompts[0]), "PerSlotTarget::prefill: slot 3 outside [0, 3)");
  std::vector<HashTarget> mixed;
  mixed.emplace_back(30);
  mixed.emplace_back(31);
  CHECK_THROWS_WITH(PerSlotTarget<HashTarget>(std::move(mixed)), "PerSlotTarget: slot 1's target has 31 tokens, slot 0's 30");
}

TEST_CASE("PerSlotTarget of Llama2cTargets (stories260K): batched decoding equals greedy", "[batch][per_slot][lossless][data]") {
  const testing::Stories260K* stories = testing::stories260k();
  if (!stories) return;  // skipped: see data.hpp
  STATIC_REQUIRE(BoundedTarget<PerSlotTarget<Llama2cTarget>>);
  std::vector<Llama2cTarget> targets;
  for (int s = 0; s < 3; ++s) targets.emplace_back(stories->model);  // the weights are shared
  PerSlotTarget<Llama2cTarget> target(std::move(targets));
  SpeculativeBatch<PerSlotTarget<Llama2cTarget>, CasdDrafter, ExactVerifier> batch(target, 3);
  std::vector<std::vector<token_t>> prompts;
  for (const char* text : {"Once upon a time", "Tom had a big red ball.", "The cat", "Mom said", "There was a dog"})
    prompts.push_back(stories->tokenizer.encode(text));
  const auto out = decode_all(batch, prompts, 80);
  Llama2cTarget single(stories->model);
  for (std::size_t p = 0; p < prompts.size(); ++p) CHECK(out[p] == single.generate(prompts[p], 80));
}
