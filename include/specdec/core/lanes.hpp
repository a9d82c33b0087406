// Executors of the vocabulary-parallel stochastic walks (core/sampling.hpp, core/rejection.hpp,
// core/conditional.hpp). A walk is written once, over an executor `ex`, and runs either serially
// on the host (SerialLanes) or on one CUDA block of sampling_lanes threads per tree (BlockLanes),
// with the same bits on both:
//
//  - float sums follow one fixed order, the *lane order*: entry v of a row belongs to lane
//    v % 256, a lane adds its entries in increasing v (starting from 0), and the 256 lane partials
//    are combined by the pairwise tree `for (s = 128; s >= 1; s /= 2) for (i < s) p[i] += p[i + s]`.
//    The host computes exactly this (tiles of 256 entries into 256 accumulators); the device with
//    thread = lane, shared memory for s >= 32 and warp shuffles (same pairs) below;
//  - max, histograms and counts are integer reductions, exact in any order;
//  - every primitive returns its result to every thread, so the scalar decisions a walk takes
//    from them are the same in every thread of the block (no divergent barriers).
//
// The primitives (both executors):
//   leader()                 true for the one thread that writes a walk's array outputs
//   sync()                   block barrier (no-op on the host): after leader/for_each writes
//   for_each(n, f)           f(i) for i in [0, n), spread over the lanes
//   sum(n, f)                Σ f(v) over v in [0, n) in lane order (float)
//   lane_sums(n, f)          the 256 lane partials of that sum, before the tree: part[l] = Σ f(v)
//                            over v = l, l + 256, ... < n in increasing v; returns them in an array
//                            every thread sees, valid until the next lane_sums call (a walk may
//                            rewrite entry l in for_each's item l, then sync)
//   load_lanes(from)         the same array, filled with from[0..256) (lane sums known beforehand)
//   count(n, pred)           #{v in [0, n) : pred(v)}
//   max_scan(n, f)           running max: best = f(i, best) from best = 0 over the lane's items,
//                            then the max over lanes; f must return max(best, key(i)) for some
//                            key(i) (it may skip work when key(i) <= best), and the result is
//                            max_i key(i) in any order
//   histogram(n, f)          256 bins of 64-bit integers: f(v) returns a Bin {bin, amount}
//                            (amount 0 adds nothing); returns the bins, valid until the next
//                            histogram call
//
// The device executor's code is BlockLanesOn<Block>, written over the block primitives it needs
// (barrier, warp shuffle, shared atomic add): the kernels run it on a CUDA block (CudaBlock), and
// tests/core/block_lanes_test.cpp runs the very same code on 256 host threads with emulated
// primitives, walks included, against SerialLanes; the GPU parity tests
// (tests/kernels/stochastic_verify_test.cpp) compare whole walks bit for bit on a device.
#pragma once

#include <cstdint>

#include <specdec/config.hpp>
#include <specdec/core/portable_math.hpp>

namespace specdec::core {

/// Lanes of the lane order, and threads of a stochastic verification block.
inline constexpr int sampling_lanes = 256;

/// One histogram contribution: `amount` added to bin `bin` (0..255).
struct Bin {
  int bin = 0;
  std::uint64_t amount = 0;
};

/// The lane order's combination of 256 partials (modifies them; the result is part[0]).
SPECDEC_HD inline float combine_lanes(float* part) {
  for (int s = sampling_lanes / 2; s >= 1; s /= 2)
    for (int i = 0; i < s; ++i) part[i] = add_rn(part[i], part[i + s]);
  return part[0];
}

/// The host executor: one thread does every lane's work in turn.
class SerialLanes {
 public:
  SPECDEC_HD bool leader() const { return true; }
  SPECDEC_HD void sync() const {}

  template <class F>
  SPECDEC_HD void for_each(int count, F&& f) const {
    for (int i = 0; i < count; ++i) f(i);
  }

  template <class F>
  SPECDEC_HD float sum(int count, F&& f) {
    accumulate_lanes(count, f, part_);
    return combine_lanes(part_);
  }

  template <class F>
  SPECDEC_HD float* lane_sums(int count, F&& f) {
    accumulate_lanes(count, f, lanes_);
    return lanes_;
  }

