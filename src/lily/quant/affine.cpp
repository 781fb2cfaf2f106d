#include "lily/quant/affine.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace lily::quant {

bool supported_bits(int bits) { return bits == 2 || bits == 3 || bits == 4 || bits == 5 || bits == 6 || bits == 8; }
bool supported_group_size(int gs) { return gs == 32 || gs == 64 || gs == 128; }

uint32_t unpack(const uint8_t* row, int64_t index, int bits) {
  const uint64_t bit = static_cast<uint64_t>(index) * static_cast<uint64_t>(bits);
  const uint8_t* p = row + bit / 8;
  const unsigned shift = bit % 8;
  // a value spans at most two bytes (bits <= 8)
  uint32_t v = p[0] >> shift;
  if (shift + bits > 8) v |= static_cast<uint32_t>(p[1]) << (8 - shift);
  return v & ((1u << bits) - 1u);
}

void pack(uint8_t* row, int64_t index, int bits, uint32_t q) {
  const uint64_t bit = static_cast<uint64_t>(index) * static_cast<uint64_t>(bits);
  row[bit / 8] |= static_cast<uint8_t>(q << (bit % 8));
  if (bit % 8 + bits > 8) row[bit / 8 + 1] |= static_cast<uint8_t>(q >> (8 - bit % 8));
}

namespace {
float scale_at(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::F32: return static_cast<const float*>(p)[i];
    case DType::BF16: return bf16_to_float(static_cast<const uint16_t*>(p)[i]);
    default: return f16_to_float(static_cast<const uint16_t*>(p)[i]);
  }
}
}  // namespace

// The plain form; the CPU kernels have their own, compiled per vector width
// (kernels::dequantize_row), which the tests hold to this one.
void dequantize_row(const uint8_t* packed, const void* scales, const void* biases, DType st, int64_t cols, int bits,
                    int group_size, float* out) {
  for (int64_t g = 0; g < cols / group_size; ++g) {
    const float s = scale_at(scales, st, g), b = scale_at(biases, st, g);
    float* o = out + g * group_size;
    if (bits == 4) {  // the common widths get byte loops the compiler vectorises
      const uint8_t* p = packed + g * group_size / 2;
#pragma omp simd
      for (int j = 0; j < group_size / 2; ++j) {
        o[2 * j] = s * static_cast<float>(p[j] & 15) + b;
        o[2 * j + 1] = s * static_cast<float>(p[j] >> 4) + b;
      }
    } else if (bits == 8) {
      const uint8_t* p = packed + g * group_size;
#pragma omp simd
      for (int j = 0; j < group_size; ++j) o[j] = s * static_cast<float>(p[j]) + b;
    } else {
      for (int64_t c = 0; c < group_size; ++c) o[c] = s * static_cast<float>(unpack(packed, g * group_size + c, bits)) + b;
    }
  }
}

QuantizedRows quantize(const float* w, int64_t rows, int64_t cols, int bits, int group_size) {
  QuantizedRows q;
  const size_t row_bytes = packed_row_bytes(cols, bits);
  q.packed.assign(static_cast<size_t>(rows) * row_bytes, 0);
  const int64_t groups = cols / group_size;
  q.scales.resize(static_cast<size_t>(rows * groups));
  q.biases.resize(static_cast<size_t>(rows * groups));
  const float n_bins = static_cast<float>((1 << bits) - 1);
  const float eps = 1e-7f;
  for (int64_t r = 0; r < rows; ++r) {
    uint8_t* out = q.packed.data() + static_cast<size_t>(r) * row_bytes;
    for (int64_t g = 0; g < groups; ++g) {
      const float* x = w + r * cols + g * group_size;
      float lo = std::numeric_limits<float>::infinity(), hi = -lo;
      for (int j = 0; j < group_size; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
      // The edge of larger magnitude is represented exactly; the scale's sign
      // points from it into the group.
      const bool low_edge = std::abs(lo) > std::abs(hi);
      float scale = std::max((hi - lo) / n_bins, eps);
      if (!low_edge) scale = -scale;
      const float edge = low_edge ? lo : hi;
      const float q0 = std::rint(edge / scale);
      float bias = 0;
      if (q0 != 0) {
        scale = edge / q0;
        bias = edge;
      }
      for (int j = 0; j < group_size; ++j) {
        const float v = std::clamp(std::rint((x[j] - bias) / scale), 0.0f, n_bins);
        pack(out, g * group_size + j, bits, static_cast<uint32_t>(v));
      }
      q.scales[r * groups + g] = scale;
      q.biases[r * groups + g] = bias;
    }
  }
  return q;
}

}  // namespace lily::quant
