// Cost tables: what a forward of n tree nodes costs on a model and machine, as `specbench
// calibrate` measures it (calibrate.hpp), and the cost models of `--budget auto` made of them. The
// table's JSON format is in docs/specbench.md.
#pragma once

#include <climits>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

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

/// The nodes of a step's tree with up to `budget` draft nodes: the budget and the root, saturating
/// (a budget may be INT_MAX).
constexpr int tree_nodes(int budget) { return budget < INT_MAX ? budget + 1 : INT_MAX; }

}  // namespace specbench
