// What is the same for every device (device.hpp), built with and without CUDA: the model choice,
// the device table's metadata, the energy counter read through NVML with dlopen, and the step's
// parts.
#include <dlfcn.h>

#include <utility>

#include <fmt/format.h>

#include <specdec/error.hpp>
#include <specdec/models/synthetic_llama.hpp>

#include "calibrate.hpp"
#include "common/cli_checks.hpp"
#include "device.hpp"
#include "input_error.hpp"

#ifndef SPECBENCH_COMMIT
#define SPECBENCH_COMMIT "unknown"
#endif

namespace specbench {

DeviceModelChoice device_model_choice(const std::string& text, const char* option) {
  static constexpr std::string_view prefix = "synthetic:";
  DeviceModelChoice choice;
  if (text.starts_with(prefix)) {
    try {
      choice.shape = specdec::synthetic_shape(text.substr(prefix.size())).name;
    } catch (const specdec::error& e) {
      throw input_error(fmt::format("{}: {}", option, e.what()));
    }
    return choice;
  }
  specdec::tools::check_input_file<input_error>(text, option);
  choice.file = text;
  return choice;
}

nlohmann::ordered_json device_table_metadata(const DeviceModelChoice& model, const nlohmann::ordered_json& config,
                                             std::uint64_t weight_bytes, const char* weights, const char* device,
                                             const std::string& machine, const char* timer, int repetitions) {
  nlohmann::ordered_json m{{"file", model.name()}, {"config", config}, {"weights", weights},
                           {"weight_bytes", weight_bytes}};
  if (!model.shape.empty()) {
    m["shape"] = model.shape;
    m["synthetic_weights"] = true;
    m["note"] = "random weights made on the device: the forward's cost depends on the shape, not on the values";
  }
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  meta["format"] = "specdec-cost-table-1";
  meta["model"] = m;
  meta["device"] = device;
  meta["machine"] = machine;
  meta["date"] = utc_now();
  meta["commit"] = SPECBENCH_COMMIT;
  meta["timer"] = std::string(timer) + " around each forward";
  meta["tree"] = "chain";
  meta["repetitions"] = repetitions;
  return meta;
}

// ---- NVML ----

namespace {
constexpr int nvml_success = 0;
}

EnergyMeter::EnergyMeter(const std::string& pci_bus_id, const char* library) {
  library_ = dlopen(library, RTLD_NOW | RTLD_LOCAL);
  if (!library_) {
    why_ = fmt::format("{} cannot be loaded: it comes with the NVIDIA driver", library);
    return;
  }
  const auto symbol = [this](const char* name) { return dlsym(library_, name); };
  auto init = reinterpret_cast<int (*)()>(symbol("nvmlInit_v2"));
  auto by_bus = reinterpret_cast<int (*)(const char*, void**)>(symbol("nvmlDeviceGetHandleByPciBusId_v2"));
  read_ = reinterpret_cast<int (*)(void*, unsigned long long*)>(symbol("nvmlDeviceGetTotalEnergyConsumption"));
  shutdown_ = reinterpret_cast<int (*)()>(symbol("nvmlShutdown"));
  if (!init || !by_bus || !read_ || !shutdown_) {
    why_ = fmt::format("{} lacks the functions it needs (nvmlInit_v2, nvmlDeviceGetHandleByPciBusId_v2, "
                       "nvmlDeviceGetTotalEnergyConsumption)",
                       library);
    return;
  }
  if (const int status = init(); status != nvml_success) {
    why_ = fmt::format("nvmlInit_v2 returned {}", status);
    shutdown_ = nullptr;
    return;
  }
  if (const int status = by_bus(pci_bus_id.c_str(), &device_); status != nvml_success) {
    why_ = fmt::format("NVML has no device at PCI bus id '{}' (status {})", pci_bus_id, status);
    return;
  }
  unsigned long long millijoules = 0;
  if (const int status = read_(device_, &millijoules); status != nvml_success) {
    why_ = fmt::format("the device's total energy counter cannot be read (status {}: a card older than Volta?)", status);
    return;
  }
  available_ = true;
}

EnergyMeter EnergyMeter::unavailable(std::string why) {
  EnergyMeter m;
  m.why_ = std::move(why);
  return m;
}

EnergyMeter::EnergyMeter(EnergyMeter&& o) noexcept
    : library_(std::exchange(o.library_, nullptr)),
      device_(o.device_),
      read_(o.read_),
      shutdown_(std::exchange(o.shutdown_, nullptr)),
      available_(std::exchange(o.available_, false)),
      why_(std::move(o.why_)) {}

EnergyMeter& EnergyMeter::operator=(EnergyMeter&& o) noexcept {
  if (this != &o) {
    this->~EnergyMeter();
    new (this) EnergyMeter(std::move(o));
  }
  return *this;
}

EnergyMeter::~EnergyMeter() {
  if (shutdown_) shutdown_();
  if (library_) dlclose(library_);
}

std::optional<double> EnergyMeter::joules() const {
  if (!available_) return std::nullopt;
  unsigned long long millijoules = 0;
  if (read_(device_, &millijoules) != nvml_success) return std::nullopt;
  return static_cast<double>(millijoules) / 1000.0;
}

void EnergyTotal::add(std::optional<double> before, std::optional<double> after, std::int64_t produced) {
  ++passes;
  failed = failed || !before || !after;
  if (before && after) joules += *after - *before;
  tokens += produced;
}

double EnergyTotal::per_token() const { return tokens > 0 ? joules / static_cast<double>(tokens) : 0.0; }

std::string energy_line(bool available, const std::string& why, const EnergyTotal& speculative,
                        const EnergyTotal& plain) {
  if (!available) return "energy: NVML not available (" + why + ")";
  if (!speculative.measured() || !plain.measured() || speculative.tokens == 0 || plain.tokens == 0)
    return "energy: not measured (a read of NVML's energy counter failed, or a pass produced no token)";
  const double ratio = plain.per_token() > 0 ? speculative.per_token() / plain.per_token() : 0.0;
  return fmt::format("energy (NVML total energy counter): {:.4g} J/token speculative, {:.4g} J/token plain: {:.3f}x "
                     "plain's",
                     speculative.per_token(), plain.per_token(), ratio);
}

nlohmann::ordered_json energy_json(bool available, const std::string& why, const EnergyTotal& speculative,
                                   const EnergyTotal& plain) {
  if (!available) return {{"available", false}, {"why", why}};
  if (!speculative.measured() || !plain.measured()) return {{"available", true}, {"measured", false}};
  nlohmann::ordered_json j{{"available", true}, {"measured", true}};
  j["joules_per_token"] = {{"speculative", speculative.per_token()}, {"plain", plain.per_token()}};
  j["ratio"] = plain.per_token() > 0 ? speculative.per_token() / plain.per_token() : 0.0;
  j["joules"] = {{"speculative", speculative.joules}, {"plain", plain.joules}};
  j["tokens"] = {{"speculative", speculative.tokens}, {"plain", plain.tokens}};
  return j;
}

StepParts step_parts(const ModelRun& run) {
  StepParts parts;
  for (const ModelTurn& turn : run.turns) {
    const specdec::DecodeStats& s = turn.result.stats;
    parts.steps += s.steps;
    parts.drafting += s.draft_seconds;
    parts.backend.add(s.backend_phases);
  }
  return parts;
}

std::string step_parts_line(const StepParts& p, const char* timer) {
  if (p.steps == 0) return "step parts: no step";
  const double per = 1e6 / static_cast<double>(p.steps);
  return fmt::format("step parts, microseconds per step ({} steps): drafting {:.1f} (host), copy in {:.1f}, forward "
                     "{:.1f}, verify+compact {:.1f}, copy out {:.1f} (device, {})",
                     p.steps, p.drafting * per, p.backend.copy_in * per, p.backend.forward * per,
                     p.backend.verify_compact * per, p.backend.copy_out * per, timer);
}

nlohmann::ordered_json step_parts_json(const StepParts& p) {
  return {{"steps", p.steps},
          {"seconds",
           {{"drafting", p.drafting},
            {"copy_in", p.backend.copy_in},
            {"forward", p.backend.forward},
            {"verify_compact", p.backend.verify_compact},
            {"copy_out", p.backend.copy_out}}}};
}

}  // namespace specbench
