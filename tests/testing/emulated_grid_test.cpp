// The host's emulated grid (testing/emulated_grid.hpp): indices, shared memory, barriers, the
// warp butterfly and the block trees bit for bit against references written here from the
// contract in kernels/grid.hpp, the warp MMA against PTX's fragment tables, divergence and
// exceptions.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

#include <specdec/kernels/grid.hpp>
#include <specdec/testing/emulated_grid.hpp>

using Catch::Matchers::Contains;
using specdec::backend::host;
using specdec::backend::launch_grid;
using specdec::kernels::LaunchShape;

namespace {

/// Floats whose sums depend on the order they are added in (magnitudes 2^-10 to 2^10).
std::vector<float> random_floats(std::size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mantissa(-1.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-10, 10);
  std::vector<float> v(n);
  for (float& x : v) x = std::ldexp(mantissa(rng), exponent(rng));
  return v;
}

/// The warp butterfly of grid.hpp: lane l's value after v += shfl_xor(v, m), m = 16, ..., 1.
std::vector<float> butterfly(const float* lanes) {
  std::vector<float> cur(lanes, lanes + 32), next(32);
  for (int m = 16; m >= 1; m /= 2) {
    for (int l = 0; l < 32; ++l) next[static_cast<std::size_t>(l)] = cur[static_cast<std::size_t>(l)] + cur[static_cast<std::size_t>(l ^ m)];
    cur.swap(next);
  }
  return cur;
}

/// The block tree of grid.hpp on `part` (left as the device leaves it); returns part[0].
template <class Op>
float tree(float* part, int threads, Op op) {
  for (int s = threads / 2; s >= 1; s /= 2)
    for (int i = 0; i < s; ++i) part[i] = op(part[i], part[i + s]);
  return part[0];
}

bool same_bits(float a, float b) { return std::memcmp(&a, &b, sizeof a) == 0; }

}  // namespace

TEST_CASE("emulated grid: every thread of a 2D grid runs once with its indices, blocks x fastest") {
  const LaunchShape shape{3, 2, 64, 0};
  std::vector<int> runs(3 * 2 * 64, 0);
  std::vector<std::pair<int, int>> block_order;
  bool sizes_ok = true;
  launch_grid(host{}, shape, [&](const auto& th) {
    const int global = ((th.block_y() * th.blocks_x() + th.block_x()) * th.threads()) + th.thread();
    ++runs[static_cast<std::size_t>(global)];
    if (th.thread() == 0) block_order.emplace_back(th.block_x(), th.block_y());
    sizes_ok = sizes_ok && th.blocks_x() == 3 && th.threads() == 64;
  });
  CHECK(sizes_ok);
  CHECK(runs == std::vector<int>(runs.size(), 1));
  CHECK(block_order == std::vector<std::pair<int, int>>{{0, 0}, {1, 0}, {2, 0}, {0, 1}, {1, 1}, {2, 1}});
}

TEST_CASE("emulated grid: each block has its own 16-byte aligned shared memory, not the last block's") {
  const int threads = 32;
  const LaunchShape shape{4, 1, threads, threads * sizeof(int) + 3};
  std::vector<int> misaligned, stale, foreign;
  launch_grid(host{}, shape, [&](const auto& th) {
    unsigned char* shared = th.shared();
    if (reinterpret_cast<std::uintptr_t>(shared) % 16 != 0) misaligned.push_back(th.block_x());
    int* slot = reinterpret_cast<int*>(shared);
    unsigned char fresh[sizeof(int)];
    std::memcpy(fresh, &slot[th.thread()], sizeof fresh);
    for (unsigned char byte : fresh)
      if (byte != 0xA5) stale.push_back(th.block_x());  // the executor's pattern, not a value of the last block
    th.sync();
    slot[th.thread()] = th.block_x() * 1000 + th.thread();
    th.sync();
    for (int t = 0; t < threads; ++t)
      if (slot[t] != th.block_x() * 1000 + t) foreign.push_back(th.block_x());
  });
  CHECK(misaligned.empty());
  CHECK(stale.empty());
  CHECK(foreign.empty());
}

