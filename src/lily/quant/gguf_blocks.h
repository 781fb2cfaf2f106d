// ggml's block formats, turned back into floats: the plain reference that
// every faster GGUF kernel is tested against. Each format is decoded with
// the arithmetic of llama.cpp's gguf-py (`gguf/quants.py`), in float32 and in
// its order, so the results are bit-identical to it (the tests check that on
// blocks it decoded, edge values included).
#pragma once

#include <cstdint>
#include <vector>

#include "lily/io/gguf.h"

namespace lily::quant {

// Whether dequantize_gguf decodes this type.
bool gguf_type_supported(GgmlType t);

// Decodes `n` elements (whole blocks) of type `t` from `src` into `dst`.
// Throws lily::Error for a type it does not decode or a partial block.
void dequantize_gguf(GgmlType t, const uint8_t* src, float* dst, int64_t n);

// A block matrix as affine groups holding the same values to the last bit
// or so (w = scale * code + bias, unsigned codes of `bits` packed as
// affine.h packs them, float32 scales and biases; Q2_K, Q3_K and Q6_K have
// groups of 16, the others of 32): how a backend without kernels for the
// block formats reads them. The codes are 4, 6 or 8 bits wide, the widths
// the fast kernels read. Throws lily::Error for a type it cannot take apart
// (F32, F16 and BF16 are plain matrices already) or rows of partial blocks.
struct AffineForm {
  int bits = 0, group_size = 0;
  std::vector<uint8_t> packed;
  std::vector<float> scales, biases;  // rows * cols / group_size
};
AffineForm gguf_to_affine(GgmlType t, const uint8_t* src, int64_t rows, int64_t cols);

// The eight 6-bit scales and mins of a Q4_K or Q5_K super-block, from its
// twelve bytes at `s` (the CPU's prompt tiles unpack them per row as well).
void scale_min_k4(const uint8_t* s, int* sc, int* mn);

}  // namespace lily::quant
