// The bf16 kernels on Intel AMX (TDPBF16PS): the matrix product over Matrix's bf16 blocks
// (packing.hpp) and the attention of heads whose K/V cache is bf16 (models/llama_layer.hpp's
// attend_bf16). Their reduction order: host_kernels.hpp. Host-only; compiled where
// SPECDEC_HOST_AMX is defined (x86-64 Linux), run only where bf16_unavailable() is "".
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#include <specdec/models/kernels/packing.hpp>
#include <specdec/models/kernels/platform.hpp>

namespace specdec::llama {

/// Whether a model of these weights and head size keeps its K/V cache in bf16 and runs attention
/// on AMX (llama_layer.hpp): bf16 weights and heads of 16 values or a multiple of 32.
inline bool bf16_attention(WeightFormat format, int head_size) {
  return format == WeightFormat::bf16 && (head_size == 16 || (head_size > 0 && head_size % 32 == 0));
}

namespace detail {

#if defined(SPECDEC_HOST_AMX)
// AMX tile registers of the bf16 product: tmm0-3 accumulate `rows` tokens × 16 columns (fp32),
// tmm4 holds the tokens' 32 inputs of a chunk (bf16), tmm5-7 the weights' blocks.
struct alignas(64) AmxTileConfig {
  std::uint8_t palette = 1, start_row = 0, reserved[14] = {};
  std::uint16_t bytes_per_row[16] = {};
  std::uint8_t rows[16] = {};
};

// GCC 12 does not count LDTILECFG's operand as read memory and may drop the stores that fill it
// (all of them, where it sees the values at compile time): the empty asm makes them happen.
[[gnu::target("amx-tile")]] inline void amx_load(const AmxTileConfig& config) {
  asm volatile("" : : "r"(&config) : "memory");
  _tile_loadconfig(&config);
}

[[gnu::target("amx-tile,amx-bf16")]] inline void amx_configure(int rows) {
  AmxTileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = static_cast<std::uint8_t>(t < 5 ? rows : 16);
    config.bytes_per_row[t] = 64;
  }
  amx_load(config);
}

// Columns [c0, c1) (multiples of 64, or c1 = stride) of y[n][ldy] = xa[n][in_padded] · m, m in
// bf16 and xa its inputs in bf16. Tokens in blocks of 16 inside a tile of 64 columns: a tile's
// weights stay in L2 for the next block.
[[gnu::target("amx-tile,amx-bf16")]] inline void amx_matmul(const Matrix& m, const std::uint16_t* xa, int n, float* y,
                                                           int ldy, int c0, int c1) {
  const int in_pad = m.in_padded(), chunks = in_pad / Matrix::bf16_chunk;
  const long lda = static_cast<long>(in_pad) * 2, ldc = static_cast<long>(ldy) * 4;
  int configured = 0;
  for (int c = c0; c < c1; c += Matrix::tile) {
    const int blocks = m.width(c) / Matrix::align;
    const std::uint16_t* w = m.bf16.data() + static_cast<std::size_t>(c) * in_pad;
    for (int t = 0; t < n; t += 16) {
      const int rows = std::min(16, n - t);
      if (rows != configured) amx_configure(configured = rows);
      _tile_zero(0);
      _tile_zero(1);
      _tile_zero(2);
      _tile_zero(3);
      const std::uint16_t* a = xa + static_cast<std::size_t>(t) * in_pad;
      for (int k = 0; k < chunks; ++k) {
        _tile_loadd(4, a + k * Matrix::bf16_chunk, lda);
        const std::uint16_t* b = w + static_cast<std::size_t>(k) * blocks * Matrix::bf16_block;
        _tile_loadd(5, b, 64);
        _tile_dpbf16ps(0, 4, 5);
        if (blocks > 1) {
          _tile_loadd(6, b + Matrix::bf16_block, 64);
          _tile_dpbf16ps(1, 4, 6);
        }
        if (blocks > 2) {
          _tile_loadd(7, b + 2 * Matrix::bf16_block, 64);
          _tile_dpbf16ps(2, 4, 7);
        }
        if (blocks > 3) {
          _tile_loadd(5, b + 3 * Matrix::bf16_block, 64);
          _tile_dpbf16ps(3, 4, 5);
        }
      }
      float* out = y + static_cast<std::size_t>(t) * ldy + c;
      _tile_stored(0, out, ldc);
      if (blocks > 1) _tile_stored(1, out + 16, ldc);
      if (blocks > 2) _tile_stored(2, out + 32, ldc);
      if (blocks > 3) _tile_stored(3, out + 48, ldc);
    }
  }
  _tile_release();
}

// Attention in bf16 on AMX (llama_layer.hpp's attend_bf16): the tiles of one call, for heads of
// hs values. tmm0 scores (16 nodes × 16 slots), tmm1 queries (16 nodes × a chunk of kc = min(hs,
// 32) dimensions), tmm2 keys (kc / 2 dimension pairs × 16 slots); tmm3 outputs (16 nodes × 16
// values), tmm4 weights (16 nodes × 32 slots), tmm5 values (16 slot pairs × 16 values); tmm6 and
// tmm7 one node's outputs and weights.
[[gnu::target("amx-tile,amx-bf16")]] inline void amx_attention_configure(int hs) {
  const int kc = std::min(hs, 32);
  AmxTileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = static_cast<std::uint8_t>(t == 2 ? kc / 2 : t >= 6 ? 1 : 16);
    config.bytes_per_row[t] = static_cast<std::uint16_t>(t == 1 ? kc * 2 : 64);
  }
  amx_load(config);
}

