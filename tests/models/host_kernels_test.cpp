// The host matrix products against a reference in double: the fp32 kernels, and the bf16 (AMX)
// one, whose packed layout a wrong index would scramble. Shapes with padded inputs (not a multiple
// of 32), partial 64-column tiles and token counts around AMX's 16-row tiles, on 1 and 3 threads.
// The attention kernels (scores, value sums, exp_sum) on every ISA this CPU runs: several nodes in
// one call give each node the bits of a call of its own. The choice of an ISA (HostIsa): names,
// refusals of an ISA the CPU or the build lacks, SPECDEC_HOST_ISA, and the check that the kernels
// were compiled without contraction.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <specdec/core/tree.hpp>
#include <specdec/models/llama_layer.hpp>

using namespace specdec;
using specdec::llama::Matrix;

namespace {

float bf16_value(float f) {
  const std::uint32_t u = static_cast<std::uint32_t>(Matrix::round_to_bf16(f)) << 16;
  float r;
  std::memcpy(&r, &u, sizeof r);
  return r;
}

struct Product {
  int in, out, n;
};

// y = x · W^T for W [out][in], through llama::detail::matmul; checked element by element against
// the sum in double of the operands as the format sees them, within `tolerance` of the sum of the
// terms' magnitudes. Each token's row must also equal, bit for bit, a call with that token alone.
void check(WeightFormat format, const Product& p, int threads, double tolerance) {
  std::mt19937 rng(static_cast<unsigned>(p.in * 131 + p.out * 7 + p.n));
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> w(static_cast<std::size_t>(p.out) * p.in), x(static_cast<std::size_t>(p.n) * p.in);
  for (float& v : w) v = value(rng);
  for (float& v : x) v = value(rng);
  const Matrix m = Matrix::pack(p.in, {{w.data(), p.out}}, format);
  REQUIRE(m.format == format);
  llama::ThreadPool pool(threads);
  std::vector<float> y(static_cast<std::size_t>(p.n) * m.stride, -1.0f), one(static_cast<std::size_t>(m.stride));
  llama::detail::matmul(&pool, m, x.data(), p.in, p.n, y.data(), m.stride);
  const auto seen = [&](float v) { return format == WeightFormat::bf16 ? bf16_value(v) : v; };
  int wrong = 0, unlike_alone = 0;
  for (int i = 0; i < p.n; ++i) {
    for (int r = 0; r < p.out; ++r) {
      double sum = 0, magnitude = 0;
      for (int j = 0; j < p.in; ++j) {
        const double term = static_cast<double>(seen(w[static_cast<std::size_t>(r) * p.in + j])) *
                            seen(x[static_cast<std::size_t>(i) * p.in + j]);
        sum += term;
        magnitude += std::fabs(term);
      }
      if (std::fabs(y[static_cast<std::size_t>(i) * m.stride + r] - sum) > tolerance * magnitude + 1e-30) ++wrong;
    }
    llama::detail::matmul(&pool, m, x.data() + static_cast<std::size_t>(i) * p.in, p.in, 1, one.data(), m.stride);
    if (std::memcmp(one.data(), y.data() + static_cast<std::size_t>(i) * m.stride, sizeof(float) * p.out) != 0)
      ++unlike_alone;
  }
  INFO(weight_format_name(format) << ": " << p.n << " tokens × [" << p.out << "][" << p.in << "], " << threads
                                  << " threads");
  CHECK(wrong == 0);
  CHECK(unlike_alone == 0);
}

// Inputs past 64 rows go in chunks (the last one short), outputs end in a narrow tile, and token
// counts of 1, 2 and 3–13 take each register tile and block split (matmul_impl); none is a no-op.
const Product kProducts[] = {{5, 7, 1},     {32, 64, 16},  {48, 150, 17}, {100, 33, 3},  {64, 200, 40},
                             {96, 320, 33}, {40, 33, 20},  {64, 80, 32},  {200, 150, 2}, {130, 100, 1},
                             {257, 72, 8},  {129, 48, 7},  {300, 64, 13}, {192, 208, 4}, {65, 16, 11},
                             {100, 70, 0}};

}  // namespace

