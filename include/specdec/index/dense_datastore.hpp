// DenseDatastore: DReSD's datastore (docs/drafters/dresd.md). One key per stored token: the
// target's feature at that token's position, z-normalised, projected on the first key_dim
// principal components and L2-normalised; its value is the document's text after that position.
// One file, memory-mapped read-only and shared by every decoder that drafts from it.
//
// File format, version 2 (all integers and floats little-endian):
//   offset  0  char[8]  magic "SDDENSE\0"
//           8  u32      version (2)
//          12  u32      header bytes (128)
//          16  u32      vocab_size: every token id is < vocab_size
//          20  u32      feature_dim: floats per target feature (the target's feature_dim())
//          24  u32      key_dim: principal components kept (1 <= key_dim <= feature_dim)
//          28  u32      flags (0)
//          32  u64      text_length: words of the text (tokens plus one separator per document)
//          40  u64      documents
//          48  u64      keys (= text_length - documents: one per token)
//          56  f32      epsilon of the z-normalisation
//          60  f32      explained variance: share of the z-normalised variance the kept components hold
//          64  u64      sample: features the statistics and the PCA were fitted on
//          72  u64      seed that drew the sample
//          80  u8[32]   reserved (0)
//         112  u64      payload checksum (datastore_checksum of everything after the header)
//         120  u64      header checksum (datastore_checksum of bytes 0..119)
//         128  f32[feature_dim]           mean: per-dimension mean of the features
//              f32[feature_dim]           inv_scale: 1 / sqrt(variance + epsilon) per dimension
//              f32[key_dim][feature_dim]  components: principal axes of the z-normalised features,
//                                         by decreasing variance, unit length
//              f32[keys][key_dim]         keys, each of L2 norm 1
//              u32[text_length]           the text: each document's tokens, then kDocumentEnd
//              u32[keys]                  key_position: the text position of key i's token; its
//                                         value is the text after it, up to the separator
// The file's size must be exactly 128 + 4 * (2 * feature_dim + key_dim * feature_dim +
// keys * key_dim + text_length + keys).
//
// Why the text rather than a fixed N tokens per key: the values of consecutive keys overlap, so
// 8 bytes per key hold every continuation to the end of its document (N fixed per key would cost
// 4 N bytes), and the draft's depth stays a drafter option.
//
// Opening checks the header (magic, version, header checksum, the counts against each other and
// their overflow-safe sum against the file's size: io/file_format.hpp) and, by default
// (DatastoreVerify::values), every stored value: every float finite, every token below
// vocab_size, every key position a token's. DatastoreVerify::full adds the payload checksum;
// DatastoreVerify::header skips the payload, as for TokenDatastore.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <specdec/error.hpp>
#include <specdec/io/mapped_file.hpp>
#include <specdec/index/token_datastore.hpp>
#include <specdec/index/token_file.hpp>

namespace specdec {

inline constexpr char kDenseDatastoreMagic[8] = {'S', 'D', 'D', 'E', 'N', 'S', 'E', '\0'};
inline constexpr std::uint32_t kDenseDatastoreVersion = 2;

/// The 128-byte header of a dense datastore file (see the top of this file).
struct DenseDatastoreHeader {
  char magic[8] = {};
  std::uint32_t version = 0;
  std::uint32_t header_bytes = 0;
  std::uint32_t vocab_size = 0;
  std::uint32_t feature_dim = 0;
  std::uint32_t key_dim = 0;
  std::uint32_t flags = 0;
  std::uint64_t text_length = 0;
  std::uint64_t documents = 0;
  std::uint64_t keys = 0;
  float epsilon = 0;
  float explained_variance = 0;
  std::uint64_t sample = 0;
  std::uint64_t seed = 0;
  unsigned char reserved[32] = {};
  std::uint64_t payload_checksum = 0;
  std::uint64_t header_checksum = 0;
};
static_assert(sizeof(DenseDatastoreHeader) == 128 && std::endian::native == std::endian::little,
              "the dense datastore header is read in place as 128 little-endian bytes");

inline std::uint64_t header_checksum(const DenseDatastoreHeader& h) {
  return datastore_checksum(&h, offsetof(DenseDatastoreHeader, header_checksum));
}

/// The layout of a dense datastore file with this header's sizes (overflow-safe: io/file_format.hpp).
struct DenseDatastoreLayout {
  std::uint64_t mean, inv_scale, components, keys, text, key_positions;
  FileLayout file{sizeof(DenseDatastoreHeader)};

