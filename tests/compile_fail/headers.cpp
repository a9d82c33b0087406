// The compile-fail tests' precompiled headers (tests/CMakeLists.txt) are made with this file, which
// compiles.
