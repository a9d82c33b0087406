// The one exception type thrown at specdec's public boundary.
#pragma once

#include <stdexcept>
#include <string>
#include <type_traits>

namespace specdec {

/// Thrown on bad input at a public boundary; the message names the bad value.
class error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// The specdec::error of a model, cache or batch that does not fit the device's free memory: a
/// caller may go on with a smaller one (specbench's batch table skips that batch size).
class device_memory_error : public error {
 public:
  using error::error;
};

/// Who a check's message names: a string, or a callable that builds one, so that a check run every
/// step builds its message only when it fails.
template <class Who>
std::string subject(const Who& who) {
  if constexpr (std::is_invocable_v<const Who&>) return who();
  else return std::string(who);
}

}  // namespace specdec
