// The host forward's threads: ThreadPool, a fixed set of persistent threads that run
// parallel_for's static shares, and OwnedPool, a target's pool that its copies do not share.
// Host-only.
#pragma once

#include <atomic>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include <specdec/error.hpp>

namespace specdec::llama {

/// Tells the core that this thread is spinning (x86 PAUSE, Arm YIELD): an SMT sibling gets the
/// core's resources meanwhile, and leaving the loop does not flush the pipeline.
inline void spin_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}

/// A fixed set of threads that run parallel_for's shares: the caller runs share 0, threads()
/// - 1 persistent workers the rest. Shares are static ranges, so which thread computes an
/// element never changes its value (see the reduction order in host_kernels.hpp). One
/// parallel_for at a time: a pool is not shared by threads that call it concurrently.
class ThreadPool {
 public:
  static constexpr int max_threads = 256;

  explicit ThreadPool(int threads) : threads_(threads) {
    if (threads < 1 || threads > max_threads)
      throw error("threads must be in [1, " + std::to_string(max_threads) + "], got " + std::to_string(threads));
    for (int w = 1; w < threads; ++w) workers_.emplace_back([this, w] { work(w); });
  }
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;
  ~ThreadPool() {
    stop_ = true;
    generation_.fetch_add(1);
    generation_.notify_all();
    for (auto& t : workers_) t.join();
  }

  int threads() const { return threads_; }

  /// Calls f(begin, end) on a split of [0, tasks) into threads() contiguous ranges. If f throws
  /// in any share, parallel_for returns only after every share has ended (no thread still runs
  /// f), then throws the caller's exception, or else the first a worker caught.
  template <class F>
  void parallel_for(int tasks, F&& f) {
    if (threads_ == 1 || tasks <= 1) {
      if (tasks > 0) f(0, tasks);
      return;
    }
    // Every worker takes part (an empty range when tasks < threads), so no worker can still be
    // reading these fields when the next call writes them.
    job_ = [](void* c, int b, int e) { (*static_cast<std::remove_reference_t<F>*>(c))(b, e); };
    context_ = &f;
    tasks_ = tasks;
    worker_failure_ = nullptr;
    pending_.store(threads_ - 1);
    generation_.fetch_add(1);
    generation_.notify_all();
    std::exception_ptr caller_failure;
    try {
      f(share(0), share(1));
    } catch (...) {
      caller_failure = std::current_exception();
    }
    for (int spin = 0; pending_.load() != 0; ++spin) {
      if (spin > 1000) std::this_thread::yield();
      else spin_pause();
    }
    // A worker wrote worker_failure_ before its pending_ decrement, which the load above saw.
    if (caller_failure) std::rethrow_exception(caller_failure);
    if (worker_failure_) std::rethrow_exception(worker_failure_);
  }

 private:
  int share(int w) const { return static_cast<int>(static_cast<long>(tasks_) * w / threads_); }

  void work(int w) {
    unsigned seen = 0;
    for (;;) {
      for (int spin = 0; generation_.load() == seen && spin < 20000; ++spin) spin_pause();
      generation_.wait(seen);
      seen = generation_.load();
      if (stop_) return;
      try {
        job_(context_, share(w), share(w + 1));
      } catch (...) {  // a throw must not leave the thread (std::terminate): the caller rethrows it
        const std::lock_guard<std::mutex> lock(failure_mutex_);
        if (!worker_failure_) worker_failure_ = std::current_exception();
      }
      pending_.fetch_sub(1);
    }
  }

  int threads_;
  std::vector<std::thread> workers_;
  std::atomic<unsigned> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  void (*job_)(void*, int, int) = nullptr;
  void* context_ = nullptr;
  int tasks_ = 0;
  std::mutex failure_mutex_;
  std::exception_ptr worker_failure_;
};

/// A target's own ThreadPool (none for one thread). A copy of the target gets a pool of its own
/// of the same size, so copies can decode on different threads at once: a shared pool would run
/// two parallel_for calls over the same workers.
class OwnedPool {
 public:
  explicit OwnedPool(int threads) : pool_(threads > 1 ? std::make_unique<ThreadPool>(threads) : nullptr) {}
  OwnedPool(const OwnedPool& other) : OwnedPool(other.threads()) {}
  OwnedPool& operator=(const OwnedPool& other) {
    if (this != &other) pool_ = other.pool_ ? std::make_unique<ThreadPool>(other.threads()) : nullptr;
    return *this;
  }
  OwnedPool(OwnedPool&&) noexcept = default;
  OwnedPool& operator=(OwnedPool&&) noexcept = default;

  /// Null for one thread (the callers then run every share themselves).
  ThreadPool* get() const { return pool_.get(); }
  int threads() const { return pool_ ? pool_->threads() : 1; }

 private:
  std::unique_ptr<ThreadPool> pool_;
};

}  // namespace specdec::llama
