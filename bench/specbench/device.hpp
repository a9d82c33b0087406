// specbench on a device (docs/specbench.md, "--device"): the model runs on DeviceLlamaTarget,
// either on a CUDA GPU (`--device cuda`, CudaLlamaTarget) or on the host's emulated grid
// (`--device emulated`, EmulatedLlamaTarget: the same kernels and step, bit for bit, at emulation
// speed, so that this code is checked where there is no GPU). It gives the device's cost table
// (`calibrate`), decodes the real checkpoints speculatively and plainly (`model`), times the
// replay's steps (`replay --timed-model`), and reads the GPU's energy per token from NVML.
// This header has no CUDA in it: device_runs.hpp is the code, written once over the backend;
// cuda_device.cpp instantiates it in a CUDA build (cuda_absent.cpp refuses in a build without
// CUDA), emulated_device.cpp on the host; device_host.cpp holds what is the same for both (the
// model choice, the table's metadata, NVML and the joules per token).
#pragma once

#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "batch.hpp"
#include "calibrate.hpp"
#include "cost_table.hpp"
#include "model.hpp"
#include "replay.hpp"

namespace specbench {

/// `--device host|cuda|emulated`.
struct DeviceArgs {
  std::string device = "host";
  std::string synthetic;  ///< calibrate --synthetic SHAPE
  bool graphs = false;    ///< --graphs: DeviceLlamaOptions::graphs
  bool tensor_cores = false;  ///< --tensor-cores: DeviceLlamaOptions::tensor_cores
  /// The model runs on DeviceLlamaTarget (cuda or emulated), not on the host's Llama2cTarget.
  bool on_device() const { return device != "host"; }
};

/// ", tensor-core products" and ", launch graphs", for the options that are on.
inline std::string device_options_text(bool tensor_cores, bool graphs) {
  return std::string(tensor_cores ? ", tensor-core products" : "") + (graphs ? ", launch graphs" : "");
}

/// What runs on the device: a llama2.c checkpoint (fp32) or a synthetic shape (bf16 weights made
/// on the device from a seed; models/synthetic_llama.hpp).
struct DeviceModelChoice {
  std::filesystem::path file;  ///< empty for a synthetic shape
  std::string shape;           ///< empty for a checkpoint
  bool graphs = false;         ///< the target replays launch graphs (DeviceLlamaOptions::graphs)
  bool tensor_cores = false;   ///< its products run on tensor cores (DeviceLlamaOptions::tensor_cores)
  /// "synthetic:SHAPE" or the file's name.
  std::string name() const { return shape.empty() ? file.string() : "synthetic:" + shape; }
  /// The options in a description: ", tensor-core products, launch graphs" or less.
  std::string options_text() const { return device_options_text(tensor_cores, graphs); }
};

/// `--timed-model`'s text (or `--model`'s) on a device: "synthetic:SHAPE" (a known shape, else
/// input_error listing them) or a checkpoint file (input_error when it is not a readable file).
DeviceModelChoice device_model_choice(const std::string& text, const char* option);

/// The metadata of a device's cost table, beside the host tables' (calibrate.hpp): model {file or
/// shape, config, weights, weight_bytes, synthetic_weights}, device ("cuda" or "emulated"),
/// machine (the card's name, so that describe() names it), date (UTC), commit (of the build),
/// timer, repetitions.
nlohmann::ordered_json device_table_metadata(const DeviceModelChoice& model, const nlohmann::ordered_json& config,
                                             std::uint64_t weight_bytes, const char* weights, const char* device,
                                             const std::string& machine, const char* timer, int repetitions);

// ---- energy ----

/// The GPU's total energy counter through NVML (nvmlDeviceGetTotalEnergyConsumption), loaded with
/// dlopen at run time: the library comes with the driver, not the toolkit, and a build machine
/// has none.
class EnergyMeter {
 public:
  /// NVML of `library` for the device at PCI bus id `pci_bus_id` (cudaDeviceGetPCIBusId: the same
  /// card whatever the two libraries' device orders). Never throws: when something is missing,
  /// available() is false and why() says what.
  EnergyMeter(const std::string& pci_bus_id, const char* library = "libnvidia-ml.so.1");
  /// An unavailable meter that says `why`.
  static EnergyMeter unavailable(std::string why);
  EnergyMeter(EnergyMeter&&) noexcept;
  EnergyMeter& operator=(EnergyMeter&&) noexcept;
  ~EnergyMeter();

