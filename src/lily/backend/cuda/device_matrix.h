// A weight matrix as the CUDA kernels read it: device pointers to the rows
// (plain F32/F16/BF16, or MLX's packed affine values) and to the group scales
// and biases. Plain data, passed to kernels by value.
#pragma once

#include <cstdint>

namespace lily::cuda {

enum class ElemType : int { F32 = 0, F16 = 1, BF16 = 2 };

struct DevMatrix {
  const uint8_t* data = nullptr;
  const uint8_t* scales = nullptr;
  const uint8_t* biases = nullptr;
  int64_t rows = 0, cols = 0, row_bytes = 0;
  ElemType dtype = ElemType::F32;        // plain matrices
  int bits = 0, group_size = 0;          // bits > 0: quantized
  ElemType scale_dtype = ElemType::BF16;
};

}  // namespace lily::cuda
