// The host's executor of grid kernels (kernels/grid.hpp): backend::launch_grid(host, shape, f)
// runs f over the whole grid on the calling thread, block after block (x fastest, then y), each
// block's threads as fibers that switch at barriers, so that a kernel written for CUDA gives the
// same bits on the CPU (kernels/grid.cuh is the device executor; the orders below are its).
//
// Scheduling: a block's fibers run round robin, each until it waits at a barrier (sync(), a
// reduction, warp_sums, mma_bf16) or returns, then switches to the next one that can run. When none can
// (a full round finds every thread waiting at a barrier that has not opened) the threads
// diverged (some wait at a barrier the others never reach), reported as a specdec::error. A
// thread's exception stops the launch and leaves launch_grid. Either way the block's other fibers
// are abandoned where they wait, never unwound: a kernel body must hold only trivially
// destructible locals across a barrier (device code does anyway).
//
// Fibers switch with a few instructions of assembly on x86-64 (glibc's swapcontext makes a
// sigprocmask system call per switch, far slower than the switch itself); elsewhere, and under
// sanitizers, with ucontext (under AddressSanitizer with its fiber annotations). Stacks (64 KiB,
// 256 KiB under ASan, with a guard page) are reused by every launch on the thread.
//
// Compiled once or in every translation unit, as the host kernels are (models/kernels/isa.hpp):
// by default the executor's functions are inline, compiled wherever a grid runs. A program may
// instead define SPECDEC_EMULATED_KERNELS_EXTERN in all its units, which then only declare them
// (and the device Llama's launches: testing/emulated_llama.hpp), and link one unit that defines
// SPECDEC_EMULATED_KERNELS_IMPLEMENTATION and includes testing/emulated_llama.hpp (CMake, in this
// project's build: specdec::emulated_kernels, src/emulated_kernels.cpp), optimised whatever the
// program's own level: the emulation then runs at the library's speed in a program built for
// debugging (a launch of the 32000-row classifier's product: 52 ms at -O2, over twice that at -Og).
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include <sys/mman.h>
#include <unistd.h>

#include <specdec/backend.hpp>
#include <specdec/error.hpp>
#include <specdec/kernels/grid.hpp>

#if defined(__SANITIZE_ADDRESS__)
#define SPECDEC_GRID_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SPECDEC_GRID_ASAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define SPECDEC_GRID_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SPECDEC_GRID_TSAN 1
#endif
#endif

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__)) && !defined(SPECDEC_GRID_ASAN) && \
    !defined(SPECDEC_GRID_TSAN)
#define SPECDEC_GRID_ASM_SWITCH 1
#else
#include <ucontext.h>
#endif
#if defined(SPECDEC_GRID_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

#if defined(SPECDEC_EMULATED_KERNELS_EXTERN) && !defined(SPECDEC_EMULATED_KERNELS_IMPLEMENTATION)
#define SPECDEC_GRID_INLINE
#define SPECDEC_GRID_DEFINED 0
#elif defined(SPECDEC_EMULATED_KERNELS_IMPLEMENTATION)
#define SPECDEC_GRID_INLINE
#define SPECDEC_GRID_DEFINED 1
#else
#define SPECDEC_GRID_INLINE inline
#define SPECDEC_GRID_DEFINED 1
#endif

