// Where tests find the shared data files, and how they skip when a file is absent.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <optional>
#include <string>

namespace specdec::testing {

/// `relative` under $SPECDEC_DATA, else under the build's default data directory (../shared/data).
/// Returns nullopt, after printing a "specdec-skip:" line that CTest reports as a skip, when the
/// file does not exist.
inline std::optional<std::filesystem::path> data_file(const std::string& relative) {
  const char* env = std::getenv("SPECDEC_DATA");
  const std::filesystem::path root = env && *env ? env : SPECDEC_DEFAULT_DATA_DIR;
  std::filesystem::path path = root / relative;
  if (std::filesystem::exists(path)) return path;
  std::cout << "specdec-skip: data file " << path << " not found (set SPECDEC_DATA to the data directory)\n";
  return std::nullopt;
}

}  // namespace specdec::testing
