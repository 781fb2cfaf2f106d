// Decode products with int8 activations, the fast path for 4- and 8-bit
// weights (the library's default is off; the CLI turns it on where a kernel
// exists, --float-activations keeps it off). Each group of inputs is
// rounded to int8 with its own step (max |x| / 127) and met by the packed
// weights through byte dot products (AVX-512 VNNI: 64 multiply-adds an
// instruction; AVX2 elsewhere), which is what lets a decode step run at the
// memory's speed instead of the float units'. It is lossy: a product moves
// by at most sum over groups of (step / 2) * sum |w|, which the tests hold
// it to; the float path stays the reference. The group's bias term uses the
// exact float input sum.
#pragma once

#include <cstdint>
#include <vector>

#include "lily/backend/cpu/cpu_context.h"
#include "lily/backend/tensor.h"

namespace lily::cpu::int8 {

// The kernels: AVX-512 VNNI byte dot products, or AVX2 (byte products
// summed in 16 then 32 bits) on CPUs without VNNI; on Arm, SDOT (four byte
// products into a 32-bit lane), and with I8MM the prompts' 2 x 8 x 2 byte
// matrix products (neon_int8.h).
enum class Kernel { None, Vnni, Avx2, ArmDot, ArmI8mm };
// The kernel a context at this ISA level uses (None below AVX2).
Kernel kernel_for(Isa isa);

// The packed formats int8 inputs meet (here and on AMX tiles): 4- or 8-bit,
// groups of 64 or 128, F32/F16/BF16 scales.
bool packed_format(const Matrix& W);
// A matrix this path takes: a packed format, rows of an even number of
// groups, at most 256 of them.
bool supports(const Matrix& W);

// One input row rounded group by group. For 4-bit products the bytes are
// split into the even and odd inputs (met by low and high nibbles).
struct Input {
  std::vector<int8_t> q;   // [cols]: even inputs then odd ones for 4-bit
  std::vector<float> step;  // [groups]
  std::vector<float> sum;   // [groups], exact sums of the float inputs
};
Input quantize_input(Isa isa, const float* x, int64_t cols, int group_size, bool split_even_odd);

// out[i] = row (r0 + i) of W . input, for i < n <= 4; W's scales and biases
// (F32, F16 or BF16) are read where they lie. `ahead` > 0 prefetches each
// row's bytes that far past it into L1, and five times as far into L2, as
// the loop goes.
void dot_rows(Kernel k, const Matrix& W, int64_t r0, int64_t n, const Input& in, float* out, int64_t ahead = 0);
// The same for nt inputs: out[t * 4 + i] = row (r0 + i) . in[t]. With AVX2
// a pair of inputs meets each chunk of the rows, unpacked once; every
// result equals what dot_rows gives its input alone.
void dot_tile(Kernel k, const Matrix& W, int64_t r0, int64_t n, const Input* in, int64_t nt, float* out,
              int64_t ahead = 0);

}  // namespace lily::cpu::int8
