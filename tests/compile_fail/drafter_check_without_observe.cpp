// Must not compile: a drafter without observe(), checked at the end of its header with
// specdec::check_drafter (what docs/writing_a_drafter.md recommends). The expected error is the
// worded sentence, not a bare "static assertion failed", and the line above it names the drafter.
#include <specdec/checks.hpp>

struct DrafterWithoutObserve {
  void begin(std::span<const specdec::token_t>) {}
  void propose(const specdec::DraftContext&, specdec::DraftTree&) {}
};

static_assert(specdec::check_drafter<DrafterWithoutObserve>());

int main() {}
