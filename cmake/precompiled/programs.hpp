// What the programs of the test suite's build parse most (../test_build_pch.cmake): the standard
// headers and {fmt}, where it is found. Not CLI11: its classes' inline code is compiled in every
// file that includes it, so a file that does not would pay more than it saves.
#pragma once

#include "standard.hpp"

#if __has_include(<fmt/format.h>)
#include <fmt/format.h>
#endif