  bool available() const { return available_; }
  const std::string& why() const { return why_; }
  /// Joules since the driver loaded; nullopt when unavailable or the read fails.
  std::optional<double> joules() const;

 private:
  EnergyMeter() = default;
  void* library_ = nullptr;
  void* device_ = nullptr;
  int (*read_)(void*, unsigned long long*) = nullptr;
  int (*shutdown_)() = nullptr;
  bool available_ = false;
  std::string why_;
};

/// The energy of some passes and the tokens they produced.
struct EnergyTotal {
  double joules = 0;
  std::int64_t tokens = 0;
  int passes = 0;
  bool failed = false;  ///< a read failed
  /// Adds the counter's difference `after - before` (nullopt: a read failed) and the tokens.
  void add(std::optional<double> before, std::optional<double> after, std::int64_t produced);
  /// Some pass was added and every read succeeded.
  bool measured() const { return passes > 0 && !failed; }
  /// Joules per token; 0 without tokens.
  double per_token() const;
};

/// "energy (...): X J/token speculative, Y J/token plain: Zx plain's" or "energy: NVML not
/// available (why)" (the meter's available() and why()), for the reports.
std::string energy_line(bool available, const std::string& why, const EnergyTotal& speculative,
                        const EnergyTotal& plain);
/// The same as JSON: {"available", "measured", "joules_per_token": {"speculative", "plain"},
/// "ratio", "joules", "tokens"} or {"available": false, "why"}.
nlohmann::ordered_json energy_json(bool available, const std::string& why, const EnergyTotal& speculative,
                                   const EnergyTotal& plain);

// ---- where a step's time goes ----

/// A run's speculative steps, their drafting on the host and their parts on the device, summed
/// over its turns (DecodeStats::draft_seconds and backend_phases).
struct StepParts {
  std::int64_t steps = 0;
  double drafting = 0;
  specdec::BackendPhases backend;
};
StepParts step_parts(const ModelRun& run);
/// "step parts, microseconds per step (N steps): drafting A (host), copy in B, forward C,
/// verify+compact D, copy out E (device, TIMER)", TIMER what timed the device's parts.
std::string step_parts_line(const StepParts& parts, const char* timer);
/// {"steps", "seconds": {"drafting", "copy_in", "forward", "verify_compact", "copy_out"}}.
nlohmann::ordered_json step_parts_json(const StepParts& parts);

// ---- model and replay ----

/// `specbench model --device D`: every prompt decoded plainly (with the exact verifier a one-node
/// forward per token, argmax on the host: greedy decoding on the same device target, the
/// reference; with a sampling verifier the decoder without drafters, the same random streams) and
/// speculatively (SpeculativeDecoder<DeviceLlamaTarget, Drafters..., Verifier>), in two passes
/// (all prompts plain, then all speculative), the energy counter read around each.
struct DeviceModelRun {
  ModelRun run;
  std::string device;  ///< the card's name
  std::string target;  ///< what ran on it
  EnergyTotal speculative_energy, plain_energy;
};
using DeviceModelRunner = DeviceModelRun (*)(const ModelBench&, const ModelOptions&, const DeviceModelChoice&,
                                             EnergyMeter&);

/// `model --batch B,... --device D`: decode_batch (batch.hpp) on a DeviceLlamaBatchTarget of the
/// model for each B, its forward sized for B requests of options.budget + 1 nodes.
using DeviceBatchRunner = BatchRun (*)(const ModelBench&, const BatchOptions&, const DeviceModelChoice&);

/// `replay --timed-model M --device D`: every step's tree runs through M's forward on the device,
/// then the KV compaction of the replay's accepted path (copy in, forward, compaction, one
/// synchronisation: the device step without its verification kernel), timed by the host clock.
/// Plain decoding of a turn is timed on a sample: up to plain_samples one-node steps at positions
/// spread evenly over the turn, their mean time the time of each of its tokens (every token when
/// the turn has at most plain_samples). The energy counter is read around each turn's steps and
/// around the plain samples.
class DeviceStepCoster : public StepCoster {
 public:
  static constexpr int plain_samples = 32;
  /// A cost table of the coster's own target: trees of 1, 2, 4, ... `largest` nodes at the
  /// default contexts that fit, 2 repetitions (`--budget auto` without --cost); `description`
  /// says what was measured and how long it took.
  virtual CostTable quick_calibration(int largest, std::string& description) = 0;
  virtual const EnergyMeter& energy_meter() const = 0;
  virtual const EnergyTotal& speculative_energy() const = 0;
  virtual const EnergyTotal& plain_energy() const = 0;
};

/// What specbench runs on one device: device_runs.hpp implements it once for every backend.
class DeviceRuns {
 public:
  virtual ~DeviceRuns() = default;
  /// "--device cuda": how its sentences begin.
  virtual const char* option() const = 0;
  /// What times the device's work: "CUDA events" or "the host's clock".
  virtual const char* timer() const = 0;
  /// The device's name, once it is known to be usable; else input_error, e.g. "--device cuda:
  /// this specbench was built without CUDA (...)" or "--device cuda: no CUDA device is visible".
  virtual std::string require() const = 0;
  /// `specbench calibrate --device D`: the cost table of `model` on the device: for each context,
  /// prefilled, the median of `repetitions` timed forwards (after one warm-up) of a chain of n
  /// nodes for each n of options.nodes, and the plain step (a one-node forward). options.contexts
  /// without room for the largest tree are left out (the largest that has room is added), as on
  /// the host. Progress goes to `log`.
  virtual CostTable calibrate(const DeviceModelChoice& model, const CalibrateOptions& options,
                              std::ostream& log) const = 0;
  /// The combination of these drafters (any order; their names as Combination::drafters spells
  /// them) with `verifier`, compiled for the device, or input_error naming the ones that are.
  virtual DeviceModelRunner find_combination(const std::vector<std::string>& drafters,
                                             VerifierKind verifier) const = 0;
  /// The same combination's `model --batch` (exact verifier).
  virtual DeviceBatchRunner find_batch_combination(const std::vector<std::string>& drafters) const = 0;
  /// The batch target's name: "CudaLlamaBatchTarget" or "EmulatedLlamaBatchTarget".
  virtual const char* batch_target() const = 0;
  /// The most nodes of one tree the device target's forward takes (what a calibration may time).
  virtual int max_tree_nodes() const = 0;
  /// The device's combinations, e.g. "pld", "tree_history" (device_runs.hpp lists them).
  virtual std::vector<std::string> combination_names() const = 0;
  /// `replay --batch --timed-model M --device D`: checks M against `corpus` as make_coster does
  /// and makes its batch targets (TimedBatch on a DeviceLlamaBatchTarget, forwards sized for
  /// `budget` draft nodes a request); `source` says what times the steps, `config` is M's shape.
  virtual TimedBatchMaker timed_batch(const DeviceModelChoice& model, Corpus& corpus, int budget, std::string& source,
                                      specdec::LlamaConfig& config) const = 0;
  /// The energy meter of the device (require() first).
  virtual EnergyMeter energy_meter() const = 0;
  /// The coster of `model` for `corpus`: drops (and says so on stderr) the turns its positions
  /// cannot hold with `budget` draft nodes; input_error when its vocabulary is smaller than the
  /// replay's or no turn fits. `source` says what times the steps.
  virtual std::unique_ptr<DeviceStepCoster> make_coster(const DeviceModelChoice& model, Corpus& corpus, int budget,
                                                        std::string& source) const = 0;
};

/// `--device cuda`: cuda_device.cpp, or cuda_absent.cpp's refusals in a build without CUDA.
const DeviceRuns& cuda_runs();
/// `--device emulated` (emulated_device.cpp).
const DeviceRuns& emulated_runs();

}  // namespace specbench
