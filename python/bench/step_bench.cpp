// The C++ side of python/bench/step_bench.py: the per-step overhead of SpeculativeDecoder (draft,
// merge, layout, verify, commit, observe) around a target whose forward costs nothing (it hands
// out logits computed once), on the tree and logits the Python side uses.
//
//   specdec_python_step_bench greedy|rejection STEPS
// prints the mean microseconds per step.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <span>
#include <string>
#include <vector>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/fixed_tree.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>

#include "step_shape.hpp"

namespace {

using namespace specdec;

/// A target whose every forward returns the same rows of logits (row i after node i).
class StoredLogitsTarget {
 public:
  struct Output {
    const std::vector<float>* rows;
    std::span<const float> logits(node_t node) const {
      return {rows->data() + static_cast<std::size_t>(node) * bench::vocab, static_cast<std::size_t>(bench::vocab)};
    }
  };
  explicit StoredLogitsTarget(std::vector<float> rows) : rows_(std::move(rows)) {}
  int vocab_size() const { return bench::vocab; }
  void prefill(std::span<const token_t>) {}
  Output forward(const TreeView&) const { return {&rows_}; }
  void commit(std::span<const node_t>) {}

 private:
  std::vector<float> rows_;
};

template <class Verifier>
double microseconds_per_step(Verifier verifier, int steps) {
  StoredLogitsTarget target(bench::logits());
  SpeculativeDecoder<StoredLogitsTarget, FixedTreeDrafter, Verifier> decoder(
      target, DecoderOptions{.budget = bench::nodes}, FixedTreeDrafter(bench::parents(), bench::tokens()),
      std::move(verifier));
  decoder.prefill(bench::prompt());
  for (int i = 0; i < 100; ++i) decoder.step();  // warm up
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < steps; ++i) decoder.step();
  const std::chrono::duration<double, std::micro> elapsed = std::chrono::steady_clock::now() - t0;
  return elapsed.count() / steps;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string kind = argc > 1 ? argv[1] : "greedy";
  const int steps = argc > 2 ? std::atoi(argv[2]) : 2000;
  const double us = kind == "rejection"
                        ? microseconds_per_step(RejectionSampling(SamplingOptions{{1.0f}, 1, 0}), steps)
                        : microseconds_per_step(ExactVerifier{}, steps);
  std::printf("%.3f\n", us);
  return 0;
}
