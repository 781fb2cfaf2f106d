// Normalisations and activations of the model, over rows of fp32 activations.
#pragma once

#include <cmath>
#include <cstdint>

namespace lily::cpu {

inline float silu(float x) { return x / (1.0f + std::exp(-x)); }
inline float sigmoid(float x) { return 1.0f / (1.0f + std::exp(-x)); }
// log(1 + e^x), with PyTorch's switch to the identity above 20.
inline float softplus(float x) { return x > 20.0f ? x : std::log1p(std::exp(x)); }

// y[t] = x[t] * rsqrt(mean(x[t]^2) + eps) * w, for T rows of `dim`; y may alias x.
void rmsnorm(const float* x, int64_t T, int64_t dim, const float* w, float eps, float* y);

// The GDN output norm: y = rmsnorm(x) * w * silu(z), per row of `dim`; y may alias x.
void gated_rmsnorm(const float* x, const float* z, int64_t rows, int64_t dim, const float* w, float eps, float* y);

// x[i] = x[i] / sqrt(sum(x^2) + eps) * scale over one vector.
void l2norm_scale(float* x, int64_t n, float eps, float scale);

}  // namespace lily::cpu
