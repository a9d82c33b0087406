// A consumer checks a target with the installed conformance kit, without any test framework.
#include <cstdio>

#include <specdec/testing/hash_target.hpp>
#include <specdec/testing/target_conformance.hpp>

int main() {
  specdec::HashTarget target(32);
  const specdec::testing::ConformanceReport report = specdec::testing::check_target(target);
  std::printf("consumer_conformance: %s\n", report.str().c_str());
  return report.ok() ? 0 : 1;
}