TEST_CASE("emulated grid: sync() orders shared memory, and threads that returned do not block it") {
  const int threads = 128;
  SECTION("a shift through shared memory, twice") {
    std::vector<int> out(2 * threads, -1);
    launch_grid(host{}, LaunchShape{2, 1, threads, threads * sizeof(int)}, [&](const auto& th) {
      int* s = reinterpret_cast<int*>(th.shared());
      const int t = th.thread();
      s[t] = th.block_x() * threads + t;
      th.sync();
      const int right = s[(t + 1) % threads];
      th.sync();  // every read is done before the next writes
      s[t] = right;
      th.sync();
      out[static_cast<std::size_t>(th.block_x() * threads + t)] = s[(t + 1) % threads];
    });
    for (int b = 0; b < 2; ++b)
      for (int t = 0; t < threads; ++t) CHECK(out[static_cast<std::size_t>(b * threads + t)] == b * threads + (t + 2) % threads);
  }
  SECTION("the upper half returns at once; the lower half syncs three times") {
    std::vector<int> out(threads, -1);
    launch_grid(host{}, LaunchShape{1, 1, threads, threads * sizeof(int)}, [&](const auto& th) {
      const int t = th.thread(), half = threads / 2;
      if (t >= half) return;
      int* s = reinterpret_cast<int*>(th.shared());
      s[t] = t;
      th.sync();
      const int right = s[(t + 1) % half];
      th.sync();
      s[t] = right;
      th.sync();
      out[static_cast<std::size_t>(t)] = s[t];
    });
    for (int t = 0; t < threads / 2; ++t) CHECK(out[static_cast<std::size_t>(t)] == (t + 1) % (threads / 2));
  }
}

template <int N>
void check_warp_sums() {
  // 4 warps; warps 1 and 3 return at once. Each lane sums its N inputs, then sums again what it
  // got times (lane + 1), so that a lane racing ahead into the second call meets lanes that have
  // not yet resumed from the first.
  const int threads = 128;
  const std::vector<float> in = random_floats(static_cast<std::size_t>(threads * N), 1000 + N);
  std::vector<float> first(in.size(), -1.0f), second(in.size(), -1.0f);
  launch_grid(host{}, LaunchShape{1, 1, threads, 0}, [&](const auto& th) {
    const int t = th.thread(), warp = t / 32;
    if (warp % 2 == 1) return;
    float v[N];
    for (int i = 0; i < N; ++i) v[i] = in[static_cast<std::size_t>(t * N + i)];
    th.warp_sums(v);
    for (int i = 0; i < N; ++i) first[static_cast<std::size_t>(t * N + i)] = v[i];
    for (int i = 0; i < N; ++i) v[i] *= static_cast<float>(t % 32 + 1);
    th.warp_sums(v);
    for (int i = 0; i < N; ++i) second[static_cast<std::size_t>(t * N + i)] = v[i];
  });
  for (int warp = 0; warp < threads / 32; ++warp)
    for (int i = 0; i < N; ++i) {
      float lanes[32];
      for (int l = 0; l < 32; ++l) lanes[l] = in[static_cast<std::size_t>((warp * 32 + l) * N + i)];
      const std::vector<float> sum = butterfly(lanes);
      for (int l = 0; l < 32; ++l) lanes[l] = sum[static_cast<std::size_t>(l)] * static_cast<float>(l + 1);
      const std::vector<float> sum2 = butterfly(lanes);
      for (int l = 0; l < 32; ++l) {
        const std::size_t at = static_cast<std::size_t>((warp * 32 + l) * N + i);
        if (warp % 2 == 1) {
          CHECK(first[at] == -1.0f);
          continue;
        }
        CHECK(same_bits(first[at], sum[static_cast<std::size_t>(l)]));
        CHECK(same_bits(second[at], sum2[static_cast<std::size_t>(l)]));
      }
    }
}

TEST_CASE("emulated grid: warp_sums is the butterfly of grid.hpp, bit for bit, in every lane") {
  SECTION("N = 1") { check_warp_sums<1>(); }
  SECTION("N = 16") { check_warp_sums<16>(); }
  SECTION("N = 7 (four at a time, then one by one)") { check_warp_sums<7>(); }
}

namespace {

// PTX's fragments of mma.m16n8k16 with .bf16 operands and .f32 accumulators, written out here as
// the ISA's tables state them (element i of a lane's fragment, low half of a register first),
// independently of kernels/grid.hpp's mma_* functions, which the emulator uses.
int a_row(int lane, int i) { return lane / 4 + ((i < 2 || (i >= 4 && i < 6)) ? 0 : 8); }
int a_col(int lane, int i) { return (lane % 4) * 2 + (i & 1) + (i >= 4 ? 8 : 0); }
int b_row(int lane, int i) { return (lane % 4) * 2 + (i & 1) + (i >= 2 ? 8 : 0); }
int b_col(int lane) { return lane / 4; }
int d_row(int lane, int i) { return lane / 4 + (i >= 2 ? 8 : 0); }
int d_col(int lane, int i) { return (lane % 4) * 2 + (i & 1); }

std::uint16_t bf16_of(float x) {  // x is a small integer: exact in bf16
  std::uint32_t bits;
  std::memcpy(&bits, &x, sizeof bits);
  return static_cast<std::uint16_t>(bits >> 16);
}

}  // namespace

