// MLX's affine quantization: each group of `group_size` consecutive inputs of
// a row has a scale and a bias, w = scale * q + bias, with q an unsigned
// `bits`-bit integer. The packed row is a little-endian bit stream (element 0
// in the lowest bits of byte 0), so 3-, 5- and 6-bit values cross byte and
// word boundaries exactly as mlx stores them.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "lily/io/dtype.h"

namespace lily::quant {

bool supported_bits(int bits);          // 2, 3, 4, 5, 6, 8
bool supported_group_size(int gs);      // 32, 64, 128
inline size_t packed_row_bytes(int64_t cols, int bits) { return static_cast<size_t>(cols) * bits / 8; }

// The q value at `index` of a packed row.
uint32_t unpack(const uint8_t* row, int64_t index, int bits);
// ORs `q` (< 2^bits) into a zeroed packed row at `index`.
void pack(uint8_t* row, int64_t index, int bits, uint32_t q);

// out[c] = scale[g] * q[c] + bias[g] for one row of `cols`; scales and biases
// are the row's `cols / group_size` entries in `scale_dtype` (F32, F16, BF16).
void dequantize_row(const uint8_t* packed, const void* scales, const void* biases, DType scale_dtype, int64_t cols,
                    int bits, int group_size, float* out);

struct QuantizedRows {
  std::vector<uint8_t> packed;              // rows * packed_row_bytes
  std::vector<float> scales, biases;        // rows * cols / group_size, before rounding to the stored dtype
};

// Quantizes `rows` x `cols` floats the way mlx.core.quantize does: min and
// max per group, the edge of larger magnitude mapped exactly onto a grid
// point. As in mlx, q is computed with the float scale; the caller rounds the
// scales and biases to the stored dtype when writing them.
QuantizedRows quantize(const float* w, int64_t rows, int64_t cols, int bits, int group_size);

}  // namespace lily::quant
