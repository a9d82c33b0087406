// BlockLanesOn, the CUDA kernels' executor, run on an emulated block of 256 threads (fibers, or
// host threads under a sanitizer): a barrier (Barrier, below) for __syncthreads, a per-warp
// exchange for __shfl_down_sync, std::atomic_ref for shared atomicAdd.
// The code under test is the kernels' own (core/lanes.hpp), so CI checks the device executor's
// primitives and whole walks against SerialLanes bit for bit, with no GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <semaphore>
#include <thread>
#include <vector>

#include <ucontext.h>

#include <specdec/backend.hpp>
#include <specdec/core/lanes.hpp>

#include "kernels/random_stochastic.hpp"

using namespace specdec;
using namespace specdec::core;

namespace {

constexpr int warps = sampling_lanes / 32;

// core_block_lanes_tsan_test builds this file with ThreadSanitizer, which reports a missing
// barrier as a data race even when the threads' timing hides it, but runs ~20 times slower.
#if defined(__SANITIZE_THREAD__)
constexpr bool under_thread_sanitizer = true;
#else
constexpr bool under_thread_sanitizer = false;
#endif

// The block's threads are host threads under a sanitizer (ThreadSanitizer checks their barriers;
// AddressSanitizer does not follow fibers' stacks), fibers otherwise (Fibers, below).
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
#define SPECDEC_BLOCK_ON_THREADS 1
#else
#define SPECDEC_BLOCK_ON_THREADS 0
#endif

// What a thread stuck at a barrier throws: the block's threads took different paths, which on a
// GPU is a hang or undefined behaviour (a __syncthreads not reached by every thread).
struct Diverged {};

#if SPECDEC_BLOCK_ON_THREADS
// A barrier whose waiters give up (throw Diverged) when the other threads do not arrive in time.
// Arrivals count under a mutex; the last one lets the others go through a semaphore, so waking
// does not make every waiter take the mutex again (256 threads on two cores spend their time
// switching). The semaphores alternate by phase: a thread already waiting at the next barrier
// cannot take what was released for a slow waiter of this one.
class Barrier {
 public:
  explicit Barrier(int threads) : threads_(threads) {}
  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    std::counting_semaphore<>& gate = gates_[phase_];
    if (++arrived_ == threads_) {
      arrived_ = 0;
      phase_ ^= 1;
      lock.unlock();
      gate.release(threads_ - 1);
      return;
    }
    lock.unlock();
    if (!gate.try_acquire_for(std::chrono::seconds(20))) throw Diverged{};
  }

 private:
  std::mutex mutex_;
  std::counting_semaphore<> gates_[2]{std::counting_semaphore<>(0), std::counting_semaphore<>(0)};
  int threads_, arrived_ = 0, phase_ = 0;
};
#else
// The block's threads as fibers of the calling thread (ucontext), each run until it waits at a
// barrier, in turn: the interleavings a barrier allows, without 256 OS threads taking turns on two
// cores (several times faster). A pass over the fibers in which none arrives at a barrier or ends
// is a deadlock: the threads diverged, and each waiting fiber throws Diverged.
class Fibers {
 public:
  // Runs body(t) for every t in [0, n), each on a fiber; false when they diverged.
  bool run(int n, const std::function<void(int)>& body) {
    if (!stacks_) stacks_ = std::make_unique<char[]>(static_cast<std::size_t>(sampling_lanes) * stack_bytes);
    body_ = &body;
    stuck_ = diverged_ = false;
    contexts_.assign(static_cast<std::size_t>(n), ucontext_t{});
    done_.assign(static_cast<std::size_t>(n), false);
    for (int t = 0; t < n; ++t) {
      ucontext_t& c = contexts_[static_cast<std::size_t>(t)];
      getcontext(&c);
      c.uc_stack.ss_sp = stacks_.get() + static_cast<std::size_t>(t) * stack_bytes;
      c.uc_stack.ss_size = stack_bytes;
      c.uc_link = &scheduler_;
      makecontext(&c, &Fibers::entry, 0);
    }
    active() = this;
    for (int live = n; live > 0;) {
      const std::uint64_t before = progress_;
      for (current_ = 0; current_ < n; ++current_)
        if (!done_[static_cast<std::size_t>(current_)]) swapcontext(&scheduler_, &contexts_[static_cast<std::size_t>(current_)]);
      live = static_cast<int>(std::count(done_.begin(), done_.end(), false));
      if (progress_ == before) stuck_ = true;
    }
    active() = nullptr;
    return !diverged_;
  }