  SPECDEC_HD float* load_lanes(const float* from) {
    for (int lane = 0; lane < sampling_lanes; ++lane) lanes_[lane] = from[lane];
    return lanes_;
  }

  template <class Pred>
  SPECDEC_HD std::uint64_t count(int count, Pred&& pred) const {
    std::uint64_t n = 0;
    for (int v = 0; v < count; ++v) n += pred(v) ? 1u : 0u;
    return n;
  }

  // Eight running maxima rather than one: independent chains, so the loop is not bound by the
  // latency of one compare-and-select per item.
  template <class F>
  SPECDEC_HD std::uint64_t max_scan(int count, F&& f) const {
    constexpr int chains = 8;
    std::uint64_t best[chains] = {};
    for (int base = 0; base < count; base += chains)
      for (int c = 0; c < chains && base + c < count; ++c) best[c] = f(base + c, best[c]);
    for (int c = 1; c < chains; ++c) best[0] = best[c] > best[0] ? best[c] : best[0];
    return best[0];
  }

  template <class F>
  SPECDEC_HD const std::uint64_t* histogram(int count, F&& f) {
    for (std::uint64_t& b : bins_) b = 0;
    for (int v = 0; v < count; ++v) {
      const Bin b = f(v);
      bins_[b.bin] += b.amount;
    }
    return bins_;
  }

 private:
  // Tiles of 256 entries into 256 accumulators: lane l adds its entries in increasing v, and the
  // inner loop over lanes vectorises.
  template <class F>
  SPECDEC_HD static void accumulate_lanes(int count, F& f, float* part) {
    for (int lane = 0; lane < sampling_lanes; ++lane) part[lane] = 0.0f;
    int base = 0;
    for (; base + sampling_lanes <= count; base += sampling_lanes)
      for (int lane = 0; lane < sampling_lanes; ++lane) part[lane] = add_rn(part[lane], f(base + lane));
    for (int lane = 0; base + lane < count; ++lane) part[lane] = add_rn(part[lane], f(base + lane));
  }

  float part_[sampling_lanes];
  float lanes_[sampling_lanes];
  std::uint64_t bins_[256];
};

/// The device executor, over the thread block it runs on (`Block`: thread(), barrier(),
/// shfl_down(x, s) within a warp of 32, atomic_add on shared memory): BlockLanes (CudaBlock) in
/// the kernels; tests run the same code on an emulated block (tests/core/block_lanes_test.cpp). Thread
/// `block.thread()` of a block of exactly sampling_lanes threads is lane block.thread(). Every
/// primitive is reached by all threads of the block (the walks are uniform), writes its shared
/// scratch only after a barrier that follows the previous reads of it, and broadcasts its result
/// through shared memory.
template <class Block>
class BlockLanesOn {
 public:
  struct Storage {
    float part[sampling_lanes];
    float lanes[sampling_lanes];
    unsigned long long bins[256];
    unsigned long long warp[sampling_lanes / 32];
    float sum;
    unsigned long long total;
  };

  SPECDEC_HD BlockLanesOn(Storage& storage, Block block) : s_(storage), block_(block), lane_(block.thread()) {}

  SPECDEC_HD bool leader() const { return lane_ == 0; }
  SPECDEC_NO_EXEC_CHECK
  SPECDEC_HD void sync() const { block_.barrier(); }

  SPECDEC_NO_EXEC_CHECK
  template <class F>
  SPECDEC_HD void for_each(int count, F&& f) const {
    for (int i = lane_; i < count; i += sampling_lanes) f(i);
  }

  SPECDEC_NO_EXEC_CHECK
  template <class F>
  SPECDEC_HD float sum(int count, F&& f) {
    float partial = 0.0f;
    for (int v = lane_; v < count; v += sampling_lanes) partial = add_rn(partial, f(v));
    s_.part[lane_] = partial;
    block_.barrier();
    for (int s = sampling_lanes / 2; s >= 32; s /= 2) {
      if (lane_ < s) s_.part[lane_] = add_rn(s_.part[lane_], s_.part[lane_ + s]);
      block_.barrier();
    }
    if (lane_ < 32) {  // the tree's steps s = 16 .. 1: lane i adds lane i + s, as part[i] += part[i + s]
      float x = s_.part[lane_];
      for (int s = 16; s >= 1; s /= 2) x = add_rn(x, block_.shfl_down(x, s));
      if (lane_ == 0) s_.sum = x;
    }
    block_.barrier();
    return s_.sum;
  }

