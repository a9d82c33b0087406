// What the fuzz targets share: the libFuzzer entry point they define, and a file to hand the
// input to loaders that read paths. Built two ways (docs/fuzzing.md): with random_driver.cpp by
// any compiler (a bounded run in CTest), or with clang's -fsanitize=fuzzer (scripts/fuzz.sh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace specdec::fuzz {

/// Writes the input to this process's scratch file (one per target) and returns its path.
inline std::filesystem::path as_file(const std::uint8_t* data, std::size_t size, const char* suffix) {
  static const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("specdec_fuzz_" + std::to_string(::getpid()) + suffix);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(reinterpret_cast<const char*>(data),
                                                                static_cast<std::streamsize>(size));
  return path;
}

}  // namespace specdec::fuzz
