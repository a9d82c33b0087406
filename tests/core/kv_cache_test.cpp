#include <catch2/catch.hpp>

#include <vector>

#include <specdec/core/kv_cache.hpp>

using namespace specdec;

namespace {

// A cache of `layers` blocks of `slots` rows; every float encodes (layer, slot, element).
std::vector<float> numbered_cache(int layers, int slots, int row) {
  std::vector<float> c(static_cast<std::size_t>(layers) * slots * row);
  for (int l = 0; l < layers; ++l)
    for (int s = 0; s < slots; ++s)
      for (int e = 0; e < row; ++e) c[(static_cast<std::size_t>(l) * slots + s) * row + e] = l * 10000.0f + s * 10.0f + e;
  return c;
}

}  // namespace

TEST_CASE("compact_kv_path moves the path's rows to contiguous slots, in place", "[core][kv]") {
  const int layers = 3, slots = 20, row = 4, base = 5;
  // Overlapping moves: the destination of entry k is the source of no later entry, but slots
  // base+1 and base+2 are both sources and destinations.
  const std::vector<node_t> path{0, 1, 3, 4, 9, 12};
  auto cache = numbered_cache(layers, slots, row);
  const auto before = cache;
  REQUIRE(core::compact_kv_path(cache.data(), static_cast<long>(slots) * row, layers, row, base, path.data(),
                                static_cast<int>(path.size())));
  for (int l = 0; l < layers; ++l)
    for (int s = 0; s < slots; ++s)
      for (int e = 0; e < row; ++e) {
        const std::size_t at = (static_cast<std::size_t>(l) * slots + s) * row + e;
        const int k = s - base;
        if (k >= 0 && k < static_cast<int>(path.size()))
          CHECK(cache[at] == before[(static_cast<std::size_t>(l) * slots + base + path[k]) * row + e]);
        else if (s < base)
          CHECK(cache[at] == before[at]);  // committed entries are never touched
      }
}

TEST_CASE("compact_kv_path refuses a path that is not increasing from the root", "[core][kv]") {
  auto cache = numbered_cache(1, 8, 2);
  const auto before = cache;
  for (const std::vector<node_t>& bad : {std::vector<node_t>{1}, {0, 2, 2}, {0, 3, 1}, {0, -1}}) {
    CHECK_FALSE(core::compact_kv_path(cache.data(), 16, 1, 2, 0, bad.data(), static_cast<int>(bad.size())));
    CHECK(cache == before);
  }
}
