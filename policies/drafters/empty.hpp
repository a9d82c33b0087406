// EmptyDrafter: proposes nothing (plain decoding through the speculative loop).
#pragma once

#include <specdec/concepts.hpp>

namespace specdec {

struct EmptyDrafter {
  static constexpr const char* name = "empty";
  void begin(std::span<const token_t>) {}
  void propose(const DraftContext&, DraftTree&) {}
  void observe(std::span<const token_t>) {}
};

static_assert(Drafter<EmptyDrafter>);

}  // namespace specdec
