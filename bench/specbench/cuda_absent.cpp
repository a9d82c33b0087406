// `--device cuda` in a specbench built without CUDA: every entry point refuses with one sentence
// (require_cuda_device), so that the options parse and say why they cannot run.
#include "cuda_device.hpp"
#include "input_error.hpp"

namespace specbench {

bool cuda_built() { return false; }

std::string require_cuda_device() {
  throw input_error("--device cuda: this specbench was built without CUDA (configure with the cuda preset, "
                    "SPECDEC_CUDA=ON, on a machine with nvcc)");
}

CostTable calibrate_cuda(const CudaModelChoice&, const CalibrateOptions&, std::ostream&) {
  require_cuda_device();
  return {};
}

CudaModelRunner find_cuda_combination(const std::vector<std::string>&) {
  require_cuda_device();
  return nullptr;
}

std::vector<std::string> cuda_combination_names() { return {}; }

EnergyMeter cuda_energy_meter() {
  require_cuda_device();
  return EnergyMeter::unavailable("no CUDA");
}

std::unique_ptr<CudaStepCoster> make_cuda_coster(const CudaModelChoice&, Corpus&, int, std::string&) {
  require_cuda_device();
  return nullptr;
}

}  // namespace specbench