TEST_CASE("emulated grid: mma_bf16 is D = A B + C in PTX's m16n8k16 fragments, in every lane") {
  // Small integers: every product and sum is exact, so the order of the sums cannot hide a
  // misplaced element.
  float A[16][16], B[16][8], C[16][8];
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> small(-8, 8);
  for (auto& row : A) for (float& x : row) x = static_cast<float>(small(rng));
  for (auto& row : B) for (float& x : row) x = static_cast<float>(small(rng));
  for (auto& row : C) for (float& x : row) x = static_cast<float>(small(rng));
  std::vector<float> d(2 * 32 * 4);  // two warps, the second with C = D of the first: chained
  launch_grid(host{}, LaunchShape{1, 1, 64, 0}, [&](const auto& th) {
    const int lane = th.thread() % 32;
    std::uint32_t a[4], b[2];
    float acc[4];
    for (int r = 0; r < 4; ++r)
      a[r] = bf16_of(A[a_row(lane, 2 * r)][a_col(lane, 2 * r)]) |
             static_cast<std::uint32_t>(bf16_of(A[a_row(lane, 2 * r + 1)][a_col(lane, 2 * r + 1)])) << 16;
    for (int r = 0; r < 2; ++r)
      b[r] = bf16_of(B[b_row(lane, 2 * r)][b_col(lane)]) |
             static_cast<std::uint32_t>(bf16_of(B[b_row(lane, 2 * r + 1)][b_col(lane)])) << 16;
    for (int i = 0; i < 4; ++i) acc[i] = C[d_row(lane, i)][d_col(lane, i)];
    th.mma_bf16(acc, a, b);
    if (th.thread() >= 32) th.mma_bf16(acc, a, b);
    for (int i = 0; i < 4; ++i) d[static_cast<std::size_t>(th.thread() * 4 + i)] = acc[i];
  });
  int wrong = 0;
  for (int t = 0; t < 64; ++t)
    for (int i = 0; i < 4; ++i) {
      const int row = d_row(t % 32, i), col = d_col(t % 32, i);
      float product = 0;
      for (int k = 0; k < 16; ++k) product += A[row][k] * B[k][col];
      const float expected = C[row][col] + product * (t < 32 ? 1.0f : 2.0f);
      wrong += d[static_cast<std::size_t>(t * 4 + i)] != expected;
    }
  CHECK(wrong == 0);
}

TEST_CASE("emulated grid: block_sum and block_max are the pairwise tree, bit for bit") {
  const int threads = GENERATE(128, 256);
  const int blocks = 3;
  const std::size_t n = static_cast<std::size_t>(blocks * threads);
  std::vector<float> sums_in = random_floats(n, 7), maxes_in = random_floats(n, 8);
  maxes_in[5] = std::numeric_limits<float>::quiet_NaN();  // fmaxf takes the other operand
  std::vector<float> part(n), sums(n), maxes(n);
  launch_grid(host{}, LaunchShape{static_cast<unsigned>(blocks), 1, threads, 0}, [&](const auto& th) {
    const std::size_t at = static_cast<std::size_t>(th.block_x() * th.threads() + th.thread());
    float* p = part.data() + th.block_x() * th.threads();
    p[th.thread()] = sums_in[at];
    sums[at] = th.block_sum(p);
    // Part is written again at once, while other threads have not read the sum yet: the results
    // must not come from part[0].
    p[th.thread()] = maxes_in[at];
    maxes[at] = th.block_max(p);
  });
  for (int b = 0; b < blocks; ++b) {
    const std::size_t first = static_cast<std::size_t>(b * threads);
    std::vector<float> ref_sum(&sums_in[first], &sums_in[first] + threads);
    std::vector<float> ref_max(&maxes_in[first], &maxes_in[first] + threads);
    const float sum = tree(ref_sum.data(), threads, [](float a, float c) { return a + c; });
    const float max = tree(ref_max.data(), threads, [](float a, float c) { return std::fmax(a, c); });
    for (int t = 0; t < threads; ++t) {
      CHECK(same_bits(sums[first + static_cast<std::size_t>(t)], sum));
      CHECK(same_bits(maxes[first + static_cast<std::size_t>(t)], max));
    }
    // part is left as the device's tree leaves it.
    CHECK(std::memcmp(part.data() + first, ref_max.data(), static_cast<std::size_t>(threads) * sizeof(float)) == 0);
  }
}

