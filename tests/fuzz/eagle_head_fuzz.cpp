// Fuzz target: EAGLE head files (models/eagle_head.hpp). A file is read (header first, as a
// drafter does to check that it fits, then the weights), or refused with a specdec::error;
// anything else (std::bad_alloc included) is a bug, and so is a header read twice two ways.
#include <cstdlib>

#include <specdec/error.hpp>
#include <specdec/models/eagle_head.hpp>

#include "fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = specdec::fuzz::as_file(data, size, ".eagle");
  try {
    const specdec::LlamaConfig config = specdec::EagleHead::read_config(file);
    const specdec::EagleHead head = specdec::EagleHead::load(file);
    if (head.config().dim != config.dim || head.config().vocab_size != config.vocab_size) std::abort();
  } catch (const specdec::error&) {
  }
  return 0;
}