  // A fiber whose barrier has not opened: the others run.
  static void yield() {
    Fibers& f = *active();
    if (!f.stuck_) swapcontext(&f.contexts_[static_cast<std::size_t>(f.current_)], &f.scheduler_);
    if (f.stuck_) throw Diverged{};
  }
  static void progressed() { ++active()->progress_; }

 private:
  static constexpr std::size_t stack_bytes = 256 * 1024;
  static Fibers*& active() {
    static Fibers* fibers = nullptr;
    return fibers;
  }
  static void entry() {
    Fibers& f = *active();
    const int t = f.current_;
    try {
      (*f.body_)(t);
    } catch (const Diverged&) {
      f.diverged_ = true;
    }
    f.done_[static_cast<std::size_t>(t)] = true;
    ++f.progress_;
  }  // then to uc_link: the scheduler

  std::unique_ptr<char[]> stacks_;
  std::vector<ucontext_t> contexts_;
  std::vector<bool> done_;
  ucontext_t scheduler_{};
  const std::function<void(int)>* body_ = nullptr;
  int current_ = 0;
  std::uint64_t progress_ = 0;
  bool stuck_ = false, diverged_ = false;
};

// A barrier of fibers: the last to arrive opens it.
class Barrier {
 public:
  explicit Barrier(int threads) : threads_(threads) {}
  void arrive_and_wait() {
    Fibers::progressed();
    if (++arrived_ == threads_) {
      arrived_ = 0;
      ++generation_;
      return;
    }
    for (const std::uint64_t generation = generation_; generation_ == generation;) Fibers::yield();
  }

 private:
  int threads_, arrived_ = 0;
  std::uint64_t generation_ = 0;
};
#endif

// A CUDA block of sampling_lanes threads, emulated: every thread holds one EmulatedBlock.
class EmulatedBlock {
 public:
  struct Shared {
    Barrier block{sampling_lanes};
    std::array<std::unique_ptr<Barrier>, warps> warp;
    std::uint64_t exchange[sampling_lanes] = {};
    Shared() {
      for (auto& w : warp) w = std::make_unique<Barrier>(32);
    }
  };

  EmulatedBlock(Shared& shared, int thread) : shared_(&shared), thread_(thread) {}

  int thread() const { return thread_; }
  void barrier() const { shared_->block.arrive_and_wait(); }

  // __shfl_down_sync over a full warp: lane i gets lane i + s's value, its own past lane 31.
  template <class T>
  T shfl_down(T x, int s) const {
    static_assert(sizeof(T) <= sizeof(std::uint64_t));
    std::uint64_t bits = 0;
    std::memcpy(&bits, &x, sizeof x);
    shared_->exchange[thread_] = bits;
    warp().arrive_and_wait();
    T y = x;
    if (thread_ % 32 + s < 32) std::memcpy(&y, &shared_->exchange[thread_ + s], sizeof y);
    warp().arrive_and_wait();  // nobody overwrites a slot before every lane has read it
    return y;
  }

  // Relaxed, as a GPU's atomicAdd: it orders nothing else, so ThreadSanitizer sees no false
  // happens-before edge through it.
  void atomic_add(unsigned long long* p, unsigned long long v) const {
    std::atomic_ref<unsigned long long>(*p).fetch_add(v, std::memory_order_relaxed);
  }

 private:
  Barrier& warp() const { return *shared_->warp[thread_ / 32]; }
  Shared* shared_;
  int thread_;
};

using EmulatedLanes = BlockLanesOn<EmulatedBlock>;