namespace specdec::testing {

class EmulatedThread;

namespace grid_detail {

#if defined(SPECDEC_GRID_ASAN)
inline constexpr std::size_t stack_bytes = 256 * 1024;  // instrumented frames are several times larger
#else
inline constexpr std::size_t stack_bytes = 64 * 1024;
#endif
inline constexpr int max_threads = 1024;

struct Fiber;
[[noreturn]] SPECDEC_GRID_INLINE void fiber_main(Fiber* fiber);

/// A fiber's stack: mapped once, with an inaccessible page below it so that an overflow faults
/// instead of writing over another fiber's stack.
class Stack {
 public:
  explicit Stack(int index) {
    guard_ = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
    void* p = mmap(nullptr, guard_ + stack_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    map_ = static_cast<unsigned char*>(p);
    mprotect(map_, guard_, PROT_NONE);
    // Mappings are whole pages apart: without an offset the tops of all the fibers' stacks, where
    // each switch pushes and pops, would share the same few cache sets (and the pops of a switch
    // would alias its pushes by address modulo 4 KiB), which made switches among 32 fibers half
    // again as slow. Seven lines apart, neighbours' top frames fall in different sets.
    size_ = stack_bytes - 64 * static_cast<std::size_t>(index * 7 % 64);
  }
  ~Stack() { munmap(map_, guard_ + stack_bytes); }
  Stack(const Stack&) = delete;
  Stack& operator=(const Stack&) = delete;

  unsigned char* bottom() const { return map_ + guard_; }
  std::size_t size() const { return size_; }  // the bytes a fiber uses, from bottom()

 private:
  unsigned char* map_ = nullptr;
  std::size_t guard_ = 0, size_ = 0;
};

#if defined(SPECDEC_GRID_ASM_SWITCH)

// Saves the callee-saved registers and the floating-point control words (MXCSR, x87 CW; the
// SysV ABI makes them callee-saved too) on the current stack, stores the stack pointer to *from,
// then restores the same from the stack `to` and returns into it. Naked: the body is the whole
// function, so the compiler sees an ordinary call that preserves what the ABI says a call does.
[[gnu::naked, gnu::noinline]] inline void switch_stack(void** /*from*/, void* /*to*/) {
  asm("pushq %rbp\n\t"
      "pushq %rbx\n\t"
      "pushq %r12\n\t"
      "pushq %r13\n\t"
      "pushq %r14\n\t"
      "pushq %r15\n\t"
      "subq $16, %rsp\n\t"
      "stmxcsr 8(%rsp)\n\t"
      "fnstcw (%rsp)\n\t"
      "movq %rsp, (%rdi)\n\t"
      "movq %rsi, %rsp\n\t"
      "ldmxcsr 8(%rsp)\n\t"
      "fldcw (%rsp)\n\t"
      "addq $16, %rsp\n\t"
      "popq %r15\n\t"
      "popq %r14\n\t"
      "popq %r13\n\t"
      "popq %r12\n\t"
      "popq %rbx\n\t"
      "popq %rbp\n\t"
      "ret");
}

// Where a new fiber's first switch returns to: make_context leaves the fiber in r12 and the
// entry in r13. The stack is 16-byte aligned here, as the call needs.
[[gnu::naked, gnu::noinline]] inline void fiber_start() {
  asm("movq %r12, %rdi\n\t"
      "callq *%r13\n\t"
      "ud2");
}

struct Context {
  void* sp = nullptr;
};

/// Control words the fibers start with: the launching thread's.
struct FpControl {
  std::uint32_t mxcsr = 0;
  std::uint16_t x87 = 0;
  static FpControl current() {
    FpControl c;
    asm volatile("stmxcsr %0" : "=m"(c.mxcsr));
    asm volatile("fnstcw %0" : "=m"(c.x87));
    return c;
  }
};

/// Makes `c` start fiber_main(fiber) on `stack` at its first switch: the frame switch_stack
/// pops (control words, r15, r14, r13 = entry, r12 = fiber, rbx, rbp = 0 to end frame chains,
/// return address = fiber_start), placed so that rsp is 16-byte aligned after the ret.
inline void make_context(Context& c, const Stack& stack, Fiber* fiber, const FpControl& fp) {
  const auto top = reinterpret_cast<std::uintptr_t>(stack.bottom() + stack.size()) & ~std::uintptr_t{15};
  auto* frame = reinterpret_cast<std::uintptr_t*>(top - 88);
  // Word by word (a memset of the 88 bytes became a `rep stos`, a third of a short kernel's launch).
  frame[0] = fp.x87;  // fldcw reads the low 16 bits, ldmxcsr the 32 at byte 8 (little-endian)
  frame[1] = fp.mxcsr;
  frame[2] = frame[3] = 0;  // r15, r14
  frame[4] = reinterpret_cast<std::uintptr_t>(&fiber_main);
  frame[5] = reinterpret_cast<std::uintptr_t>(fiber);
  frame[6] = frame[7] = 0;  // rbx, rbp
  frame[8] = reinterpret_cast<std::uintptr_t>(&fiber_start);
  frame[9] = frame[10] = 0;
  c.sp = frame;
}

inline void jump(Context& from, const Context& to) { switch_stack(&from.sp, to.sp); }
/// Brings the top of a suspended fiber's stack (the frame switch_stack pops and its caller's) into
/// the cache: 256 fibers' stacks do not fit in L1, and the order they run in is known.
inline void prefetch(const Context& c) {
  for (int line = 0; line < 4; ++line) __builtin_prefetch(static_cast<const char*>(c.sp) + 64 * line);
}
/// A fiber's first act (nothing to tell anyone here).
inline void entered(Context*) {}
/// A finished fiber's last switch.
[[noreturn]] inline void leave(Context& from, const Context& to) {
  jump(from, to);
  __builtin_unreachable();
}

#else  // ucontext

struct Context {
  ucontext_t uc{};
#if defined(SPECDEC_GRID_ASAN)
  const void* stack = nullptr;  // the stack it runs on, for ASan's switch annotations
  std::size_t stack_size = 0;
#endif
};

struct FpControl {
  static FpControl current() { return {}; }  // swapcontext carries the control words itself
};

inline void prefetch(const Context&) {}  // swapcontext costs far more than a cache miss

/// makecontext passes int arguments only: the fiber's pointer goes in two halves.
inline void ucontext_main(int high, int low) {
  const auto bits = (static_cast<std::uintptr_t>(static_cast<unsigned>(high)) << 16 << 16) |
                    static_cast<std::uintptr_t>(static_cast<unsigned>(low));
  fiber_main(reinterpret_cast<Fiber*>(bits));
}

inline void make_context(Context& c, const Stack& stack, Fiber* fiber, const FpControl&) {
  // getcontext once (a system call); every fiber starts from a copy.
  static const ucontext_t initial = [] {
    ucontext_t u{};
    getcontext(&u);
    return u;
  }();
  c.uc = initial;
  c.uc.uc_stack.ss_sp = stack.bottom();
  c.uc.uc_stack.ss_size = stack.size();
  c.uc.uc_link = nullptr;
  const auto bits = reinterpret_cast<std::uintptr_t>(fiber);
  makecontext(&c.uc, reinterpret_cast<void (*)()>(&ucontext_main), 2, static_cast<int>(bits >> 16 >> 16),
              static_cast<int>(bits & 0xffffffffu));
#if defined(SPECDEC_GRID_ASAN)
  c.stack = stack.bottom();
  c.stack_size = stack.size();
  // The last fiber on this stack left its frames poisoned: fiber_main never returns, and an
  // abandoned fiber's frames stay where they were.
  ASAN_UNPOISON_MEMORY_REGION(stack.bottom(), stack.size());
#endif
}

// Under ASan every switch is announced (start) and confirmed on the other side (finish), so that
// it knows which stack is current (exceptions thrown in a fiber check it) and keeps each fiber's
// fake stack. (Its swapcontext interceptor clears the shadow of the whole stack switched to,
// which costs about a microsecond a switch; only under ASan.)
inline void jump(Context& from, const Context& to) {
#if defined(SPECDEC_GRID_ASAN)
  void* fake_stack = nullptr;
  __sanitizer_start_switch_fiber(&fake_stack, to.stack, to.stack_size);
#endif
  swapcontext(&from.uc, &to.uc);
#if defined(SPECDEC_GRID_ASAN)
  __sanitizer_finish_switch_fiber(fake_stack, nullptr, nullptr);
#endif
}

/// A fiber's first act: under ASan, finish the switch, and learn the stack it came from when
/// that is the scheduler's (`scheduler` not null).
inline void entered([[maybe_unused]] Context* scheduler) {
#if defined(SPECDEC_GRID_ASAN)
  if (scheduler) __sanitizer_finish_switch_fiber(nullptr, &scheduler->stack, &scheduler->stack_size);
  else __sanitizer_finish_switch_fiber(nullptr, nullptr, nullptr);
#endif
}

/// A finished fiber's last switch (its fake stack, if any, is released).
[[noreturn]] inline void leave(Context& from, const Context& to) {
#if defined(SPECDEC_GRID_ASAN)
  __sanitizer_start_switch_fiber(nullptr, to.stack, to.stack_size);
#endif
  swapcontext(&from.uc, &to.uc);
  __builtin_unreachable();
}

#endif

/// Out of line, so that the message's strings do not enlarge the frames of the barriers, which
/// every waiting fiber keeps in the cache.
[[noreturn, gnu::cold, gnu::noinline]] inline void refuse_block(const char* need, int threads) {
  throw error(std::string("emulated grid: ") + need + ", not a block of " + std::to_string(threads) + " threads");
}

class Runtime;

struct Fiber {
  Context context;
  Runtime* runtime = nullptr;
  int thread = 0;
  bool done = false;
  const std::uint64_t* gate = nullptr;  // the generation of the barrier it waits at
  std::uint64_t waited = 0;             // ... while it still has this value
};

/// A warp's barrier: the lanes' arrays, so that the last lane to arrive writes every lane's sums
/// (or MMA results) in place. Those arrays live on the waiting lanes' stacks (or wherever their
/// caller keeps them), which stay put while they wait, so no lane can clobber another's results.
struct Warp {
  std::uint64_t generation = 0;
  int arrived = 0;
  int n = 0;  // warp_sums: the arrays' length, set by the first lane to arrive; mma_bf16: -1
  float* lanes[kernels::warp_threads] = {};
  const std::uint32_t* a[kernels::warp_threads] = {};  // mma_bf16's fragments
  const std::uint32_t* b[kernels::warp_threads] = {};
};

enum class BarrierKind { sync, sum, max };

/// The executor's state on one thread: the block being run, its fibers and their stacks (reused
/// by every launch on the thread).
class Runtime {
 public:
  using Body = void (*)(const void* f, const EmulatedThread& th);

