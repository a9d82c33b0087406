// ThreadPool and OwnedPool (models/thread_pool.hpp): a throw in any share becomes one error after
// every share has ended (issue 49: the caller unwound while the workers still ran its functor, and
// a worker's throw ended the process), and copies of a target's pool are pools of their own.
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <stdexcept>
#include <thread>
#include <vector>

#include <specdec/models/thread_pool.hpp>

using specdec::llama::OwnedPool;
using specdec::llama::ThreadPool;

namespace {

// Shares of 8 tasks on 4 threads: two tasks each, the caller's first. Each task that is not
// `failing` sleeps a little, then counts itself, so that a caller that unwound early sees fewer.
struct Shares {
  int failing = -1;
  std::atomic<int> done{0};
  void operator()(int begin, int end) {
    for (int t = begin; t < end; ++t) {
      if (t == failing) throw std::runtime_error("task " + std::to_string(t) + " failed");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      done.fetch_add(1);
    }
  }
};

}  // namespace

TEST_CASE("ThreadPool: a throw in the caller's share comes after every worker's share ended", "[threads]") {
  ThreadPool pool(4);
  Shares shares{.failing = 0};
  CHECK_THROWS_WITH(pool.parallel_for(8, shares), "task 0 failed");
  CHECK(shares.done.load() == 6);  // the three workers' six tasks, none of the caller's
  Shares again;
  pool.parallel_for(8, again);  // the pool goes on
  CHECK(again.done.load() == 8);
}

TEST_CASE("ThreadPool: a throw in a worker's share is rethrown by the caller", "[threads]") {
  ThreadPool pool(4);
  for (const int failing : {2, 5, 7}) {
    Shares shares{.failing = failing};
    CHECK_THROWS_WITH(pool.parallel_for(8, shares), "task " + std::to_string(failing) + " failed");
    // Every share but the failing task's own rest ran: the failing task ends its share.
    CHECK(shares.done.load() == (failing % 2 == 0 ? 6 : 7));
  }
  Shares again;
  pool.parallel_for(8, again);
  CHECK(again.done.load() == 8);
}

TEST_CASE("ThreadPool: several throws in one call are one error, the caller's first", "[threads]") {
  ThreadPool pool(2);
  auto all_fail = [](int begin, int) { throw std::runtime_error("share at " + std::to_string(begin)); };
  CHECK_THROWS_WITH(pool.parallel_for(4, all_fail), "share at 0");
  auto workers_fail = [](int begin, int) {
    if (begin > 0) throw std::runtime_error("worker share");
  };
  CHECK_THROWS_WITH(pool.parallel_for(4, workers_fail), "worker share");
}

TEST_CASE("OwnedPool: a copy has a pool of its own of the same size", "[threads]") {
  const OwnedPool one(1);
  CHECK(one.get() == nullptr);
  CHECK(one.threads() == 1);
  const OwnedPool four(4);
  const OwnedPool copy(four);
  REQUIRE(copy.get() != nullptr);
  CHECK(copy.get() != four.get());
  CHECK(copy.threads() == 4);
  OwnedPool assigned(1);
  assigned = four;
  REQUIRE(assigned.get() != nullptr);
  CHECK(assigned.get() != four.get());
  CHECK(assigned.threads() == 4);
  // The copies run at once from two threads, each on its own workers.
  std::atomic<int> sum{0};
  auto add = [&sum](int begin, int end) { sum.fetch_add(end - begin); };
  std::thread other([&] {
    for (int i = 0; i < 200; ++i) copy.get()->parallel_for(64, add);
  });
  for (int i = 0; i < 200; ++i) four.get()->parallel_for(64, add);
  other.join();
  CHECK(sum.load() == 2 * 200 * 64);
}

TEST_CASE("ThreadPool: a thread count outside [1, 256] is refused with the value", "[threads][errors]") {
  CHECK_THROWS_WITH(ThreadPool(0), "threads must be in [1, 256], got 0");
  CHECK_THROWS_WITH(ThreadPool(257), "threads must be in [1, 256], got 257");
}
