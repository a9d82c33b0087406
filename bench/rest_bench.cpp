// REST's drafting cost per step against datastore size (1M and 10M tokens built here; any other
// datastore file through $SPECDEC_REST_DATASTORE) and occurrence cap (REST's 5000 and smaller).
//
// Datastores: synthetic documents (tools/datastore/synthetic_text.hpp: Zipf tokens with copied
// passages), built once per size into a temporary directory and opened as a decoder would.
// A step: one propose() for a context of 64 tokens. Two kinds of contexts:
//  - held_out: documents of another seed, so matches are chance matches of frequent tokens (short
//    spans with many occurrences: the cap decides the cost);
//  - in_store: passages of the datastore itself (long spans with few occurrences).
// Counters: nodes drafted and the matched span, per step.
//
//   rest_bench [--benchmark_filter=REGEX] [any Google Benchmark flag]
//   SPECDEC_REST_DATASTORE=/tmp/ds100m.bin rest_bench --benchmark_filter=file
#include <benchmark/benchmark.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <specdec/index/datastore_builder.hpp>
#include <specdec/policies/drafters/rest.hpp>

#include "synthetic_text.hpp"

namespace {

namespace fs = std::filesystem;
using specdec::token_t;

constexpr int kContext = 64;
constexpr int kContexts = 512;
constexpr std::uint32_t kVocab = 32000;

/// The datastore of `tokens` synthetic tokens ("file": $SPECDEC_REST_DATASTORE), opened once.
std::shared_ptr<const specdec::TokenDatastore> datastore(const std::string& size) {
  static std::map<std::string, std::shared_ptr<const specdec::TokenDatastore>> opened;
  auto& ds = opened[size];
  if (ds) return ds;
  if (size == "file") {
    ds = std::make_shared<const specdec::TokenDatastore>(std::getenv("SPECDEC_REST_DATASTORE"));
    return ds;
  }
  // A name of its own: several runs (worktrees, ctest -j) may build at the same time.
  const fs::path path =
      fs::temp_directory_path() / ("specdec_rest_bench_" + size + "_" + std::to_string(std::random_device{}()) + ".bin");
  const std::uint64_t tokens = size == "1M" ? 1'000'000 : 10'000'000;
  specdec::build_datastore(specdec::tools::synthetic_documents(tokens, kVocab, 1), path, {.vocab_size = kVocab});
  ds = std::make_shared<const specdec::TokenDatastore>(path);
  fs::remove(path);  // the mapping keeps the file's contents
  return ds;
}

/// Contexts of kContext tokens: from other documents (held_out) or from the datastore (in_store).
std::vector<std::vector<token_t>> contexts(const specdec::TokenDatastore& ds, bool in_store) {
  std::vector<std::vector<token_t>> out;
  std::mt19937_64 rng(5);
  const auto other = specdec::tools::synthetic_documents(kContexts * (kContext + 1) * 2, kVocab, 99);
  const auto text = in_store ? ds.text() : std::span<const std::uint32_t>(other.text);
  while (out.size() < kContexts) {
    const std::size_t at = rng() % (text.size() - kContext);
    std::vector<token_t> c(text.begin() + static_cast<std::ptrdiff_t>(at), text.begin() + static_cast<std::ptrdiff_t>(at + kContext));
    bool whole = true;
    for (const token_t t : c) whole = whole && static_cast<std::uint32_t>(t) != specdec::kDocumentEnd;
    if (whole) out.push_back(std::move(c));
  }
  return out;
}

void draft(benchmark::State& state, const std::string& size, bool in_store) {
  const auto ds = datastore(size);
  const auto ctx = contexts(*ds, in_store);
  specdec::RestDrafter drafter(ds, {.max_occurrences = static_cast<int>(state.range(0))});
  specdec::DraftTree tree;
  std::size_t i = 0;
  double nodes = 0, span = 0;
  for (auto _ : state) {
    const auto& c = ctx[i++ % ctx.size()];
    tree.reset(c.back());
    drafter.propose(specdec::DraftContext{c, 0, 64, 64, static_cast<int>(kVocab)}, tree);
    nodes += tree.size() - 1;
    span += drafter.last_match().length;
    benchmark::DoNotOptimize(tree.tokens().data());
  }
  state.counters["nodes"] = benchmark::Counter(nodes, benchmark::Counter::kAvgIterations);
  state.counters["span"] = benchmark::Counter(span, benchmark::Counter::kAvgIterations);
}

void register_all() {
  std::vector<std::string> sizes = {"1M", "10M"};
  if (std::getenv("SPECDEC_REST_DATASTORE")) sizes.push_back("file");
  for (const auto& size : sizes) {
    for (const bool in_store : {false, true}) {
      const std::string name = "rest/" + size + "/" + (in_store ? "in_store" : "held_out");
      benchmark::RegisterBenchmark(name.c_str(), [=](benchmark::State& s) { draft(s, size, in_store); })
          ->ArgName("cap")
          ->Arg(5000)
          ->Arg(1000)
          ->Arg(200)
          ->Arg(50)
          ->Unit(benchmark::kMicrosecond);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  register_all();
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
