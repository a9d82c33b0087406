// `--device emulated` (device.hpp): device_runs.hpp on EmulatedLlamaTarget, the GPU path's code
// (the device Llama's kernels, the backend step) run by the host's emulated grid, bit for bit as
// on a GPU and far slower: so that what `--device cuda` runs is checked on machines without one.
#include <string>

#include <specdec/testing/emulated_llama.hpp>

#include "device_runs.hpp"

namespace specbench {

namespace {

struct Emulated {
  using backend = specdec::backend::host;
  static constexpr const char* option = "--device emulated";
  static constexpr const char* timer = "the host's clock";
  static constexpr const char* kind = "emulated";

  static std::string require() { return "the host's emulated grid"; }
  static EnergyMeter energy_meter() { return EnergyMeter::unavailable("the emulated device has no energy counter"); }
};

}  // namespace

const DeviceRuns& emulated_runs() {
  static const device_runs_detail::BackendRuns<Emulated> runs;
  return runs;
}

}  // namespace specbench