  explicit DenseDatastoreLayout(const DenseDatastoreHeader& h) {
    const std::uint64_t f = h.feature_dim, l = h.key_dim;
    mean = file.take(f, 4);
    inv_scale = file.take(f, 4);
    components = file.take(l * f, 4);  // both below 2^32: no overflow
    keys = file.take(h.keys, 4 * l);
    text = file.take(h.text_length, 4);
    key_positions = file.take(h.keys, 4);
  }
};

namespace detail {

/// Inner product in a fixed order (8 interleaved partial sums, then a fixed reduction): the
/// compiler vectorises it, and every caller, builder or search, gets the same bits.
inline float dense_dot(const float* a, const float* b, int n) {
  float s[8] = {};
  int i = 0;
  for (; i + 8 <= n; i += 8)
    for (int u = 0; u < 8; ++u) s[u] += a[i + u] * b[i + u];
  for (; i < n; ++i) s[i & 7] += a[i] * b[i];  // the tail: i & 7 is its offset from a multiple of 8
  return ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
}

}  // namespace detail

/// DReSD's query transform: z-normalise with the datastore's statistics, project on its principal
/// components, L2-normalise. A view into the datastore (or into a builder's arrays).
struct DenseProjection {
  int feature_dim = 0;
  int key_dim = 0;
  const float* mean = nullptr;        ///< feature_dim floats
  const float* inv_scale = nullptr;   ///< feature_dim floats
  const float* components = nullptr;  ///< key_dim rows of feature_dim floats

  /// key = normalised projection of `feature`. `scratch` is resized and reused. A feature that
  /// projects to 0 gives the zero key (it matches nothing better than anything else).
  void project(std::span<const float> feature, std::span<float> key, std::vector<float>& scratch) const {
    scratch.resize(static_cast<std::size_t>(feature_dim));
    for (int d = 0; d < feature_dim; ++d) scratch[d] = (feature[d] - mean[d]) * inv_scale[d];
    for (int r = 0; r < key_dim; ++r)
      key[r] = detail::dense_dot(components + static_cast<std::size_t>(r) * feature_dim, scratch.data(), feature_dim);
    const float norm = std::sqrt(detail::dense_dot(key.data(), key.data(), key_dim));
    const float inv = norm > 1e-12f ? 1.0f / norm : 0.0f;
    for (int r = 0; r < key_dim; ++r) key[r] *= inv;
  }
};

/// A dense datastore file, mapped read-only (see the top of this file). Immutable once open, so
/// one instance (std::shared_ptr<const DenseDatastore>) serves any number of decoders and threads.
class DenseDatastore {
 public:
  /// Maps `path` and checks it (`verify`). Throws specdec::error naming the file and what is
  /// wrong: missing, truncated, not a dense datastore, another version, bad checksum, empty.
  explicit DenseDatastore(const std::filesystem::path& path, DatastoreVerify verify = DatastoreVerify::values)
      : path_(path), file_(path, "dense datastore " + path.string(), sizeof(DenseDatastoreHeader)) {
    check("dense datastore " + path.string(), verify);
  }

  const std::filesystem::path& path() const { return path_; }
  const DenseDatastoreHeader& header() const { return *static_cast<const DenseDatastoreHeader*>(file_.data()); }
  int vocab_size() const { return static_cast<int>(header().vocab_size); }
  int feature_dim() const { return static_cast<int>(header().feature_dim); }
  int key_dim() const { return static_cast<int>(header().key_dim); }
  std::uint64_t keys() const { return header().keys; }
  std::uint64_t documents() const { return header().documents; }
  std::size_t file_bytes() const { return file_.size(); }

