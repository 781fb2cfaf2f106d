// Decode products with int8 activations, an opt-in fast path for 4- and
// 8-bit weights (off by default; --int8-activations). Each group of inputs
// is rounded to int8 with its own step (max |x| / 127) and met by the packed
// weights through AVX-512 VNNI byte dot products, 64 multiply-adds an
// instruction, which is what lets a decode step run at the memory's speed
// instead of the float units'. It is lossy: a product moves by at most
// sum over groups of (step / 2) * sum |w|, which the tests hold it to; the
// float path stays the reference. The group's bias term uses the exact
// float input sum.
#pragma once

#include <cstdint>
#include <vector>

#include "lily/backend/cpu/kernels.h"
#include "lily/model/weights.h"

namespace lily::cpu::int8 {

// The CPU has AVX-512 VNNI (with BW and VL).
bool available();
// The process-wide choice; enabling where it is not available is refused (returns false).
bool enable(bool on);
bool enabled();
// A matrix the path takes: 4- or 8-bit, groups of 64 or 128.
bool supports(const Matrix& W);

// One input row rounded group by group. For 4-bit products the bytes are
// split into the even and odd inputs (met by low and high nibbles).
struct Input {
  std::vector<int8_t> q;   // [cols]: even inputs then odd ones for 4-bit
  std::vector<float> step;  // [groups]
  std::vector<float> sum;   // [groups], exact sums of the float inputs
};
Input quantize_input(const float* x, int64_t cols, int group_size, bool split_even_odd);

// out[r] = row r . input for the four rows of `w` (a row may repeat).
void dot_rows(const kernels::QuantRows& w, const Input& in, float out[4]);

}  // namespace lily::cpu::int8
