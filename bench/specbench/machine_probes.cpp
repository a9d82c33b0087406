#include "machine_probes.hpp"

#include <algorithm>
#include <cstddef>
#include <limits>
#include <stdexcept>
#include <vector>

#include <specdec/models/llama_layer.hpp>

#include "clock.hpp"

namespace specbench {

using detail::Clock;
using detail::seconds_since;

namespace {

// The sum of `n` floats (n a multiple of 64), four 64-byte vectors in flight: on a core with
// AVX-512 one instruction per cache line, so the loop waits on memory, not on additions
// (target_clones: the widest vectors this machine has, whatever the build's -march).
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
float stream_sum(const float* data, std::size_t n) {
  typedef float v16 __attribute__((vector_size(64)));
  v16 s0{}, s1{}, s2{}, s3{};
  for (std::size_t i = 0; i < n; i += 64) {
    v16 a, b, c, d;
    __builtin_memcpy(&a, data + i, sizeof a);
    __builtin_memcpy(&b, data + i + 16, sizeof b);
    __builtin_memcpy(&c, data + i + 32, sizeof c);
    __builtin_memcpy(&d, data + i + 48, sizeof d);
    s0 += a;
    s1 += b;
    s2 += c;
    s3 += d;
  }
  const v16 s = (s0 + s1) + (s2 + s3);
  float sum = 0;
  for (int k = 0; k < 16; ++k) sum += s[k];
  return sum;
}

}  // namespace

double read_bandwidth_gbs() {
  constexpr std::size_t floats = (std::size_t{1} << 30) / sizeof(float);
  std::vector<float> data(floats, 1.0f);  // sums of ones stay exact in float: 2^28 = 268435456
  double best = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const auto t0 = Clock::now();
    const float sum = stream_sum(data.data(), floats);
    const double seconds = seconds_since(t0);
    // Checked, so that the loop cannot be optimised away.
    if (sum != static_cast<float>(floats)) throw std::logic_error("bandwidth sum is wrong");
    best = std::max(best, static_cast<double>(floats * sizeof(float)) / seconds / 1e9);
  }
  return best;
}

MatrixProductGflops matrix_product_gflops(int threads, specdec::WeightFormat weights) {
  constexpr int in = 256, out = 256, tokens = 32, rounds = 256, products = 4;
  std::vector<float> w(static_cast<std::size_t>(in) * out), x(static_cast<std::size_t>(tokens) * in);
  for (std::size_t i = 0; i < w.size(); ++i) w[i] = static_cast<float>(i % 17) / 64 - 0.125f;
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(i % 13) / 16 - 0.375f;
  const specdec::llama::Matrix m = specdec::llama::Matrix::pack(in, {{w.data(), out}}, weights);
  // Outputs of their own: lines that the other threads wrote would move between caches.
  std::vector<float> y_one(static_cast<std::size_t>(tokens) * m.stride), y_all(y_one.size());
  specdec::llama::ThreadPool pool(threads);
  auto fastest = [&](specdec::llama::ThreadPool* on, double& best) {
    for (int p = 0; p < products; ++p) {
      const auto t0 = Clock::now();
      specdec::llama::detail::matmul(on, m, x.data(), in, tokens, (on ? y_all : y_one).data(), m.stride);
      best = std::min(best, seconds_since(t0));
    }
  };
  double one = std::numeric_limits<double>::infinity(), all = one;
  for (int r = 0; r < rounds; ++r) {
    fastest(nullptr, one);
    fastest(&pool, all);
  }
  const double operations = 2.0 * in * out * tokens;
  return {operations / one / 1e9, operations / all / 1e9};
}
}  // namespace specbench
