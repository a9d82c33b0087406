// CudaLlamaTarget: the device Llama (targets/device_llama.hpp) on one CUDA device, as a
// BackendTarget (backend::cuda), so that SpeculativeDecoder verifies and compacts its trees on the
// device with the backend step; CudaLlamaBatchTarget is the same model as a BackendBatchTarget.
// The kernels are kernels/llama_forward.hpp's grid kernels on a CUDA grid (kernels/grid.cuh).
// Include it in a .cu file compiled by nvcc (C++20).
#pragma once

#include <specdec/kernels/grid.cuh>
#include <specdec/targets/device_llama.hpp>

namespace specdec {

using CudaLlamaOptions = DeviceLlamaOptions;
using CudaLlamaLayout = DeviceLlamaLayout;
using CudaLlamaModel = DeviceLlamaModel<backend::cuda>;
using CudaLlamaTarget = DeviceLlamaTarget<backend::cuda>;
using CudaLlamaBatchTarget = DeviceLlamaBatchTarget<backend::cuda>;

static_assert(BackendTarget<CudaLlamaTarget>);
static_assert(BackendBatchTarget<CudaLlamaBatchTarget>);

}  // namespace specdec
