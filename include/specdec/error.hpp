// The one exception type thrown at specdec's public boundary.
#pragma once

#include <stdexcept>
#include <string>

namespace specdec {

/// Thrown on bad input at a public boundary; the message names the bad value.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace specdec
