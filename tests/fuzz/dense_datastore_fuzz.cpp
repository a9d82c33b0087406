// Fuzz target: dense datastores (index/dense_datastore.hpp), checksums recomputed as an attacker
// would. Opened with the header check only, a file must still be memory-safe to project and
// search and to read continuations from, which hold only tokens of the vocabulary; with the
// full check, every stored value is valid. Anything but a specdec::error is a bug.
#include <cstdlib>
#include <vector>

#include <specdec/error.hpp>
#include <specdec/index/dense_datastore.hpp>

#include "fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = specdec::fuzz::as_file(specdec::fuzz::sealed<specdec::DenseDatastoreHeader>(data, size), ".sddense");
  for (const auto verify :
       {specdec::DatastoreVerify::header, specdec::DatastoreVerify::values, specdec::DatastoreVerify::full}) {
    try {
      const specdec::DenseDatastore ds(file, verify);
      if (ds.feature_dim() > 4096) continue;  // a valid but wide file: projecting it is slow, not unsafe
      const std::vector<float> feature(static_cast<std::size_t>(ds.feature_dim()), 0.5f);
      std::vector<float> key(static_cast<std::size_t>(ds.key_dim())), scratch;
      ds.projection().project(feature, key, scratch);
      for (std::uint64_t i = 0; i < ds.keys() && i < 64; ++i) {
        (void)specdec::detail::dense_dot(ds.key(i).data(), key.data(), ds.key_dim());
        for (const std::uint32_t t : ds.continuation(i, 16))
          if (t >= static_cast<std::uint32_t>(ds.vocab_size())) std::abort();  // a token outside the vocabulary
      }
    } catch (const specdec::error&) {
    }
  }
  return 0;
}