  SPECDEC_NO_EXEC_CHECK
  template <class F>
  SPECDEC_HD float* lane_sums(int count, F&& f) {
    float partial = 0.0f;
    for (int v = lane_; v < count; v += sampling_lanes) partial = add_rn(partial, f(v));
    block_.barrier();  // every thread has finished reading the previous lane sums
    s_.lanes[lane_] = partial;
    block_.barrier();
    return s_.lanes;
  }

  SPECDEC_NO_EXEC_CHECK
  SPECDEC_HD float* load_lanes(const float* from) {
    const float mine = from[lane_];
    block_.barrier();  // as in lane_sums
    s_.lanes[lane_] = mine;
    block_.barrier();
    return s_.lanes;
  }

  SPECDEC_NO_EXEC_CHECK
  template <class Pred>
  SPECDEC_HD std::uint64_t count(int count, Pred&& pred) {
    unsigned long long n = 0;
    for (int v = lane_; v < count; v += sampling_lanes) n += pred(v) ? 1u : 0u;
    return reduce(n, [](unsigned long long a, unsigned long long b) { return a + b; });
  }

  SPECDEC_NO_EXEC_CHECK
  template <class F>
  SPECDEC_HD std::uint64_t max_scan(int count, F&& f) {
    unsigned long long best = 0;
    for (int i = lane_; i < count; i += sampling_lanes) best = f(i, best);
    return reduce(best, [](unsigned long long a, unsigned long long b) { return a > b ? a : b; });
  }

  SPECDEC_NO_EXEC_CHECK
  template <class F>
  SPECDEC_HD const unsigned long long* histogram(int count, F&& f) {
    block_.barrier();  // every thread has finished reading the previous histogram's bins
    s_.bins[lane_] = 0;
    block_.barrier();
    for (int v = lane_; v < count; v += sampling_lanes) {
      const Bin b = f(v);
      if (b.amount != 0) block_.atomic_add(&s_.bins[b.bin], static_cast<unsigned long long>(b.amount));
    }
    block_.barrier();
    return s_.bins;
  }

 private:
  // An associative, commutative integer reduction over the block (exact in any order); identity 0.
  SPECDEC_NO_EXEC_CHECK
  template <class Op>
  SPECDEC_HD std::uint64_t reduce(unsigned long long x, Op op) {
    for (int s = 16; s >= 1; s /= 2) x = op(x, block_.shfl_down(x, s));
    if ((lane_ & 31) == 0) s_.warp[lane_ >> 5] = x;
    block_.barrier();
    if (lane_ < 32) {
      unsigned long long y = lane_ < sampling_lanes / 32 ? s_.warp[lane_] : 0ull;
      for (int s = 16; s >= 1; s /= 2) y = op(y, block_.shfl_down(y, s));
      if (lane_ == 0) s_.total = y;
    }
    block_.barrier();
    return s_.total;
  }

  Storage& s_;
  Block block_;
  int lane_;
};

#if defined(__CUDACC__)
/// The CUDA thread block, as BlockLanesOn uses it.
struct CudaBlock {
  __device__ int thread() const { return static_cast<int>(threadIdx.x); }
  __device__ void barrier() const { __syncthreads(); }
  template <class T>
  __device__ T shfl_down(T x, int s) const {
    return __shfl_down_sync(0xffffffffu, x, s);
  }
  __device__ void atomic_add(unsigned long long* p, unsigned long long v) const { atomicAdd(p, v); }
};

/// The executor of the stochastic verification kernels.
class BlockLanes : public BlockLanesOn<CudaBlock> {
 public:
  __device__ explicit BlockLanes(Storage& storage) : BlockLanesOn<CudaBlock>(storage, CudaBlock{}) {}
};
#endif

}  // namespace specdec::core
