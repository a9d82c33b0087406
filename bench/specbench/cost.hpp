// Cost tables (what a forward of n tree nodes costs on a model and machine, measured by
// `specbench calibrate`) and the two StepCosters of the replay: one that models each step's time
// from a table (`replay --cost`), one that runs each step through a real model's forward and
// times it (`replay --timed-model`). The table's JSON format is in docs/specbench.md.
#pragma once

#include <climits>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include <specdec/models/llama2c_model.hpp>
#include <specdec/targets/llama2c.hpp>
#include <specdec/testing/laid_out_tree.hpp>

#include "replay.hpp"

namespace specbench {

/// Median forward times of one model on one machine.
struct CostTable {
  /// Tree sizes measured (nodes, the root included), strictly increasing, the first 1.
  std::vector<int> nodes;
  struct Context {
    int context = 0;                 ///< tokens in the KV cache before the forward
    double plain_us = 0;             ///< one plain decoding step: a one-node forward and its commit
    std::vector<double> forward_us;  ///< a forward of nodes[i] nodes, per i
  };
  std::vector<Context> contexts;     ///< strictly increasing context
  /// Everything else the file holds (model, machine, date, threads, read_bandwidth_gbs, ...),
  /// kept as written.
  nlohmann::ordered_json metadata = nlohmann::ordered_json::object();

  /// Reads and validates a table; input_error (one line naming the file and the field) when the
  /// JSON is malformed, a size or time is missing, or a time is not a positive finite number.
  static CostTable load(const std::filesystem::path& file);
  /// The file's JSON: metadata, then "nodes" and "contexts".
  nlohmann::ordered_json to_json() const;

  int max_nodes() const { return nodes.back(); }
  /// Seconds of a forward of `n` nodes after `context` tokens: linear between the measured sizes
  /// and between the measured contexts; a context outside the measured ones takes the nearest.
  /// input_error when n is larger than the largest measured size.
  double forward_seconds(int n, int context) const;
  /// Seconds of a plain decoding step after `context` tokens (interpolated as above).
  double plain_seconds(int context) const;
  /// The table as the library's cost model (specdec::CostModel, `DecoderOptions::cost` of
  /// `--budget auto`): forward_seconds. It answers for trees up to max_nodes().
  double step_seconds(int nodes, int context) const { return forward_seconds(nodes, context); }
  /// "model M (shape), N threads, machine, date": what the metadata says, for the reports.
  std::string describe() const;
};

/// A cost table as the cost model of a batch's automatic budget (`--batch --budget auto`): a step
/// of many requests sends more nodes than one sequence's table measured (up to the requests +
/// the sum of their budgets). Up to the table's largest size it answers as the table; beyond, the
/// time grows linearly at the slope over the table's last doubling, from the largest measured
/// size at most half the largest (a forward that large is bound by its arithmetic: each further
/// node costs about the same; a slope over one node would be noise).
class BatchCostModel {
 public:
  explicit BatchCostModel(CostTable table);
  double step_seconds(int nodes, int context) const;

 private:
  CostTable table_;
  int slope_from_ = 1;  // the largest measured size at most half the largest: where the slope starts
};

/// `replay --cost`: each step costs the table's forward time for its node count and context;
/// plain decoding costs the table's plain step per token.
class TableCoster final : public StepCoster {
 public:
  explicit TableCoster(const CostTable& table) : table_(table) {}
  void prefill(std::span<const token_t>) override;
  void forward(const specdec::TreeView& tree) override;
  void commit(std::span<const specdec::node_t>) override {}
  std::pair<double, double> turn_seconds(std::int64_t tokens) override;

 private:
  const CostTable& table_;
  double seconds_ = 0;
  int first_context_ = -1;
};

/// `replay --timed-model`: each step's tree also runs through the model's real forward (its own
/// KV cache commits the same accepted path) and is timed; at the end of a turn the same tokens
/// are decoded plainly on the model, one forward and commit per token, and timed. Prefills are
/// not timed.
class ModelCoster final : public StepCoster {
 public:
  explicit ModelCoster(specdec::Llama2cTarget target);
  void prefill(std::span<const token_t> tokens) override;
  void forward(const specdec::TreeView& tree) override;
  void commit(std::span<const specdec::node_t> path) override;
  std::pair<double, double> turn_seconds(std::int64_t tokens) override;
  const specdec::Llama2cTarget& target() const { return target_; }

