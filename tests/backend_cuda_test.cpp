// The CUDA backend's host side: the argument checks that refuse a batch before anything reaches
// the device, and the words of its statuses. Nothing here launches or allocates, so it runs in
// CI, where there is no GPU (a `unit` test, compiled by the host compiler with
// specdec::cuda_kernels' launchers).
#include <catch2/catch.hpp>

#include <string>

#include <specdec/backend.hpp>

using namespace specdec;

namespace {

constexpr backend::host on_host{};
const backend::cuda on_device{};

}  // namespace

TEST_CASE("the CUDA backend refuses what its kernels cannot do before launching, as the host does",
          "[backend][cuda]") {
  const auto refused = [](backend::status on_host_status, backend::status on_device_status) {
    return on_host_status == backend::status::invalid_argument && on_device_status == on_host_status;
  };
  core::TreeBatch trees;
  trees.batch = 1;
  trees.words = 1000;
  trees.max_nodes = backend::max_tree_nodes + 1;
  CHECK(refused(backend::build_trees(on_host, trees), backend::build_trees(on_device, trees)));
  // The kernel's own limit: its shared copy of the parents and its counters within 48 KB.
  CHECK(kernels::build_trees(trees) == cudaErrorInvalidValue);
  trees.max_nodes = 8;
  trees.batch = backend::max_batch + 1;
  CHECK(refused(backend::build_trees(on_host, trees), backend::build_trees(on_device, trees)));

  core::GreedyVerifyBatch greedy;
  greedy.batch = backend::max_batch + 1;
  greedy.max_nodes = 8;
  greedy.vocab_size = greedy.row_stride = 4;
  CHECK(refused(backend::greedy_verify(on_host, greedy), backend::greedy_verify(on_device, greedy)));
  greedy.batch = 1;
  greedy.max_nodes = backend::max_verify_nodes + 1;
  CHECK(refused(backend::greedy_verify(on_host, greedy), backend::greedy_verify(on_device, greedy)));

  core::StochasticVerifyBatch sampled;
  float work[4] = {};
  sampled.batch = backend::max_batch + 1;
  sampled.max_nodes = 8;
  sampled.vocab_size = sampled.row_stride = 4;
  sampled.work = work;
  const core::SamplingParams params{1.0f};
  CHECK(refused(backend::rejection_verify(on_host, sampled, params), backend::rejection_verify(on_device, sampled, params)));

  core::SuffixMatchBatch contexts;
  contexts.batch = 1;
  contexts.max_match = backend::max_suffix_match + 1;
  CHECK(refused(backend::suffix_match(on_host, contexts), backend::suffix_match(on_device, contexts)));
  contexts.max_match = 4;
  contexts.batch = backend::max_batch + 1;
  CHECK(refused(backend::suffix_match(on_host, contexts), backend::suffix_match(on_device, contexts)));

  core::KvCompactionBatch caches;
  unsigned char cache[16] = {};
  caches.batch = 1;
  caches.max_nodes = 4;
  caches.layout = core::kv_layout(256, 4, 256, 1, 4);  // 65536 (layer, head) pairs
  caches.k_cache = cache;
  CHECK(refused(backend::compact_kv(on_host, caches), backend::compact_kv(on_device, caches)));
  CHECK(kernels::compact_kv(caches) == cudaErrorInvalidValue);
  caches.layout = core::kv_layout(1, 4, 1, 1, 4);
  caches.batch = backend::max_batch + 1;
  CHECK(refused(backend::compact_kv(on_host, caches), backend::compact_kv(on_device, caches)));
  CHECK(kernels::compact_kv(caches) == cudaErrorInvalidValue);
}

TEST_CASE("a device error names the CUDA error behind it", "[backend][cuda]") {
  CHECK(backend::detail::from(cudaSuccess) == backend::status::ok);
  CHECK(backend::detail::from(cudaErrorInvalidValue) == backend::status::invalid_argument);
  REQUIRE(backend::detail::from(cudaErrorIllegalAddress) == backend::status::device_error);
  const std::string text = backend::describe(on_device, backend::status::device_error);
  CHECK(text.find(backend::to_string(backend::status::device_error)) == 0);
  CHECK(text.find("cudaErrorIllegalAddress") != std::string::npos);
  CHECK(backend::describe(on_device, backend::status::invalid_argument) ==
        backend::to_string(backend::status::invalid_argument));
  CHECK(backend::describe(on_host, backend::status::device_error) == backend::to_string(backend::status::device_error));
}
