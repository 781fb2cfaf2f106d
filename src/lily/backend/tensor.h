// The data the backends compute on, below the model: where it lives (host
// memory or a GPU), its element type (plain, or MLX's packed affine formats
// with their scales) and its shape.
//   Matrix  a weight matrix, read-only, from a checkpoint (mapped in place on
//           the CPU, uploaded once to a GPU)
//   Vector  a small weight vector (a norm, the conv taps, the GDN decay)
//   Tensor  an activation [rows, cols], allocated by a backend
// All three are views with shared ownership of what they point into, so a
// backend's copy of the weights keeps its device memory alive and a tensor
// handed back from an op stays valid while anyone holds it.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "lily/io/dtype.h"

namespace lily {

enum class Device { Cpu, Cuda };
const char* device_name(Device d);

// A row-major [rows, cols] matrix used as y = W x. Either plain (F32, F16,
// BF16 elements) or affine-quantized as MLX stores it: packed `bits`-bit
// rows with a scale and a bias per group of `group_size` inputs ([rows,
// cols / group_size] of `scale_dtype`).
struct Matrix {
  DType dtype = DType::F32;  // element type of a plain matrix
  const void* data = nullptr;
  int64_t rows = 0;
  int64_t cols = 0;
  int bits = 0;  // > 0: quantized
  int group_size = 0;
  const void* scales = nullptr;
  const void* biases = nullptr;
  DType scale_dtype = DType::BF16;
  int ggml_type = -1;  // >= 0: a ggml block format (GgmlType) of a GGUF file, decoded row by row
  Device device = Device::Cpu;
  std::shared_ptr<const void> owner = nullptr;  // what `data` points into, when not the mapped file

  bool quantized() const { return bits > 0; }
  bool ggml_blocks() const { return ggml_type >= 0; }
  size_t row_bytes() const;
  size_t scale_bytes() const;  // of `scales` (and of `biases`)
  size_t bytes() const;        // weights plus scales and biases
  const void* row(int64_t r) const { return static_cast<const uint8_t*>(data) + static_cast<size_t>(r) * row_bytes(); }
  // Row `r` as floats (converted or dequantized); host matrices only.
  void row_to_float(int64_t r, float* out) const;
};

// A host matrix of a GGUF block format rewritten as affine groups of the
// same values (quant::gguf_to_affine; memory the result owns): what a backend
// without kernels for the block formats binds instead.
Matrix affine_copy_of_blocks(const Matrix& m);

// A float vector of weights. On the host it owns its floats (shared); on a
// device it points into memory its owner keeps.
struct Vector {
  Device device = Device::Cpu;
  const float* ptr = nullptr;
  int64_t n = 0;
  std::shared_ptr<const void> owner;

  Vector() = default;
  Vector(std::vector<float> v);  // NOLINT: weights are built as plain vectors
  const float* data() const { return ptr; }
  size_t size() const { return static_cast<size_t>(n); }
  bool empty() const { return n == 0; }
  // host vectors only
  float operator[](size_t i) const { return ptr[i]; }
  const float* begin() const { return ptr; }
  const float* end() const { return ptr + n; }
};

// An activation: [rows, cols] of `dtype`, contiguous, on `device`.
struct Tensor {
  Device device = Device::Cpu;
  DType dtype = DType::F32;
  int64_t rows = 0, cols = 0;
  void* data = nullptr;
  std::shared_ptr<void> owner;

  int64_t numel() const { return rows * cols; }
  size_t bytes() const { return static_cast<size_t>(numel()) * dtype_size(dtype); }
  // Rows [r0, r0 + n), sharing the storage.
  Tensor slice(int64_t r0, int64_t n) const;
  // The same elements seen as [rows, cols] (rows * cols unchanged).
  Tensor reshape(int64_t rows, int64_t cols) const;
  // Host F32 access, checked.
  float* f32() const;
};

}  // namespace lily