  static Runtime& local() {
    thread_local Runtime runtime;
    return runtime;
  }

  void launch(const kernels::LaunchShape& shape, Body body, const void* f);

  // The thread interface (EmulatedThread forwards here).
  int block_x() const { return block_x_; }
  int block_y() const { return block_y_; }
  int blocks_x() const { return blocks_x_; }
  int threads() const { return threads_; }
  unsigned char* shared() const { return shared_; }
  float barrier(int thread, BarrierKind kind, float* part);
  void warp_sums(int thread, float* v, int n);
  void warp_mma(int thread, float* d, const std::uint32_t* a, const std::uint32_t* b);

 private:
  /// Counts `thread` in at its warp's barrier (n: warp_sums' length, -1 for mma_bf16); true for
  /// the last lane, which then does the warp's work and calls open(). A lane that arrives at
  /// another kind of warp barrier than the others waits for good: divergence (see barrier()).
  bool arrive(Warp& w, int thread, int n);
  void open(Warp& w) {
    w.arrived = 0;
    ++w.generation;
  }
  friend void fiber_main(Fiber* fiber);

  void run_block();
  Context& next(int thread);
  void wait(int thread, const std::uint64_t& generation);
  void complete_barrier();
  template <class Op>
  float tree(float* part, Op op) const;
  [[noreturn]] void diverged() const;

