// The CUDA executor of grid kernels (kernels/grid.hpp): CudaThread maps the thread interface to
// CUDA's built-ins, and backend::launch_grid(cuda, shape, f) (declared in kernels/cuda_grid.hpp)
// launches f on the tag's stream.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include <specdec/kernels/cuda_grid.hpp>

namespace specdec::kernels {

/// The thread of a CUDA grid kernel (see grid.hpp for what each member promises).
struct CudaThread {
  unsigned char* shared_memory;
  __device__ int block_x() const { return static_cast<int>(blockIdx.x); }
  __device__ int block_y() const { return static_cast<int>(blockIdx.y); }
  __device__ int blocks_x() const { return static_cast<int>(gridDim.x); }
  __device__ int thread() const { return static_cast<int>(threadIdx.x); }
  __device__ int threads() const { return static_cast<int>(blockDim.x); }
  __device__ unsigned char* shared() const { return shared_memory; }
  __device__ void sync() const { __syncthreads(); }

  template <int N>
  __device__ void warp_sums(float (&v)[N]) const {
#pragma unroll
    for (int i = 0; i < N; ++i)
#pragma unroll
      for (int m = 16; m >= 1; m /= 2) v[i] += __shfl_xor_sync(0xffffffffu, v[i], m);
  }
  __device__ void mma_bf16(float (&d)[4], const std::uint32_t (&a)[4], const std::uint32_t (&b)[2]) const {
#if defined(__CUDA_ARCH__)
#if __CUDA_ARCH__ >= 800
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#else
    __trap();  // bf16 MMA needs sm_80; the target refuses tensor_cores on older devices
#endif
#endif
  }
  __device__ float block_sum(float* part) const { return reduce(part, [](float a, float b) { return a + b; }); }
  __device__ float block_max(float* part) const { return reduce(part, [](float a, float b) { return fmaxf(a, b); }); }

 private:
  template <class Op>
  __device__ float reduce(float* part, Op op) const {
    const int i = thread();
    __syncthreads();
    for (int s = threads() / 2; s >= 1; s /= 2) {
      if (i < s) part[i] = op(part[i], part[i + s]);
      __syncthreads();
    }
    const float total = part[0];
    __syncthreads();  // everyone has read part[0] before it is written again
    return total;
  }
};

template <class F>
__global__ void grid_kernel(F f) {
  extern __shared__ __align__(16) unsigned char shared_memory[];
  f(CudaThread{shared_memory});
}

}  // namespace specdec::kernels

namespace specdec::backend {

// Declared, with what it does, in kernels/cuda_grid.hpp.
template <class F>
void launch_grid(const cuda& tag, const kernels::LaunchShape& shape, const F& f) {
  kernels::grid_kernel<F><<<dim3(shape.blocks_x, shape.blocks_y), static_cast<unsigned>(shape.threads),
                            shape.shared_bytes, tag.stream>>>(f);
}

}  // namespace specdec::backend
