// kernels::llama::MmaProduct run on the host's emulated grid, for the tests that check its
// fragments and its rule (emulated_llama_test; the GPU test through emulated_reference.cpp).
#pragma once

#include <cstdint>
#include <vector>

#include <specdec/kernels/llama_forward.hpp>
#include <specdec/testing/emulated_grid.hpp>

namespace specdec::device_llama_checks {

/// y [n][out] = W x16ᵀ by MmaProduct<1, 1> or <8, 2> (`tiles` 1 or 8) on the emulated grid: W
/// [out][in] and x16 [n rounded up to 8][in] in bf16; from `y` as it is when `accumulate`.
inline std::vector<float> mma_product_on_host(const std::vector<std::uint16_t>& w, const std::vector<std::uint16_t>& x16,
                                              int in, int out, int n, int tiles, std::vector<float> y, bool accumulate) {
  y.resize(static_cast<std::size_t>(n) * out);
  kernels::llama::ProductArgs a;
  a.w = w.data();
  a.in = in;
  a.out = out;
  a.n = n;
  a.y = y.data();
  a.ldy = out;
  a.accumulate = accumulate;
  kernels::llama::launch_mma_variant(tiles == 8, a, x16.data(), [](const auto& kernel) {
    backend::launch_grid(backend::host{}, kernel.shape(), kernel);
  });
  return y;
}

}  // namespace specdec::device_llama_checks