TEST_CASE("emulated grid: threads that wait at barriers the others never reach are reported") {
  const int threads = 128;
  std::vector<float> part(threads, 1.0f);
  SECTION("half sync twice, the others once and then wait in block_sum") {
    CHECK_THROWS_WITH(launch_grid(host{}, LaunchShape{2, 1, threads, 0},
                                  [&](const auto& th) {
                                    th.sync();
                                    if (th.thread() < threads / 2) th.sync();
                                    else th.block_sum(part.data());
                                  }),
                      Contains("block (0, 0) diverged"));
  }
  SECTION("half a warp in mma_bf16, the other half in warp_sums") {
    CHECK_THROWS_WITH(launch_grid(host{}, LaunchShape{1, 1, 32, 0},
                                  [&](const auto& th) {
                                    float v[4] = {};
                                    const std::uint32_t a[4] = {}, b[2] = {};
                                    if (th.thread() < 16) th.mma_bf16(v, a, b);
                                    else th.warp_sums(v);
                                  }),
                      Contains("diverged"));
  }
  SECTION("half a warp in warp_sums, the other half returned") {
    CHECK_THROWS_WITH(launch_grid(host{}, LaunchShape{1, 1, threads, 0},
                                  [&](const auto& th) {
                                    float v[1] = {1.0f};
                                    if (th.thread() % 32 < 16) th.warp_sums(v);
                                  }),
                      Contains("diverged"));
  }
  // The executor is usable again.
  std::vector<float> sums(threads);
  launch_grid(host{}, LaunchShape{1, 1, threads, 0}, [&](const auto& th) {
    part[static_cast<std::size_t>(th.thread())] = 1.0f;
    sums[static_cast<std::size_t>(th.thread())] = th.block_sum(part.data());
  });
  CHECK(sums == std::vector<float>(threads, static_cast<float>(threads)));
}

TEST_CASE("emulated grid: a thread's exception leaves launch_grid, and the next launch runs") {
  CHECK_THROWS_WITH(launch_grid(host{}, LaunchShape{2, 2, 64, 0},
                                [](const auto& th) {
                                  th.sync();
                                  if (th.block_x() == 1 && th.thread() == 37) throw std::runtime_error("thread 37 failed");
                                  th.sync();
                                }),
                    "thread 37 failed");
  int runs = 0;
  launch_grid(host{}, LaunchShape{2, 2, 64, 0}, [&](const auto& th) {
    th.sync();
    ++runs;
  });
  CHECK(runs == 4 * 64);
}

TEST_CASE("emulated grid: bad shapes and misaligned vector loads are refused in a sentence") {
  const auto nothing = [](const auto&) {};
  CHECK_THROWS_WITH(launch_grid(host{}, LaunchShape{1, 1, 0, 0}, nothing), Contains("a block of 0 threads"));
  CHECK_THROWS_WITH(launch_grid(host{}, LaunchShape{1, 1, 1025, 0}, nothing), Contains("a block of 1025 threads"));
  CHECK_THROWS_WITH(launch_grid(host{}, LaunchShape{0, 1, 32, 0}, nothing), Contains("a grid of 0 x 1 blocks"));
  float part[96] = {};
  CHECK_THROWS_WITH(launch_grid(host{}, LaunchShape{1, 1, 96, 0}, [&](const auto& th) { th.block_sum(part); }),
                    Contains("power-of-two"));
  CHECK_THROWS_WITH(launch_grid(host{}, LaunchShape{1, 1, 48, 0},
                                [](const auto& th) {
                                  float v[1] = {0.0f};
                                  th.warp_sums(v);
                                }),
                    Contains("whole warps"));

  alignas(16) unsigned char bytes[48] = {};
  CHECK_NOTHROW(specdec::kernels::copy16(bytes, bytes + 16));
  CHECK_THROWS_AS(specdec::kernels::copy16(bytes + 4, bytes + 16), std::logic_error);
  CHECK_THROWS_AS(specdec::kernels::copy16(bytes, bytes + 8), std::logic_error);
  CHECK_THROWS_WITH(launch_grid(host{}, LaunchShape{1, 1, 32, 64},
                                [](const auto& th) {
                                  if (th.thread() == 3) specdec::kernels::copy16(th.shared() + 16, th.shared() + 4);
                                }),
                    Contains("not 16-byte aligned"));
}
