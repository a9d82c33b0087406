// Fuzz target: n-gram models (index/ngram_model.hpp), checksums recomputed as an attacker would.
// Opened with the header check only, a model must still be memory-safe to query; with the full
// check, every probability is finite and in [0, 1]. Anything but a specdec::error is a bug.
#include <cmath>
#include <cstdlib>
#include <vector>

#include <specdec/error.hpp>
#include <specdec/index/ngram_model.hpp>

#include "fuzz_target.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto file = specdec::fuzz::as_file(specdec::fuzz::sealed<specdec::NgramHeader>(data, size), ".ngram");
  for (const auto verify :
       {specdec::DatastoreVerify::header, specdec::DatastoreVerify::values, specdec::DatastoreVerify::full}) {
    try {
      const specdec::NgramModel model(file, verify);
      std::vector<specdec::NgramCandidate> top;
      const int v = model.vocab_size();
      const std::vector<specdec::token_t> contexts[] = {{}, {0}, {0, 1}, {v - 1, v / 2}, {-1, v}};
      for (const auto& context : contexts) {
        model.top_k(context, 4, top);
        for (const specdec::token_t w : {0, 1, v - 1, v}) {
          const double p = model.probability(context, w);
          if (verify != specdec::DatastoreVerify::header && !(p >= 0.0 && std::isfinite(p))) std::abort();
        }
      }
    } catch (const specdec::error&) {
    }
  }
  return 0;
}
