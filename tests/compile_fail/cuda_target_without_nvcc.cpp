// Must not compile: CudaLlamaTarget in a C++ file compiled by the host compiler without
// SPECDEC_CUDA_KERNELS_EXTERN, where its kernels' launches would be neither compiled nor declared
// extern. The one error says both ways to include it.
#include <specdec/targets/cuda_llama.hpp>

int main() {}
