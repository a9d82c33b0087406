// Per-step drafting cost of the host copy drafters (casd, casd_prompt, pld) against context length,
// each beside a rescanning implementation of the same rule, and the ratio.
//
// A step: the context grows by kTokensPerStep committed tokens, then the drafter proposes (for the
// incremental drafters this includes indexing the new tokens). The context starts as a prompt of N
// tokens (N = 1k, 100k, 1M) and grows by up to N/4 generated tokens; then the sequence starts
// over (begin() and the re-indexing of the prompt happen with the timer paused).
//
// Text: synthetic tokens with realistic statistics for copy drafters: Zipf-distributed (s = 1) over
// a 32000-token vocabulary, and with probability 5% per token a copy of an earlier passage
// (uniformly chosen start, 4 to 40 tokens), so that long matches exist as in real prompts.
//
//   drafters_bench [--benchmark_filter=REGEX] [any Google Benchmark flag]
//
// After Google Benchmark's table it prints a summary: µs per step of each drafter and its
// rescanning baseline, and their ratio (medians with --benchmark_repetitions=N). The summary uses
// CPU time, which a machine shared with other jobs inflates less than wall-clock time (Google
// Benchmark's table shows both).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <random>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include <specdec/core/suffix_match.hpp>
#include <specdec/draft_tree.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/drafters/pld.hpp>

namespace {

using specdec::token_t;

constexpr int kVocab = 32000;
constexpr int kTokensPerStep = 2;  // about what these drafters commit per step (τ ≈ 2)
constexpr int kContextLengths[] = {1000, 100000, 1000000};

/// Zipf tokens with copied passages (see the top of the file); deterministic.
std::vector<token_t> synthetic_text(int n) {
  std::mt19937_64 rng(2024);
  std::vector<double> cdf(kVocab);
  double total = 0;
  for (int r = 0; r < kVocab; ++r) cdf[static_cast<std::size_t>(r)] = total += 1.0 / (r + 1);
  std::uniform_real_distribution<double> uniform(0.0, total);
  std::vector<token_t> text;
  text.reserve(static_cast<std::size_t>(n));
  while (static_cast<int>(text.size()) < n) {
    if (text.size() > 64 && rng() % 100 < 5) {
      const std::size_t length = 4 + rng() % 37;
      const std::size_t from = rng() % (text.size() - length);
      for (std::size_t i = 0; i < length && static_cast<int>(text.size()) < n; ++i) text.push_back(text[from + i]);
    } else {
      text.push_back(static_cast<token_t>(std::lower_bound(cdf.begin(), cdf.end(), uniform(rng)) - cdf.begin()));
    }
  }
  return text;
}

/// The text for prompt length N: N + N/4 tokens, made once.
const std::vector<token_t>& text_for(int prompt) {
  static std::map<int, std::vector<token_t>> texts;
  auto it = texts.find(prompt);
  if (it == texts.end()) it = texts.emplace(prompt, synthetic_text(prompt + prompt / 4)).first;
  return it->second;
}

/// Runs decoding steps: `propose(tokens, prompt_length, tree)` on a context growing by
/// kTokensPerStep per iteration; `restart()` begins a new sequence (timer paused).
template <class Propose, class Restart>
void decode_steps(benchmark::State& state, Propose&& propose, Restart&& restart) {
  const int prompt = static_cast<int>(state.range(0));
  const auto& text = text_for(prompt);
  const std::span<const token_t> all(text);
  specdec::DraftTree tree;
  auto step = [&](int n) {
    tree.reset(all[static_cast<std::size_t>(n - 1)]);
    propose(all.first(static_cast<std::size_t>(n)), prompt, tree);
  };
  int n = prompt;
  restart();
  step(n);  // indexes the prompt (untimed)
  std::int64_t nodes = 0;
  for (auto _ : state) {
    if (n + kTokensPerStep > static_cast<int>(all.size())) {
      state.PauseTiming();
      n = prompt;
      restart();
      step(n);
      state.ResumeTiming();
    }
    n += kTokensPerStep;
    step(n);
    nodes += tree.size() - 1;
  }
  state.counters["nodes/step"] = benchmark::Counter(static_cast<double>(nodes), benchmark::Counter::kAvgIterations);
}

specdec::DraftContext context(std::span<const token_t> tokens, int prompt_length) {
  return specdec::DraftContext{tokens, prompt_length, /*budget=*/64, /*max_depth=*/64, kVocab};
}

// ---- the incremental drafters ---------------------------------------------------------------

template <class Drafter>
void incremental(benchmark::State& state) {
  Drafter drafter;
  const int prompt = static_cast<int>(state.range(0));
  decode_steps(
      state,
      [&](std::span<const token_t> tokens, int prompt_length, specdec::DraftTree& tree) {
        drafter.propose(context(tokens, prompt_length), tree);
      },
      [&] { drafter.begin(std::span<const token_t>(text_for(prompt)).first(static_cast<std::size_t>(prompt))); });
  state.counters["index_bytes/token"] =
      static_cast<double>(drafter.index().memory_bytes()) / std::max(drafter.index().size(), 1);
  state.counters["index_nodes/token"] =
      static_cast<double>(drafter.index().node_count()) / std::max(drafter.index().size(), 1);
}

// ---- the rescanning baselines: the same rules, the context scanned each step --------------

/// CASD by core::find_suffix_matches over the searched part, the chains drafted as CasdDrafter does.
void casd_rescan(benchmark::State& state, bool prompt_only) {
  const specdec::CasdOptions o;
  std::vector<specdec::core::SuffixMatch> matches(static_cast<std::size_t>(o.k));
  decode_steps(
      state,
      [&](std::span<const token_t> tokens, int prompt_length, specdec::DraftTree& tree) {
        const int n = static_cast<int>(tokens.size());
        const int limit = prompt_only ? prompt_length : n;
        const int found = specdec::core::find_suffix_matches(tokens.data(), n, limit, o.max_match, o.min_match, o.k,
                                                             matches.data());
        for (int i = 0; i < found; ++i) {
          const auto [p, m] = matches[static_cast<std::size_t>(i)];
          const int end = specdec::core::continuation_end(p, o.depth, n, limit);
          specdec::node_t node = 0;
          for (int j = p + 1; j < end; ++j) {
            const token_t t = tokens[static_cast<std::size_t>(j)];
            const specdec::node_t child = tree.find_child(node, t);
            node = child >= 0 ? child
                              : tree.add(node, t, static_cast<float>(m + 1) / static_cast<float>(m + (j - p) + 1));
          }
        }
      },
      [] {});
}

/// PLD by a direct scan, as Spec-Bench does it: for n = 3, 2, 1 the first window equal to the
/// last n tokens whose continuation fits (stopping at the first one, which favours the baseline).
void pld_rescan(benchmark::State& state) {
  const specdec::PldOptions o;
  decode_steps(
      state,
      [&](std::span<const token_t> tokens, int, specdec::DraftTree& tree) {
        const int n = static_cast<int>(tokens.size());
        for (int g = o.max_ngram; g >= o.min_ngram; --g) {
          const token_t* query = tokens.data() + n - g;
          const int last_start = std::min(n - g - o.depth, n - 2 * g - 1);  // both conditions
          for (int start = 0; start <= last_start; ++start) {
            if (!std::equal(query, query + g, tokens.data() + start)) continue;
            specdec::node_t node = 0;
            for (int j = 1; j <= o.depth; ++j)
              node = tree.add(node, tokens[static_cast<std::size_t>(start + g - 1 + j)],
                              static_cast<float>(g + 1) / static_cast<float>(g + j + 1));
            return;
          }
        }
      },
      [] {});
}

// ---- registration and the summary ----------------------------------------------------------

struct Key {
  std::string drafter;
  int context = 0;
  bool operator<(const Key& o) const { return std::tie(drafter, context) < std::tie(o.drafter, o.context); }
};

/// Google Benchmark's console output, and the CPU µs per step of every run kept for the summary: the
/// median when --benchmark_repetitions asks for several runs, else the one run.
class SummaryReporter : public benchmark::ConsoleReporter {
 public:
  std::map<Key, double> incremental_us, rescan_us;