TEST_CASE("fp32 matrix products match a sum in double", "[host_kernels]") {
  for (const Product& p : kProducts)
    for (int threads : {1, 3}) check(WeightFormat::fp32, p, threads, 1e-6);
}

TEST_CASE("bf16 matrix products (AMX) match a sum in double of the bf16 operands", "[host_kernels][bf16]") {
  const std::string& why = llama::bf16_unavailable();
  if (!why.empty()) {
    WARN("bf16 products not run here: " << why);
    const std::vector<float> w(8 * 16, 0.5f);
    CHECK_THROWS_WITH(Matrix::pack(16, {{w.data(), 8}}, WeightFormat::bf16), why);
    return;
  }
  for (const Product& p : kProducts)
    for (int threads : {1, 3}) check(WeightFormat::bf16, p, threads, 1e-6);
}

#if defined(SPECDEC_HOST_AMX)
TEST_CASE("bf16 attention kernels (AMX) match sums in double of the bf16 operands", "[host_kernels][bf16]") {
  if (!llama::bf16_unavailable().empty()) {
    WARN("bf16 attention not run here: " << llama::bf16_unavailable());
    return;
  }
  std::mt19937 rng(11);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f), weight(0.0f, 1.0f);
  constexpr int nodes = 16, slots = 96, seen = 80;
  auto close = [](double got, double want, double magnitude) {
    return std::fabs(got - want) <= 1e-6 * magnitude + 1e-30;
  };
  for (int hs : {16, 32, 64, 128}) {
    INFO("head size " << hs);
    auto at = [hs](int row, int column) { return static_cast<std::size_t>(row) * hs + column; };
    // Operands with bf16 values: queries and keys [.][hs], weights [nodes][slots], values [slots][hs].
    std::vector<float> q(at(nodes, 0)), k(at(slots, 0)), v(at(slots, 0)), p(static_cast<std::size_t>(nodes) * slots);
    for (auto* operand : {&q, &k, &v})
      for (float& x : *operand) x = bf16_value(value(rng));
    for (float& x : p) x = bf16_value(weight(rng));
    std::vector<std::uint16_t> q16(q.size()), p16(p.size()), vp(v.size());  // vp, kp: KvView's bf16 layouts
    std::vector<std::uint32_t> kp(k.size() / 2);
    for (std::size_t i = 0; i < q.size(); ++i) q16[i] = Matrix::round_to_bf16(q[i]);
    for (std::size_t i = 0; i < p.size(); ++i) p16[i] = Matrix::round_to_bf16(p[i]);
    for (int t = 0; t < slots; ++t)
      for (int e = 0; e < hs; ++e) {
        kp[static_cast<std::size_t>(e / 2) * slots + t] |= std::uint32_t{Matrix::round_to_bf16(k[at(t, e)])} << (e % 2 * 16);
        vp[at(t / 2, e) * 2 + t % 2] = Matrix::round_to_bf16(v[at(t, e)]);
      }
    std::vector<float> scores(static_cast<std::size_t>(nodes) * slots), out(at(nodes, 0));
    llama::detail::amx_attention_configure(hs);
    llama::detail::amx_scores(scores.data(), slots, q16.data(), hs, kp.data(), slots, seen);
    llama::detail::amx_values(out.data(), hs, p16.data(), slots, vp.data(), 2L * hs, hs, 2);  // slots [0, 64)
    std::vector<float> last = out;  // then node 3 alone: slots [64, 96) from a tile copied out
    std::vector<std::uint16_t> tile(16 * 32);
    for (int e0 = 0; e0 < hs; e0 += 16) {
      for (int u = 0; u < 16; ++u) std::copy_n(vp.data() + at(32 + u, e0) * 2, 32, tile.data() + u * 32);
      llama::detail::amx_values_row(last.data() + at(3, e0), p16.data() + 3 * slots + 64, tile.data());
    }
    llama::detail::amx_release();
    int wrong = 0;
    for (int i = 0; i < nodes; ++i)
      for (int t = 0; t < seen; ++t) {
        double sum = 0, magnitude = 0;
        for (int e = 0; e < hs; ++e) {
          const double term = static_cast<double>(q[at(i, e)]) * k[at(t, e)];
          sum += term, magnitude += std::fabs(term);
        }
        wrong += !close(scores[static_cast<std::size_t>(i) * slots + t], sum, magnitude);
      }
    for (int i = 0; i < nodes; ++i)
      for (int e = 0; e < hs; ++e)
        for (int upto : {64, 96}) {
          if (upto == 96 && i != 3) continue;
          double sum = 0, magnitude = 0;
          for (int t = 0; t < upto; ++t) {
            const double term = static_cast<double>(p[static_cast<std::size_t>(i) * slots + t]) * v[at(t, e)];
            sum += term, magnitude += std::fabs(term);
          }
          wrong += !close((upto == 64 ? out : last)[at(i, e)], sum, magnitude);
        }
    CHECK(wrong == 0);
  }
}
#endif

