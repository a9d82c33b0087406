// What two decodings of the same tokens must count alike, whatever their times: e.g. step by step
// and with plain runs (DecoderOptions::plain_runs).
#pragma once

#include <catch2/catch.hpp>

#include <specdec/stats.hpp>

namespace specdec::testing {

inline void check_same_counters(const DecodeStats& a, const DecodeStats& b) {
  CHECK(a.steps == b.steps);
  CHECK(a.tokens == b.tokens);
  CHECK(a.drafted_nodes == b.drafted_nodes);
  CHECK(a.tokens_per_step == b.tokens_per_step);
  CHECK(a.nodes_per_step == b.nodes_per_step);
  CHECK(a.accepted_by_drafter == b.accepted_by_drafter);
  CHECK(a.sized_steps == b.sized_steps);
  CHECK(a.paused_steps == b.paused_steps);
  CHECK(a.expected_tokens == Approx(b.expected_tokens));
  // The cost model's seconds plus the measured drafting time: alike up to the clock's noise.
  CHECK(a.expected_seconds == Approx(b.expected_seconds).epsilon(0.01));
}

}  // namespace specdec::testing
