// The machine probes of `specbench calibrate` (CalibrateOptions::machine_probes): one core's read
// bandwidth and the forward's matrix product on one thread and on all, written into the table.
#pragma once

#include <specdec/models/llama_config.hpp>

namespace specbench {

/// One core's sequential read bandwidth in GB/s: the best of 3 sums of a 1 GiB array.
double read_bandwidth_gbs();

/// The forward's matrix product where arithmetic bounds it, on one thread and on `threads`:
/// GFLOP/s of 32 tokens times a 256 × 256 matrix stored in `weights` (256 KB in fp32: from L2),
/// the forward's own kernel (on `threads`, its ThreadPool's split), the fastest of 1024 products
/// each, the two alternating a few products at a time (about 0.1 s), so that both meet the same
/// moments of a shared machine and a burst of load only slows some products. Side by side they
/// say whether more threads add arithmetic (separate cores) or share one core's (SMT siblings,
/// or virtual CPUs that the host backs with one core).
struct MatrixProductGflops {
  double one_thread = 0, all_threads = 0;
};
MatrixProductGflops matrix_product_gflops(int threads, specdec::WeightFormat weights);

}  // namespace specbench