#if !SPECDEC_BLOCK_ON_THREADS
// One set of fibers, whose stacks serve every block of every test case (run_block is a template
// per body: a static there would allocate stacks for each).
Fibers& block_fibers() {
  static Fibers fibers;
  return fibers;
}
#endif

// Runs body(ex, thread) on every thread of one emulated block; false when its threads diverged.
template <class Body>
bool run_block(Body body) {
  EmulatedBlock::Shared shared;
  EmulatedLanes::Storage storage;
#if SPECDEC_BLOCK_ON_THREADS
  std::atomic<bool> diverged{false};
  std::vector<std::thread> threads;
  threads.reserve(sampling_lanes);
  for (int t = 0; t < sampling_lanes; ++t)
    threads.emplace_back([&, t] {
      try {
        EmulatedLanes ex(storage, EmulatedBlock(shared, t));
        body(ex, t);
      } catch (const Diverged&) {
        diverged = true;
      }
    });
  for (std::thread& t : threads) t.join();
  return !diverged;
#else
  return block_fibers().run(sampling_lanes, [&](int t) {
    EmulatedLanes ex(storage, EmulatedBlock(shared, t));
    body(ex, t);
  });
#endif
}

// Every thread's result of a primitive, which must be the same in all of them. An array, not a
// vector: threads write their own elements concurrently, which std::vector<bool>'s packed bits
// would turn into a data race.
template <class T>
struct PerThread {
  std::array<T, sampling_lanes> values{};
  bool uniform() const { return std::all_of(values.begin(), values.end(), [&](const T& v) { return v == values[0]; }); }
};

}  // namespace

#if !SPECDEC_BLOCK_ON_THREADS
// (On threads a diverged block waits out Barrier's 20 s before it gives up.)
TEST_CASE("the emulated block reports threads that miss a barrier or leave early", "[core][lanes]") {
  CHECK(run_block([](EmulatedLanes& ex, int) { ex.sync(); }));
  CHECK_FALSE(run_block([](EmulatedLanes& ex, int t) {
    if (t != 7) ex.sync();
  }));
  CHECK_FALSE(run_block([](EmulatedLanes& ex, int t) {
    ex.sync();
    if (t % 2 == 0) ex.sync();
  }));
  CHECK(run_block([](EmulatedLanes& ex, int) { ex.sync(); }));  // the fibers' stacks serve again
}
#endif

TEST_CASE("the device executor's primitives equal SerialLanes' on an emulated block", "[core][lanes]") {
  std::mt19937_64 rng(81);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int n : {1, 31, 256, 1000, 4099}) {
    std::vector<float> x(static_cast<std::size_t>(n));
    for (float& v : x) v = std::exp(normal(rng));
    std::vector<float> known(sampling_lanes);
    for (float& v : known) v = normal(rng);
    const auto value = [&](int v) { return x[static_cast<std::size_t>(v)]; };
    SerialLanes serial;
    const float sum = serial.sum(n, value);
    const std::vector<float> lanes(serial.lane_sums(n, value), serial.lane_sums(n, value) + sampling_lanes);
    const std::uint64_t count = serial.count(n, [&](int v) { return value(v) > 1.0f; });
    const auto top_of = [&](int v, std::uint64_t best) { return max_key(best, argmax_key(value(v), v)); };
    const std::uint64_t top = serial.max_scan(n, top_of);
    const auto bin_of = [&](int v) {
      return Bin{static_cast<int>(float_bits(value(v)) >> 24), static_cast<std::uint64_t>(v % 7)};
    };
    const std::vector<std::uint64_t> bins(serial.histogram(n, bin_of), serial.histogram(n, bin_of) + 256);

    PerThread<float> sums;
    PerThread<std::uint64_t> counts, tops;
    PerThread<bool> lanes_ok, loaded_ok, bins_ok;
    const bool together = run_block([&](EmulatedLanes& ex, int t) {
      sums.values[t] = ex.sum(n, value);
      const float* l = ex.lane_sums(n, value);
      lanes_ok.values[t] = std::equal(lanes.begin(), lanes.end(), l);
      counts.values[t] = ex.count(n, [&](int v) { return value(v) > 1.0f; });
      tops.values[t] = ex.max_scan(n, top_of);
      const unsigned long long* b = ex.histogram(n, bin_of);
      bins_ok.values[t] = std::equal(bins.begin(), bins.end(), b);
      const float* loaded = ex.load_lanes(known.data());
      loaded_ok.values[t] = std::equal(known.begin(), known.end(), loaded);
      ex.sync();
    });
    INFO("n = " << n);
    REQUIRE(together);
    CHECK(sums.uniform());
    CHECK(sums.values[0] == sum);
    CHECK(lanes_ok.uniform());
    CHECK(lanes_ok.values[0]);
    CHECK(counts.uniform());
    CHECK(counts.values[0] == count);
    CHECK(tops.uniform());
    CHECK(tops.values[0] == top);
    CHECK(bins_ok.uniform());
    CHECK(bins_ok.values[0]);
    CHECK(loaded_ok.uniform());
    CHECK(loaded_ok.values[0]);
  }
}

