// A consumer of the installed host kernels (CMake: linked to specdec::host_models): one small
// matrix product. (Built with -ffp-contract=fast instead, the kernels refuse to run in one
// sentence: tests/models/kernels/isa_contraction_test.cpp checks it.)
#include <cstdio>
#include <exception>

#include <specdec/models/host_kernels.hpp>

int main() {
  try {
    const specdec::llama::detail::Kernels& k = specdec::llama::kernels();
    const float w[2 * 3] = {1, 2, 3, 4, 5, 6}, x[3] = {1, 1, 1};
    const specdec::llama::Matrix m = specdec::llama::Matrix::pack(3, {{w, 2}});
    float y[specdec::llama::Matrix::align] = {};
    k.matmul(m, x, 3, 1, y, m.stride, 0, m.stride);
    std::printf("host kernels (%s): %g %g\n", k.name, y[0], y[1]);
    return y[0] == 6.0f && y[1] == 15.0f ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
}
