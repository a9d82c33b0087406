// A clock the test moves (DecoderOptions::clock, BatchOptions::clock): the stand-ins that take
// time (CountingOracle's drafting, a target whose nodes cost time) advance it, and nothing else
// does. What the automatic budget decides from time then does not depend on how fast the build
// runs: under ASan a real 10 us of drafting is 30 (issue 49: the budget tests failed there).
#pragma once

#include <chrono>

namespace specdec::testing {

struct TestClock {
  static std::chrono::steady_clock::time_point now() { return std::chrono::steady_clock::time_point(elapsed()); }
  static void advance(std::chrono::steady_clock::duration d) { elapsed() += d; }

 private:
  static std::chrono::steady_clock::duration& elapsed() {
    static std::chrono::steady_clock::duration e{0};
    return e;
  }
};

}  // namespace specdec::testing
