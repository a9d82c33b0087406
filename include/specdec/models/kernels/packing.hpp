// Weight matrices packed for the kernels (Matrix): fp32 tiles of 64 columns for the fp32
// products (fp32_matmul.hpp), or bf16 blocks for AMX (amx.hpp); and the rounding to bf16.
// Host-only.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string_view>
#include <utility>
#include <vector>

#include <specdec/error.hpp>
#include <specdec/models/llama_config.hpp>
#include <specdec/models/kernels/memory.hpp>
#include <specdec/models/kernels/platform.hpp>

namespace specdec {


}  // namespace specdec

namespace specdec::llama {

/// W (stored [out][in] in checkpoints) kept transposed, `stride` output columns, in tiles of 64
/// columns: tile c0 (a multiple of 64, width w = min(64, stride - c0)) is [in][w] at data + c0 * in,
/// so row j of a tile holds W[r][j] for its outputs r, contiguous, and a tile is one sequential
/// read (what the hardware prefetcher streams best when a call has few tokens). Several matrices
/// with the same input may share one (fused q/k/v, w1/w3); each part starts at a multiple of 16
/// columns, and padding columns are zero.
///
/// In bf16 (`format`), `bf16` holds the same tiles for AMX instead of `data`: the inputs padded
/// with zeros to a multiple of 32 (in_padded()); tile c0 is at bf16 + c0 * in_padded(), chunk k of
/// 32 inputs then block b of 16 columns (1 KB, AMX's B operand) at ((k * w / 16) + b) * bf16_block: row
/// p of a block holds, for each of its 16 columns r, the pair W[r][32k + 2p], W[r][32k + 2p + 1].
struct Matrix {
  static constexpr int align = 16, tile = 64, bf16_chunk = 32;
  /// bf16 values in one AMX B block: 16 columns (align) × 32 inputs (bf16_chunk), 1 KB.
  static constexpr int bf16_block = align * bf16_chunk;
  int in = 0, stride = 0;
  WeightFormat format = WeightFormat::fp32;
  std::vector<float, PrefaultedAllocator<float>> data;
  std::vector<std::uint16_t, PrefaultedAllocator<std::uint16_t>> bf16;

  int in_padded() const { return (in + bf16_chunk - 1) / bf16_chunk * bf16_chunk; }

  static int padded(int n) { return (n + align - 1) / align * align; }
  /// Where W[c][j] of column c's row j is, and the row length of its tile.
  std::size_t at(int c, int j) const {
    const int c0 = c / tile * tile;
    return static_cast<std::size_t>(c0) * in + static_cast<std::size_t>(j) * width(c) + (c - c0);
  }
  int width(int c) const { return std::min(tile, stride - c / tile * tile); }
  /// Packs `parts`, each a pointer to [out][in] floats and its `out`, side by side, in `format`
  /// (bf16: throws specdec::error saying why where this process cannot multiply it).
  static Matrix pack(int in, std::initializer_list<std::pair<const float*, int>> parts,
                     WeightFormat format = WeightFormat::fp32) {
    Matrix m;
    m.in = in;
    for (const auto& p : parts) m.stride += padded(p.second);
    m.data.assign(static_cast<std::size_t>(in) * static_cast<std::size_t>(m.stride), 0.0f);
    int column = 0;
    for (const auto& [w, out] : parts) {
      // Row r of the part is column c = column + r of its tile: written `width` floats apart.
      for (int r = 0; r < out; ++r) {
        const int c = column + r;
        float* dst = m.data.data() + m.at(c, 0);
        const std::size_t step = static_cast<std::size_t>(m.width(c));
        const float* src = w + static_cast<std::size_t>(r) * in;
        for (int j = 0; j < in; ++j) dst[static_cast<std::size_t>(j) * step] = src[j];
      }
      column += padded(out);
    }
    if (format == WeightFormat::bf16) m.to_bf16();
    return m;
  }

  /// fp32 rounded to the nearest bf16, ties to even (a NaN stays a NaN).
  static std::uint16_t round_to_bf16(float f) {
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
    return static_cast<std::uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
  }

 private:
  // Re-lays the fp32 tiles out as AMX's bf16 blocks (see above) and frees them.
  void to_bf16() {
    if (!bf16_unavailable().empty()) throw error(bf16_unavailable());
    const int in_pad = in_padded();
    bf16.assign(static_cast<std::size_t>(in_pad) * static_cast<std::size_t>(stride), 0);
    for (int c = 0; c < stride; ++c) {
      const int c0 = c / tile * tile, blocks = width(c) / align, b = (c - c0) / align, r = c % align;
      std::uint16_t* tile_start = bf16.data() + static_cast<std::size_t>(c0) * in_pad;
      for (int j = 0; j < in; ++j) {
        const int k = j / bf16_chunk, p = j % bf16_chunk / 2, half = j % 2;
        tile_start[(static_cast<std::size_t>(k) * blocks + b) * bf16_block + p * 32 + r * 2 + half] = round_to_bf16(data[at(c, j)]);
      }
    }
    decltype(data)().swap(data);
    format = WeightFormat::bf16;
  }
};

}  // namespace specdec::llama
