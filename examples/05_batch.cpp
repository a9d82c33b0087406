// Batched speculative decoding: requests join and leave a SpeculativeBatch; each step is one
// target forward for all of them and streams what every request committed.
// [batch]
#include <cstdio>
#include <map>
#include <vector>

#include <specdec/batch_decoder.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/testing/hash_target.hpp>

int main() {
  using namespace specdec;
  HashTarget model(/*vocab_size=*/64, /*seed=*/1, /*sharpness=*/4.0f, /*slots=*/3);  // any BatchTarget
  SpeculativeBatch<HashTarget, OracleDrafter, ExactVerifier> batch(model, /*capacity=*/3, OracleDrafter({}, 0),
                                                                   ExactVerifier{});
  const std::vector<std::vector<token_t>> prompts{{5, 17, 42}, {1, 2}, {9, 9, 9, 9}, {33}, {7, 40}};

  std::map<request_id, std::vector<token_t>> outputs;  // streamed tokens per request
  std::map<request_id, std::size_t> prompt_of;
  std::size_t next = 0;
  bool lossless = true;
  while (next < prompts.size() || batch.active() > 0) {
    while (next < prompts.size() && batch.active() < batch.capacity()) {  // join while a slot is free
      RequestOptions options;
      options.max_new_tokens = 40 + 20 * static_cast<int>(next);
      options.speculate = next != 1;  // request 1 decodes plainly: it sends its root only
      options.budget = 8;
      std::vector<token_t> truth = prompts[next];  // an oracle right 80% of the time, for the demo
      for (token_t t : model.generate(prompts[next], 200)) truth.push_back(t);
      const request_id id = batch.add(prompts[next], options, OracleDrafter(truth, /*depth=*/6, /*error_rate=*/0.2));
      prompt_of[id] = next++;
    }
    for (const RequestUpdate& u : batch.step()) {  // one target forward for every active request
      auto& out = outputs[u.id];
      out.insert(out.end(), u.tokens.begin(), u.tokens.end());
      if (u.finished) {
        const auto& prompt = prompts[prompt_of[u.id]];
        lossless = lossless && out == model.generate(prompt, static_cast<int>(out.size()));
        std::printf("request %lld: %zu tokens, tau = %.2f (tokens per target call, bonus included)\n",
                    static_cast<long long>(u.id), out.size(), u.stats->tau());
      }
    }
  }
  const DecodeStats all = batch.stats();
  std::printf("all requests: %lld tokens in %lld target forwards; tau over request steps = %.2f\n",
              static_cast<long long>(all.tokens), static_cast<long long>(batch.forwards()), all.tau());
  std::printf("each request identical to its own plain greedy decoding: %s\n", lossless ? "yes" : "NO");
  return lossless ? 0 : 1;
}
// [batch]
