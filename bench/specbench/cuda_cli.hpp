// `--device host|cuda` on specbench's subcommands (cuda_device.hpp); included by main.cpp only.
#pragma once

#include <CLI/CLI.hpp>

#include "common/cli_values.hpp"
#include "cuda_device.hpp"

namespace specbench {

/// Adds --device (and, with `synthetic`, calibrate's --synthetic SHAPE) to `cmd`.
inline void add_device_option(CLI::App& cmd, DeviceArgs& d, bool synthetic) {
  cmd.add_option("--device", d.device, "Where the model runs: host (default) or cuda (CudaLlamaTarget on GPU 0; a "
                                       "build with CUDA)")
      ->transform(specdec::tools::one_of({"host", "cuda"}));
  if (synthetic)
    cmd.add_option("--synthetic", d.synthetic, "With --device cuda: time a synthetic shape (bf16 weights made on the "
                                               "device), e.g. Llama-2-7B, instead of --model");
}

/// calibrate's model on the device (nullopt: the host calibrates --model), once calibrate_rules
/// (main.cpp) has checked that --model or --synthetic names one.
inline std::optional<CudaModelChoice> calibrate_device_model(const DeviceArgs& d, const CalibrateOptions& o) {
  if (!d.cuda()) return std::nullopt;
  CudaModelChoice choice = d.synthetic.empty() ? cuda_model_choice(o.model.string(), "--model")
                                               : cuda_model_choice("synthetic:" + d.synthetic, "--synthetic");
  require_cuda_device();
  return choice;
}

}  // namespace specbench