  std::span<const float> mean() const { return {floats(), static_cast<std::size_t>(feature_dim())}; }
  std::span<const float> inv_scale() const { return {floats() + feature_dim(), static_cast<std::size_t>(feature_dim())}; }
  /// Row r: the r-th principal axis (feature_dim floats).
  std::span<const float> components() const {
    return {floats() + 2 * feature_dim(), static_cast<std::size_t>(key_dim()) * feature_dim()};
  }
  /// keys() rows of key_dim floats.
  std::span<const float> key_matrix() const {
    return {components().data() + components().size(), static_cast<std::size_t>(keys() * key_dim())};
  }
  std::span<const float> key(std::uint64_t i) const {
    return key_matrix().subspan(static_cast<std::size_t>(i * key_dim()), static_cast<std::size_t>(key_dim()));
  }
  std::span<const std::uint32_t> text() const {
    return {reinterpret_cast<const std::uint32_t*>(key_matrix().data() + key_matrix().size()),
            static_cast<std::size_t>(header().text_length)};
  }
  std::span<const std::uint32_t> key_positions() const {
    return {text().data() + text().size(), static_cast<std::size_t>(keys())};
  }
  /// The value of key i: the text after its token, up to (not including) the document's end.
  /// Empty for a damaged position, and cut at a token outside the vocabulary (a file opened
  /// with DatastoreVerify::header).
  std::span<const std::uint32_t> continuation(std::uint64_t i, std::size_t max_tokens) const {
    const auto t = text();
    const std::uint64_t begin = std::uint64_t{key_positions()[i]} + 1;
    std::size_t n = 0;
    while (n < max_tokens && begin + n < t.size() && t[begin + n] < header().vocab_size) ++n;  // kDocumentEnd >= vocab
    return {t.data() + std::min<std::uint64_t>(begin, t.size()), n};
  }

  DenseProjection projection() const {
    return {feature_dim(), key_dim(), mean().data(), inv_scale().data(), components().data()};
  }

  /// The checksum of the payload as it is now (reads the whole file).
  std::uint64_t payload_checksum() const {
    return datastore_checksum(static_cast<const char*>(file_.data()) + sizeof(DenseDatastoreHeader),
                              file_bytes() - sizeof(DenseDatastoreHeader));
  }

 private:
  const float* floats() const {
    return reinterpret_cast<const float*>(static_cast<const char*>(file_.data()) + sizeof(DenseDatastoreHeader));
  }

  void check(const std::string& who, DatastoreVerify verify) const {
    const DenseDatastoreHeader& h = header();
    detail::check_file_header(h, kDenseDatastoreMagic, kDenseDatastoreVersion, "dense datastore", who);
    if (h.keys == 0 || h.documents == 0) throw error(who + " is empty (no keys)");
    if (h.text_length >= kDocumentEnd)
      throw error(who + " has " + std::to_string(h.text_length) + " words of text, more than 32-bit positions address");
    if (h.documents > h.text_length)
      throw error(who + " has " + std::to_string(h.documents) + " documents in " + std::to_string(h.text_length) +
                  " words of text (each document ends with a separator)");
    if (h.vocab_size == 0 || h.vocab_size > 0x7FFFFFFF)
      throw error(who + " has vocab_size " + std::to_string(h.vocab_size) + " (expected 1 to 2^31 - 1)");
    if (h.feature_dim == 0 || h.feature_dim > kMaxFeatureDim || h.key_dim == 0 || h.key_dim > h.feature_dim)
      throw error(who + " has key_dim " + std::to_string(h.key_dim) + " for feature_dim " +
                  std::to_string(h.feature_dim) + " (need 1 <= key_dim <= feature_dim <= " +
                  std::to_string(kMaxFeatureDim) + ")");
    if (h.keys != h.text_length - h.documents)
      throw error(who + " has " + std::to_string(h.keys) + " keys for " + std::to_string(h.text_length - h.documents) +
                  " tokens");
    DenseDatastoreLayout(h).file.check_size(who, file_bytes());
    if (text().back() != kDocumentEnd) throw error(who + " has a text that does not end with a document separator");
    if (verify == DatastoreVerify::header) return;
    if (verify == DatastoreVerify::full && payload_checksum() != h.payload_checksum)
      throw error(who + " is damaged (payload checksum mismatch)");
    detail::check_finite(mean(), who, "mean");
    detail::check_finite(inv_scale(), who, "inv_scale");
    detail::check_finite(components(), who, "components");
    detail::check_finite(key_matrix(), who, "keys");
    TokenDatastore::check_text(text(), h.vocab_size, h.documents, who);
    // The keys are in text order, so this reads the text sequentially: affordable by default.
    TokenDatastore::check_positions(key_positions(), text(), who, "key position");
  }

  /// The widest feature a file may declare (the widest models' hidden size is 2^14 or so): keeps
  /// a damaged header from making a search allocate gigabytes per query.
  static constexpr std::uint32_t kMaxFeatureDim = 1u << 20;

  std::filesystem::path path_;
  MappedFile file_;
};

}  // namespace specdec
