// What the int8-input tests (decode kernels, AMX prompt tiles) share: a
// quantized matrix with its scales stored in a chosen type, and the bound
// their outputs must keep to.
#pragma once

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "lily/model/weights.h"
#include "lily/quant/affine.h"

namespace lily::test {

// `w` [rows, cols] quantized MLX-affine; scales and biases kept as `scale_dtype` (F32, F16 or BF16).
struct QuantizedMatrix {
  quant::QuantizedRows q;
  std::vector<uint16_t> scales16, biases16;
  Matrix m;
  QuantizedMatrix(const std::vector<float>& w, int64_t rows, int64_t cols, int bits, int group_size, DType scale_dtype);
};

// Random weights [rows, cols] and inputs [tokens, cols] from N(0, 1), with
// the edges of the int8 rounding in the inputs: a group of zeros (step 0) in
// the first token and a group of large values in the second.
struct Int8Case {
  std::vector<float> w, x;
};
Int8Case int8_case(std::mt19937& rng, int64_t rows, int64_t cols, int64_t tokens, int group_size);

// Every y[t, r] within the rounding the int8 path makes of x[t] of the
// exact product x[t] . W row r: at most sum over groups of (step / 2) *
// sum |w| (a 0.1% and 1e-5 relative allowance for float sums); the first
// output beyond it is named.
::testing::AssertionResult within_int8_rounding(const Matrix& W, const float* x, int64_t T, const float* y);

}  // namespace lily::test