TEST_CASE("bf16 rounding is to the nearest, ties to even, and keeps NaN", "[host_kernels][bf16]") {
  CHECK(Matrix::round_to_bf16(1.0f) == 0x3f80);
  CHECK(Matrix::round_to_bf16(-2.0f) == 0xc000);
  const auto from_bits = [](std::uint32_t u) {
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
  };
  CHECK(Matrix::round_to_bf16(from_bits(0x3f808000u)) == 0x3f80);  // a tie, to the even 0x3f80
  CHECK(Matrix::round_to_bf16(from_bits(0x3f818000u)) == 0x3f82);  // a tie, to the even 0x3f82
  CHECK(Matrix::round_to_bf16(from_bits(0x3f808001u)) == 0x3f81);  // above the tie
  CHECK(Matrix::round_to_bf16(from_bits(0x7f7fffffu)) == 0x7f80);  // the largest float rounds to inf
  CHECK((Matrix::round_to_bf16(std::nanf("")) & 0x7fc0) == 0x7fc0);
}

namespace {

constexpr llama::HostIsa kIsas[] = {llama::HostIsa::portable, llama::HostIsa::avx2, llama::HostIsa::avx512};

// The kernel tables this CPU can run: the portable one always, AVX2 and AVX-512 where the CPU has
// them (a build forced onto the portable path has only that one).
std::vector<const llama::detail::Kernels*> runnable_kernels() {
  std::vector<const llama::detail::Kernels*> all;
  for (llama::HostIsa isa : kIsas)
    if (llama::host_isa_unavailable(isa).empty()) all.push_back(&llama::kernels(isa));
  return all;
}

}  // namespace

