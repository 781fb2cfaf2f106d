#include "lily/backend/cpu/attention.h"

#include <algorithm>
#include <cmath>

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

void causal_attention(const float* q, int64_t T, int64_t p0, const float* K, const float* V, int64_t heads,
                      int64_t kv_heads, int64_t hd, float scale, float* out) {
  const int64_t group = heads / kv_heads;
  std::vector<float> w(static_cast<size_t>(p0 + T));
  for (int64_t t = 0; t < T; ++t) {
    const int64_t n = p0 + t + 1;
    for (int64_t h = 0; h < heads; ++h) {
      const float* qv = q + (t * heads + h) * hd;
      const int64_t kh = h / group;
      float mx = -INFINITY;
      for (int64_t p = 0; p < n; ++p) {
        const float* kv = K + (p * kv_heads + kh) * hd;
        float s = 0.f;
        for (int64_t d = 0; d < hd; ++d) s += qv[d] * kv[d];
        w[p] = s * scale;
        mx = std::max(mx, w[p]);
      }
      float sum = 0.f;
      for (int64_t p = 0; p < n; ++p) sum += (w[p] = std::exp(w[p] - mx));
      float* o = out + (t * heads + h) * hd;
      std::fill(o, o + hd, 0.f);
      for (int64_t p = 0; p < n; ++p) {
        const float pw = w[p] / sum;
        const float* vv = V + (p * kv_heads + kh) * hd;
        for (int64_t d = 0; d < hd; ++d) o[d] += pw * vv[d];
      }
    }
  }
}

}  // namespace lily::cpu
