#include "kernels/device_decoder.hpp"

#include <stdexcept>
#include <string>

#include <cuda_runtime.h>

#include <specdec/targets/backend_hash_target.hpp>

namespace specdec::testing {
namespace {

// A stream for one test, destroyed with it.
class Stream {
 public:
  Stream() {
    const cudaError_t e = cudaStreamCreate(&stream_);
    if (e != cudaSuccess) throw std::runtime_error(std::string("cudaStreamCreate: ") + cudaGetErrorString(e));
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() { cudaStreamDestroy(stream_); }
  backend::cuda tag() const { return backend::cuda{stream_}; }

 private:
  cudaStream_t stream_ = nullptr;
};

}  // namespace

DecodeResult decode_on_device(const DecodeCase& c) {
  Stream stream;
  BackendHashTarget<backend::cuda> target(c.vocab, c.max_positions, c.seed, 4.0f, stream.tag());
  return decode(target, c);
}

std::vector<bool> device_cache_matches_after_each_step(const DecodeCase& c, int steps) {
  Stream stream;
  using Target = BackendHashTarget<backend::cuda>;
  Target target(c.vocab, c.max_positions, c.seed, 4.0f, stream.tag());
  std::vector<token_t> reference = c.prompt;
  const auto greedy = HashTarget(c.vocab, c.seed).greedy(c.prompt, steps * 8 + 8);
  reference.insert(reference.end(), greedy.begin(), greedy.end());
  SpeculativeDecoder<Target, OracleDrafter, ExactVerifier> dec(target, DecoderOptions{c.budget},
                                                                 OracleDrafter(reference, 5, 0.3, 3), ExactVerifier{});
  dec.prefill(c.prompt);
  std::vector<bool> matches;
  for (int s = 0; s < steps; ++s) {
    dec.step();
    const std::vector<token_t> committed(dec.context().begin(), dec.context().end() - 1);
    matches.push_back(target.cached_hashes(static_cast<int>(committed.size())) == running_hashes(committed, c.seed));
  }
  return matches;
}

}  // namespace specdec::testing
