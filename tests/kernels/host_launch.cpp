// device_launch.hpp served by the host backend. Linked instead of device_launch.cpp into the GPU
// test programs (as `*_gpu_harness_test`, label `unit`), it runs the GPU tests' own logic in CI:
// their inputs, their comparisons, and that they pass when the "device" computes exactly what the
// host does. On a GPU a failure then points at a kernel, not at a test. The row-parallel shape is
// stood in for by handing the walks RowStats computed on the host (the pre-pass's results).
#include <vector>

#include "kernels/device_launch.hpp"
#include "kernels/random_stochastic.hpp"

namespace specdec::testing {
namespace {

constexpr backend::host on_host{};

}  // namespace

backend::status run_on_device(const core::TreeBatch& host) { return backend::build_trees(on_host, host); }
backend::status run_on_device(const core::GreedyVerifyBatch& host) { return backend::greedy_verify(on_host, host); }
backend::status run_on_device(const core::SuffixMatchBatch& host) { return backend::suffix_match(on_host, host); }
backend::status run_on_device(const core::KvCompactionBatch& host) { return backend::compact_kv(on_host, host); }

backend::status run_rejection_on_device(const core::StochasticVerifyBatch& host, const core::SamplingParams& params,
                                        stochastic_shape shape) {
  if (shape != stochastic_shape::row_parallel || !backend::detail::valid(host, params))
    return backend::rejection_verify(on_host, host, params);
  const std::vector<core::RowStats> stats = row_stats(host, params);
  core::StochasticVerifyBatch b = host;
  b.row_stats = stats.data();
  return backend::rejection_verify(on_host, b, params);
}

backend::status run_conditional_on_device(const core::StochasticVerifyBatch& host, const core::ConditionalParams& params,
                                          const core::SamplingParams& next, stochastic_shape shape) {
  if (shape != stochastic_shape::row_parallel || !backend::detail::valid(host, params, next))
    return backend::conditional_verify(on_host, host, params, next);
  const std::vector<core::RowStats> stats = row_stats(host, core::conditional_softmax());
  core::StochasticVerifyBatch b = host;
  b.row_stats = stats.data();
  return backend::conditional_verify(on_host, b, params, next);
}

// As on the device: the verifier reads the build's outputs and the compaction the verifier's.
backend::status run_step_on_device(const core::TreeBatch& trees, const core::GreedyVerifyBatch& verify,
                                   const core::KvCompactionBatch& kv, bool) {
  core::GreedyVerifyBatch v = verify;
  v.offsets = trees.offsets;
  v.token = trees.token;
  v.first_child = trees.first_child;
  v.next_sibling = trees.next_sibling;
  v.build_status = trees.status;
  core::KvCompactionBatch c = kv;
  c.path = v.path;
  c.length = v.length;
  backend::status s = backend::build_trees(on_host, trees);
  if (s == backend::status::ok) s = backend::greedy_verify(on_host, v);
  if (s == backend::status::ok) s = backend::compact_kv(on_host, c);
  return s;
}

}  // namespace specdec::testing
