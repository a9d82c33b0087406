#include "model.hpp"

#include <fmt/format.h>

#include "input_error.hpp"

namespace specbench {

ModelBench make_model_bench(std::shared_ptr<const specdec::Llama2cModel> model, const specdec::Llama2cTokenizer& tokenizer,
                            std::span<const Task* const> tasks, int max_new_tokens, int max_prompts, int* clamped) {
  ModelBench bench;
  bench.model = std::move(model);
  bench.stop_tokens = {specdec::Llama2cTokenizer::bos, specdec::Llama2cTokenizer::eos};
  const int positions = bench.model->config().seq_len;
  int cut = 0;
  for (const Task* task : tasks) {
    const std::size_t count =
        max_prompts > 0 ? std::min<std::size_t>(static_cast<std::size_t>(max_prompts), task->prompts.size())
                        : task->prompts.size();
    for (std::size_t i = 0; i < count; ++i) {
      ModelPrompt prompt{task->name, {}, max_new_tokens};
      try {
        prompt.tokens = tokenizer.encode(task->prompts[i]);
      } catch (const specdec::error& e) {  // a tokenizer without a piece the task needs: the input's fault
        throw input_error(fmt::format("task {}, prompt {}: {} (choose tasks this tokenizer can write, --task)",
                                      task->name, i, e.what()));
      }
      const int length = static_cast<int>(prompt.tokens.size());
      if (length > positions) {
        ++bench.skipped;
        continue;
      }
      const int room = positions - length + 1;
      if (prompt.max_new_tokens > room) {
        prompt.max_new_tokens = room;
        ++cut;
      }
      bench.prompts.push_back(std::move(prompt));
    }
  }
  if (bench.prompts.empty() && bench.skipped > 0)
    throw input_error(fmt::format("every prompt ({}) is longer than the model's {} positions", bench.skipped, positions));
  if (clamped) *clamped = cut;
  return bench;
}

}  // namespace specbench