  SummaryReporter() : ConsoleReporter(OO_Tabular) {}

  void ReportRuns(const std::vector<Run>& runs) override {
    ConsoleReporter::ReportRuns(runs);
    for (const Run& run : runs) {
      if (run.error_occurred) continue;
      if (run.run_type == Run::RT_Aggregate && run.aggregate_name != "median") continue;
      // Names are "<drafter>/<incremental|rescan>/<context>[_median]".
      const std::string name = run.benchmark_name();
      const auto a = name.find('/'), b = name.find('/', a + 1);
      const Key key{name.substr(0, a), std::stoi(name.substr(b + 1))};
      const double us = run.GetAdjustedCPUTime() * 1e6 / benchmark::GetTimeUnitMultiplier(run.time_unit);
      (name.compare(a + 1, b - a - 1, "incremental") == 0 ? incremental_us : rescan_us)[key] = us;
    }
  }
};

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  for (const int n : kContextLengths) {
    benchmark::RegisterBenchmark("casd/incremental", incremental<specdec::CasdDrafter>)->Arg(n);
    benchmark::RegisterBenchmark("casd/rescan", [](benchmark::State& s) { casd_rescan(s, false); })->Arg(n);
    benchmark::RegisterBenchmark("casd_prompt/incremental", incremental<specdec::CasdPromptDrafter>)->Arg(n);
    benchmark::RegisterBenchmark("casd_prompt/rescan", [](benchmark::State& s) { casd_rescan(s, true); })->Arg(n);
    benchmark::RegisterBenchmark("pld/incremental", incremental<specdec::PldDrafter>)->Arg(n);
    benchmark::RegisterBenchmark("pld/rescan", pld_rescan)->Arg(n);
  }
  SummaryReporter reporter;
  benchmark::RunSpecifiedBenchmarks(&reporter);
  benchmark::Shutdown();

  std::printf("\nPer-step drafting cost (µs of CPU time; %d tokens committed per step)\n", kTokensPerStep);
  std::printf("%-12s %10s %14s %12s %10s\n", "drafter", "context", "incremental", "rescan", "ratio");
  for (const auto& [key, us] : reporter.incremental_us) {
    const auto rescan = reporter.rescan_us.find(key);
    if (rescan == reporter.rescan_us.end()) {
      std::printf("%-12s %10d %14.2f %12s %10s\n", key.drafter.c_str(), key.context, us, "-", "-");
    } else {
      std::printf("%-12s %10d %14.2f %12.2f %9.0fx\n", key.drafter.c_str(), key.context, us, rescan->second,
                  rescan->second / us);
    }
  }
  return 0;
}
