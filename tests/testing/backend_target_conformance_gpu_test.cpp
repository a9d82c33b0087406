// The backend conformance kit on backend::cuda: BackendHashTarget's kernels pass it, every result
// read back from device memory through backend::copy (cudaMemcpyAsync on the target's stream).
// Label `gpu`: skipped without a device. tests/testing/backend_target_conformance_test.cpp runs
// the same kit on the host backend, with the buggy targets that must fail it.
#include <catch2/catch.hpp>

#include <specdec/testing/backend_hash_target.hpp>
#include <specdec/testing/backend_target_conformance.hpp>

#include "support/cuda_stream.hpp"

using namespace specdec;

TEST_CASE("backend conformance kit on CUDA: BackendHashTarget<backend::cuda> passes", "[testing][conformance][gpu]") {
  testing::CudaStream stream;
  for (int vocab : {2, 1000}) {
    BackendHashTarget<backend::cuda> target(vocab, /*max_positions=*/128, /*seed=*/3, 4.0f, stream.tag());
    const testing::ConformanceReport report = testing::check_backend_target(target);
    INFO("vocab " << vocab << ": " << report.str());
    CHECK(report.ok());
    CHECK(report.nodes_checked > 200);
  }
}

TEST_CASE("backend conformance kit on CUDA: BackendHashBatchTarget<backend::cuda> passes",
          "[testing][conformance][gpu]") {
  testing::CudaStream stream;
  BackendHashBatchTarget<backend::cuda> target(/*vocab=*/64, /*max_positions=*/128, /*slots=*/5, /*seed=*/3, 4.0f,
                                               stream.tag());
  const testing::ConformanceReport report = testing::check_backend_batch_target(target);
  INFO(report.str());
  CHECK(report.ok());
  CHECK(report.nodes_checked > 800);
}
