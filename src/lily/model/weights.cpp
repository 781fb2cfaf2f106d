#include "lily/model/weights.h"

#include "lily/quant/affine.h"

namespace lily {

size_t Matrix::row_bytes() const {
  return quantized() ? quant::packed_row_bytes(cols, bits) : static_cast<size_t>(cols) * dtype_size(dtype);
}

size_t Matrix::bytes() const {
  size_t b = static_cast<size_t>(rows) * row_bytes();
  if (quantized()) b += 2 * static_cast<size_t>(rows * (cols / group_size)) * dtype_size(scale_dtype);
  return b;
}

void Matrix::row_to_float(int64_t r, float* out) const {
  if (!quantized()) {
    convert_to_float(dtype, row(r), out, static_cast<size_t>(cols));
    return;
  }
  const int64_t groups = cols / group_size;
  const size_t off = static_cast<size_t>(r * groups) * dtype_size(scale_dtype);
  quant::dequantize_row(static_cast<const uint8_t*>(row(r)), static_cast<const uint8_t*>(scales) + off,
                        static_cast<const uint8_t*>(biases) + off, scale_dtype, cols, bits, group_size, out);
}

}  // namespace lily
