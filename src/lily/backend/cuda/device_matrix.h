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

// Eight consecutive weights of a row at once, in one load of the stored
// form: the products' fast path, taken when every row starts on such a load's
// alignment and the columns are a multiple of 8 (MLX groups are too). The
// format is a kernel's template argument, so the unpacking is straight-line
// code (for_each8 in device_math.cuh). Q4W is MLX 4-bit read 32 values (16
// bytes) a load: a row of 2,048 is two loads a lane rather than eight, so
// more of the row is in flight at once; its 32 values share a group's scale.
enum class WeightFormat { F32, F16, BF16, Q4, Q6, Q8, Q4W };

// Values a lane reads in one load of format F.
template <WeightFormat F>
inline constexpr int kChunkValues = F == WeightFormat::Q4W ? 32 : 8;

// The chunked format of m, or false where its rows do not allow one (then the
// kernels read weight_at one value at a time). `wide`: Q4W where it fits.
inline bool chunked_format(const DevMatrix& m, WeightFormat* f, bool wide = true) {
  if (m.cols % 8 != 0) return false;
  int64_t chunk = 0;
  if (m.bits == 0) {
    *f = m.dtype == ElemType::F32 ? WeightFormat::F32 : m.dtype == ElemType::F16 ? WeightFormat::F16 : WeightFormat::BF16;
    chunk = 16;  // two float4 loads or one uint4
  } else {
    if (m.group_size % 8 != 0 || (m.bits != 4 && m.bits != 6 && m.bits != 8)) return false;
    *f = m.bits == 4 ? WeightFormat::Q4 : m.bits == 6 ? WeightFormat::Q6 : WeightFormat::Q8;
    chunk = m.bits == 6 ? 2 : m.bits;  // Q6 reads three 16-bit words
    if (wide && m.bits == 4 && m.cols % 32 == 0 && m.group_size % 32 == 0 && m.row_bytes % 16 == 0 &&
        reinterpret_cast<uintptr_t>(m.data) % 16 == 0) {
      *f = WeightFormat::Q4W;
      return true;
    }
  }
  return m.row_bytes % chunk == 0 && reinterpret_cast<uintptr_t>(m.data) % chunk == 0;
}

// One chunked format that every matrix get(0) .. get(n - 1) allows: Q4W
// only where all of them do, else the narrow formats.
template <class Get>
bool common_format(int64_t n, Get&& get, WeightFormat* f) {
  for (const bool wide : {true, false}) {
    bool ok = n > 0;
    for (int64_t i = 0; i < n && ok; ++i) {
      WeightFormat fi;
      ok = chunked_format(get(i), &fi, wide) && (i == 0 || fi == *f);
      *f = fi;
    }
    if (ok) return true;
  }
  return false;
}

}  // namespace lily::cuda
