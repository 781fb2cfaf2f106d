// The int8 products of MLX 4- and 8-bit matrices on 64-bit Arm, where x86
// has its AVX2 and VNNI kernels (int8_dot.h, int8_tile.h). Inputs are
// rounded as there (int8_dot.h's Input), so results agree with those paths
// within the same bound.
//
// - Decode (SDOT, Armv8.2 DotProd): a row's 16 bytes at a time meet the
//   input, four byte products summed into each 32-bit lane, a group's sum
//   converted and scaled once. 4-bit codes (0..15) are signed bytes as they
//   are; 8-bit codes are met as code - 128, and 128 times the group's input
//   codes added back, so the signed-only SDOT takes them.
// - Prompts (I8MM): USMMLA multiplies a 2 x 8 block of unsigned bytes by a
//   8 x 2 block of signed ones into a 2 x 2 block of 32-bit sums, so two rows
//   meet two tokens in one instruction, twice SDOT's products. The tiles take
//   two pairs of rows against two pairs of tokens, a group's integer sums
//   exact before one scaled add per lane; each lane's operations are those of
//   its row and token alone, so a token's result does not depend on what
//   shares the call.
#pragma once

#include <cstdint>

#include "lily/backend/cpu/int8_dot.h"

#if defined(__aarch64__) && defined(__GNUC__)
#define LILY_NEON_INT8 1
#else
#define LILY_NEON_INT8 0
#endif

namespace lily::cpu::int8::neon {

// out[t * 4 + i] = row (r0 + i) of W . in[t], for i < n <= 4 and t < nt, with SDOT.
void dot_rows(const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t nt, float* out);

// y[t * y_stride + r0 + i] = row (r0 + i) of W . in[t], for i < n <= 16 and
// t < T, with USMMLA. For any matrix int8::supports takes.
void tile_rows(const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t T, float* y, int64_t y_stride);

}  // namespace lily::cpu::int8::neon
