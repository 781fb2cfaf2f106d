#include "lily/backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "lily/backend/cpu/thread_pool.h"

namespace lily::cpu {

std::vector<float> rope_inv_freq(double theta, int64_t rotary_dim) {
  std::vector<float> f(static_cast<size_t>(rotary_dim / 2));
  const float base = static_cast<float>(theta);
  for (int64_t i = 0; i < rotary_dim / 2; ++i)
    f[i] = 1.0f / std::pow(base, static_cast<float>(2 * i) / static_cast<float>(rotary_dim));
  return f;
}

void apply_rope(float* x, int64_t heads, int64_t head_dim, int64_t rotary_dim, const float* inv_freq, int64_t pos) {
  const int64_t half = rotary_dim / 2;
  for (int64_t i = 0; i < half; ++i) {
    const float angle = inv_freq[i] * static_cast<float>(pos);
    const float c = std::cos(angle), s = std::sin(angle);
    for (int64_t h = 0; h < heads; ++h) {
      float* v = x + h * head_dim;
      const float a = v[i], b = v[i + half];
      v[i] = a * c - b * s;
      v[i + half] = b * c + a * s;
    }
  }
}

namespace {
// One query against the first n cached positions of its kv head. Compiled
// for AVX-512, AVX2+FMA and baseline (the project builds for baseline x86-64).
#if defined(__x86_64__) && defined(__GNUC__)
__attribute__((target_clones("avx512f", "arch=haswell", "default")))
#endif
void attend(const float* qv, int64_t n, const float* K, const float* V, int64_t stride, int64_t hd, float scale,
            float* w, float* o) {
  float mx = -INFINITY;
  for (int64_t p = 0; p < n; ++p) {
    const float* kv = K + p * stride;
    float s = 0.f;
#pragma omp simd reduction(+ : s)
    for (int64_t d = 0; d < hd; ++d) s += qv[d] * kv[d];
    w[p] = s * scale;
    mx = std::max(mx, w[p]);
  }
  float sum = 0.f;
  for (int64_t p = 0; p < n; ++p) sum += (w[p] = std::exp(w[p] - mx));
  std::fill(o, o + hd, 0.f);
  for (int64_t p = 0; p < n; ++p) {
    const float pw = w[p] / sum;
    const float* vv = V + p * stride;
#pragma omp simd
    for (int64_t d = 0; d < hd; ++d) o[d] += pw * vv[d];
  }
}
}  // namespace

void causal_attention(const float* q, int64_t T, int64_t p0, const float* K, const float* V, int64_t heads,
                      int64_t kv_heads, int64_t hd, float scale, float* out) {
  const int64_t group = heads / kv_heads;
  // every (query, head) pair is independent: split them over the pool
  ThreadPool::global().parallel_for(T * heads, 1, [&](int64_t b, int64_t e) {
    std::vector<float> w(static_cast<size_t>(p0 + T));
    for (int64_t j = b; j < e; ++j) {
      const int64_t t = j / heads, h = j % heads, kh = h / group;
      attend(q + (t * heads + h) * hd, p0 + t + 1, K + kh * hd, V + kh * hd, kv_heads * hd, hd, scale, w.data(),
             out + (t * heads + h) * hd);
    }
  });
}

}  // namespace lily::cpu
