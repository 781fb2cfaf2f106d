// Inner loops of the matrix products, compiled for several x86 vector widths
// and picked at run time (plain portable code elsewhere, NEON included):
// float dots, BF16/F16 row conversion, and fused dequantize-and-dot for MLX
// 4- and 8-bit rows, where each group contributes
// scale * sum(q * x) + bias * sum(x) so the bias costs one multiply per group.
#pragma once

#include <cstdint>

namespace lily::cpu::kernels {

float dot(const float* a, const float* b, int64_t n);
// y[i] += a * x[i]
void axpy(float a, const float* x, float* y, int64_t n);
void bf16_to_f32(const uint16_t* src, float* dst, int64_t n);

// Sum of each group of `gs` inputs: xsum[g] = sum(x[g*gs .. (g+1)*gs)).
void group_sums(const float* x, int64_t n, int gs, float* xsum);
// Four quantized rows dotted with the same x (out[r] = row r . x); scales
// and biases already in float. A row may be passed more than once (short
// edges); its result does not depend on the other rows of the call.
// 4-bit: xe/xo are the even and odd inputs (see deinterleave), met by the low and high nibbles.
void dot_q4_x4(const uint8_t* const q[4], const float* xe, const float* xo, const float* xsum,
               const float* const scales[4], const float* const biases[4], int64_t groups, int gs, float out[4]);
void dot_q8_x4(const uint8_t* const q[4], const float* x, const float* xsum, const float* const scales[4],
               const float* const biases[4], int64_t groups, int gs, float out[4]);

void deinterleave(const float* x, int64_t n, float* xe, float* xo);

// out[i][j] = dot(w[i], x[j]) for a 4 x 4 tile: each loaded weight meets four
// inputs and each input four weights, which is what makes prompt processing
// arithmetic-bound instead of load-bound.
void dot4x4(const float* const w[4], const float* const x[4], int64_t n, float out[4][4]);

}  // namespace lily::cpu::kernels
