// A kernel written once for two executors: a CUDA grid (kernels/grid.cuh) and the host's
// emulated grid (testing/emulated_grid.hpp), which runs the same code on fibers so that CI checks
// a device forward's logic bit for bit without a GPU.
//
// A grid kernel is a callable `f` with `template <class Thread> SPECDEC_HD void operator()(const
// Thread& th) const`, launched by `backend::launch_grid(tag, LaunchShape, f)` (found by argument-
// dependent lookup on the backend tag). Inside, `th` is the only way to the execution model:
//
//   th.block_x(), th.block_y()   the block's index (blockIdx.x, .y)
//   th.blocks_x()                blocks along x (gridDim.x)
//   th.thread(), th.threads()    the thread's index in its block, and the block's size (1D blocks)
//   th.shared()                  the block's shared memory: LaunchShape::shared_bytes, 16-byte aligned
//   th.sync()                    barrier of the block's threads that have not returned (__syncthreads)
//   th.warp_sums(v)              float v[N]: every v[i] becomes the warp's butterfly sum, the same in
//                                every lane: v += shfl_xor(v, m) for m = 16, 8, 4, 2, 1. Every lane
//                                of the warp calls it (a warp returns whole or not at all)
//   th.block_sum(part), th.block_max(part)
//                                part[th.thread()] holds the thread's value; after a barrier, the
//                                pairwise tree `for (s = threads / 2; s >= 1; s /= 2) part[i] =
//                                op(part[i], part[i + s]) for i < s` (op: +, or fmaxf); every
//                                thread gets part[0]'s final value; part is left modified and may
//                                be written again at once. threads() is a power of two.
//   th.mma_bf16(d, a, b)         float d[4], std::uint32_t a[4], b[2]: the warp's tensor-core
//                                product D = A·B + D of a 16x16 bf16 A, a 16x8 bf16 B and a 16x8
//                                fp32 D, in the fragments of PTX's mma.sync.aligned.m16n8k16.row.col
//                                .f32.bf16.bf16.f32 (mma_a_row/mma_a_col, mma_b_k, mma_d_row/mma_d_col
//                                below; two bf16 a 32-bit word, the lower index in the low half).
//                                Every lane of the warp calls it (sm_80 or later on a GPU)
//
// The orders are the executors' contract: both give the same bits for the same inputs, except
// mma_bf16, whose sums inside one MMA are the tensor core's on a GPU and, on the host, fmaf over
// k = 0, 1, ..., 15 from D's value: a kernel built on it gets the same bits on both executors
// everywhere but in those sums, so a rule that fixes which MMAs make an output (and in what order)
// holds on both, while the values differ by the tensor core's rounding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include <specdec/config.hpp>

namespace specdec::kernels {

/// A launch: blocks_x × blocks_y blocks of `threads` threads (1D), with `shared_bytes` of shared
/// memory per block.
struct LaunchShape {
  unsigned blocks_x = 1, blocks_y = 1;
  int threads = 32;
  std::size_t shared_bytes = 0;
};

/// Threads per warp, on both executors.
inline constexpr int warp_threads = 32;

// The fragments of mma_bf16 (m16n8k16): lane l is in group l / 4 and is thread l % 4 of it;
// register r of a fragment holds elements (h = 0, 1: the low and the high half of a's and b's
// words).
SPECDEC_HD constexpr int mma_a_row(int lane, int r) { return lane / 4 + 8 * (r & 1); }
SPECDEC_HD constexpr int mma_a_col(int lane, int r, int h) { return 2 * (lane % 4) + h + 8 * (r >> 1); }
SPECDEC_HD constexpr int mma_b_k(int lane, int r, int h) { return 2 * (lane % 4) + h + 8 * r; }
SPECDEC_HD constexpr int mma_b_col(int lane) { return lane / 4; }
SPECDEC_HD constexpr int mma_d_row(int lane, int r) { return lane / 4 + 8 * (r >> 1); }
SPECDEC_HD constexpr int mma_d_col(int lane, int r) { return 2 * (lane % 4) + (r & 1); }

/// Copies `Bytes` (8 or 16) bytes from `from` to `to`, both `Bytes`-aligned: one vector load on the
/// device; on the host a check of the alignment the device would fault on, then the copy.
template <int Bytes>
SPECDEC_HD inline void copy_vector(void* to, const void* from) {
  static_assert(Bytes == 8 || Bytes == 16, "copy_vector: 8 or 16 bytes");
#if defined(__CUDA_ARCH__)
  if constexpr (Bytes == 16) *static_cast<uint4*>(to) = *static_cast<const uint4*>(from);
  else *static_cast<uint2*>(to) = *static_cast<const uint2*>(from);
#else
  if ((reinterpret_cast<std::uintptr_t>(to) | reinterpret_cast<std::uintptr_t>(from)) % Bytes != 0)
    throw std::logic_error("copy" + std::to_string(Bytes) + ": an address is not " + std::to_string(Bytes) +
                           "-byte aligned (a misaligned vector load on a GPU)");
  std::memcpy(to, from, Bytes);
#endif
}
SPECDEC_HD inline void copy16(void* to, const void* from) { copy_vector<16>(to, from); }

}  // namespace specdec::kernels
