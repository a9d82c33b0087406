// The decoder's own cost per step, around a target whose forward costs nothing: what speculation
// costs on top of plain decoding when it sends no draft node (a paused step, budget 0), and a
// step that drafts. On a model whose forward takes tens of microseconds (stories260K: 25 us),
// this is what keeps speculative / plain under 1 when drafting cannot pay.
//
//   decoder_overhead_bench [--benchmark_filter=REGEX] [any Google Benchmark flag]
//
// One iteration is one step() (ns per iteration = ns per step). The target's tokens are a hash
// of token and position, so the text does not repeat and a copy drafter rarely finds a match. A
// sequence starts over (prefill) every 4096 tokens, inside the timing (once in 4096 steps).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/casd.hpp>
#include <specdec/policies/verifiers/exact.hpp>

namespace {

using namespace specdec;

constexpr int kVocab = 512;

// A target whose forward does nothing: each node's argmax is a hash of its token and position.
struct NullTarget {
  struct Output {
    const TreeView* tree = nullptr;
    token_t argmax(node_t node) const {
      std::uint64_t x = static_cast<std::uint64_t>(tree->token[node]) * 1000003u +
                        static_cast<std::uint64_t>(tree->base_position + tree->depth[node]);
      x ^= x >> 29;
      x *= 0xbf58476d1ce4e5b9ull;
      x ^= x >> 32;
      return static_cast<token_t>(x % kVocab);
    }
  };
  int vocab_size() const { return kVocab; }
  void prefill(std::span<const token_t>) {}
  const Output& forward(const TreeView& tree) {
    out.tree = &tree;
    return out;
  }
  void commit(std::span<const node_t>) {}
  Output out;
};

// What the automatic budget's decisions see: a 25 us forward plus 20 us a node (stories260K-like,
// where drafting does not pay). The pause weighs this model, not the null target's own time.
struct ComputeBoundCost {
  double step_seconds(int nodes, int) const { return 25e-6 + 20e-6 * (nodes - 1); }
};

template <class Decoder>
void run_steps(benchmark::State& state, Decoder& decoder) {
  const std::vector<token_t> prompt{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13};
  decoder.prefill(prompt);
  for (auto _ : state) {
    if (decoder.context().size() > 4096) decoder.prefill(prompt);
    benchmark::DoNotOptimize(decoder.step().data());
  }
  state.counters["paused"] = benchmark::Counter(static_cast<double>(decoder.stats().paused_steps) /
                                                static_cast<double>(std::max<std::int64_t>(decoder.stats().steps, 1)));
}

void plain_no_drafter(benchmark::State& state) {
  NullTarget target;
  SpeculativeDecoder<NullTarget, ExactVerifier> decoder(target, DecoderOptions{.budget = 0});
  run_steps(state, decoder);
}

void casd_budget_0(benchmark::State& state) {
  NullTarget target;
  SpeculativeDecoder<NullTarget, CasdDrafter, ExactVerifier> decoder(target, DecoderOptions{.budget = 0});
  run_steps(state, decoder);
}

void casd_auto_paused(benchmark::State& state) {
  NullTarget target;
  SpeculativeDecoder<NullTarget, CasdDrafter, ExactVerifier> decoder(
      target, DecoderOptions{.budget = 64, .cost = ComputeBoundCost{}, .measured_pause = false});
  run_steps(state, decoder);
}

void casd_budget_8(benchmark::State& state) {
  NullTarget target;
  SpeculativeDecoder<NullTarget, CasdDrafter, ExactVerifier> decoder(target, DecoderOptions{.budget = 8});
  run_steps(state, decoder);
}

}  // namespace

BENCHMARK(plain_no_drafter);
BENCHMARK(casd_budget_0);
BENCHMARK(casd_auto_paused);
BENCHMARK(casd_budget_8);
BENCHMARK_MAIN();
