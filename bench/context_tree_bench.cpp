// Per-step cost of the tree drafters against context (and history) length: one propose() of 64
// nodes plus observe() of the committed tokens, on synthetic text of 1k, 100k and 1M tokens.
// The index is updated per token, so the cost should not grow with the length. Periodic text
// (a repeated token or line) gets its own rows: it must not cost more per token.
//
//   context_tree_bench [--benchmark_filter=...]
#include <benchmark/benchmark.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include <specdec/policies/drafters/context_tree.hpp>

using namespace specdec;

namespace {

constexpr int kVocab = 32000;

/// Text-like tokens: Zipf-distributed words, and now and then a copy of an earlier stretch
/// (what makes context drafting work on real text).
std::vector<token_t> synthetic_text(std::size_t n, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<double> weights(kVocab);
  for (int v = 0; v < kVocab; ++v) weights[v] = 1.0 / std::pow(v + 1.0, 1.1);
  std::discrete_distribution<token_t> word(weights.begin(), weights.end());
  std::vector<token_t> text;
  text.reserve(n);
  while (text.size() < n) {
    if (text.size() > 100 && rng() % 8 == 0) {
      const std::size_t from = rng() % (text.size() - 50), length = 5 + rng() % 40;
      for (std::size_t k = 0; k < length && text.size() < n; ++k) text.push_back(text[from + k]);
    } else {
      text.push_back(word(rng));
    }
  }
  return text;
}

/// Drafts on a context of state.range(0) tokens; each step commits the next 3 tokens of the text.
template <class Drafter>
void step(benchmark::State& state, Drafter& drafter, std::vector<token_t> context, const std::vector<token_t>& next) {
  DraftTree tree;
  std::size_t k = 0;
  for (auto _ : state) {
    tree.reset(context.back());
    drafter.propose(DraftContext{context, 0, 64, 64, kVocab}, tree);
    benchmark::DoNotOptimize(tree.size());
    const std::span<const token_t> committed(next.data() + (k % (next.size() - 3)), 3);
    drafter.observe(committed);
    context.insert(context.end(), committed.begin(), committed.end());
    k += 3;
  }
  state.counters["nodes"] = tree.size() - 1;
}

void BM_TreeStep(benchmark::State& state) {
  const auto text = synthetic_text(static_cast<std::size_t>(state.range(0)) + 30000, 1);
  const std::vector<token_t> context(text.begin(), text.end() - 30000), next(text.end() - 30000, text.end());
  ContextTreeDrafter drafter;
  drafter.begin(context);
  step(state, drafter, context, next);
}

void BM_TreeHistoryStep(benchmark::State& state) {
  // A history of state.range(0) tokens (earlier outputs), a context of 1k tokens.
  const auto history = synthetic_text(static_cast<std::size_t>(state.range(0)), 2);
  const auto text = synthetic_text(31000, 3);
  const std::vector<token_t> context(text.begin(), text.begin() + 1000), next(text.begin() + 1000, text.end());
  HistoryTreeDrafter drafter(ContextTreeOptions{.history_tokens = 1 << 24});
  drafter.begin(std::vector<token_t>{1});
  drafter.observe(history);
  drafter.begin(context);
  step(state, drafter, context, next);
}

/// Appends the whole text to an emptied automaton per iteration.
void append_all(benchmark::State& state, const std::vector<token_t>& text) {
  index::ContinuationAutomaton automaton;
  for (auto _ : state) {
    automaton.clear();
    for (token_t t : text) automaton.append(t);
    benchmark::DoNotOptimize(automaton.size());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(text.size()));
}

void BM_AutomatonAppend(benchmark::State& state) {
  append_all(state, synthetic_text(static_cast<std::size_t>(state.range(0)), 4));
}

/// Periodic text: a line of `period` distinct tokens written over and over (one token repeated
/// when the period is 1): whitespace runs, repeated lines, a model stuck in a loop.
std::vector<token_t> periodic_text(std::size_t n, int period) {
  std::vector<token_t> text(n);
  for (std::size_t i = 0; i < n; ++i) text[i] = static_cast<token_t>(100 + i % static_cast<std::size_t>(period));
  return text;
}

void BM_AutomatonAppendPeriodic(benchmark::State& state) {
  append_all(state, periodic_text(static_cast<std::size_t>(state.range(0)), static_cast<int>(state.range(1))));
}

/// begin() on a periodic prompt, then one step: what a request whose prompt repeats costs.
void BM_TreeBeginPeriodic(benchmark::State& state) {
  const auto context = periodic_text(static_cast<std::size_t>(state.range(0)), static_cast<int>(state.range(1)));
  ContextTreeDrafter drafter;
  DraftTree tree;
  for (auto _ : state) {
    drafter.begin(context);
    tree.reset(context.back());
    drafter.propose(DraftContext{context, static_cast<int>(context.size()), 64, 64, kVocab}, tree);
    benchmark::DoNotOptimize(tree.size());
  }
  state.counters["nodes"] = tree.size() - 1;
}

}  // namespace

BENCHMARK(BM_TreeStep)->Arg(1000)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_TreeHistoryStep)->Arg(1000)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_AutomatonAppend)->Arg(1000)->Arg(100000)->Arg(1000000)->Unit(benchmark::kMillisecond);
// Periodic text must cost what text does (the suffix chain of a run is as long as the run).
BENCHMARK(BM_AutomatonAppendPeriodic)
    ->Args({1000, 1})->Args({100000, 1})->Args({1000000, 1})->Args({1000000, 7})->Unit(benchmark::kMillisecond);
BENCHMARK(BM_TreeBeginPeriodic)->Args({80000, 1})->Args({160000, 3})->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
