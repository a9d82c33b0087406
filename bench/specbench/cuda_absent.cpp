// `--device cuda` in a specbench built without CUDA: every entry point refuses with one sentence,
// so that the options parse and say why they cannot run.
#include <specdec/kernels/llama_forward.hpp>

#include "device.hpp"
#include "input_error.hpp"

namespace specbench {

namespace {

class CudaAbsent final : public DeviceRuns {
 public:
  const char* option() const override { return "--device cuda"; }
  const char* timer() const override { return "CUDA events"; }
  [[noreturn]] std::string require() const override {
    throw input_error("--device cuda: this specbench was built without CUDA (configure with the cuda preset, "
                      "SPECDEC_CUDA=ON, on a machine with nvcc)");
  }
  CostTable calibrate(const DeviceModelChoice&, const CalibrateOptions&, std::ostream&) const override { require(); }
  DeviceModelRunner find_combination(const std::vector<std::string>&, VerifierKind) const override { require(); }
  DeviceBatchRunner find_batch_combination(const std::vector<std::string>&) const override { require(); }
  const char* batch_target() const override { return "CudaLlamaBatchTarget"; }
  int max_tree_nodes() const override { return specdec::kernels::llama::max_tree_nodes; }
  std::vector<std::string> combination_names() const override { return {}; }
  TimedBatchMaker timed_batch(const DeviceModelChoice&, Corpus&, int, std::string&, specdec::LlamaConfig&) const override {
    require();
  }
  EnergyMeter energy_meter() const override { require(); }
  std::unique_ptr<DeviceStepCoster> make_coster(const DeviceModelChoice&, Corpus&, int, std::string&) const override {
    require();
  }
};

}  // namespace

const DeviceRuns& cuda_runs() {
  static const CudaAbsent runs;
  return runs;
}

}  // namespace specbench
