// Fuzz target: llama2.c tokenizer files. A file is loaded and encodes and decodes a text with
// multi-byte characters, or is refused with a specdec::error; anything else is a bug.
#include <specdec/error.hpp>
#include <specdec/tokenizers/llama2c_tokenizer.hpp>

#include "fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = specdec::fuzz::as_file(data, size, ".tok");
  try {
    const auto tokenizer = specdec::Llama2cTokenizer::load(file);
    const auto ids = tokenizer.encode("Once upon a time,  a caf\xc3\xa9 \xf0\x9f\x99\x82 ~\n", true, true);
    static_cast<void>(tokenizer.decode(ids));
  } catch (const specdec::error&) {
  }
  return 0;
}
