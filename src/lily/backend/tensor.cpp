#include "lily/backend/tensor.h"

#include <string>

#include "lily/error.h"
#include "lily/io/gguf.h"
#include "lily/quant/affine.h"
#include "lily/quant/gguf_blocks.h"

namespace lily {

const char* device_name(Device d) { return d == Device::Cuda ? "cuda" : "cpu"; }

size_t Matrix::row_bytes() const {
  if (ggml_blocks()) {
    int64_t elems = 1, bytes = 1;
    ggml_block_layout(static_cast<GgmlType>(ggml_type), &elems, &bytes);
    return static_cast<size_t>(cols / elems * bytes);
  }
  return quantized() ? quant::packed_row_bytes(cols, bits) : static_cast<size_t>(cols) * dtype_size(dtype);
}

size_t Matrix::scale_bytes() const {
  return quantized() ? static_cast<size_t>(rows * (cols / group_size)) * dtype_size(scale_dtype) : 0;
}

size_t Matrix::bytes() const { return static_cast<size_t>(rows) * row_bytes() + 2 * scale_bytes(); }

void Matrix::row_to_float(int64_t r, float* out) const {
  if (device != Device::Cpu) throw Error("Matrix::row_to_float: the matrix is on the " + std::string(device_name(device)));
  if (ggml_blocks()) {
    quant::dequantize_gguf(static_cast<GgmlType>(ggml_type), static_cast<const uint8_t*>(row(r)), out, cols);
    return;
  }
  if (!quantized()) {
    convert_to_float(dtype, row(r), out, static_cast<size_t>(cols));
    return;
  }
  const int64_t groups = cols / group_size;
  const size_t off = static_cast<size_t>(r * groups) * dtype_size(scale_dtype);
  quant::dequantize_row(static_cast<const uint8_t*>(row(r)), static_cast<const uint8_t*>(scales) + off,
                        static_cast<const uint8_t*>(biases) + off, scale_dtype, cols, bits, group_size, out);
}

Matrix affine_copy_of_blocks(const Matrix& m) {
  if (!m.ggml_blocks() || m.device != Device::Cpu)
    throw Error("affine_copy_of_blocks: not a host matrix of a GGUF block format");
  auto form = std::make_shared<const quant::AffineForm>(
      quant::gguf_to_affine(static_cast<GgmlType>(m.ggml_type), static_cast<const uint8_t*>(m.data), m.rows, m.cols));
  Matrix a;
  a.rows = m.rows;
  a.cols = m.cols;
  a.bits = form->bits;
  a.group_size = form->group_size;
  a.scale_dtype = DType::F32;
  a.data = form->packed.data();
  a.scales = form->scales.data();
  a.biases = form->biases.data();
  a.owner = form;
  return a;
}

Vector::Vector(std::vector<float> v) {
  auto held = std::make_shared<const std::vector<float>>(std::move(v));
  ptr = held->data();
  n = static_cast<int64_t>(held->size());
  owner = std::move(held);
}

Tensor Tensor::slice(int64_t r0, int64_t n) const {
  if (r0 < 0 || n < 0 || r0 + n > rows)
    throw Error("Tensor::slice: rows [" + std::to_string(r0) + ", " + std::to_string(r0 + n) + ") of " +
                std::to_string(rows));
  Tensor t = *this;
  t.rows = n;
  t.data = static_cast<uint8_t*>(data) + static_cast<size_t>(r0 * cols) * dtype_size(dtype);
  return t;
}

Tensor Tensor::reshape(int64_t r, int64_t c) const {
  if (r * c != rows * cols)
    throw Error("Tensor::reshape: [" + std::to_string(rows) + ", " + std::to_string(cols) + "] is not [" +
                std::to_string(r) + ", " + std::to_string(c) + "]");
  Tensor t = *this;
  t.rows = r;
  t.cols = c;
  return t;
}

float* Tensor::f32() const {
  if (device != Device::Cpu || dtype != DType::F32) throw Error("Tensor::f32: not a host F32 tensor");
  return static_cast<float*>(data);
}

}  // namespace lily
