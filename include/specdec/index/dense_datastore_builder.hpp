// Building a DenseDatastore file (dense_datastore.hpp) from token documents and the target's
// features of every token. Needs Eigen 3.4 (Debian libeigen3-dev) for the PCA's eigensolver;
// reading a dense datastore does not.
//
// Steps: draw a sample of at most `sample` features (uniform, without replacement, by `seed`);
// fit the per-dimension mean and variance on it; z-normalise it and accumulate its covariance
// (double precision); take the key_dim eigenvectors of largest eigenvalue (Eigen's
// SelfAdjointEigenSolver), each signed so that its largest entry is positive (a deterministic
// file); then project every feature with DenseProjection::project, the function the drafter
// queries with, so a stored feature maps to its key bit for bit. The file is written in one
// streaming pass (keys are never all in memory).
//
// Compiled in every file that includes this header, or once: a program of several such files may
// define SPECDEC_DENSE_BUILDER_EXTERN in all of them (they then only declare build_dense_datastore
// and need no Eigen) and compile one more that defines SPECDEC_DENSE_BUILDER_IMPLEMENTATION and
// includes this header (this project's CMake build: link specdec::dense_builder).
#pragma once

#if defined(SPECDEC_DENSE_BUILDER_EXTERN) && !defined(SPECDEC_DENSE_BUILDER_IMPLEMENTATION)
#define SPECDEC_DENSE_BUILDER_DEFINED 0
#define SPECDEC_DENSE_BUILDER_INLINE
#elif defined(SPECDEC_DENSE_BUILDER_IMPLEMENTATION)
#define SPECDEC_DENSE_BUILDER_DEFINED 1
#define SPECDEC_DENSE_BUILDER_INLINE
#else
#define SPECDEC_DENSE_BUILDER_DEFINED 1
#define SPECDEC_DENSE_BUILDER_INLINE inline
#endif

#if SPECDEC_DENSE_BUILDER_DEFINED
#include <Eigen/Dense>
#endif

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <numeric>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <specdec/error.hpp>
#include <specdec/index/dense_datastore.hpp>
#include <specdec/index/token_file.hpp>

namespace specdec {

struct DenseBuildOptions {
  int key_dim = 64;                     ///< principal components kept (DReSD's l)
  std::uint64_t sample = 1'000'000;     ///< features the statistics and the PCA are fitted on, at most
  std::uint64_t seed = 0;               ///< draws the sample
  float epsilon = 1e-6f;                ///< of the z-normalisation: 1 / sqrt(variance + epsilon)
  int vocab_size = 0;                   ///< every token must be < vocab_size; 0 takes the largest + 1
  /// Told what the build is doing, phase by phase (e.g. to print progress).
  std::function<void(std::string_view)> progress = nullptr;
};

struct DenseBuildSummary {
  std::uint64_t keys = 0;
  std::uint64_t sample = 0;
  double explained_variance = 0;  ///< share of the z-normalised variance in the kept components
};

namespace detail {

/// `take` distinct indices of [0, n), sorted: a partial Fisher-Yates shuffle by mt19937_64, whose
/// output the standard fixes (so is the sample, on every platform).
inline std::vector<std::uint64_t> sample_indices(std::uint64_t n, std::uint64_t take, std::uint64_t seed) {
  std::vector<std::uint64_t> index(n);
  std::iota(index.begin(), index.end(), std::uint64_t{0});
  if (take < n) {
    std::mt19937_64 rng(seed);
    for (std::uint64_t i = 0; i < take; ++i) std::swap(index[i], index[i + rng() % (n - i)]);
    index.resize(take);
    std::sort(index.begin(), index.end());
  }
  return index;
}

class ChecksummedWriter {
 public:
  ChecksummedWriter(const std::filesystem::path& path) : path_(path), file_(open_file(path, "wb", "dense datastore")) {}
  void write(const void* data, std::size_t bytes, bool checksummed = true) {
    if (std::fwrite(data, 1, bytes, file_.get()) != bytes)
      throw error("dense datastore " + path_.string() + " could not be written");
    if (checksummed) sum_.add(data, bytes);
  }
  std::uint64_t checksum() const { return sum_.value(); }
  void rewrite_header(const DenseDatastoreHeader& h) {
    if (std::fseek(file_.get(), 0, SEEK_SET) != 0) throw error("dense datastore " + path_.string() + " cannot seek");
    write(&h, sizeof h, false);
    if (std::fflush(file_.get()) != 0) throw error("dense datastore " + path_.string() + " could not be written");
  }