TEST_CASE("attention kernels: several nodes at once give each node's bits alone, near a sum in double",
          "[host_kernels][attention]") {
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  for (const llama::detail::Kernels* k : runnable_kernels())
    for (int hs : {8, 16, 24, 64, 128})
      for (int nodes : {1, 2, 3, 4, 5, 9, 16})
        for (auto [t0, t1] : {std::pair{0, 64}, std::pair{0, 200}, std::pair{5, 70}, std::pair{17, 20}}) {
          INFO(k->name << ": head size " << hs << ", " << nodes << " nodes, slots [" << t0 << ", " << t1 << ")");
          const int slots = 224;
          const std::size_t v_stride = static_cast<std::size_t>(hs) + 16;
          std::vector<float> kt(static_cast<std::size_t>(hs) * slots), v(slots * v_stride);
          std::vector<float> q(static_cast<std::size_t>(nodes) * hs), p(static_cast<std::size_t>(nodes) * slots);
          for (auto* data : {&kt, &v, &q, &p})
            for (float& x : *data) x = value(rng);
          // Scores: all nodes in one call against each node alone and against double.
          std::vector<float> together(static_cast<std::size_t>(nodes) * slots, 0.0f), alone(together);
          std::vector<float*> rows(static_cast<std::size_t>(nodes));
          std::vector<const float*> queries(static_cast<std::size_t>(nodes));
          for (int n = 0; n < nodes; ++n) rows[n] = together.data() + n * slots, queries[n] = q.data() + n * hs;
          const float sqrt_hs = std::sqrt(static_cast<float>(hs));
          k->scores(rows.data(), queries.data(), nodes, kt.data(), slots, hs, t0, t1, sqrt_hs);
          int wrong = 0;
          for (int n = 0; n < nodes; ++n) {
            float* row = alone.data() + n * slots;
            k->scores(&row, &queries[n], 1, kt.data(), slots, hs, t0, t1, sqrt_hs);
            for (int t = t0; t < t1; ++t) {
              double sum = 0, magnitude = 0;
              for (int e = 0; e < hs; ++e) {
                const double term = static_cast<double>(q[n * hs + e]) * kt[static_cast<std::size_t>(e) * slots + t];
                sum += term;
                magnitude += std::fabs(term);
              }
              if (std::fabs(row[t] - sum / sqrt_hs) > 1e-5 * magnitude + 1e-30) ++wrong;
            }
          }
          CHECK(wrong == 0);
          CHECK(std::memcmp(together.data(), alone.data(), together.size() * sizeof(float)) == 0);
          // Values: node_values() of one head against head_values() node by node and against double.
          std::vector<float> o_together(static_cast<std::size_t>(nodes) * hs);
          for (float& x : o_together) x = value(rng);
          std::vector<float> o_alone(o_together), o_start(o_together);
          std::vector<float*> outs(static_cast<std::size_t>(nodes));
          std::vector<const float*> weights(static_cast<std::size_t>(nodes));
          for (int n = 0; n < nodes; ++n) outs[n] = o_together.data() + n * hs, weights[n] = p.data() + n * slots;
          k->node_values(outs.data(), weights.data(), nodes, v.data(), v_stride, hs, t0, t1);
          wrong = 0;
          for (int n = 0; n < nodes; ++n) {
            float* out = o_alone.data() + n * hs;
            const float* vp = v.data();
            k->head_values(&out, &weights[n], &vp, 1, v_stride, hs, t0, t1);
            for (int e = 0; e < hs; ++e) {
              double sum = o_start[n * hs + e], magnitude = std::fabs(sum);
              for (int t = t0; t < t1; ++t) {
                const double term = static_cast<double>(p[n * slots + t]) * v[t * v_stride + e];
                sum += term;
                magnitude += std::fabs(term);
              }
              if (std::fabs(out[e] - sum) > 1e-5 * magnitude + 1e-30) ++wrong;
            }
          }
          CHECK(wrong == 0);
          CHECK(std::memcmp(o_together.data(), o_alone.data(), o_together.size() * sizeof(float)) == 0);
        }
}

TEST_CASE("argmax: core::argmax_row's index, ties to the lowest, -1 for NaN or an infinity", "[host_kernels]") {
  std::mt19937 rng(5);
  // Few distinct values, so that rows have ties, -0 next to +0 among them.
  const float values[] = {-3.0f, -0.0f, 0.0f, 1.5f, 2.0f, -1.0e30f};
  std::uniform_int_distribution<int> pick(0, 5);
  for (const llama::detail::Kernels* k : runnable_kernels())
    for (int n : {1, 3, 15, 16, 17, 40, 513, 32000})
      for (int trial = 0; trial < 20; ++trial) {
        std::vector<float> row(static_cast<std::size_t>(n));
        for (float& x : row) x = values[pick(rng)];
        INFO(k->name << ": " << n << " values, trial " << trial);
        CHECK(k->argmax(row.data(), n) == core::argmax_row(row.data(), n));
        const float bad[] = {std::nanf(""), std::numeric_limits<float>::infinity(),
                             -std::numeric_limits<float>::infinity()};
        const int at = std::uniform_int_distribution<int>(0, n - 1)(rng);
        row[static_cast<std::size_t>(at)] = bad[trial % 3];
        CHECK(k->argmax(row.data(), n) == -1);
      }
}