 private:
  specdec::Llama2cTarget target_;
  std::vector<token_t> sequence_;     // prefilled and committed tokens
  std::vector<token_t> tree_tokens_;  // of the last forward
  double seconds_ = 0;
  int first_context_ = -1;
  specdec::testing::LaidOutTree root_{{-1}, {0}};
};

/// The Llama2cTarget of every specbench command (`calibrate`, `replay --timed-model`, `model`,
/// `corpus`): `threads` forward threads (Llama2cTarget::Options).
specdec::Llama2cTarget make_llama_target(std::shared_ptr<const specdec::Llama2cModel> model, int threads);

/// The model file's side-car `FILE.json` written by specdec-synth-model, when there is one.
std::optional<nlohmann::ordered_json> synthetic_model_note(const std::filesystem::path& model);

struct CalibrateOptions {
  std::filesystem::path model;
  int threads = 1;
  specdec::WeightFormat weights = specdec::WeightFormat::fp32;  ///< how the model's matrices are stored
  /// > 0: the checkpoint holds only some of a model's layers (specdec-synth-model --layers K, K >= 2);
  /// the table is scaled to this many (see calibrate()).
  int layers_of = 0;
  std::vector<int> nodes{1, 2, 4, 8, 16, 32, 64, 128};
  /// Those that leave room for the largest tree are kept; when some do not, the largest context
  /// that does (positions - the largest tree) is added.
  std::vector<int> contexts{128, 512, 2048};
  int repetitions = 5;
  /// Also measure the machine: the read bandwidth (read_bandwidth_gbs) and, with threads > 1, the
  /// matrix product's arithmetic on one thread and on all (matrix_product_gflops).
  bool machine_probes = true;
};

/// Measures a cost table: for each context c, prefills c tokens, then times `repetitions` rounds
/// (after one warm-up round) of a forward of a chain of n nodes for each n and the plain step (a
/// one-node forward and its commit); the median of each. With layers_of = L and a checkpoint of K < L layers, the
/// same grid is also measured on a copy holding its first layer only (written next to `scratch`),
/// and each time is T_1 + (L - 1) (T_K - T_1) / (K - 1): embedding and classifier once, the layers
/// scaled. Also measures the machine (machine_probes). Progress goes to `log`.
CostTable calibrate(const CalibrateOptions& options, const std::filesystem::path& scratch, std::ostream& log);

/// The nodes of a step's tree with up to `budget` draft nodes: the budget and the root, saturating
/// (a budget may be INT_MAX).
constexpr int tree_nodes(int budget) { return budget < INT_MAX ? budget + 1 : INT_MAX; }

/// The tree sizes a calibration measures: 1, 2, 4, ... below `largest`, then `largest` (>= 1).
std::vector<int> doubling_sizes(int largest);

/// `--budget auto` without `--cost`: a quick calibration of `model` at start-up, the cost model of
/// the automatic budget. Trees of 1, 2, 4, ... up to `largest` nodes (what the decoder may ask
/// for: its cap + 1; a batch's steps are larger), the default contexts that fit the model, 2
/// repetitions, no bandwidth; `description` says what was measured and how long it took. Throws
/// input_error where a chain of `largest` nodes does not fit the model's positions.
CostTable quick_calibration(const std::filesystem::path& model, int threads, specdec::WeightFormat weights, int largest,
                            std::string& description);

/// One core's sequential read bandwidth in GB/s: the best of 3 sums of a 1 GiB array.
double read_bandwidth_gbs();

/// The forward's matrix product where arithmetic bounds it, on one thread and on `threads`:
/// GFLOP/s of 32 tokens times a 256 × 256 matrix stored in `weights` (256 KB in fp32: from L2),
/// the forward's own kernel (on `threads`, its ThreadPool's split), the fastest of 1024 products
/// each, the two alternating a few products at a time (about 0.1 s), so that both meet the same
/// moments of a shared machine and a burst of load only slows some products. Side by side they
/// say whether more threads add arithmetic (separate cores) or share one core's (SMT siblings,
/// or virtual CPUs that the host backs with one core).
struct MatrixProductGflops {
  double one_thread = 0, all_threads = 0;
};
MatrixProductGflops matrix_product_gflops(int threads, specdec::WeightFormat weights);

/// The table as text: forward µs per n and context, and c(n) / c(1).
void print_cost_table(std::ostream& out, const CostTable& table);
/// c(n) / c(1) against n (log scale), one line per context, with the line c(n) = n c(1) (n
/// single-token forwards) for reference.
std::string cost_svg(const CostTable& table);

}  // namespace specbench
