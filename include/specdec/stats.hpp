// Statistics of a decoding run.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace specdec {

/// Where a backend step's time went (step/backend_step.hpp), summed over steps: measured on the
/// backend between its parts (CUDA events; the clock on the host backend), with no wait in
/// between. Zero for a target that is not a BackendTarget.
struct BackendPhases {
  double copy_in = 0;         ///< the trees' copy to the backend
  double forward = 0;         ///< the target's forward
  double verify_compact = 0;  ///< the verifier's verify_on and the KV compaction
  double copy_out = 0;        ///< the verdicts' copy back
  void add(const BackendPhases& o) {
    copy_in += o.copy_in;
    forward += o.forward;
    verify_compact += o.verify_compact;
    copy_out += o.copy_out;
  }
};

/// Counters collected by SpeculativeDecoder over all steps since prefill().
struct DecodeStats {
  std::int64_t steps = 0;          ///< target calls (one forward per step)
  std::int64_t tokens = 0;         ///< tokens committed, bonus tokens included
  /// Tokens handed to the caller: step()'s, generate()'s output and a batch's updates. Fewer than
  /// `tokens` where a step committed tokens past max_new_tokens or a stop token, which the output
  /// leaves out (they stay in the context): throughput is output_tokens over the seconds.
  std::int64_t output_tokens = 0;
  std::int64_t drafted_nodes = 0;  ///< non-root nodes sent to the target, summed over steps
  /// tokens_per_step[k] = number of steps that committed k tokens (k >= 1).
  std::vector<std::int64_t> tokens_per_step;
  /// accepted_by_drafter[d][k] = number of steps in which the accepted path's first k draft
  /// nodes (and not k + 1) were all proposed by drafter d (the CASD paper's Figure 4).
  std::vector<std::vector<std::int64_t>> accepted_by_drafter;
  std::vector<std::string> drafter_names;
  double draft_seconds = 0;   ///< drafters' propose/observe, merge and layout
  /// Target forward and commit; a BackendTarget's verification too, and a host target's in the
  /// steps that send the root alone (every tree of a batch's step: fewer clock reads per plain step).
  double target_seconds = 0;
  double verify_seconds = 0;  ///< verifier, in the steps that send draft nodes (see target_seconds)
  /// A BackendTarget's steps on the backend, part by part (each request of a batch counts its
  /// shared step's, as with target_seconds).
  BackendPhases backend_phases;
  /// nodes_per_step[k] = number of steps that sent k draft nodes (the chosen budgets' distribution
  /// under an automatic budget).
  std::vector<std::int64_t> nodes_per_step;
  /// Under an automatic budget (DecoderOptions::cost, BatchOptions::cost): the steps it sized (a
  /// batch's steps, for a SpeculativeBatch), and the sums over them of the tokens they were
  /// expected to commit and the seconds they were expected to cost.
  std::int64_t sized_steps = 0;
  /// Of those, the steps that did not ask the drafters (a request's steps, for a SpeculativeBatch;
  /// DraftingPause).
  std::int64_t paused_steps = 0;
  double expected_tokens = 0;
  double expected_seconds = 0;

  /// τ: tokens committed per target call, bonus token included (Spec-Bench's convention).
  double tau() const { return steps ? static_cast<double>(tokens) / static_cast<double>(steps) : 0.0; }
  double draft_nodes_per_step() const {
    return steps ? static_cast<double>(drafted_nodes) / static_cast<double>(steps) : 0.0;
  }

  /// Adds another run's counters (e.g. to aggregate over prompts). Drafter sets must match.
  void add(const DecodeStats& o) {
    steps += o.steps;
    tokens += o.tokens;
    output_tokens += o.output_tokens;
    drafted_nodes += o.drafted_nodes;
    add_histogram(tokens_per_step, o.tokens_per_step);
    if (accepted_by_drafter.size() < o.accepted_by_drafter.size())
      accepted_by_drafter.resize(o.accepted_by_drafter.size());
    for (std::size_t d = 0; d < o.accepted_by_drafter.size(); ++d)
      add_histogram(accepted_by_drafter[d], o.accepted_by_drafter[d]);
    if (drafter_names.empty()) drafter_names = o.drafter_names;
    draft_seconds += o.draft_seconds;
    target_seconds += o.target_seconds;
    verify_seconds += o.verify_seconds;
    backend_phases.add(o.backend_phases);
    add_histogram(nodes_per_step, o.nodes_per_step);
    sized_steps += o.sized_steps;
    paused_steps += o.paused_steps;
    expected_tokens += o.expected_tokens;
    expected_seconds += o.expected_seconds;
  }

  static void count(std::vector<std::int64_t>& histogram, std::size_t bin, std::int64_t times = 1) {
    if (histogram.size() <= bin) histogram.resize(bin + 1, 0);
    histogram[bin] += times;
  }

 private:
  static void add_histogram(std::vector<std::int64_t>& into, const std::vector<std::int64_t>& from) {
    if (into.size() < from.size()) into.resize(from.size(), 0);
    for (std::size_t k = 0; k < from.size(); ++k) into[k] += from[k];
  }
};

}  // namespace specdec