// s[i][t] (row i at s + i * lds) = q[i] · k[t] for the 16 rows of q (bf16, hs each) and slots t
// in [0, t1) rounded up to 16; kp holds the head's keys as bf16 pairs, pair row r (dimensions 2r,
// 2r + 1) at kp + r * slots.
[[gnu::target("amx-tile,amx-bf16")]] inline void amx_scores(float* s, long lds, const std::uint16_t* q, int hs,
                                                           const std::uint32_t* kp, long slots, int t1) {
  const int kc = std::min(hs, 32);
  for (int t = 0; t < t1; t += 16) {
    _tile_zero(0);
    for (int d = 0; d < hs; d += kc) {
      _tile_loadd(1, q + d, hs * 2);
      _tile_loadd(2, kp + static_cast<std::size_t>(d / 2) * slots + t, slots * 4);
      _tile_dpbf16ps(0, 1, 2);
    }
    _tile_stored(0, s + t, lds * 4);
  }
}

// o[i][e] (row i at o + i * ldo) = the sum over slots [0, 32 · chunks) of p[i][t] v[t][e], for
// the 16 rows of p (bf16, ldp apart): 0, then one TDPBF16PS per chunk of 32 slots in order. vp
// holds the head's values by slot pairs, pair u (slots 2u, 2u + 1) at vp + u * pair_stride, value
// e's two at 2e and 2e + 1.
[[gnu::target("amx-tile,amx-bf16")]] inline void amx_values(float* o, long ldo, const std::uint16_t* p, long ldp,
                                                           const std::uint16_t* vp, long pair_stride, int hs,
                                                           int chunks) {
  for (int e = 0; e < hs; e += 16) {
    _tile_zero(3);
    for (int c = 0; c < chunks; ++c) {
      _tile_loadd(4, p + c * 32, ldp * 2);
      _tile_loadd(5, vp + static_cast<std::size_t>(c) * 16 * pair_stride + e * 2, pair_stride * 2);
      _tile_dpbf16ps(3, 4, 5);
    }
    _tile_stored(3, o + e, ldo * 4);
  }
}

// o[0 .. 16) += one node's chunk: p its 32 weights (bf16), b the chunk's 16 slot pairs of 16
// values (64 bytes a pair): the step amx_values takes for a row, on that row alone.
[[gnu::target("amx-tile,amx-bf16")]] inline void amx_values_row(float* o, const std::uint16_t* p,
                                                               const std::uint16_t* b) {
  _tile_loadd(6, o, 64);
  _tile_loadd(7, p, 64);
  _tile_loadd(5, b, 64);
  _tile_dpbf16ps(6, 7, 5);
  _tile_stored(6, o, 64);
}

[[gnu::target("amx-tile")]] inline void amx_release() { _tile_release(); }
#endif

}  // namespace detail

}  // namespace specdec::llama
