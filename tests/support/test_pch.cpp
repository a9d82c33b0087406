// The object that carries the tests' precompiled Catch2 header (tests/CMakeLists.txt,
// specdec_test_pch); it has no code of its own.
