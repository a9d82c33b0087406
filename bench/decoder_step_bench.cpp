// Time per decoding step of SpeculativeDecoder on its three paths, side by side in one run, with
// the same drafter (an oracle: 6-deep chains, 20% wrong, 4 siblings per node) and verifier:
//   host path     HashTarget: forward, verify and commit on the host
//   host backend  BackendHashTarget<backend::host>: the backend step (packing, copies, backend ops)
//   cuda backend  BackendHashTarget<backend::cuda>: the model's kernels, the verification and
//                 compaction kernels, one copy each way and one synchronisation per step
// and whether all three committed the same tokens. The hash model is a stand-in: its forward
// costs vocab x nodes hashes, so the numbers show the step's overhead, not a real model's speed.
//
//   decoder_step_bench [--tokens N]
//
// The cuda rows are skipped (with a message) when there is no CUDA device.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include <specdec/decoder.hpp>
#include <specdec/policies/drafters/oracle.hpp>
#include <specdec/policies/verifiers/exact.hpp>
#include <specdec/policies/verifiers/rejection_sampling.hpp>
#include <specdec/testing/backend_hash_target.hpp>
#include <specdec/testing/hash_target.hpp>

using namespace specdec;

namespace {

struct Run {
  std::vector<token_t> tokens;
  double seconds_per_step = 0;
  double tau = 0;
  double nodes_per_step = 0;
};

template <class Target, class Verifier>
Run decode(Target& target, Verifier verifier, const std::vector<token_t>& prompt, const std::vector<token_t>& reference,
           int tokens) {
  SpeculativeDecoder<Target, OracleDrafter, Verifier> dec(target, DecoderOptions{64},
                                                          OracleDrafter(reference, 6, 0.2, 4), verifier);
  dec.prefill(prompt);
  dec.step();  // warm-up: buffers, first launches
  dec.prefill(prompt);
  const auto start = std::chrono::steady_clock::now();
  Run r;
  r.tokens = dec.generate(tokens);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  r.seconds_per_step = seconds / static_cast<double>(dec.stats().steps);
  r.tau = dec.stats().tau();
  r.nodes_per_step = static_cast<double>(dec.stats().drafted_nodes) / static_cast<double>(dec.stats().steps);
  return r;
}

void row(const char* path, const char* verifier, int vocab, const Run& r, const Run& baseline) {
  std::printf("%-13s %-10s %7d %6.2f %10.1f %10.1f %6.2fx  %s\n", path, verifier, vocab, r.tau, r.nodes_per_step,
              r.seconds_per_step * 1e6, baseline.seconds_per_step / r.seconds_per_step,
              r.tokens == baseline.tokens ? "yes" : "NO");
}

}  // namespace

int main(int argc, char** argv) {
  int tokens = 128;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--tokens") == 0 && i + 1 < argc) {
      tokens = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: decoder_step_bench [--tokens N]\n");
      return 2;
    }
  }
  if (tokens < 1) {
    std::fprintf(stderr, "decoder_step_bench: --tokens must be >= 1\n");
    return 2;
  }
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  const bool gpu = e == cudaSuccess && devices > 0;
  cudaStream_t stream = nullptr;
  if (gpu) {
    cudaDeviceProp prop{};
    cudaError_t ready = cudaGetDeviceProperties(&prop, 0);
    if (ready == cudaSuccess) ready = cudaStreamCreate(&stream);
    if (ready != cudaSuccess) {
      std::fprintf(stderr, "decoder_step_bench: the CUDA device is not usable: %s\n", cudaGetErrorString(ready));
      return 1;
    }
    std::printf("device: %s\n", prop.name);
  } else {
    std::printf("no CUDA device (%s): cuda rows skipped\n", e != cudaSuccess ? cudaGetErrorString(e) : "0 devices");
  }

  std::printf("%-13s %-10s %7s %6s %10s %10s %7s  %s\n", "path", "verifier", "vocab", "tau", "nodes/step", "us/step",
              "speedup", "same tokens");
  const std::vector<token_t> prompt = {1, 2, 3, 4};
  const SamplingOptions sampling{SamplingParams{0.8f}, 7, 0};
  for (int vocab : {1000, 32000}) {
    const int max_positions = static_cast<int>(prompt.size()) + tokens + 128;
    std::vector<token_t> reference = prompt;
    const auto greedy = HashTarget(vocab, 1).generate(prompt, tokens + 64);
    reference.insert(reference.end(), greedy.begin(), greedy.end());

    HashTarget host_target(vocab, 1);
    BackendHashTarget<backend::host> host_backend(vocab, max_positions, 1);
    const Run host_exact = decode(host_target, ExactVerifier{}, prompt, reference, tokens);
    row("host path", "exact", vocab, host_exact, host_exact);
    row("host backend", "exact", vocab, decode(host_backend, ExactVerifier{}, prompt, reference, tokens), host_exact);
    const Run host_rejection = decode(host_target, RejectionSampling(sampling), prompt, reference, tokens);
    row("host path", "rejection", vocab, host_rejection, host_rejection);
    row("host backend", "rejection", vocab,
        decode(host_backend, RejectionSampling(sampling), prompt, reference, tokens), host_rejection);
    if (gpu) {
      BackendHashTarget<backend::cuda> device(vocab, max_positions, 1, 4.0f, backend::cuda{stream});
      row("cuda backend", "exact", vocab, decode(device, ExactVerifier{}, prompt, reference, tokens), host_exact);
      row("cuda backend", "rejection", vocab, decode(device, RejectionSampling(sampling), prompt, reference, tokens),
          host_rejection);
    }
  }
  if (gpu) cudaStreamDestroy(stream);
  return 0;
}
