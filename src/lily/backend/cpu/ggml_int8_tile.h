// Prompt products of GGUF Q4_0 and Q4_K rows with int8 inputs on AVX2, in
// tiles of eight rows. The row kernel (ggml_int8_dot.h) meets each block of 32
// weights of one row with a token: a byte product, a widening multiply, a
// conversion and a scaled add per row, block and token, where every 32
// weights carry their own f16 scale. Here eight rows' blocks are transposed
// once into vectors whose 32-bit lanes are the rows (four codes each, low
// nibbles and high nibbles apart), and each token meets them four input
// bytes at a time, broadcast: a lane sums its row's block in 16-bit pieces
// (at most 16 products of 15 x 127, short of overflow), folded once into 32
// bits, less 8 x the block's input codes (Q4_0 stores q + 8), then one
// conversion and one scaled add for eight rows. Q4_K's sub-blocks of 32
// sum the same way and meet each row's 6-bit scale in the fold, so its
// super-block of 256 ends in one scaled add; the mins meet the exact input
// sums as in the row kernel.
//
// The integer sums are exact, so a result differs from the row kernel's
// only in the order its float terms are added, and it is the same whatever
// other inputs share the call.
#pragma once

#include <cstdint>

#include "lily/backend/cpu/ggml_int8_dot.h"

namespace lily::cpu::ggml_int8 {

// Rows a tile covers.
inline constexpr int64_t kTileRows = 8;

// Whether tiles run for W with this kernel (AVX2, and Q4_0 or Q4_K).
bool tile_supported(int8::Kernel k, const Matrix& W);

// y[t * y_stride + r0 + i] = row (r0 + i) of W . in[t], for i < n <= 8 and
// t < T.
void tile_rows(int8::Kernel k, const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t T, float* y,
               int64_t y_stride);

}  // namespace lily::cpu::ggml_int8
