// Fuzz target: specbench's jsonl readers (questions and answers). Any file is read or refused
// with an input_error naming the file and line; anything else is a bug.
#include "corpus.hpp"
#include "fuzz_target.hpp"
#include "input_error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = specdec::fuzz::as_file(data, size, ".jsonl");
  try {
    static_cast<void>(specbench::load_questions(file));
  } catch (const specbench::input_error&) {
  }
  try {
    static_cast<void>(specbench::load_answers(file));
  } catch (const specbench::input_error&) {
  }
  return 0;
}
