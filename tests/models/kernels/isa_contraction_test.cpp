// Built with -ffp-contract=fast (tests/CMakeLists.txt): the host kernels of such a build refuse to
// run, in one sentence that says which flag to use, since contraction would make their bits
// depend on the compiler's choices (models/host_kernels.hpp). GCC forms FMAs from -O2 on and only
// where the target has FMA: this test builds at -O3, and the AVX2 entry points have it.
#include <catch2/catch.hpp>

#include <specdec/models/kernels/isa.hpp>

using namespace specdec;

TEST_CASE("kernels compiled with -ffp-contract=fast refuse to run, saying which flag to use", "[host_kernels][isa]") {
#if defined(SPECDEC_HOST_ISA_X86)
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) {
    WARN("no FMA on this CPU: nothing is contracted");
    return;
  }
  CHECK(llama::detail::contracts_with_fma());
  for (llama::HostIsa isa : {llama::HostIsa::automatic, llama::HostIsa::portable})
    CHECK_THROWS_WITH(llama::kernels(isa),
                      "the host kernels were compiled with floating-point contraction, which breaks their "
                      "bit-exactness: build with -ffp-contract=off (CMake: link specdec::host_models)");
#else
  WARN("not x86-64 GCC/Clang: this test knows where contraction happens only there");
#endif
}
