#include "lily/backend/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "lily/backend/cpu/isa_variants.h"
#include "lily/backend/cpu/kernels.h"
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
// The heads of one kv head (`group` of them) at one position against its
// first n cached positions. Scores come from 4 x 4 tiles of dot products
// (four heads by four keys, each loaded row met four times); each cached
// value row is then read once for all the heads.
LILY_ISA_BODY void attend_group_body(Isa isa, const float* q, int64_t group, int64_t n, const float* K, const float* V, int64_t stride,
                  int64_t hd, float scale, float* scores, float* out) {
  for (int64_t h0 = 0; h0 < group; h0 += 4) {
    const float* qs[4];
    for (int64_t i = 0; i < 4; ++i) qs[i] = q + std::min(h0 + i, group - 1) * hd;  // a short quad repeats its last head
    for (int64_t p0 = 0; p0 < n; p0 += 4) {
      const float* ks[4];
      for (int64_t j = 0; j < 4; ++j) ks[j] = K + std::min(p0 + j, n - 1) * stride;
      float tile[4][4];
      kernels::dot4x4(isa, qs, ks, hd, tile);
      for (int64_t i = 0; i < std::min<int64_t>(4, group - h0); ++i)
        for (int64_t j = 0; j < std::min<int64_t>(4, n - p0); ++j) scores[(h0 + i) * n + p0 + j] = tile[i][j] * scale;
    }
  }
  for (int64_t h = 0; h < group; ++h) {
    float* w = scores + h * n;
    float mx = -INFINITY;
    for (int64_t p = 0; p < n; ++p) mx = std::max(mx, w[p]);
    float sum = 0.f;
    for (int64_t p = 0; p < n; ++p) sum += (w[p] = std::exp(w[p] - mx));
    for (int64_t p = 0; p < n; ++p) w[p] /= sum;
    std::fill(out + h * hd, out + (h + 1) * hd, 0.f);
  }
  for (int64_t p = 0; p < n; ++p) {
    const float* vv = V + p * stride;
    for (int64_t h = 0; h < group; ++h) {
      const float pw = scores[h * n + p];
      float* o = out + h * hd;
#pragma omp simd
      for (int64_t d = 0; d < hd; ++d) o[d] += pw * vv[d];
    }
  }
}

LILY_ISA_VARIANTS("avx2,fma,f16c", void, attend_group,
                  (Isa isa, const float* q, int64_t group, int64_t n, const float* K, const float* V, int64_t stride,
                   int64_t hd, float scale, float* scores, float* out),
                  (isa, q, group, n, K, V, stride, hd, scale, scores, out))

void attend(Isa isa, const float* q, int64_t group, int64_t n, const float* K, const float* V, int64_t stride,
            int64_t hd, float scale, float* scores, float* out) {
  LILY_ISA_DISPATCH(isa, attend_group, (isa, q, group, n, K, V, stride, hd, scale, scores, out));
}
}  // namespace

void causal_attention(const CpuContext& ctx, const float* q, int64_t T, int64_t p0, const float* K, const float* V, int64_t heads,
                      int64_t kv_heads, int64_t hd, float scale, float* out) {
  const int64_t group = heads / kv_heads;
  // every (query position, kv head) pair is independent: split them over the pool
  ctx.threads().parallel_for(T * kv_heads, 1, [&](int64_t b, int64_t e) {
    std::vector<float> scores(static_cast<size_t>(group * (p0 + T)));
    for (int64_t j = b; j < e; ++j) {
      const int64_t t = j / kv_heads, kh = j % kv_heads;
      attend(ctx.isa, q + (t * heads + kh * group) * hd, group, p0 + t + 1, K + kh * hd, V + kh * hd, kv_heads * hd, hd,
                   scale, scores.data(), out + (t * heads + kh * group) * hd);
    }
  });
}

}  // namespace lily::cpu
