// The error specbench reports for bad input: one line on stderr, exit code 2.
#pragma once

#include <stdexcept>

namespace specbench {

/// Bad input from the user (a file, its contents, an option value, a name); the message names it.
class input_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace specbench
