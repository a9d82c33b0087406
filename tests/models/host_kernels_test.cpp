// The host matrix products against a reference in double: the fp32 kernels, and the bf16 (AMX)
// one, whose packed layout a wrong index would scramble. Shapes with padded inputs (not a multiple
// of 32), partial 64-column tiles and token counts around AMX's 16-row tiles, on 1 and 3 threads.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

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

const Product kProducts[] = {{5, 7, 1}, {32, 64, 16}, {48, 150, 17}, {100, 33, 3}, {64, 200, 40}, {96, 320, 33}};

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
