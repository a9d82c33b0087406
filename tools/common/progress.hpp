// Progress lines of the datastore tools: "[   12.3 s] what", on stderr, timed from the program's start.
#pragma once

#include <chrono>
#include <iostream>
#include <string_view>

#include <fmt/format.h>

namespace specdec::tools {

using Clock = std::chrono::steady_clock;
inline const Clock::time_point program_start = Clock::now();

inline void progress(std::string_view what) {
  const double seconds = std::chrono::duration<double>(Clock::now() - program_start).count();
  std::cerr << fmt::format("[{:8.1f} s] {}\n", seconds, what);
}

}  // namespace specdec::tools
