// `--device host|cuda|emulated` on specbench's subcommands (device.hpp); included by main.cpp only.
#pragma once

#include <CLI/CLI.hpp>

#include "common/cli_values.hpp"
#include "device.hpp"

namespace specbench {

/// The model of `text` (device_model_choice) as the device options `d` run it.
inline DeviceModelChoice device_model(const DeviceArgs& d, const std::string& text, const char* option) {
  DeviceModelChoice choice = device_model_choice(text, option);
  choice.graphs = d.graphs;
  choice.tensor_cores = d.tensor_cores;
  return choice;
}

/// The runs of the device `d` names (d.on_device() first).
inline const DeviceRuns& device_runs(const DeviceArgs& d) { return d.device == "emulated" ? emulated_runs() : cuda_runs(); }

/// Adds --device (and, with `synthetic`, calibrate's --synthetic SHAPE) to `cmd`.
inline void add_device_option(CLI::App& cmd, DeviceArgs& d, bool synthetic) {
  cmd.add_option("--device", d.device, "Where the model runs: host (default), cuda (CudaLlamaTarget on GPU 0; a "
                                       "build with CUDA) or emulated (the same kernels and step on the host's "
                                       "emulated grid: slow, for checking the GPU path without a GPU)")
      ->transform(specdec::tools::one_of({"host", "cuda", "emulated"}));
  cmd.add_flag("--graphs", d.graphs, "With --device cuda or emulated: the target replays a CUDA graph per tree size "
                                     "bucket instead of launching each kernel (trees padded to a power of two nodes; the "
                                     "same bits)");
  cmd.add_flag("--tensor-cores", d.tensor_cores,
               "With --device cuda or emulated: the weight products run on tensor cores (bf16 MMA of the activations "
               "rounded to bf16; synthetic shapes only, whose weights are bf16)");
  if (synthetic)
    cmd.add_option("--synthetic", d.synthetic, "With --device cuda or emulated: time a synthetic shape (bf16 weights "
                                               "made on the device), e.g. Llama-2-7B, instead of --model");
}

/// calibrate's model on the device (nullopt: the host calibrates --model), once calibrate_rules
/// (main.cpp) has checked that --model or --synthetic names one.
inline std::optional<DeviceModelChoice> calibrate_device_model(const DeviceArgs& d, const CalibrateOptions& o) {
  if (!d.on_device()) return std::nullopt;
  DeviceModelChoice choice = d.synthetic.empty() ? device_model_choice(o.model.string(), "--model")
                                                 : device_model_choice("synthetic:" + d.synthetic, "--synthetic");
  choice.graphs = d.graphs;
  choice.tensor_cores = d.tensor_cores;
  device_runs(d).require();
  return choice;
}

}  // namespace specbench
