// What the fuzz targets share: the libFuzzer entry point they define, and a file to hand the
// input to loaders that read paths. Built two ways (docs/fuzzing.md): with random_driver.cpp by
// any compiler (a bounded run in CTest), or with clang's -fsanitize=fuzzer (scripts/fuzz.sh).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

#include <specdec/io/file_format.hpp>

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

/// The input with its payload and header checksums recomputed (for formats whose header has
/// them: io/file_format.hpp), as an attacker crafting a file would: mutations then reach every
/// check past the checksums. An input shorter than the header comes back as it is.
template <class Header>
std::string sealed(const std::uint8_t* data, std::size_t size) {
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (size < sizeof(Header)) return bytes;
  Header h;
  std::memcpy(&h, bytes.data(), sizeof h);
  h.payload_checksum = specdec::datastore_checksum(bytes.data() + sizeof h, size - sizeof h);
  h.header_checksum = header_checksum(h);
  std::memcpy(bytes.data(), &h, sizeof h);
  return bytes;
}

/// Writes `bytes` to this process's scratch file (as as_file).
inline std::filesystem::path as_file(const std::string& bytes, const char* suffix) {
  return as_file(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size(), suffix);
}

}  // namespace specdec::fuzz
