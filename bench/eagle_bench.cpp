// EAGLE on specbench's tasks until `specbench model` registers it (issue 15; the lead's part):
// tau, tokens/s and the drafting vs target time per step of eagle, eagle+casd, eagle+tree and
// casd against plain greedy decoding, with the exact verifier (each output checked identical to
// greedy). docs/performance.md ("EAGLE-2") has the table and the command.
//
//   eagle_bench [--data-dir DIR] [--head FILE] [--prompts N] [--new-tokens N] [--budget N]
#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/context_tree.hpp>
#include <specdec/policies/drafters/eagle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "corpus.hpp"
#include "tasks.hpp"

using namespace specdec;
using clock_type = std::chrono::steady_clock;
using Tokens = std::vector<token_t>;

int main(int argc, char** argv) {
  CLI::App app("EAGLE combinations on specbench's tasks, greedy, beside plain decoding");
  std::string data_dir, head_file = SPECDEC_SOURCE_DIR "/tools/eagle/heads/stories260K.eagle";
  int prompts_per_task = 40, new_tokens = 128, budget = 60;
  app.add_option("--data-dir", data_dir, "Data directory (default: $SPECDEC_DATA, else " SPECDEC_DEFAULT_DATA_DIR ")");
  app.add_option("--head", head_file, "EAGLE head file (default: the committed stories260K head)");
  app.add_option("--prompts", prompts_per_task, "First prompts of each task")->check(CLI::PositiveNumber);
  app.add_option("--new-tokens", new_tokens, "Tokens generated per prompt")->check(CLI::PositiveNumber);
  app.add_option("--budget", budget, "Draft nodes per step")->check(CLI::PositiveNumber);
  CLI11_PARSE(app, argc, argv);
  try {
    const std::filesystem::path root = specbench::data_root(data_dir);
    auto model = std::make_shared<const Llama2cModel>(Llama2cModel::load(root / "models/stories260K.bin"));
    const auto tokenizer = Llama2cTokenizer::load(root / "models/tok512.bin", model->config().vocab_size);
    const auto head = std::make_shared<const EagleHead>(EagleHead::load(head_file));
    Llama2cTarget target(model);
    const DecoderOptions options{.budget = budget};
    for (const specbench::Task& task : specbench::builtin_tasks()) {
      std::vector<Tokens> prompts, greedy;
      for (const std::string& text : task.prompts)
        if (static_cast<int>(prompts.size()) < prompts_per_task) prompts.push_back(tokenizer.encode(text));
      const auto t0 = clock_type::now();
      for (const Tokens& p : prompts) greedy.push_back(target.generate(p, new_tokens));
      const double greedy_seconds = std::chrono::duration<double>(clock_type::now() - t0).count();
      const double generated = static_cast<double>(prompts.size()) * new_tokens;
      fmt::print("{} ({} prompts x {} tokens, budget {}; tau = tokens per target call, bonus included)\n", task.name,
                 prompts.size(), new_tokens, budget);
      fmt::print("  {:<11} tau {:5.2f}  tokens/s {:6.0f}\n", "greedy", 1.0, generated / greedy_seconds);
      auto run = [&](const char* name, auto make_decoder) {
        DecodeStats all;
        double seconds = 0;
        bool identical = true;
        for (std::size_t i = 0; i < prompts.size(); ++i) {
          auto decoder = make_decoder();
          const auto t = clock_type::now();
          decoder.prefill(prompts[i]);
          identical &= decoder.generate(new_tokens) == greedy[i];
          seconds += std::chrono::duration<double>(clock_type::now() - t).count();
          if (i == 0) all = decoder.stats();
          else all.add(decoder.stats());
        }
        const double steps = static_cast<double>(all.steps);
        fmt::print("  {:<11} tau {:5.2f}  tokens/s {:6.0f}  drafting {:5.0f} us/step  target {:5.0f} us/step  {:4.1f} "
                   "nodes/step  {}\n",
                   name, all.tau(), generated / seconds, 1e6 * all.draft_seconds / steps, 1e6 * all.target_seconds / steps,
                   all.draft_nodes_per_step(), identical ? "identical to greedy" : "DIFFERS FROM GREEDY");
      };
      run("eagle", [&] {
        return SpeculativeDecoder<Llama2cTarget, EagleDrafter, ExactVerifier>(target, options, EagleDrafter(head, model),
                                                                              ExactVerifier{});
      });
      run("eagle,casd", [&] {
        return SpeculativeDecoder<Llama2cTarget, EagleDrafter, CasdDrafter, ExactVerifier>(
            target, options, EagleDrafter(head, model), CasdDrafter{}, ExactVerifier{});
      });
      run("eagle,tree", [&] {
        return SpeculativeDecoder<Llama2cTarget, EagleDrafter, ContextTreeDrafter, ExactVerifier>(
            target, options, EagleDrafter(head, model), ContextTreeDrafter{}, ExactVerifier{});
      });
      run("casd", [&] {
        return SpeculativeDecoder<Llama2cTarget, CasdDrafter, ExactVerifier>(target, options, CasdDrafter{}, ExactVerifier{});
      });
    }
  } catch (const std::exception& e) {
    fmt::print(stderr, "eagle_bench: {}\n", e.what());
    return 1;
  }
}
