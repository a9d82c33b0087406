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
// Why no host emulation of BlockLanes: its code paths are a few lines each, written to mirror
// SerialLanes step by step (same accumulation per lane, same pairs in the tree); the host tests
// check SerialLanes' sums against an independent implementation of the lane order, and the GPU
// parity tests (tests/kernels/stochastic_verify_test.cpp) compare whole walks bit for bit.
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

#if defined(__CUDACC__)
/// The device executor: thread threadIdx.x of a block of exactly sampling_lanes threads is lane
/// threadIdx.x. Every primitive is reached by all threads of the block (the walks are uniform),
/// writes its shared scratch only after a barrier that follows the previous reads of it, and
/// broadcasts its result through shared memory.
class BlockLanes {
 public:
  struct Storage {
    float part[sampling_lanes];
    float lanes[sampling_lanes];
    unsigned long long bins[256];
    unsigned long long warp[sampling_lanes / 32];
    float sum;
    unsigned long long total;
  };

  __device__ explicit BlockLanes(Storage& storage) : s_(storage), lane_(static_cast<int>(threadIdx.x)) {}

  __device__ bool leader() const { return lane_ == 0; }
  __device__ void sync() const { __syncthreads(); }

  template <class F>
  __device__ void for_each(int count, F&& f) const {
    for (int i = lane_; i < count; i += sampling_lanes) f(i);
  }

  template <class F>
  __device__ float sum(int count, F&& f) {
    float partial = 0.0f;
    for (int v = lane_; v < count; v += sampling_lanes) partial = __fadd_rn(partial, f(v));
    s_.part[lane_] = partial;
    __syncthreads();
    for (int s = sampling_lanes / 2; s >= 32; s /= 2) {
      if (lane_ < s) s_.part[lane_] = __fadd_rn(s_.part[lane_], s_.part[lane_ + s]);
      __syncthreads();
    }
    if (lane_ < 32) {  // the tree's steps s = 16 .. 1: lane i adds lane i + s, as part[i] += part[i + s]
      float x = s_.part[lane_];
      for (int s = 16; s >= 1; s /= 2) x = __fadd_rn(x, __shfl_down_sync(0xffffffffu, x, s));
      if (lane_ == 0) s_.sum = x;
    }
    __syncthreads();
    return s_.sum;
  }

  template <class F>
  __device__ float* lane_sums(int count, F&& f) {
    float partial = 0.0f;
    for (int v = lane_; v < count; v += sampling_lanes) partial = __fadd_rn(partial, f(v));
    __syncthreads();  // every thread has finished reading the previous lane sums
    s_.lanes[lane_] = partial;
    __syncthreads();
    return s_.lanes;
  }

  __device__ float* load_lanes(const float* from) {
    const float mine = from[lane_];
    __syncthreads();  // as in lane_sums
    s_.lanes[lane_] = mine;
    __syncthreads();
    return s_.lanes;
  }

  template <class Pred>
  __device__ std::uint64_t count(int count, Pred&& pred) {
    unsigned long long n = 0;
    for (int v = lane_; v < count; v += sampling_lanes) n += pred(v) ? 1u : 0u;
    return reduce(n, [](unsigned long long a, unsigned long long b) { return a + b; });
  }

  template <class F>
  __device__ std::uint64_t max_scan(int count, F&& f) {
    unsigned long long best = 0;
    for (int i = lane_; i < count; i += sampling_lanes) best = f(i, best);
    return reduce(best, [](unsigned long long a, unsigned long long b) { return a > b ? a : b; });
  }

  template <class F>
  __device__ const unsigned long long* histogram(int count, F&& f) {
    __syncthreads();  // every thread has finished reading the previous histogram's bins
    s_.bins[lane_] = 0;
    __syncthreads();
    for (int v = lane_; v < count; v += sampling_lanes) {
      const Bin b = f(v);
      if (b.amount != 0) atomicAdd(&s_.bins[b.bin], static_cast<unsigned long long>(b.amount));
    }
    __syncthreads();
    return s_.bins;
  }

 private:
  // An associative, commutative integer reduction over the block (exact in any order); identity 0.
  template <class Op>
  __device__ std::uint64_t reduce(unsigned long long x, Op op) {
    for (int s = 16; s >= 1; s /= 2) x = op(x, __shfl_down_sync(0xffffffffu, x, s));
    if ((lane_ & 31) == 0) s_.warp[lane_ >> 5] = x;
    __syncthreads();
    if (lane_ < 32) {
      unsigned long long y = lane_ < sampling_lanes / 32 ? s_.warp[lane_] : 0ull;
      for (int s = 16; s >= 1; s /= 2) y = op(y, __shfl_down_sync(0xffffffffu, y, s));
      if (lane_ == 0) s_.total = y;
    }
    __syncthreads();
    return s_.total;
  }

  Storage& s_;
  int lane_;
};
#endif

}  // namespace specdec::core
