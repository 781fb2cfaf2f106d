// Decode products of GGUF block formats with int8 activations: the rows are
// read where they lie in the file, in ggml's own blocks (Q4_0, Q8_0, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS), and each block's codes meet the input through byte dot
// products. The input is rounded as llama.cpp rounds it for each format: in
// groups of 32 for Q4_0 and Q8_0 (their blocks), with one step per 256 for
// the super-block formats, whose sub-blocks then sum in 32-bit integers with
// their integer scales, one float multiply-add a super-block. The error bound
// is at most sum over groups of (step / 2) * sum |w| (the steps given per 32
// either way). The mins of Q2_K, Q4_K and Q5_K meet the exact float sums of
// the input. The float path (dequantize, then a float dot) stays the reference.
#pragma once

#include <cstdint>
#include <vector>

#include "lily/backend/cpu/int8_dot.h"
#include "lily/backend/tensor.h"
#include "lily/io/gguf.h"

namespace lily::cpu::ggml_int8 {

// Steps and exact sums are given per this many inputs, whatever the rounding group.
inline constexpr int kGroup = 32;

// A matrix of a block format these kernels take, in whole blocks per row.
bool supports(const Matrix& W);
// Whether these kernels exist for an int8 kernel family: the x86 ones (AVX2,
// AVX-512 VNNI). On Arm, GGUF blocks take the float path.
bool has_kernel(int8::Kernel k);

// One input row: int8 codes in their natural order with a step and an exact
// float sum per group of 32, and the sums of each four codes (what the
// formats stored with an offset, q - 8 or q - 32, subtract).
struct Input {
  int8::Input rounded;              // q [cols], step and sum [cols / 32]
  std::vector<int32_t> sum4;        // [cols / 4]
  std::vector<int32_t> sum4_x32;    // -32 x sum4: where Q6_K's accumulators start
  std::vector<float> sum16;         // [cols / 16]: exact sums of each 16 float inputs (Q2_K's mins)
  std::vector<int16_t> codes16;     // [cols / 16]: sums of each 16 codes (Q6_K's and Q3_K's offsets)
  // Per 256 inputs (when cols is a multiple): the eight steps then the eight
  // sums (Q4_K, Q5_K), and each step twice (Q6_K's sub-blocks of 16).
  std::vector<float> steps_sums, steps_twice;
};
Input quantize_input(Isa isa, GgmlType type, const float* x, int64_t cols);

// out[i] = row (r0 + i) of W . input, for i < n <= 4; `ahead` > 0 prefetches
// each row's bytes that far ahead (and five times as far into L2).
void dot_rows(int8::Kernel k, const Matrix& W, int64_t r0, int64_t n, const Input& in, float* out, int64_t ahead = 0);

// The prompt (and verify) form: out[t * 4 + i] = row (r0 + i) . in[t] for
// t < nt, each block of the rows decoded once for a pair of inputs (with
// AVX2 and AVX-512 VNNI alike). Every result equals what dot_rows gives for
// its input alone.
void dot_tile(int8::Kernel k, const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t nt, float* out,
              int64_t ahead = 0);

}  // namespace lily::cpu::ggml_int8
