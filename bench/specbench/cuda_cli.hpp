// `--device host|cuda` on specbench's subcommands (cuda_device.hpp); included by main.cpp only.
#pragma once

#include <CLI/CLI.hpp>

#include "cuda_device.hpp"
#include "input_error.hpp"

namespace specbench {

/// Adds --device (and, with `synthetic`, calibrate's --synthetic SHAPE) to `cmd`.
inline void add_device_option(CLI::App& cmd, DeviceArgs& d, bool synthetic) {
  cmd.add_option("--device", d.device, "Where the model runs: host (default) or cuda (CudaLlamaTarget on GPU 0; a "
                                       "build with CUDA)")
      ->check(CLI::IsMember({"host", "cuda"}));
  if (synthetic)
    cmd.add_option("--synthetic", d.synthetic, "With --device cuda: time a synthetic shape (bf16 weights made on the "
                                               "device), e.g. Llama-2-7B, instead of --model");
}

/// calibrate's model on the device (nullopt: the host calibrates --model), once the options are
/// known to fit: --device cuda takes --model FILE or --synthetic SHAPE, and none of the host's
/// --threads, --weights, --layers-of.
inline std::optional<CudaModelChoice> calibrate_device_model(const DeviceArgs& d, const CalibrateOptions& o) {
  if (!d.cuda()) {
    if (!d.synthetic.empty()) throw input_error("--synthetic SHAPE runs on the GPU: add --device cuda");
    if (o.model.empty()) throw input_error("calibrate needs --model FILE (or --device cuda --synthetic SHAPE)");
    return std::nullopt;
  }
  if (o.model.empty() == d.synthetic.empty())
    throw input_error("--device cuda: calibrate takes either --model FILE or --synthetic SHAPE (one of the two)");
  if (o.threads != 1 || o.weights != specdec::WeightFormat::fp32 || o.layers_of != 0)
    throw input_error("--device cuda: --threads, --weights and --layers-of are the host's options (a checkpoint "
                      "runs in fp32 on the GPU, a synthetic shape in bf16)");
  CudaModelChoice choice = d.synthetic.empty() ? cuda_model_choice(o.model.string(), "--model")
                                               : cuda_model_choice("synthetic:" + d.synthetic, "--synthetic");
  require_cuda_device();
  return choice;
}

}  // namespace specbench
