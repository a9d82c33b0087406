// Where specbench finds the files its drafters read by default (the stories260K EAGLE head and
// draft model): the installed copies under the install prefix (share/specdec/, installed with
// the binary), else, for the binary in a build tree, the copies in the source tree.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>

namespace specbench {

/// `installed` (relative to the directory of the running executable, e.g.
/// "../share/specdec/eagle/stories260K.eagle") when that file exists, else `source`.
inline std::string default_resource(const char* installed, const char* source) {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const std::filesystem::path copy = (exe.parent_path() / installed).lexically_normal();
    if (std::filesystem::is_regular_file(copy, ec)) return copy.string();
  }
  return source;
}

}  // namespace specbench
