// ggml's block formats, written: the quantizers `lily quantize --gguf` uses.
// Q8_0 and Q4_0 follow llama.cpp's reference quantizers (gguf-py's
// `quants.py` computes them bit for bit the same way), so a file Lily writes
// holds the bytes llama.cpp's tools would write for the same floats. Q4_K and
// Q6_K use a direct one-pass fit (each sub-block's range, its scale rounded
// to the super-block's grid) rather than llama.cpp's iterative search: valid
// blocks every reader decodes, at slightly higher error.
#pragma once

#include <cstdint>
#include <string>

#include "lily/io/gguf.h"

namespace lily::quant {

// Whether quantize_gguf writes this type (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q6_K).
bool gguf_quantizable(GgmlType t);

// `rows` rows of `cols` floats as blocks of `t`. Throws lily::Error when the
// type is not written here or `cols` does not split into its blocks.
std::string quantize_gguf(GgmlType t, const float* x, int64_t rows, int64_t cols);

}  // namespace lily::quant