  Body body_ = nullptr;
  const void* f_ = nullptr;
  int block_x_ = 0, block_y_ = 0, blocks_x_ = 0, threads_ = 0;
  std::size_t shared_bytes_ = 0;
  unsigned char* shared_ = nullptr;
  std::vector<unsigned char> shared_storage_;
  std::deque<Stack> stacks_;  // a deque: a Stack owns its mapping and cannot move
  std::vector<Fiber> fibers_;
  std::vector<Warp> warps_;
  Context scheduler_;
  FpControl fp_;
  bool running_ = false;
  std::exception_ptr error_;

  // The block's barrier. `live`: threads that have not returned (they count as arrived).
  int live_ = 0, arrived_ = 0;
  std::uint64_t generation_ = 0;
  BarrierKind kind_ = BarrierKind::sync;
  float* part_ = nullptr;
  float result_ = 0.0f;  // a reduction's result: part[0] may be written again before all have read it
};

}  // namespace grid_detail

/// The `Thread` of a grid kernel on the host (kernels/grid.hpp says what each member promises).
class EmulatedThread {
 public:
  int block_x() const { return runtime_->block_x(); }
  int block_y() const { return runtime_->block_y(); }
  int blocks_x() const { return runtime_->blocks_x(); }
  int thread() const { return thread_; }
  int threads() const { return runtime_->threads(); }
  unsigned char* shared() const { return runtime_->shared(); }
  void sync() const { runtime_->barrier(thread_, grid_detail::BarrierKind::sync, nullptr); }
  template <int N>
  void warp_sums(float (&v)[N]) const {
    runtime_->warp_sums(thread_, v, N);
  }
  void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) const {
    runtime_->warp_mma(thread_, d, a, b);
  }
  float block_sum(float* part) const { return runtime_->barrier(thread_, grid_detail::BarrierKind::sum, part); }
  float block_max(float* part) const { return runtime_->barrier(thread_, grid_detail::BarrierKind::max, part); }

