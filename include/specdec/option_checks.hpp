// The one check of a policy's integer options, shared by every drafter: a value below its least
// is a specdec::error in one sentence that names the policy, the option and the value.
#pragma once

#include <string>
#include <string_view>

#include <specdec/error.hpp>

namespace specdec {

/// Throws specdec::error "POLICY: OPTION must be >= LEAST, got VALUE" unless value >= least.
inline void check_option(std::string_view policy, std::string_view option, int value, int least = 1) {
  if (value < least)
    throw error(std::string(policy) + ": " + std::string(option) + " must be >= " + std::to_string(least) + ", got " +
                std::to_string(value));
}

}  // namespace specdec
