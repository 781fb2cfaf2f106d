// Element types found in checkpoint files and their conversion to float.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace lily {

enum class DType { F32, F16, BF16, F64, I64, I32, I16, I8, U8, U32, Bool };

// Size of one element in bytes.
size_t dtype_size(DType t);
// The safetensors spelling ("BF16", "F32", ...).
std::string_view dtype_name(DType t);
// Parses the safetensors spelling; returns false when unknown.
bool parse_dtype(std::string_view s, DType* out);

inline float bf16_to_float(uint16_t v) {
  uint32_t bits = static_cast<uint32_t>(v) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// Round to nearest even, as PyTorch does when casting float to bfloat16.
inline uint16_t float_to_bf16(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof bits);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>(bits >> 16);
}

float f16_to_float(uint16_t v);
uint16_t float_to_f16(float f);

// Converts n elements of a floating-point type (F32, F16, BF16) to float.
void convert_to_float(DType t, const void* src, float* dst, size_t n);

}  // namespace lily
