// Writes the files the `specbench model` command-line tests read into the directory given:
// tiny.bin (a random-weight llama2.c checkpoint: vocabulary 350, 128 positions), tiny_tok.bin
// (its tokenizer), tiny_32k.bin (the same with Llama-2's vocabulary of 32000 and 320 positions:
// a model the replay can time, small enough for the emulated device), tiny_1024.bin (tiny.bin's
// shape with 1024 positions: room for calibrated trees larger than a device forward takes),
// tiny_truncated.bin (the checkpoint cut in half), long_prompt.txt (a prompt longer than 128
// positions) and mixed_prompts.txt (that prompt, then a short one).
#include <filesystem>
#include <fstream>
#include <string>

#include "support/tiny_llama.hpp"

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const std::filesystem::path dir = argv[1];
  std::filesystem::create_directories(dir);
  specdec::testing::write_tiny_llama(dir / "tiny.bin");
  specdec::testing::write_tiny_tokenizer(dir / "tiny_tok.bin");
  specdec::testing::TinyLlamaShape replayable;
  replayable.vocab = 32000;
  replayable.seq_len = 320;
  specdec::testing::write_tiny_llama(dir / "tiny_32k.bin", replayable);
  specdec::testing::TinyLlamaShape long_context;
  long_context.seq_len = 1024;
  specdec::testing::write_tiny_llama(dir / "tiny_1024.bin", long_context);
  std::ifstream in(dir / "tiny.bin", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::ofstream(dir / "tiny_truncated.bin", std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  std::string prompt;
  for (int i = 0; i < 40; ++i) prompt += "the cat sat on the mat. ";
  std::ofstream(dir / "long_prompt.txt") << prompt << "\n";
  std::ofstream(dir / "mixed_prompts.txt") << prompt << "\nthe cat\n";
  return 0;
}
