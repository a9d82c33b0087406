// Catch2's implementation is compiled once (catch_session.cpp) for both test entry points: the
// plain one (catch_main.cpp) and the GPU tests' (gpu_main.cpp).
#pragma once

namespace specdec::testing {

/// Runs the program's Catch2 test cases with its command line; returns the number of failures.
int run_catch_session(int argc, char* argv[]);

}  // namespace specdec::testing
