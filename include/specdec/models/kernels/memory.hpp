// The allocator of packed weights and KV caches (PrefaultedAllocator). Host-only.
#pragma once

#include <cstddef>
#include <memory>
#include <new>

#include <specdec/models/kernels/platform.hpp>

namespace specdec::llama {

/// The allocator of packed weights and KV caches: a large block is mapped with its pages in place
/// (MAP_POPULATE: one system call, where touching a fresh page at a time costs a page fault each,
/// most of loading a model of a few MB); anything else, or without mmap, operator new. Blocks of
/// 2 MB or more ask for transparent huge pages first (where the system leaves them to madvise, as
/// Debian does): with 4 KB pages, streaming hundreds of MB of weights and a tree's attention
/// reading each head's keys a few lines at a time, KBs apart, kept missing the TLB.
template <class T>
struct PrefaultedAllocator {
  using value_type = T;
  static constexpr std::size_t mapped_from = std::size_t{1} << 16;  // bytes
  static constexpr std::size_t huge_from = std::size_t{2} << 20;    // bytes
  PrefaultedAllocator() = default;
  template <class U>
  PrefaultedAllocator(const PrefaultedAllocator<U>&) noexcept {}
  T* allocate(std::size_t n) {
#if SPECDEC_HOST_MMAP
    if (n >= mapped_from / sizeof(T) && n <= static_cast<std::size_t>(-1) / sizeof(T)) {
      const std::size_t bytes = n * sizeof(T);
#if defined(MADV_HUGEPAGE)
      if (bytes >= huge_from) {
        void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        ::madvise(p, bytes, MADV_HUGEPAGE);  // advice: without huge pages, the same memory in 4 KB pages
        populate(static_cast<char*>(p), bytes);
        return static_cast<T*>(p);
      }
#endif
      void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      return static_cast<T*>(p);
    }
#endif
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, std::size_t n) noexcept {
#if SPECDEC_HOST_MMAP
    if (n >= mapped_from / sizeof(T)) {
      ::munmap(p, n * sizeof(T));
      return;
    }
#endif
    std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const PrefaultedAllocator<U>&) const noexcept { return true; }

 private:
#if SPECDEC_HOST_MMAP
  // The pages of a fresh mapping in place: one call where the kernel has MADV_POPULATE_WRITE
  // (Linux 5.14), else a write to each 4 KB page (a fault per huge page, or per page without).
  static void populate(char* p, std::size_t bytes) {
#if defined(MADV_POPULATE_WRITE)
    if (::madvise(p, bytes, MADV_POPULATE_WRITE) == 0) return;
#endif
    for (std::size_t at = 0; at < bytes; at += 4096) p[at] = 0;
  }
#endif
};

}  // namespace specdec::llama
