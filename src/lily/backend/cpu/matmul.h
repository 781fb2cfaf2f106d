// Matrix products against checkpoint weights, with the weight's storage type
// (F32, F16, BF16) converted on the fly and fp32 accumulation.
#pragma once

#include <cstdint>
#include <span>

#include "lily/backend/cpu/cpu_context.h"
#include "lily/backend/tensor.h"

namespace lily::cpu {

// What the rows of x are. The two kinds sum in different orders, and each
// kind gives a row the same result whatever else shares the call:
// - Prompt: tokens of one prompt, taken four by four in register tiles
//   (short edges padded), so a prompt resumed from a checkpoint is computed
//   bit for bit as a fresh one;
// - Tokens: independent decode tokens (one per sequence of a batch), each its
//   own dot, bit for bit what a product with that one row gives.
enum class Rows { Prompt, Tokens };

// y[t, r] = sum_c W[r, c] * x[t, c] for t < T; x is [T, W.cols], y is [T, W.rows].
// Multi-threaded, vectorised, with fused dequantization for 4- and 8-bit rows.
void matmul(const CpuContext& ctx, const float* x, int64_t T, const Matrix& W, float* y, Rows rows);
// One row is a decode token, more are a prompt.
inline void matmul(const CpuContext& ctx, const float* x, int64_t T, const Matrix& W, float* y) {
  matmul(ctx, x, T, W, y, T == 1 ? Rows::Tokens : Rows::Prompt);
}
// Several products with the same T and kind, e.g. the gate and up
// projections of every expert a token was routed to: for decode tokens
// their rows are split among the threads in one parallel loop, which keeps
// both cores busy where each product alone is too small to split well.
// Every output equals what matmul gives for its product alone.
struct Product {
  const float* x;  // [T, W->cols]
  const Matrix* W;
  float* y;  // [T, W->rows]
};
void matmul_batch(const CpuContext& ctx, std::span<const Product> products, int64_t T, Rows rows);

// The plain version the fast one is tested against: one row converted at a time, one thread.
void matmul_reference(const float* x, int64_t T, const Matrix& W, float* y);

// Row r's group scales and biases of a quantized matrix (F32, F16 or BF16
// stored) as floats: s and b hold W.cols / W.group_size each.
void scales_to_float(Isa isa, const Matrix& W, int64_t r, float* s, float* b);

// y[t] = dot(W row `r`, x[t]) for one row; used for single-output projections.
float dot_row(Isa isa, const Matrix& W, int64_t r, const float* x);

// Copies rows `ids` of W (an embedding table) into out [n, W.cols] as float.
void gather_rows(Isa isa, const Matrix& W, const int32_t* ids, int64_t n, float* out);

}  // namespace lily::cpu
