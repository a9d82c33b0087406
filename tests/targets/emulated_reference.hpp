// The device Llama's logits computed by its emulation on the host (EmulatedLlamaTarget), for the
// GPU test to compare the device's with, bit for bit. Compiled in its own C++ file
// (emulated_reference.cpp): the emulated grid's fibers are host code that nvcc need not see.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include <specdec/config.hpp>
#include <specdec/models/synthetic_llama.hpp>
#include <specdec/testing/laid_out_tree.hpp>

namespace specdec::device_llama_checks {

/// The logits of every node of `tree` (rows of the vocabulary) on top of `prefix`, by the emulated
/// device Llama of `checkpoint` (fp32), or of `shape` with the synthetic weights of `seed` when
/// `checkpoint` is empty.
std::vector<float> emulated_logits(const std::filesystem::path& checkpoint, const SyntheticShape& shape,
                                   std::uint64_t seed, const std::vector<token_t>& prefix,
                                   const testing::LaidOutTree& tree);

/// y [n][out] = W x16ᵀ by kernels::llama::MmaProduct on the emulated grid (`Tiles` 1 or 8), from
/// `y` as it is when `accumulate`.
std::vector<float> emulated_mma_product(const std::vector<std::uint16_t>& w, const std::vector<std::uint16_t>& x16,
                                        int in, int out, int n, int tiles, std::vector<float> y, bool accumulate);

}  // namespace specdec::device_llama_checks
