// CudaLlamaTarget: targets/cuda_llama.hpp, under the name a .cu file has included since before a
// C++ file could (C++20).
#pragma once

#include <specdec/targets/cuda_llama.hpp>
