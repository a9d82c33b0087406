// Fuzz target: llama2.c checkpoints. A file is loaded, becomes a target and runs a short
// prefill, or is refused with a specdec::error; anything else (std::bad_alloc included) is a bug.
#include <vector>

#include <specdec/error.hpp>
#include <specdec/targets/llama2c.hpp>

#include "fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = specdec::fuzz::as_file(data, size, ".bin");
  try {
    specdec::Llama2cTarget target(file);
    const int vocab = target.vocab_size();
    const std::vector<specdec::token_t> prompt{0, vocab - 1, vocab / 2};
    if (target.max_positions() >= 3) target.prefill(prompt);
  } catch (const specdec::error&) {
  }
  return 0;
}
