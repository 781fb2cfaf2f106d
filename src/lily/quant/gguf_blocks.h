// ggml's block formats, turned back into floats: the plain reference that
// every faster GGUF kernel is tested against. Each format is decoded with
// the arithmetic of llama.cpp's gguf-py (`gguf/quants.py`), in float32 and in
// its order, so the results are bit-identical to it (the tests check that on
// blocks it decoded, edge values included).
#pragma once

#include <cstdint>

#include "lily/io/gguf.h"

namespace lily::quant {

// Whether dequantize_gguf decodes this type.
bool gguf_type_supported(GgmlType t);

// Decodes `n` elements (whole blocks) of type `t` from `src` into `dst`.
// Throws lily::Error for a type it does not decode or a partial block.
void dequantize_gguf(GgmlType t, const uint8_t* src, float* dst, int64_t n);

// The eight 6-bit scales and mins of a Q4_K or Q5_K super-block, from its
// twelve bytes at `s` (the CPU's prompt tiles unpack them per row as well).
void scale_min_k4(const uint8_t* s, int* sc, int* mn);

}  // namespace lily::quant
