// Prompt products of MLX 4- and 8-bit matrices with int8 inputs, in tiles of
// sixteen rows. The decode kernel (int8_dot.h) meets one input with four
// rows whose bytes lie along the vector, so every 64 bytes it converts and
// scales a partial sum per row and input; with many inputs that bookkeeping,
// not the byte products, is the work. Here a tile's rows are transposed once
// into vectors whose lanes are the rows (four bytes each; sixteen rows to a
// vector with AVX-512, eight with AVX2, whose 4-bit tiles sum in 16-bit
// pieces first), and each input meets them four bytes at a time, broadcast: a
// lane sums a whole group of one row in integers before one conversion and
// one scaled add, and the transposition is paid once for all the inputs.
//
// The integer sums are exact, so a result differs from the decode kernel's
// only in the order its groups' float terms are added, and it is the same
// whatever other inputs share the call.
#pragma once

#include <cstdint>

#include "lily/backend/cpu/int8_dot.h"

namespace lily::cpu::int8 {

// Rows a tile covers.
inline constexpr int64_t kTileRows = 16;

// Whether tiles run for W with this kernel: a matrix int8::supports takes,
// with AVX-512 VNNI or Arm's I8MM (neon_int8.h), or with AVX2 where its
// weights are 4-bit.
bool tile_supported(Kernel k, const Matrix& W);

// y[t * y_stride + r0 + i] = row (r0 + i) of W . in[t], for i < n <= 16 and
// t < T, with kernel k's tiles.
void tile_rows(Kernel k, const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t T, float* y,
               int64_t y_stride);

}  // namespace lily::cpu::int8
