#include "lily/backend/cpu/elementwise.h"

namespace lily::cpu {

void rmsnorm(const float* x, int64_t T, int64_t dim, const float* w, float eps, float* y) {
  for (int64_t t = 0; t < T; ++t) {
    const float* xr = x + t * dim;
    float* yr = y + t * dim;
    float ss = 0.f;
    for (int64_t i = 0; i < dim; ++i) ss += xr[i] * xr[i];
    const float inv = 1.0f / std::sqrt(ss / static_cast<float>(dim) + eps);
    for (int64_t i = 0; i < dim; ++i) yr[i] = xr[i] * inv * w[i];
  }
}

void gated_rmsnorm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps, float* y) {
  rmsnorm(x, rows, dim, w, eps, y);
  for (int64_t i = 0; i < rows * dim; ++i) y[i] *= silu(z[i]);
}

void l2norm_scale(float* x, int64_t n, float eps, float scale) {
  float ss = 0.f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float f = scale / std::sqrt(ss + eps);
  for (int64_t i = 0; i < n; ++i) x[i] *= f;
}

}  // namespace lily::cpu