 private:
  std::filesystem::path path_;
  File file_;
  DatastoreChecksum sum_;
};

}  // namespace detail

/// Writes the dense datastore of `docs` to `out`; `features` holds feature_dim floats per token of
/// `docs` (separators excluded, in order). Throws specdec::error for sizes that do not match, a
/// token outside the vocabulary, a non-finite feature, or a file that cannot be written.
SPECDEC_DENSE_BUILDER_INLINE DenseBuildSummary build_dense_datastore(const TokenDocuments& docs,
                                                                     std::span<const float> features, int feature_dim,
                                                                     const std::filesystem::path& out,
                                                                     const DenseBuildOptions& options = {});

#if SPECDEC_DENSE_BUILDER_DEFINED
SPECDEC_DENSE_BUILDER_INLINE DenseBuildSummary build_dense_datastore(const TokenDocuments& docs,
                                                                     std::span<const float> features, int feature_dim,
                                                                     const std::filesystem::path& out,
                                                                     const DenseBuildOptions& options) {
  const auto say = [&](const std::string& what) {
    if (options.progress) options.progress(what);
  };
  const std::uint64_t n = docs.tokens();
  if (n == 0) throw error("dense datastore build: no tokens");
  if (feature_dim <= 0) throw error("dense datastore build: feature_dim must be >= 1, got " + std::to_string(feature_dim));
  if (features.size() != n * static_cast<std::uint64_t>(feature_dim))
    throw error("dense datastore build: " + std::to_string(features.size()) + " feature floats for " +
                std::to_string(n) + " tokens of dim " + std::to_string(feature_dim));
  const int l = options.key_dim;
  if (l < 1 || l > feature_dim)
    throw error("dense datastore build: key_dim must be in [1, " + std::to_string(feature_dim) + "], got " +
                std::to_string(l));
  if (options.sample < 2) throw error("dense datastore build: sample must be >= 2, got " + std::to_string(options.sample));
  if (!(options.epsilon > 0.0f)) throw error("dense datastore build: epsilon must be > 0");
  if (docs.text.size() >= kDocumentEnd) throw error("dense datastore build: text too long for 32-bit positions");
  std::uint32_t largest = 0;
  for (const std::uint32_t t : docs.text)
    if (t != kDocumentEnd) largest = std::max(largest, t);
  const std::uint64_t vocab = options.vocab_size > 0 ? static_cast<std::uint64_t>(options.vocab_size) : largest + 1ull;
  if (largest >= vocab)
    throw error("dense datastore build: token " + std::to_string(largest) + " is outside the vocabulary of " +
                std::to_string(vocab));
  for (std::size_t i = 0; i < features.size(); ++i)
    if (!std::isfinite(features[i]))
      throw error("dense datastore build: feature " + std::to_string(i / feature_dim) + " has a non-finite value");

  // Statistics and PCA on the sample.
  const std::uint64_t f = static_cast<std::uint64_t>(feature_dim);
  const auto sample = detail::sample_indices(n, std::min(n, options.sample), options.seed);
  const auto row = [&](std::uint64_t i) { return features.data() + i * f; };
  Eigen::VectorXd mean = Eigen::VectorXd::Zero(feature_dim), var = Eigen::VectorXd::Zero(feature_dim);
  for (const auto i : sample) mean += Eigen::Map<const Eigen::VectorXf>(row(i), feature_dim).cast<double>();
  mean /= static_cast<double>(sample.size());
  for (const auto i : sample)
    var += (Eigen::Map<const Eigen::VectorXf>(row(i), feature_dim).cast<double>() - mean).array().square().matrix();
  var /= static_cast<double>(sample.size() - 1);
  std::vector<float> mean_f(f), inv_scale(f);
  for (int d = 0; d < feature_dim; ++d) {
    mean_f[d] = static_cast<float>(mean[d]);
    inv_scale[d] = static_cast<float>(1.0 / std::sqrt(var[d] + options.epsilon));
  }
  say("fitted mean and variance on " + std::to_string(sample.size()) + " features");
  Eigen::MatrixXd covariance = Eigen::MatrixXd::Zero(feature_dim, feature_dim);
  constexpr std::size_t kBlock = 4096;
  Eigen::MatrixXd block(feature_dim, static_cast<Eigen::Index>(kBlock));
  for (std::size_t b = 0; b < sample.size(); b += kBlock) {
    const std::size_t rows = std::min(kBlock, sample.size() - b);
    for (std::size_t j = 0; j < rows; ++j)
      for (int d = 0; d < feature_dim; ++d)
        block(d, static_cast<Eigen::Index>(j)) = (static_cast<double>(row(sample[b + j])[d]) - mean_f[d]) * inv_scale[d];
    covariance.noalias() += block.leftCols(static_cast<Eigen::Index>(rows)) *
                            block.leftCols(static_cast<Eigen::Index>(rows)).transpose();
  }
  covariance /= static_cast<double>(sample.size() - 1);
  const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eigen(covariance);
  if (eigen.info() != Eigen::Success) throw error("dense datastore build: the PCA's eigensolver did not converge");
  std::vector<float> components(static_cast<std::size_t>(l) * f);
  double kept = 0;
  for (int r = 0; r < l; ++r) {
    const Eigen::Index c = feature_dim - 1 - r;  // eigenvalues ascend
    Eigen::VectorXd axis = eigen.eigenvectors().col(c);
    Eigen::Index largest_entry = 0;
    axis.cwiseAbs().maxCoeff(&largest_entry);
    if (axis[largest_entry] < 0) axis = -axis;
    for (int d = 0; d < feature_dim; ++d) components[static_cast<std::size_t>(r) * f + d] = static_cast<float>(axis[d]);
    kept += std::max(0.0, eigen.eigenvalues()[c]);
  }
  const double total = std::max(eigen.eigenvalues().cwiseMax(0.0).sum(), 1e-300);
  DenseBuildSummary summary{n, sample.size(), kept / total};
  say("PCA: " + std::to_string(l) + " of " + std::to_string(feature_dim) + " components hold " +
      std::to_string(100.0 * summary.explained_variance) + "% of the variance");

  // The file, in one pass.
  DenseDatastoreHeader h;
  std::memcpy(h.magic, kDenseDatastoreMagic, sizeof h.magic);
  h.version = kDenseDatastoreVersion;
  h.header_bytes = sizeof(DenseDatastoreHeader);
  h.vocab_size = static_cast<std::uint32_t>(vocab);
  h.feature_dim = static_cast<std::uint32_t>(feature_dim);
  h.key_dim = static_cast<std::uint32_t>(l);
  h.text_length = docs.text.size();
  h.documents = docs.documents;
  h.keys = n;
  h.epsilon = options.epsilon;
  h.explained_variance = static_cast<float>(summary.explained_variance);
  h.sample = sample.size();
  h.seed = options.seed;
  detail::ChecksummedWriter file(out);
  file.write(&h, sizeof h, false);
  file.write(mean_f.data(), 4 * f);
  file.write(inv_scale.data(), 4 * f);
  file.write(components.data(), 4 * components.size());
  const DenseProjection projection{feature_dim, l, mean_f.data(), inv_scale.data(), components.data()};
  std::vector<float> keys(kBlock * static_cast<std::size_t>(l)), scratch;
  for (std::uint64_t b = 0; b < n; b += kBlock) {
    const std::uint64_t rows = std::min<std::uint64_t>(kBlock, n - b);
    for (std::uint64_t j = 0; j < rows; ++j)
      projection.project({row(b + j), f}, std::span(keys).subspan(j * l, static_cast<std::size_t>(l)), scratch);
    file.write(keys.data(), 4 * rows * static_cast<std::uint64_t>(l));
  }
  file.write(docs.text.data(), 4 * docs.text.size());
  std::vector<std::uint32_t> positions;
  positions.reserve(n);
  for (std::uint32_t p = 0; p < docs.text.size(); ++p)
    if (docs.text[p] != kDocumentEnd) positions.push_back(p);
  file.write(positions.data(), 4 * positions.size());
  h.payload_checksum = file.checksum();
  h.header_checksum = header_checksum(h);
  file.rewrite_header(h);
  say("wrote " + out.string() + ": " + std::to_string(n) + " keys of dim " + std::to_string(l));
  return summary;
}
#endif

}  // namespace specdec
