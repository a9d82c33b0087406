#include "targets/emulated_reference.hpp"

#include <utility>

#include <specdec/testing/emulated_llama.hpp>

#include "targets/mma_product_on_host.hpp"

namespace specdec::device_llama_checks {

std::vector<float> emulated_logits(const std::filesystem::path& checkpoint, const SyntheticShape& shape,
                                   std::uint64_t seed, const std::vector<token_t>& prefix,
                                   const testing::LaidOutTree& tree) {
  EmulatedLlamaTarget target =
      checkpoint.empty() ? EmulatedLlamaTarget::synthetic(shape, seed) : EmulatedLlamaTarget::load(checkpoint);
  target.prefill(prefix);
  const LogitsRows rows = target.forward(tree.view(static_cast<int>(prefix.size())));
  const std::size_t n = static_cast<std::size_t>(tree.view(0).size) * static_cast<std::size_t>(target.vocab_size());
  return std::vector<float>(rows.data, rows.data + n);
}

std::vector<float> emulated_mma_product(const std::vector<std::uint16_t>& w, const std::vector<std::uint16_t>& x16,
                                        int in, int out, int n, int tiles, std::vector<float> y, bool accumulate) {
  return mma_product_on_host(w, x16, in, out, n, tiles, std::move(y), accumulate);
}

}  // namespace specdec::device_llama_checks
