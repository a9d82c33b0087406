// Synthetic Llama shapes (models/synthetic_llama.hpp) and the counter-based weight generator
// (models/synthetic_weights.hpp) on the host: the table's shapes and its error, and the
// generator's determinism, independence between tensors, layers and seeds, and scale. Whether the
// device computes the same bits is cuda_llama_gpu_test's question.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <vector>

#include <specdec/models/host_kernels.hpp>
#include <specdec/models/llama2c_model.hpp>
#include <specdec/models/synthetic_llama.hpp>

using namespace specdec;
using Catch::Matchers::Contains;
namespace syn = specdec::synthetic;

namespace {

std::uint32_t bits_of(float f) {
  std::uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

// Mean and standard deviation of weights [0, count) of (kind, layer).
struct Moments {
  double mean = 0, sd = 0, min = 0, max = 0;
};
Moments moments(std::uint64_t seed, syn::tensor kind, int layer, std::uint64_t first, int count) {
  double sum = 0, sum2 = 0, lo = std::numeric_limits<double>::max(), hi = -lo;
  for (int i = 0; i < count; ++i) {
    const double w = syn::weight(seed, kind, layer, first + static_cast<std::uint64_t>(i));
    sum += w;
    sum2 += w * w;
    lo = std::min(lo, w);
    hi = std::max(hi, w);
  }
  const double mean = sum / count;
  return {mean, std::sqrt(sum2 / count - mean * mean), lo, hi};
}

}  // namespace

TEST_CASE("the synthetic shapes are the published configurations, each a valid Llama layer") {
  const auto shapes = synthetic_shapes();
  REQUIRE(shapes.size() == 5);
  std::set<std::string> names;
  for (const SyntheticShape& s : shapes) {
    INFO(s.name);
    names.insert(s.name);
    CHECK(s.config.layer_problem().empty());
    CHECK(s.config.n_layers >= 1);
    CHECK(s.config.seq_len >= 256);
    CHECK(&synthetic_shape(s.name) == &s);
  }
  CHECK(names.size() == shapes.size());
  const LlamaConfig& tiny = synthetic_shape("TinyLlama-1.1B").config;
  CHECK((tiny.dim == 2048 && tiny.hidden_dim == 5632 && tiny.n_layers == 22 && tiny.n_heads == 32 &&
         tiny.n_kv_heads == 4 && tiny.vocab_size == 32000));
  CHECK(tiny.kv_group() == 8);
  const LlamaConfig& l2 = synthetic_shape("Llama-2-7B").config;
  CHECK((l2.dim == 4096 && l2.hidden_dim == 11008 && l2.n_layers == 32 && l2.n_heads == 32 && l2.n_kv_heads == 32 &&
         l2.vocab_size == 32000 && !l2.shared_classifier));
  const SyntheticShape& l3 = synthetic_shape("Llama-3-8B");
  CHECK((l3.config.dim == 4096 && l3.config.hidden_dim == 14336 && l3.config.n_layers == 32 &&
         l3.config.n_heads == 32 && l3.config.n_kv_heads == 8 && l3.config.vocab_size == 128256));
  CHECK(l3.rope_theta == 500000.0f);
  CHECK(synthetic_shape("stories110M").config.head_size() == 64);
  // Weights that a forward reads (all but the embedding): Llama-2-7B in bf16 is 13.2 GB.
  const double bytes = static_cast<double>(Llama2cModel::forward_weight_bytes(l2, WeightFormat::bf16));
  CHECK(bytes > 13.1e9);
  CHECK(bytes < 13.3e9);
}

TEST_CASE("an unknown shape is one sentence that lists the known names") {
  try {
    synthetic_shape("GPT-5");
    FAIL("no error");
  } catch (const error& e) {
    const std::string what = e.what();
    CHECK(what == "unknown shape 'GPT-5'; the shapes are: stories15M, stories110M, TinyLlama-1.1B, Llama-2-7B, "
                  "Llama-3-8B");
  }
  CHECK_THROWS_AS(synthetic_shape(""), error);
  // Case does not matter, as people type names; letters do.
  CHECK(&synthetic_shape("llama-2-7b") == &synthetic_shape("Llama-2-7B"));
  CHECK(&synthetic_shape("STORIES15M") == &synthetic_shape("stories15M"));
  CHECK_THROWS_WITH(synthetic_shape("Llama-2-7"), Contains("unknown shape 'Llama-2-7'"));
}

TEST_CASE("the generator is a pure function of (seed, tensor, layer, index)") {
  // The same element twice, in a different order of generation, gives the same bits.
  std::vector<std::uint32_t> forward, backward(1000);
  for (std::uint64_t i = 0; i < 1000; ++i) forward.push_back(bits_of(syn::weight(7, syn::tensor::wq, 3, i * 977)));
  for (std::uint64_t i = 1000; i-- > 0;) backward[i] = bits_of(syn::weight(7, syn::tensor::wq, 3, i * 977));
  CHECK(forward == backward);
  // Indices past 2^32 (Llama-3-8B's classifier has 525M elements; a whole model is 8G) are their
  // own elements, not aliases of low ones.
  const std::uint64_t high = (std::uint64_t{1} << 32) + 5;
  CHECK(bits_of(syn::weight(7, syn::tensor::w1, 0, high)) != bits_of(syn::weight(7, syn::tensor::w1, 0, 5)));
}

TEST_CASE("distinct tensors, layers, seeds and indices draw distinct numbers") {
  constexpr int n = 4096;
  auto sample = [&](std::uint64_t seed, syn::tensor kind, int layer) {
    std::vector<std::uint32_t> v;
    for (int i = 0; i < n; ++i) v.push_back(syn::weight_bits(seed, syn::tensor_id(kind, layer), static_cast<std::uint64_t>(i)));
    return v;
  };
  auto equal_fraction = [&](const std::vector<std::uint32_t>& a, const std::vector<std::uint32_t>& b) {
    int same = 0;
    for (int i = 0; i < n; ++i) same += a[static_cast<std::size_t>(i)] == b[static_cast<std::size_t>(i)];
    return static_cast<double>(same) / n;
  };
  const auto base = sample(1, syn::tensor::wq, 0);
  CHECK(equal_fraction(base, sample(1, syn::tensor::wk, 0)) == 0.0);
  CHECK(equal_fraction(base, sample(1, syn::tensor::wq, 1)) == 0.0);
  CHECK(equal_fraction(base, sample(2, syn::tensor::wq, 0)) == 0.0);
  CHECK(equal_fraction(base, sample(std::uint64_t{1} << 32 | 1, syn::tensor::wq, 0)) == 0.0);  // high seed bits count
  // Within a tensor: no repeats among 4096 draws of 32 bits (a repeat has probability ~0.2 %).
  CHECK(std::set<std::uint32_t>(base.begin(), base.end()).size() == base.size());
  // Every (kind, layer) pair of a 1024-layer model has its own stream id.
  std::set<std::uint32_t> ids;
  for (int layer = 0; layer < 1024; ++layer)
    for (std::uint32_t k = 0; k <= static_cast<std::uint32_t>(syn::tensor::classifier); ++k)
      ids.insert(syn::tensor_id(static_cast<syn::tensor>(k), layer));
  CHECK(ids.size() == 1024u * 12u);
}

TEST_CASE("matrix weights have mean 0 and sd 0.02, norm weights lie on 1 +- 0.1") {
  constexpr int n = 200000;
  for (syn::tensor kind : {syn::tensor::embedding, syn::tensor::wo, syn::tensor::w2, syn::tensor::classifier}) {
    const Moments m = moments(11, kind, 2, 123456789, n);
    INFO("tensor " << static_cast<int>(kind));
    // Uniform on +-a: sd a/sqrt(3) = 0.02; the sample mean's sd is 0.02/sqrt(n) = 4.5e-5.
    CHECK(std::abs(m.mean) < 2.5e-4);
    CHECK(m.sd == Approx(syn::matrix_sd).epsilon(0.01));
    CHECK(m.min >= -syn::matrix_half_range);
    CHECK(m.max <= syn::matrix_half_range);
    CHECK(m.min < -0.99 * syn::matrix_half_range);  // the range is used
    CHECK(m.max > 0.99 * syn::matrix_half_range);
  }
  for (syn::tensor kind : {syn::tensor::rms_att, syn::tensor::rms_ffn, syn::tensor::rms_final}) {
    const Moments m = moments(11, kind, 0, 0, n);
    INFO("tensor " << static_cast<int>(kind));
    CHECK(std::abs(m.mean - 1.0) < 1e-3);
    CHECK(m.min >= 1.0 - syn::norm_half_range - 1e-7);
    CHECK(m.max <= 1.0 + syn::norm_half_range + 1e-7);
    CHECK(m.sd == Approx(syn::norm_half_range / std::sqrt(3.0)).epsilon(0.01));
  }
}

TEST_CASE("the generator's values are uniform: a chi-square over 32 bins, and all four Philox words used") {
  constexpr int bins = 32, n = 320000;
  std::vector<int> count(bins, 0), word_count(bins * 4, 0);
  for (int i = 0; i < n; ++i) {
    const float w = syn::weight(3, syn::tensor::w3, 5, static_cast<std::uint64_t>(i));
    const int b = std::min(bins - 1, static_cast<int>((w / syn::matrix_half_range + 1.0f) * 0.5f * bins));
    ++count[static_cast<std::size_t>(b)];
    ++word_count[static_cast<std::size_t>(b * 4 + i % 4)];
  }
  auto chi2 = [](const std::vector<int>& c, double expected) {
    double x = 0;
    for (int k : c) x += (k - expected) * (k - expected) / expected;
    return x;
  };
  // 31 degrees of freedom: 61.1 is the 0.1 % tail; 127 dof (per word): 181.
  CHECK(chi2(count, static_cast<double>(n) / bins) < 61.1);
  CHECK(chi2(word_count, static_cast<double>(n) / bins / 4) < 181.0);
}

TEST_CASE("bf16_bits rounds as the host's bf16 matrices do, and bf16_value is exact") {
  // The host AMX path's rounding (llama::Matrix::round_to_bf16) is the reference: random floats
  // of every exponent, ties, the largest finite, infinities, NaN and signed zeros.
  std::vector<float> values{0.0f, -0.0f, 1.0f, -1.0f, std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(), std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN(),
                            std::numeric_limits<float>::denorm_min(), 1.00390625f /* 1 + 2^-8: a tie, to even */,
                            1.01171875f /* 1 + 3 * 2^-8: a tie, up */};
  for (std::uint64_t i = 0; i < 100000; ++i) {
    std::uint32_t u = syn::weight_bits(99, 0, i);
    float f;
    std::memcpy(&f, &u, sizeof f);
    values.push_back(f);
  }
  int mismatches = 0;
  for (float f : values) {
    const std::uint16_t b = syn::bf16_bits(f);
    mismatches += b != llama::Matrix::round_to_bf16(f);
    const float back = syn::bf16_value(b);
    if (std::isnan(f)) {
      CHECK(std::isnan(back));
    } else {
      // Round to nearest: within half a bf16 ulp (2^-8 relative), or overflowed to infinity.
      if (std::isfinite(back) && f != 0.0f && std::isnormal(f))
        CHECK(std::abs(back - f) <= std::ldexp(std::abs(f), -8) * 1.0000001f);
      CHECK(syn::bf16_bits(back) == b);  // exact: a bf16 value rounds to itself
    }
  }
  CHECK(mismatches == 0);
  CHECK(syn::bf16_bits(1.00390625f) == syn::bf16_bits(1.0f));
  CHECK(syn::bf16_bits(1.01171875f) == syn::bf16_bits(1.015625f));
}