 private:
  friend void grid_detail::fiber_main(grid_detail::Fiber* fiber);
  EmulatedThread(grid_detail::Runtime* runtime, int thread) : runtime_(runtime), thread_(thread) {}

  grid_detail::Runtime* runtime_;
  int thread_;
};

namespace grid_detail {

#if SPECDEC_GRID_DEFINED

/// A fiber's whole life: the thread's body, its exception kept for launch_grid, then a switch,
/// for good, to the next fiber that can run (or to the scheduler).
[[noreturn]] SPECDEC_GRID_INLINE void fiber_main(Fiber* fiber) {
  Runtime& rt = *fiber->runtime;
  // Thread 0 is started by the scheduler (run_block), every other thread by a fiber.
  entered(fiber->thread == 0 ? &rt.scheduler_ : nullptr);
  try {
    rt.body_(rt.f_, EmulatedThread(&rt, fiber->thread));
  } catch (...) {
    rt.error_ = std::current_exception();
  }
  fiber->done = true;
  // A returned thread counts as arrived: it may be the one the others waited for.
  --rt.live_;
  if (rt.arrived_ > 0 && rt.arrived_ == rt.live_) rt.complete_barrier();
  leave(fiber->context, rt.next(fiber->thread));
}

SPECDEC_GRID_INLINE void Runtime::launch(const kernels::LaunchShape& shape, Body body, const void* f) {
  if (shape.threads < 1 || shape.threads > max_threads)
    throw error("emulated grid: a block of " + std::to_string(shape.threads) + " threads (1 to " +
                std::to_string(max_threads) + " on a GPU)");
  if (shape.blocks_x < 1 || shape.blocks_y < 1)
    throw error("emulated grid: a grid of " + std::to_string(shape.blocks_x) + " x " + std::to_string(shape.blocks_y) +
                " blocks (a CUDA launch needs at least one along each)");
  if (running_) throw error("emulated grid: launch_grid called from inside a grid kernel");
  struct Running {
    bool& flag;
    explicit Running(bool& f) : flag(f) { flag = true; }
    ~Running() { flag = false; }
  } running(running_);

  body_ = body;
  f_ = f;
  threads_ = shape.threads;
  blocks_x_ = static_cast<int>(shape.blocks_x);
  shared_bytes_ = shape.shared_bytes;
  shared_storage_.resize(shared_bytes_ + 15);
  shared_ = reinterpret_cast<unsigned char*>((reinterpret_cast<std::uintptr_t>(shared_storage_.data()) + 15) &
                                             ~std::uintptr_t{15});
  while (stacks_.size() < static_cast<std::size_t>(threads_)) stacks_.emplace_back(static_cast<int>(stacks_.size()));
  // Fibers point into fibers_, so it is resized only here, while no fiber is suspended in it.
  if (fibers_.size() < static_cast<std::size_t>(threads_)) fibers_.resize(static_cast<std::size_t>(threads_));
  warps_.assign(static_cast<std::size_t>((threads_ + kernels::warp_threads - 1) / kernels::warp_threads), Warp{});
  fp_ = FpControl::current();
  for (unsigned y = 0; y < shape.blocks_y; ++y)
    for (unsigned x = 0; x < shape.blocks_x; ++x) {
      block_x_ = static_cast<int>(x);
      block_y_ = static_cast<int>(y);
      run_block();
    }
}

SPECDEC_GRID_INLINE void Runtime::run_block() {
  // Unwritten shared memory reads as a recognisable pattern, not as the last block's data.
  std::memset(shared_, 0xA5, shared_bytes_);
  live_ = threads_;
  arrived_ = 0;
  for (Warp& w : warps_) w.arrived = 0;
  for (int t = 0; t < threads_; ++t) {
    Fiber& fiber = fibers_[static_cast<std::size_t>(t)];
    fiber.runtime = this;
    fiber.thread = t;
    fiber.done = false;
    fiber.gate = nullptr;
    make_context(fiber.context, stacks_[static_cast<std::size_t>(t)], &fiber, fp_);
  }
  // The fibers pass control among themselves and come back here when all have returned, one
  // has thrown, or none can run.
  jump(scheduler_, fibers_[0].context);
  if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  if (live_ > 0) diverged();
}

/// Where a fiber that waits or returns switches to: the next fiber after `thread` that can run,
/// round robin, or the scheduler when there is none or a thread has thrown. Switching straight
/// from fiber to fiber takes one switch per wait instead of two, and every fiber of a block
/// resumes at the same few places, which the CPU's return prediction then gets right.
SPECDEC_GRID_INLINE Context& Runtime::next(int thread) {
  if (!error_)
    for (int k = 1; k < threads_; ++k) {
      int t = thread + k;
      if (t >= threads_) t -= threads_;
      Fiber& fiber = fibers_[static_cast<std::size_t>(t)];
      if (!fiber.done && (!fiber.gate || *fiber.gate != fiber.waited)) {
        prefetch(fibers_[static_cast<std::size_t>(t + 1 < threads_ ? t + 1 : 0)].context);  // likely the one after
        return fiber.context;
      }
    }
  return scheduler_;
}

SPECDEC_GRID_INLINE void Runtime::diverged() const {
  throw error("emulated grid: the threads of block (" + std::to_string(block_x_) + ", " + std::to_string(block_y_) +
              ") diverged at a barrier (some wait at sync(), a block reduction, warp_sums or mma_bf16 that others never reach)");
}

/// Suspends the thread until `generation` changes.
SPECDEC_GRID_INLINE void Runtime::wait(int thread, const std::uint64_t& generation) {
  Fiber& fiber = fibers_[static_cast<std::size_t>(thread)];
  fiber.gate = &generation;
  fiber.waited = generation;
  jump(fiber.context, next(thread));
}

SPECDEC_GRID_INLINE float Runtime::barrier(int thread, BarrierKind kind, float* part) {
  if (kind != BarrierKind::sync && (threads_ & (threads_ - 1)) != 0)
    refuse_block("block_sum/block_max need a power-of-two block", threads_);
  if (arrived_ == 0) {
    kind_ = kind;
    part_ = part;
  } else if (kind != kind_ || part != part_) {
    // Another barrier than the one the others wait at: it never opens (this thread is live and
    // never counted), which the scheduler reports as divergence.
    wait(thread, generation_);
  }
  if (++arrived_ == live_) complete_barrier();
  else wait(thread, generation_);
  return result_;
}

/// Opens the block's barrier; a reduction's tree is computed here once, as the device's threads
/// compute it step by step (a returned thread takes no part in its steps).
SPECDEC_GRID_INLINE void Runtime::complete_barrier() {
  if (kind_ == BarrierKind::sum) result_ = tree(part_, [](float a, float b) { return a + b; });
  else if (kind_ == BarrierKind::max) result_ = tree(part_, [](float a, float b) { return std::fmax(a, b); });
  arrived_ = 0;
  ++generation_;
}

template <class Op>
float Runtime::tree(float* part, Op op) const {
  const bool everyone = live_ == threads_;
  for (int s = threads_ / 2; s >= 1; s /= 2)
    for (int i = 0; i < s; ++i)
      if (everyone || !fibers_[static_cast<std::size_t>(i)].done) part[i] = op(part[i], part[i + s]);
  return part[0];
}

SPECDEC_GRID_INLINE bool Runtime::arrive(Warp& w, int thread, int n) {
  if (w.arrived == 0) w.n = n;
  else if (n != w.n) wait(thread, w.generation);  // never opens: see barrier()
  if (++w.arrived == kernels::warp_threads) return true;
  wait(thread, w.generation);
  return false;
}

SPECDEC_GRID_INLINE void Runtime::warp_sums(int thread, float* v, int n) {
  constexpr int lanes = kernels::warp_threads;
  if (threads_ % lanes != 0) refuse_block("warp_sums needs whole warps", threads_);
  Warp& w = warps_[static_cast<std::size_t>(thread / lanes)];
  w.lanes[thread % lanes] = v;
  if (!arrive(w, thread, n)) return;
  // The last lane: the butterfly v += shfl_xor(v, m), m = 16, ..., 1, of every element. After the
  // stage of m, lanes l and l ^ m hold the same sum (addition is commutative, bit for bit), so a
  // lane's value depends on l mod m only and lane 0's halving tree is every lane's result.
  // In place, element by element within each step (the lanes' arrays are all overwritten with
  // lane 0's at the end): contiguous inner loops the compiler can vectorise.
  const int count = w.n;
  for (int m = lanes / 2; m >= 1; m /= 2)
    for (int l = 0; l < m; ++l) {
      float* to = w.lanes[l];
      const float* from = w.lanes[l + m];
      int i = 0;
      for (; i + 4 <= count; i += 4) {  // four at a time, through locals: one vector add
        float a[4], b[4];
        std::memcpy(a, to + i, sizeof a);
        std::memcpy(b, from + i, sizeof b);
        for (int j = 0; j < 4; ++j) a[j] = a[j] + b[j];
        std::memcpy(to + i, a, sizeof a);
      }
      for (; i < count; ++i) to[i] = to[i] + from[i];
    }
  for (int l = 1; l < lanes; ++l) std::memcpy(w.lanes[l], w.lanes[0], static_cast<std::size_t>(count) * sizeof(float));
  open(w);
}

/// The last lane computes the warp's m16n8k16 product from every lane's fragments: each D
/// element is fmaf over k = 0, ..., 15 in increasing order, from its C (bf16 products are exact in
/// fp32, so only the order of the additions differs from a tensor core's).
SPECDEC_GRID_INLINE void Runtime::warp_mma(int thread, float* d, const std::uint32_t* a, const std::uint32_t* b) {
  using namespace kernels;
  constexpr int lanes = warp_threads;
  if (threads_ % lanes != 0) refuse_block("mma_bf16 needs whole warps", threads_);
  Warp& w = warps_[static_cast<std::size_t>(thread / lanes)];
  w.lanes[thread % lanes] = d;
  w.a[thread % lanes] = a;
  w.b[thread % lanes] = b;
  if (!arrive(w, thread, -1)) return;
  const auto half = [](std::uint32_t word, int h) {
    const std::uint32_t bits = (h ? word >> 16 : word & 0xffffu) << 16;
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  };
  float A[16][16], B[16][8], D[16][8];
  for (int l = 0; l < lanes; ++l) {
    for (int r = 0; r < 4; ++r) {
      for (int h = 0; h < 2; ++h) A[mma_a_row(l, r)][mma_a_col(l, r, h)] = half(w.a[l][r], h);
      D[mma_d_row(l, r)][mma_d_col(l, r)] = w.lanes[l][r];
    }
    for (int r = 0; r < 2; ++r)
      for (int h = 0; h < 2; ++h) B[mma_b_k(l, r, h)][mma_b_col(l)] = half(w.b[l][r], h);
  }
  for (int i = 0; i < 16; ++i)
    for (int j = 0; j < 8; ++j)
      for (int k = 0; k < 16; ++k) D[i][j] = std::fma(A[i][k], B[k][j], D[i][j]);
  for (int l = 0; l < lanes; ++l)
    for (int r = 0; r < 4; ++r) w.lanes[l][r] = D[mma_d_row(l, r)][mma_d_col(l, r)];
  open(w);
}

#endif  // SPECDEC_GRID_DEFINED

}  // namespace grid_detail
}  // namespace specdec::testing

namespace specdec::backend {

/// Runs f over the whole grid on the calling thread, block after block (x fastest, then y); each
/// block's threads as fibers. Throws what a thread threw (the first), or specdec::error for
/// threads that diverge at a barrier, for a block of threads outside [1, 1024] or a grid without
/// blocks; block_sum/block_max in a block whose size is not a power of two, and warp_sums in one
/// that is not whole warps, throw from the thread that calls them.
template <class F>
void launch_grid(host, const kernels::LaunchShape& shape, const F& f) {
  testing::grid_detail::Runtime::local().launch(
      shape, [](const void* kernel, const testing::EmulatedThread& th) { (*static_cast<const F*>(kernel))(th); },
      &f);
}

/// Launches on the host report their errors by throwing.
inline status launch_status(host) { return status::ok; }

}  // namespace specdec::backend
