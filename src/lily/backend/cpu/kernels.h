// Inner loops of the matrix products, compiled for several x86 vector widths
// and picked at run time (plain portable code elsewhere, NEON included):
// float dots, BF16/F16 row conversion, and fused dequantize-and-dot for MLX
// 4- and 8-bit rows, where each group contributes
// scale * sum(q * x) + bias * sum(x) so the bias costs one multiply per group.
#pragma once

#include <cstdint>

#include "lily/backend/cpu/cpu_context.h"

namespace lily::cpu::kernels {

// Every kernel takes the Isa its caller's context allows and runs the code
// for that level (AVX-512 for Avx512 and above), never a wider one.

float dot(Isa isa, const float* a, const float* b, int64_t n);
// y[i] += a * x[i]
void axpy(Isa isa, float a, const float* x, float* y, int64_t n);
void bf16_to_f32(Isa isa, const uint16_t* src, float* dst, int64_t n);
// out[c] = scales[g] * q[c] + biases[g] for one packed row (MLX affine, `bits` wide, groups of gs).
void dequantize_row(Isa isa, const uint8_t* packed, const float* scales, const float* biases, int64_t cols, int bits,
                    int gs, float* out);

// Sum of each group of `gs` inputs: xsum[g] = sum(x[g*gs .. (g+1)*gs)).
void group_sums(Isa isa, const float* x, int64_t n, int gs, float* xsum);
// Four rows of a 4- or 8-bit quantized matrix, with their scales and
// biases already in float. A row may appear more than once (short edges).
struct QuantRows {
  const uint8_t* q[4];
  const float* scales[4];
  const float* biases[4];
  int64_t groups;
  int gs;
  int bits;
};
// T inputs, token t at offset t * x_stride (x_stride / xsum_stride apart).
// 4-bit products read xe/xo, the even and odd inputs (see deinterleave) met
// by the low and high nibbles; 8-bit read x. xsum holds each group's sum.
struct QuantInputs {
  const float *x = nullptr, *xe = nullptr, *xo = nullptr;
  int64_t x_stride = 0;
  const float* xsum = nullptr;
  int64_t xsum_stride = 0;
};
// out[t * out_stride + r] = row r . input t for the four rows and T tokens.
// A (row, token) result is the same whatever else shares the call.
void dot_q_rows(Isa isa, const QuantRows& w, const QuantInputs& in, int64_t T, float* out, int64_t out_stride);

void deinterleave(Isa isa, const float* x, int64_t n, float* xe, float* xo);

// out[i][j] = dot(w[i], x[j]) for a 4 x 4 tile: each loaded weight meets four
// inputs and each input four weights, which is what makes prompt processing
// arithmetic-bound instead of load-bound.
void dot4x4(Isa isa, const float* const w[4], const float* const x[4], int64_t n, float out[4][4]);

}  // namespace lily::cpu::kernels
