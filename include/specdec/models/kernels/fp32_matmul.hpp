// The fp32 matrix product y = x · W over packed matrices (packing.hpp): register tiles named by
// their shape (RegisterTile, MatmulTiles), templated on the vector type of an ISA path; isa.hpp
// instantiates it per ISA. Host-only.
#pragma once

#include <algorithm>
#include <cstddef>

#include <specdec/models/kernels/lanes.hpp>
#include <specdec/models/kernels/packing.hpp>

SPECDEC_HOST_KERNELS_BEGIN
namespace specdec::llama::detail {

/// A register tile of the product: `column_vectors` vectors of output columns × `tokens` tokens,
/// each of those sums an accumulator register.
struct RegisterTile {
  int column_vectors, tokens;
};

/// The register tiles of one ISA path, by the tokens of a call: one (plain decoding), two, and
/// more (blocks of up to many_tokens.tokens). Each keeps at least 8 sums in flight, to cover a
/// multiply-add's latency on two pipes, within the ISA's vector registers.
struct MatmulTiles {
  RegisterTile one_token, two_tokens, many_tokens;
};

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wpsabi"

// Where a register tile works: weight rows [j0, j1) from w (rows `stride` floats apart), the
// tokens' inputs x (rows ldx apart) and outputs y (ldy apart). Each output is its own chain of
// multiply-adds over j in order: it starts at zero where j0 is 0 and otherwise goes on from the
// value y holds, so splitting the rows changes no bit. Row j also prefetches `lines` cache lines
// into L2 from ahead + (j - j0) · lines · 64 bytes on (a prefetch never faults, past the end of
// the matrix included).
struct TileRows {
  const float* w;
  int stride, j0, j1;
  const float* x;
  int ldx;
  float* y;
  int ldy;
  const char* ahead;
  int lines;
};

// ColumnVectors vectors of columns × Tokens tokens in registers over t's rows.
template <class V, int ColumnVectors, int Tokens>
[[gnu::always_inline]] inline void register_tile(const TileRows& t) {
  constexpr int L = lanes<V>;
  V acc[Tokens][ColumnVectors];
  _Pragma("GCC unroll 16") for (int b = 0; b < Tokens; ++b) _Pragma("GCC unroll 16") for (int v = 0; v < ColumnVectors; ++v)
      acc[b][v] = t.j0 == 0 ? V{} : load<V>(t.y + static_cast<std::size_t>(b) * t.ldy + v * L);
  const char* ahead = t.ahead;
  for (int j = t.j0; j < t.j1; ++j) {
    for (int l = 0; l < t.lines; ++l, ahead += 64) __builtin_prefetch(ahead, 0, 2);
    const float* row = t.w + static_cast<std::size_t>(j) * t.stride;
    V wv[ColumnVectors];
    _Pragma("GCC unroll 16") for (int v = 0; v < ColumnVectors; ++v) wv[v] = load<V>(row + v * L);
    _Pragma("GCC unroll 16") for (int b = 0; b < Tokens; ++b)
        multiply_add_all<fused<V>, ColumnVectors>(acc[b], wv, t.x[static_cast<std::size_t>(b) * t.ldx + j]);
  }
  _Pragma("GCC unroll 16") for (int b = 0; b < Tokens; ++b) _Pragma("GCC unroll 16") for (int v = 0; v < ColumnVectors; ++v)
      store(t.y + static_cast<std::size_t>(b) * t.ldy + v * L, acc[b][v]);
}

// register_tile<V, column_vectors, tokens> for column_vectors ≤ Tile.column_vectors and tokens ≤
// Tile.tokens known at run time (a matrix's last, narrower tile; a block's tokens).
template <class V, RegisterTile Tile>
[[gnu::always_inline]] inline void register_tile_at_most(int column_vectors, int tokens, const TileRows& t) {
  if (column_vectors == Tile.column_vectors && tokens == Tile.tokens)
    register_tile<V, Tile.column_vectors, Tile.tokens>(t);
  else if (column_vectors < Tile.column_vectors) {
    if constexpr (Tile.column_vectors > 1)
      register_tile_at_most<V, RegisterTile{Tile.column_vectors - 1, Tile.tokens}>(column_vectors, tokens, t);
  } else if constexpr (Tile.tokens > 1) {
    register_tile_at_most<V, RegisterTile{Tile.column_vectors, Tile.tokens - 1}>(column_vectors, tokens, t);
  }
}

// Rows of weights a pass of the register tiles reads before the next (16 KB of a 64-column tile).
inline constexpr int matmul_rows_per_chunk = 64;

// Columns [c0, c1) (multiples of 64, or c1 = stride) of y[n][ldy] = x[n][ldx] · m, one of m's
// tiles (64 columns) at a time, its rows in chunks of matmul_rows_per_chunk. The register tile
// is Tiles' for the call's tokens; more than two go in blocks of up to many_tokens.tokens, the
// blocks as even as they come (8 tokens in blocks of 6: 4 + 4, not 6 + 2). Every register tile
// and block reads the chunk in turn (from L1 after the first), and each of these passes
// prefetches its share of the next chunk's lines into L2, so that the weights stream from memory
// once, in order, and keep streaming while the chunk computes (m's tiles are consecutive in
// memory, so the next chunk is the next 16 KB). A register tile's columns divide 64, so it never
// straddles two of m's tiles.
template <class V, MatmulTiles Tiles>
[[gnu::always_inline]] inline void matmul_impl(const Matrix& m, const float* x, int ldx, int n, float* y, int ldy,
                                               int c0, int c1) {
  constexpr int L = lanes<V>, chunk = matmul_rows_per_chunk;
  static_assert(Matrix::tile % (Tiles.many_tokens.column_vectors * L) == 0 &&
                Matrix::tile % (Tiles.one_token.column_vectors * L) == 0 &&
                Matrix::tile % (Tiles.two_tokens.column_vectors * L) == 0);
  static_assert(Tiles.one_token.tokens == 1 && Tiles.two_tokens.tokens == 2);
  if (n <= 0) return;
  const RegisterTile shape = n == 1 ? Tiles.one_token : n == 2 ? Tiles.two_tokens : Tiles.many_tokens;
  const int columns = shape.column_vectors * L;
  const int blocks = (n + shape.tokens - 1) / shape.tokens;
  for (int c = c0; c < c1; c += Matrix::tile) {
    const int width = m.width(c);
    const float* w = m.data.data() + m.at(c, 0);
    const int passes = (width + columns - 1) / columns * blocks;
    const int lines = (width / 16 + passes - 1) / passes;  // a row of width floats: width / 16 lines
    for (int j0 = 0; j0 < m.in; j0 += chunk) {
      const int j1 = std::min(m.in, j0 + chunk);
      const char* next = reinterpret_cast<const char*>(w + static_cast<std::size_t>(j1) * width);
      int pass = 0;
      for (int k = 0, b = 0; k < blocks; ++k) {
        const int end = n * (k + 1) / blocks;
        for (int cc = 0; cc < width; cc += columns, ++pass) {
          const TileRows t{w + cc, width, j0, j1, x + static_cast<std::size_t>(b) * ldx, ldx,
                           y + static_cast<std::size_t>(b) * ldy + c + cc, ldy,
                           next + static_cast<std::size_t>(pass) * chunk * lines * 64, lines};
          const int column_vectors = std::min(columns, width - cc) / L;
          if (n == 1) register_tile_at_most<V, Tiles.one_token>(column_vectors, 1, t);
          else if (n == 2) register_tile_at_most<V, Tiles.two_tokens>(column_vectors, 2, t);
          else register_tile_at_most<V, Tiles.many_tokens>(column_vectors, end - b, t);
        }
        b = end;
      }
    }
  }
}

#pragma GCC diagnostic pop

}  // namespace specdec::llama::detail
SPECDEC_HOST_KERNELS_END
