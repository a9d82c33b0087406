// Host cost of the sampling front end and of stochastic verification (the host backend, one
// thread) at realistic vocabulary sizes: what a decoder on the CPU pays per step outside the
// target's forward.
//
//   sampling_bench [--benchmark_filter=REGEX] [any Google Benchmark flag]
//
// sample_token: one row of logits -> one token (temperature 0.8; no filter, top-k 50, top-p 0.9).
// rejection_verify / conditional_verify: one tree of 8 nodes (a chain of 4 one-hot drafts, 2
// siblings below the root, and a drafter's q with 2 draws below the root: its favourite and an
// outsider), logits rows where each draft token but the outsider is likely (so walks go deep); the
// counter `path` is the mean accepted path length (root included).
#include <benchmark/benchmark.h>

#include <algorithm>
#include <random>
#include <vector>

#include <specdec/backend.hpp>
#include <specdec/core/sampling.hpp>
#include <specdec/tree_merger.hpp>

namespace {

using namespace specdec;

std::vector<float> random_logits(std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(count);
  for (float& x : logits) x = normal(rng);
  return logits;
}

core::SamplingParams params_of(int filter) {
  switch (filter) {
    case 1: return {0.8f, 50};
    case 2: return {0.8f, 0, 0.9f};
    default: return {0.8f};
  }
}

const char* filter_name(int filter) { return filter == 1 ? "top-k 50" : filter == 2 ? "top-p 0.9" : "no filter"; }

void BM_sample_token(benchmark::State& state) {
  const int vocab = static_cast<int>(state.range(0));
  const core::SamplingParams params = params_of(static_cast<int>(state.range(1)));
  state.SetLabel(filter_name(static_cast<int>(state.range(1))));
  const std::vector<float> logits = random_logits(static_cast<std::size_t>(vocab), 1);
  std::vector<float> work(static_cast<std::size_t>(vocab));
  int position = 0;
  for (auto _ : state) {
    core::sampling_status status{};
    benchmark::DoNotOptimize(
        core::sample_token(logits.data(), vocab, params, core::RandomKey{5, 0}, position++, work.data(), &status));
  }
  state.SetBytesProcessed(static_cast<std::int64_t>(state.iterations()) * vocab * 4);
}
BENCHMARK(BM_sample_token)->ArgsProduct({{32000, 128256}, {0, 1, 2}})->Unit(benchmark::kMicrosecond);

/// One 8-node tree (see the top of the file) with its logits rows and the batch descriptor.
struct OneTree {
  int vocab;
  DraftTree tree;
  TreeMerger merger;
  TreeView view;
  std::vector<float> logits, q, work;
  std::vector<std::uint8_t> accepted;
  std::vector<node_t> path;
  std::vector<int> row_offset{0}, length{0};
  std::vector<token_t> next{0};
  std::vector<core::RandomKey> keys{core::RandomKey{5, 0}};
  std::vector<core::stochastic_status> status{core::stochastic_status::ok};
  std::vector<core::sampling_status> row_status{core::sampling_status::ok};
  std::vector<node_t> bad{0};

  explicit OneTree(int v) : vocab(v), q(static_cast<std::size_t>(v)), work(static_cast<std::size_t>(v)) {
    std::mt19937_64 rng(3);
    tree.reset(1);
    node_t node = 0;
    for (int k = 0; k < 4; ++k) node = tree.add(node, static_cast<token_t>(rng() % vocab));
    tree.add(0, static_cast<token_t>(rng() % vocab));
    tree.add(0, static_cast<token_t>(rng() % vocab));
    for (float& x : q) x = 0.5f / static_cast<float>(vocab - 1);
    const token_t favourite = static_cast<token_t>(rng() % vocab);
    q[static_cast<std::size_t>(favourite)] = 0.5f;
    const token_t outsider = static_cast<token_t>(rng() % vocab);
    const token_t draws[] = {favourite, outsider};
    tree.add_sampled(0, q, draws);
    const DraftTree* one[] = {&tree};
    merger.merge(one, 16, 16);
    view = merger.view();
    logits = random_logits(static_cast<std::size_t>(view.size) * vocab, 2);
    for (node_t c = 1; c < view.size; ++c)  // make each draft token but the outsider likely after its parent
      if (view.token[c] != outsider) logits[static_cast<std::size_t>(view.parent[c]) * vocab + view.token[c]] = 12.0f;
    accepted.resize(static_cast<std::size_t>(view.size));
    path.resize(static_cast<std::size_t>(view.size));
  }

  core::StochasticVerifyBatch batch() {
    core::StochasticVerifyBatch b;
    b.batch = 1;
    b.max_nodes = view.size;
    b.vocab_size = vocab;
    b.row_stride = vocab;
    b.trees = &view;
    b.row_offset = row_offset.data();
    b.logits = logits.data();
    b.keys = keys.data();
    b.work = work.data();
    b.accepted = accepted.data();
    b.path = path.data();
    b.length = length.data();
    b.next_token = next.data();
    b.status = status.data();
    b.row_status = row_status.data();
    b.bad_node = bad.data();
    return b;
  }
};

void BM_rejection_verify(benchmark::State& state) {
  OneTree t(static_cast<int>(state.range(0)));
  const core::SamplingParams params = params_of(static_cast<int>(state.range(1)));
  state.SetLabel(filter_name(static_cast<int>(state.range(1))));
  const core::StochasticVerifyBatch b = t.batch();
  double total_length = 0;
  std::uint32_t sequence = 0;
  for (auto _ : state) {
    t.keys[0].sequence = sequence++;  // a fresh random stream each call: paths vary as in decoding
    backend::rejection_verify(backend::host{}, b, params);
    total_length += t.length[0];
  }
  state.counters["path"] = total_length / static_cast<double>(state.iterations());
}
BENCHMARK(BM_rejection_verify)->ArgsProduct({{32000, 128256}, {0, 1, 2}})->Unit(benchmark::kMicrosecond);

void BM_conditional_verify(benchmark::State& state) {
  OneTree t(static_cast<int>(state.range(0)));
  const core::ConditionalParams params{0.1f, static_cast<int>(state.range(1)), -1};
  state.SetLabel(state.range(1) > 0 ? "mixed top-k 5, next T=0.8" : "delta 0.1, next T=0.8");
  const core::StochasticVerifyBatch b = t.batch();
  double total_length = 0;
  std::uint32_t sequence = 0;
  for (auto _ : state) {
    t.keys[0].sequence = sequence++;
    backend::conditional_verify(backend::host{}, b, params, core::SamplingParams{0.8f});
    total_length += t.length[0];
  }
  state.counters["path"] = total_length / static_cast<double>(state.iterations());
}
BENCHMARK(BM_conditional_verify)->ArgsProduct({{32000, 128256}, {0, 5}})->Unit(benchmark::kMicrosecond);

}  // namespace

BENCHMARK_MAIN();