TEST_CASE("exp_sum: exponentials of the row minus its maximum, and their sum", "[host_kernels][attention]") {
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> value(-30.0f, 10.0f);
  for (const llama::detail::Kernels* k : runnable_kernels())
    for (int n : {1, 7, 16, 33, 200}) {
      INFO(k->name << ": " << n << " scores");
      std::vector<float> s(static_cast<std::size_t>(n));
      for (float& x : s) x = value(rng);
      const std::vector<float> original = s;
      const float top = *std::max_element(original.begin(), original.end());
      const float sum = k->exp_sum(s.data(), n);
      double expected = 0;
      int wrong = 0;
      for (int t = 0; t < n; ++t) {
        const double e = std::exp(static_cast<double>(original[t] - top));  // the kernel's difference
        expected += e;
        if (std::fabs(s[t] - e) > 4e-7 * e) ++wrong;
      }
      CHECK(wrong == 0);
      CHECK(std::fabs(sum - expected) <= 1e-6 * expected);
    }
}

TEST_CASE("host ISA: each one the CPU runs is its own table, one it lacks is refused in one sentence",
          "[host_kernels][isa]") {
  for (llama::HostIsa isa : kIsas) {
    const std::string why = llama::host_isa_unavailable(isa);
    INFO(llama::host_isa_name(isa) << ": " << why);
    if (why.empty()) {
      CHECK(std::string(llama::kernels(isa).name) == llama::host_isa_name(isa));
      CHECK(llama::kernels(isa).fused == (isa != llama::HostIsa::portable));
    } else {
      CHECK_THROWS_WITH(llama::kernels(isa), why);
      CHECK(why.find("choose") != std::string::npos);
    }
  }
  CHECK(llama::host_isa_unavailable(llama::HostIsa::portable).empty());
#if defined(SPECDEC_HOST_ISA_PORTABLE)
  CHECK_THROWS_WITH(llama::kernels(llama::HostIsa::avx2),
                    Catch::StartsWith("host ISA avx2 is not in this build, which has only the portable kernels"));
#endif
  CHECK(&llama::kernels(llama::HostIsa::automatic) == &llama::kernels(llama::default_host_isa()));
}

TEST_CASE("host ISA names: auto, portable, avx2, avx512, anything else is refused", "[host_kernels][isa]") {
  for (llama::HostIsa isa : {llama::HostIsa::automatic, llama::HostIsa::portable, llama::HostIsa::avx2,
                             llama::HostIsa::avx512})
    CHECK(llama::host_isa_named(llama::host_isa_name(isa)) == isa);
  CHECK_THROWS_WITH(llama::host_isa_named("sse"), "host ISA must be auto, portable, avx2 or avx512, got 'sse'");
  CHECK_THROWS_WITH(llama::host_isa_named("AVX2"), "host ISA must be auto, portable, avx2 or avx512, got 'AVX2'");
}

// CTest also runs this case with SPECDEC_HOST_ISA=portable (tests/CMakeLists.txt).
TEST_CASE("host ISA: SPECDEC_HOST_ISA picks the default kernels, else the CPU's best", "[host_kernels][isa]") {
  const char* named = std::getenv("SPECDEC_HOST_ISA");
  const std::vector<const llama::detail::Kernels*> runnable = runnable_kernels();
  if (named && *named && std::string(named) != "auto") {
    CHECK(std::string(llama::kernels().name) == named);
  } else {
    CHECK(&llama::kernels() == runnable.back());  // the tables go from portable to the widest
  }
}

TEST_CASE("the kernels were compiled without contraction of a * b + c (-ffp-contract=off)", "[host_kernels][isa]") {
  CHECK_FALSE(llama::detail::contracts_baseline());
#if defined(SPECDEC_HOST_ISA_X86)
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) CHECK_FALSE(llama::detail::contracts_with_fma());
#endif
  CHECK_NOTHROW(llama::detail::check_no_contraction());
}
