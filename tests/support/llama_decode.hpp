// Checks shared by the drafter tests on llama2.c models: decoding prompts with the exact verifier
// against the target's own greedy output, and the target's next-token distribution (what a
// chi-square test under rejection sampling compares against).
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <span>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/testing/laid_out_tree.hpp>

namespace specdec::testing {

/// Decodes `n` tokens after each prompt with the exact verifier and the drafters `make()...`
/// returns (made afresh for each prompt, so move-only drafters work), requires the target's
/// greedy output, and returns the stats over all prompts.
template <class... Makers>
DecodeStats require_greedy_made(const std::shared_ptr<const Llama2cModel>& model,
                                std::span<const std::vector<token_t>> prompts, int n, DecoderOptions options,
                                Makers... make) {
  Llama2cTarget target(model);
  DecodeStats total;
  for (std::size_t p = 0; p < prompts.size(); ++p) {
    INFO("prompt " << p);
    const std::vector<token_t> expected = target.generate(prompts[p], n);  // before the decoder takes the target
    SpeculativeDecoder<Llama2cTarget, decltype(make())..., ExactVerifier> decoder(target, options, make()...,
                                                                                  ExactVerifier{});
    decoder.prefill(prompts[p]);
    CHECK(decoder.generate(n) == expected);
    total.add(decoder.stats());
  }
  return total;
}

/// The same with a copy of `drafters` for each prompt.
template <class... Drafters>
DecodeStats require_greedy(const std::shared_ptr<const Llama2cModel>& model, std::span<const std::vector<token_t>> prompts,
                           int n, DecoderOptions options, Drafters... drafters) {
  return require_greedy_made(model, prompts, n, options, [&drafters] { return drafters; }...);
}

/// The target's next-token distribution after `context` (temperature 1).
inline std::vector<double> next_token_distribution(const std::shared_ptr<const Llama2cModel>& model,
                                                   std::span<const token_t> context) {
  Llama2cTarget target(model);
  target.prefill(context.first(context.size() - 1));
  const LaidOutTree root({-1}, {context.back()});
  const auto logits = target.forward(root.view(static_cast<int>(context.size()) - 1)).logits(0);
  const float best = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (const float l : logits) sum += std::exp(static_cast<double>(l - best));
  std::vector<double> p;
  for (const float l : logits) p.push_back(std::exp(static_cast<double>(l - best)) / sum);
  return p;
}

}  // namespace specdec::testing