TEST_CASE("the device executor's walks equal the host's, bit for bit, on an emulated block", "[core][lanes][stochastic]") {
  std::mt19937_64 rng(82);
  const SamplingParams cases[] = {{0.0f}, {1.0f}, {0.8f, 0, 1.0f, 0.05f}, {0.7f, 5, 0.8f, 0.0f}};
  for (int vocab : {20, 700}) {
    for (const SamplingParams& params : cases) {
      // Under ThreadSanitizer only vocab 20 with min-p or top-k/top-p (RowStats' two paths) and
      // RowStats given run, on the same random batches as without it: those hold the race that the
      // barrier at the start of analyse_row's filters prevents (without RowStats, the row's max
      // scan passes a barrier before the filters).
      const bool skipped = under_thread_sanitizer && (vocab != 20 || (params.min_p == 0.0f && params.top_k == 0));
      for (bool with_stats : {false, true}) {
        testing::StochasticData serial = testing::random_stochastic_batch(rng, 6, 16, vocab, true, true, true);
        testing::StochasticData serial_c = testing::random_stochastic_batch(rng, 6, 16, vocab, false, true, true);
        if (skipped || (under_thread_sanitizer && !with_stats)) continue;
        testing::StochasticData block = serial;
        REQUIRE(backend::rejection_verify(backend::host{}, serial.batch(), params) == backend::status::ok);
        const std::vector<RowStats> stats = with_stats ? testing::row_stats(block, params) : std::vector<RowStats>{};
        StochasticVerifyBatch b = block.batch();
        if (with_stats) b.row_stats = stats.data();
        INFO("rejection, vocab " << vocab << ", T " << params.temperature << ", top-k " << params.top_k
                                 << (with_stats ? ", with RowStats" : ""));
        for (int t = 0; t < block.size(); ++t)
          REQUIRE(run_block([&](EmulatedLanes& ex, int) { rejection_verify_in_batch(ex, b, t, params); }));
        CHECK(testing::differing_trees(serial, block) == 0);

        testing::StochasticData block_c = serial_c;
        const ConditionalParams conditional{0.02f, params.top_k, 3};
        REQUIRE(backend::conditional_verify(backend::host{}, serial_c.batch(), conditional, params) == backend::status::ok);
        const std::vector<RowStats> softmax_stats =
            with_stats ? testing::row_stats(block_c, conditional_softmax()) : std::vector<RowStats>{};
        StochasticVerifyBatch c = block_c.batch();
        if (with_stats) c.row_stats = softmax_stats.data();
        INFO("conditional");
        for (int t = 0; t < block_c.size(); ++t)
          REQUIRE(run_block([&](EmulatedLanes& ex, int) { conditional_verify_in_batch(ex, c, t, conditional, params); }));
        CHECK(testing::differing_trees(serial_c, block_c) == 0);
      }
    }
  }
}
