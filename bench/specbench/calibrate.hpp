// `specbench calibrate`: a cost table measured on a llama2.c model on this machine, and the quick
// calibration at start-up that sizes `--budget auto` where no table is given.
#pragma once

#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <specdec/models/llama2c_model.hpp>

#include "cost_table.hpp"

namespace specbench {

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
  /// that does (positions - the largest tree) is added (fitting_contexts).
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

/// The tree sizes a calibration measures: 1, 2, 4, ... below `largest`, then `largest` (>= 1).
std::vector<int> doubling_sizes(int largest);

/// The median of `v` (the mean of the middle two for an even count), as every cell of a cost
/// table takes it.
double median(std::vector<double> v);

/// `--budget auto` without `--cost`: a quick calibration of `model` at start-up, the cost model of
/// the automatic budget. Trees of 1, 2, 4, ... up to `largest` nodes (what the decoder may ask
/// for: its cap + 1; a batch's steps are larger), the default contexts that fit the model, 5
/// repetitions, no machine probe; `description` says what was measured and how long it took. Throws
/// input_error where a chain of `largest` nodes does not fit the model's positions.
CostTable quick_calibration(const std::filesystem::path& model, int threads, specdec::WeightFormat weights, int largest,
                            std::string& description);

/// The contexts of `wanted` that leave room for a tree of `largest` nodes in `positions`; when some
/// do not, the largest context that does is added, so that the table reaches the model's last
/// positions. input_error when none fits. The host's calibrate and the GPU's alike.
std::vector<int> fitting_contexts(const std::vector<int>& wanted, int positions, int largest);

/// The date a cost table names: now, in UTC (ISO 8601, to the second).
std::string utc_now();

}  // namespace specbench
