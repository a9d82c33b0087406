// What the host kernels can use where they are compiled: mmap (memory.hpp), the x86-64 ISA
// paths (SPECDEC_HOST_ISA_X86: AVX2 and AVX-512 entry points, chosen at run time in isa.hpp),
// and AMX on Linux (SPECDEC_HOST_AMX, amx.hpp); and whether this process may run AMX
// (bf16_unavailable). Defining SPECDEC_HOST_ISA_PORTABLE (CMake: -DSPECDEC_HOST_ISA=portable)
// compiles only the portable path. Host-only.
#pragma once

#include <string>

#if __has_include(<sys/mman.h>)
#include <sys/mman.h>
#define SPECDEC_HOST_MMAP 1
#ifndef MAP_POPULATE
#define MAP_POPULATE 0
#endif
#else
#define SPECDEC_HOST_MMAP 0
#endif

// In a .cu file, nvcc's front end reads the kernels too: it does not know the host compiler's
// `#pragma GCC unroll` (its warning 1675) and warns of loops that a template's zero-trip
// instantiation never runs (128). The kernel headers hush both for their own lines.
#if defined(__NVCC__)
#define SPECDEC_HOST_KERNELS_BEGIN _Pragma("nv_diagnostic push") _Pragma("nv_diag_suppress 1675, 128")
#define SPECDEC_HOST_KERNELS_END _Pragma("nv_diagnostic pop")
#else
#define SPECDEC_HOST_KERNELS_BEGIN
#define SPECDEC_HOST_KERNELS_END
#endif

#if !defined(SPECDEC_HOST_ISA_PORTABLE) && defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define SPECDEC_HOST_ISA_X86 1
#include <immintrin.h>
#if defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define SPECDEC_HOST_AMX 1
#endif
#endif

namespace specdec::llama {

/// Why this process cannot multiply bf16 weights ("" when it can): AMX-BF16 missing, the kernel
/// refusing the tile state, or a build forced onto the portable kernels. Asks the kernel once.
inline const std::string& bf16_unavailable() {
  static const std::string why = [] {
#if defined(SPECDEC_HOST_AMX)
    // CPUID leaf 7: EDX bit 24 AMX-TILE, bit 22 AMX-BF16 (Clang 14's __builtin_cpu_supports
    // knows neither name). The kernel's grant below says whether the OS enabled the tile state.
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    const bool amx = __get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) && (edx >> 24 & 1u) && (edx >> 22 & 1u);
    if (!amx)
      return std::string("bf16 weights need a CPU with AMX-BF16 (Intel Xeon 4th generation or later); this one has none");
    constexpr long request_permission = 0x1023, tile_data = 18;  // ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA
    if (syscall(SYS_arch_prctl, request_permission, tile_data) != 0)
      return std::string("bf16 weights need AMX, which this Linux kernel does not grant (arch_prctl "
                         "ARCH_REQ_XCOMP_PERM failed)");
    return std::string();
#elif defined(SPECDEC_HOST_ISA_PORTABLE)
    return std::string("bf16 weights need AMX, and this build forces the portable kernels (SPECDEC_HOST_ISA=portable)");
#else
    return std::string("bf16 weights need Intel AMX on x86-64 Linux");
#endif
  }();
  return why;
}

}  // namespace specdec::llama
