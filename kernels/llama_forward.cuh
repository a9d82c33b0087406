// The CUDA-only part of the device Llama forward: the grid kernels of kernels/llama_forward.hpp
// launched on a stream, and the tensor-core products (CudaLlamaOptions::tensor_cores), which have
// no host executor: WMMA fragments' layouts are the hardware's.
//
// The tensor-core products' batch-invariance rule (bf16 weights): the activations are rounded to
// bf16 once, and output (o, t) is a chain of WMMA 16x16x16 products over k = 0, 16, 32, ... in
// increasing order into one fp32 accumulator; tokens go 16 at a time, each its own column of the
// tile, and an MMA's column depends on that column's operands only.
#pragma once

#include <algorithm>
#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <mma.h>

#include <specdec/backend.hpp>
#include <specdec/kernels/grid.cuh>
#include <specdec/kernels/launchers.hpp>
#include <specdec/kernels/llama_forward.hpp>

namespace specdec::kernels::llama {

/// Launches the CUDA-core product of `a` with weights W on `stream`; a launch error is left for
/// the caller's cudaGetLastError.
template <class W>
inline void launch_product(const ProductArgs& a, cudaStream_t stream) {
  const Product<W> product{a};
  backend::launch_grid(backend::cuda{stream}, product.shape(), product);
}

inline constexpr int tc_warps = 4;   // warps per block, tc_tile output rows each

/// Grid-stride over n * in: x16[t][k] = bf16 of x[t][k] (nearest even, as synthetic::bf16_bits).
template <class Unused = void>
__global__ void to_bf16_kernel(const float* x, long long ldx, int in, int n, bf16* x16) {
  const long long total = static_cast<long long>(n) * in;
  for (long long idx = blockIdx.x * static_cast<long long>(blockDim.x) + threadIdx.x; idx < total;
       idx += static_cast<long long>(gridDim.x) * blockDim.x)
    x16[idx] = synthetic::bf16_bits(x[(idx / in) * ldx + idx % in]);
}

/// Grid: ceil(out / (tc_warps * tc_tile)) blocks of tc_warps warps; bf16 weights; a.x unused: the
/// activations come as x16 ([rows rounded up to tc_tile][in] bf16, 32-byte aligned). Each warp owns
/// tc_tile rows and reads past `out` up to the tile's end (the weight buffer has that slack); rows
/// past out and tokens past n are never written. in, the rows' offsets and x16 are multiples of
/// tc_tile elements (WMMA's 32-byte alignment), checked by the target.
template <class Unused = void>
__global__ void product_tc_kernel(ProductArgs a, const bf16* x16) {
  using namespace nvcuda;
  __shared__ alignas(32) float tile[tc_warps][tc_tile * tc_tile];  // WMMA stores need 32-byte alignment
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row0 = (blockIdx.x * tc_warps + warp) * tc_tile;
  if (row0 >= a.out) return;  // the whole warp: only warp-level synchronisation follows
  const __nv_bfloat16* w = static_cast<const __nv_bfloat16*>(a.w) + static_cast<long long>(row0) * a.in;
  const __nv_bfloat16* x = reinterpret_cast<const __nv_bfloat16*>(x16);
  float* out = tile[warp];
  for (int t0 = 0; t0 < a.n; t0 += tc_tile) {
    wmma::fragment<wmma::accumulator, tc_tile, tc_tile, tc_tile, float> acc;
    wmma::fill_fragment(acc, 0.0f);
    for (int k = 0; k < a.in; k += tc_tile) {
      // A: W[row0 + i][k + j], row-major; B: x[t0 + j][k + i], i.e. column j is token t0 + j.
      wmma::fragment<wmma::matrix_a, tc_tile, tc_tile, tc_tile, __nv_bfloat16, wmma::row_major> wa;
      wmma::fragment<wmma::matrix_b, tc_tile, tc_tile, tc_tile, __nv_bfloat16, wmma::col_major> xb;
      wmma::load_matrix_sync(wa, w + k, a.in);
      wmma::load_matrix_sync(xb, x + static_cast<long long>(t0) * a.in + k, a.in);
      wmma::mma_sync(acc, wa, xb, acc);
    }
    wmma::store_matrix_sync(out, acc, tc_tile, wmma::mem_row_major);  // out[r * 16 + c]: row r, token c
    __syncwarp();
    for (int e = lane; e < tc_tile * tc_tile; e += 32) {
      const int r = e / tc_tile, c = e % tc_tile;
      if (row0 + r < a.out && t0 + c < a.n) {
        float* y = a.y + (t0 + c) * a.ldy + row0 + r;
        *y = a.accumulate ? *y + out[e] : out[e];
      }
    }
    __syncwarp();  // the tile is rewritten by the next token group
  }
}

/// Rounds x to bf16 into x16, then launches product_tc_kernel (the one place their grids are
/// computed); a launch error is left for the caller's cudaGetLastError.
SPECDEC_CUDA_LAUNCHER void launch_product_tc(const ProductArgs& a, bf16* x16, cudaStream_t stream);

#if SPECDEC_CUDA_KERNELS_DEFINED
SPECDEC_CUDA_LAUNCHER void launch_product_tc(const ProductArgs& a, bf16* x16, cudaStream_t stream) {
  const long long elements = static_cast<long long>(a.n) * a.in;
  const unsigned convert_blocks = static_cast<unsigned>(std::min<long long>((elements + 255) / 256, 4096));
  to_bf16_kernel<><<<convert_blocks, 256, 0, stream>>>(a.x, a.ldx, a.in, a.n, x16);
  constexpr int rows_per_block = tc_warps * tc_tile;
  const unsigned blocks = static_cast<unsigned>((a.out + rows_per_block - 1) / rows_per_block);
  product_tc_kernel<><<<blocks, 32 * tc_warps, 0, stream>>>(a, x16);
}
#endif

/// The tensor-core product of `a` on `tag`'s stream, through the x16 buffer (found by the device
/// model through argument-dependent lookup; there is no host form).
inline void product_tensor_cores(const backend::cuda& tag, const ProductArgs& a, bf16* x16) {
  launch_product_tc(a, x16, tag.stream);
}

}  // namespace specdec::kernels::llama
