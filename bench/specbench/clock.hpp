// The clock of specbench's timings: steady, read as seconds since a moment.
#pragma once

#include <chrono>

namespace specbench::detail {

using Clock = std::chrono::steady_clock;

inline double seconds_since(Clock::time_point t0) { return std::chrono::duration<double>(Clock::now() - t0).count(); }

}  // namespace specbench::detail
