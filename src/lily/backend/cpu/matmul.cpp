#include "lily/backend/cpu/matmul.h"

#include <vector>

namespace lily::cpu {

namespace {
inline float dot(const float* a, const float* b, int64_t n) {
  float s = 0.f;
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}
}  // namespace

void matmul(const float* x, int64_t T, const Matrix& W, float* y) {
  const int64_t R = W.rows, C = W.cols;
  if (!W.quantized() && W.dtype == DType::F32) {
    const auto* w = static_cast<const float*>(W.data);
    for (int64_t r = 0; r < R; ++r)
      for (int64_t t = 0; t < T; ++t) y[t * R + r] = dot(w + r * C, x + t * C, C);
    return;
  }
  // Convert each weight row once and reuse it for every input row.
  std::vector<float> row(static_cast<size_t>(C));
  for (int64_t r = 0; r < R; ++r) {
    W.row_to_float(r, row.data());
    for (int64_t t = 0; t < T; ++t) y[t * R + r] = dot(row.data(), x + t * C, C);
  }
}

float dot_row(const Matrix& W, int64_t r, const float* x) {
  std::vector<float> row(static_cast<size_t>(W.cols));
  W.row_to_float(r, row.data());
  return dot(row.data(), x, W.cols);
}

void gather_rows(const Matrix& W, const int32_t* ids, int64_t n, float* out) {
  for (int64_t i = 0; i < n; ++i)
    W.row_to_float(ids[i], out + i * W.cols);
}

}  // namespace lily::cpu
