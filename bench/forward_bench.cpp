// forward_bench: what a tree forward of n nodes costs next to one token, c(n)/c(1) (median of
// repeated forwards), for n = 1, 2, 4, ..., 128, on llama2.c checkpoints at 1 and 2 threads.
// Speculative decoding pays when c(n)/c(1) stays well below the tokens a step commits. Also
// prints plain greedy decoding's tokens/s from BOS over the model's first 256 positions, the
// workload of llama2.c's `run MODEL -t 0 -n 256`.
//
//   forward_bench [--model PATH]... [--context N] [--reps N] [--threads N]... [--weights fp32|bf16]
//                 [--plain-only]
// (--plain-only: just the decoding, e.g. to count its cycles with `perf stat` on a busy machine.)
// Models default to stories260K and BabyLlama-936K in the data directory.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <specdec/targets/llama2c.hpp>
#include <specdec/testing/laid_out_tree.hpp>

namespace {

// A random topological tree (parent uniform among the earlier nodes), as drafts merge into.
specdec::testing::LaidOutTree random_tree(int n, int vocab, std::mt19937_64& rng) {
  std::vector<specdec::node_t> parent(static_cast<std::size_t>(n), -1);
  std::vector<specdec::token_t> token(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) {
    if (i > 0) parent[static_cast<std::size_t>(i)] = static_cast<specdec::node_t>(rng() % static_cast<unsigned>(i));
    token[static_cast<std::size_t>(i)] = static_cast<specdec::token_t>(rng() % static_cast<unsigned>(vocab));
  }
  return {parent, token};
}

double median_us(specdec::Llama2cTarget& target, const specdec::testing::LaidOutTree& tree, int reps) {
  std::vector<double> us;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    target.forward(tree.view(target.cached()));
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  std::nth_element(us.begin(), us.begin() + reps / 2, us.end());
  return us[static_cast<std::size_t>(reps / 2)];
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"c(n)/c(1): the cost of a tree forward of n nodes next to one token"};
  const char* env = std::getenv("SPECDEC_DATA");
  const std::filesystem::path data = env && *env ? env : SPECDEC_DEFAULT_DATA_DIR;
  std::vector<std::string> models;
  std::vector<int> thread_counts{1, 2};
  int context = 128, reps = 200;
  bool plain_only = false;
  specdec::WeightFormat weights = specdec::WeightFormat::fp32;
  app.add_option("--model", models, "llama2.c checkpoint(s) (default: stories260K and BabyLlama-936K in the data dir)");
  app.add_option("--context", context, "Tokens in the KV cache before the tree (default 128)")->check(CLI::Range(1, 1 << 20));
  app.add_option("--reps", reps, "Forwards timed per size (default 200; the median is reported)")->check(CLI::Range(1, 1 << 20));
  app.add_option("--threads", thread_counts, "Thread counts (default 1 2)")->check(CLI::Range(1, 256));
  app.add_option_function<std::string>(
         "--weights",
         [&weights](const std::string& v) {
           weights = specdec::weight_format_named(v);
         },
         "Weight matrices: fp32 (as in the checkpoint, default) or bf16 (Intel AMX; the KV cache and attention "
         "too where heads hold 16 or a multiple of 32 values)")
      ->check(CLI::IsMember({"fp32", "bf16"}));
  app.add_flag("--plain-only", plain_only, "Only plain greedy decoding from BOS, no c(n) table");
  CLI11_PARSE(app, argc, argv);
  if (models.empty()) models = {(data / "models/stories260K.bin").string(), (data / "models/babyllama-936K.bin").string()};

  try {
    std::printf("%-22s %7s %5s %12s %10s\n", "model", "threads", "n", "median_us", "c(n)/c(1)");
    for (const std::string& path : models) {
      const auto model = std::make_shared<const specdec::Llama2cModel>(specdec::Llama2cModel::load(path, weights));
      const specdec::LlamaConfig& c = model->config();
      const int ctx = std::min(context, c.seq_len - 129);
      if (ctx < 1) throw specdec::error(path + ": too few positions for a context and a 128-node tree");
      std::vector<specdec::token_t> prompt(static_cast<std::size_t>(ctx));
      for (int i = 0; i < ctx; ++i) prompt[static_cast<std::size_t>(i)] = static_cast<specdec::token_t>((i * 31 + 1) % c.vocab_size);
      for (int threads : thread_counts) {
        specdec::Llama2cTarget target(model, specdec::Llama2cTarget::Options{threads});
        const specdec::token_t bos[] = {1};
        const int steps = std::min(255, c.seq_len);
        const auto g0 = std::chrono::steady_clock::now();
        const auto text = target.generate(bos, steps);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - g0).count();
        std::printf("%-22s %7d plain greedy decoding from BOS: %zu tokens, %.0f tokens/s\n",
                    std::filesystem::path(path).filename().string().c_str(), threads, text.size(),
                    static_cast<double>(text.size()) / seconds);
        if (plain_only) continue;
        target.prefill(prompt);
        std::mt19937_64 rng(1);
        double one = 0.0;
        for (int n = 1; n <= 128; n *= 2) {
          const auto tree = random_tree(n, c.vocab_size, rng);
          const double us = median_us(target, tree, reps);
          if (n == 1) one = us;
          std::printf("%-22s %7d %5d %12.1f %10.2f\n", std::filesystem::path(path).filename().string().c_str(), threads, n,
                      us, us / one);
        }
      }
    }
  } catch (const specdec::error& e) {
    std::cerr << "forward_bench: " << e.what() << "\n";
    return 1;
  }
}
