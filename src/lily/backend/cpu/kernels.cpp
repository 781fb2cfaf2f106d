#include "lily/backend/cpu/kernels.h"

#include <cstring>

#if defined(__x86_64__) && defined(__GNUC__)
#define LILY_MULTIVERSION __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define LILY_MULTIVERSION
#endif

namespace lily::cpu::kernels {

LILY_MULTIVERSION float dot(const float* a, const float* b, int64_t n) {
  float s = 0.f;
#pragma omp simd reduction(+ : s)
  for (int64_t i = 0; i < n; ++i) s += a[i] * b[i];
  return s;
}

LILY_MULTIVERSION void axpy(float a, const float* x, float* y, int64_t n) {
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) y[i] += a * x[i];
}

LILY_MULTIVERSION void bf16_to_f32(const uint16_t* src, float* dst, int64_t n) {
  auto* out = reinterpret_cast<uint32_t*>(dst);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<uint32_t>(src[i]) << 16;
}

LILY_MULTIVERSION void group_sums(const float* x, int64_t n, int gs, float* xsum) {
  for (int64_t g = 0; g < n / gs; ++g) {
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (int j = 0; j < gs; ++j) s += x[g * gs + j];
    xsum[g] = s;
  }
}

LILY_MULTIVERSION float dot_q4(const uint8_t* q, const float* x, const float* xsum, const float* scales,
                               const float* biases, int64_t groups, int gs) {
  float total = 0.f;
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* qg = q + g * gs / 2;
    const float* xg = x + g * gs;
    float acc = 0.f;
#pragma omp simd reduction(+ : acc)
    for (int j = 0; j < gs / 2; ++j) {
      const uint8_t b = qg[j];
      acc += static_cast<float>(b & 15) * xg[2 * j] + static_cast<float>(b >> 4) * xg[2 * j + 1];
    }
    total += scales[g] * acc + biases[g] * xsum[g];
  }
  return total;
}

LILY_MULTIVERSION float dot_q8(const uint8_t* q, const float* x, const float* xsum, const float* scales,
                               const float* biases, int64_t groups, int gs) {
  float total = 0.f;
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* qg = q + g * gs;
    const float* xg = x + g * gs;
    float acc = 0.f;
#pragma omp simd reduction(+ : acc)
    for (int j = 0; j < gs; ++j) acc += static_cast<float>(qg[j]) * xg[j];
    total += scales[g] * acc + biases[g] * xsum[g];
  }
  return total;
}

}  // namespace lily::cpu::kernels
