#include "lily/backend/cpu/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "lily/backend/cpu/elementwise.h"
#include "lily/backend/cpu/matmul.h"

namespace lily::cpu {

Route moe_route(const float* logits, int64_t T, int64_t E, int64_t k) {
  Route r;
  r.expert.resize(static_cast<size_t>(T * k));
  r.weight.resize(static_cast<size_t>(T * k));
  std::vector<float> p(static_cast<size_t>(E));
  std::vector<int32_t> idx(static_cast<size_t>(E));
  for (int64_t t = 0; t < T; ++t) {
    const float* l = logits + t * E;
    const float mx = *std::max_element(l, l + E);
    float sum = 0.f;
    for (int64_t e = 0; e < E; ++e) sum += (p[e] = std::exp(l[e] - mx));
    for (int64_t e = 0; e < E; ++e) p[e] /= sum;
    std::iota(idx.begin(), idx.end(), 0);
    std::partial_sort(idx.begin(), idx.begin() + k, idx.end(),
                      [&](int32_t a, int32_t b) { return p[a] > p[b] || (p[a] == p[b] && a < b); });
    float top = 0.f;
    for (int64_t j = 0; j < k; ++j) top += p[idx[j]];
    for (int64_t j = 0; j < k; ++j) {
      r.expert[t * k + j] = idx[j];
      r.weight[t * k + j] = p[idx[j]] / top;
    }
  }
  return r;
}

namespace {
// out[H] += scale * down(silu(gate x) * up x) for one token.
void swiglu_expert(const float* x, const Matrix& gate, const Matrix& up, const Matrix& down, float scale,
                   std::vector<float>& g, std::vector<float>& u, std::vector<float>& d, float* out) {
  const int64_t I = gate.rows;
  g.resize(I);
  u.resize(I);
  d.resize(down.rows);
  matmul(x, 1, gate, g.data());
  matmul(x, 1, up, u.data());
  for (int64_t i = 0; i < I; ++i) g[i] = silu(g[i]) * u[i];
  matmul(g.data(), 1, down, d.data());
  for (int64_t h = 0; h < down.rows; ++h) out[h] += scale * d[h];
}
}  // namespace

void moe_block(const float* x, int64_t T, const MoeWeights& w, int64_t k, float* y) {
  const int64_t H = w.router.cols, E = w.router.rows;
  std::vector<float> logits(static_cast<size_t>(T * E));
  matmul(x, T, w.router, logits.data());
  const Route route = moe_route(logits.data(), T, E, k);
  std::vector<float> g, u, d;
  std::fill(y, y + T * H, 0.f);
  for (int64_t t = 0; t < T; ++t) {
    const float* xt = x + t * H;
    float* yt = y + t * H;
    for (int64_t j = 0; j < k; ++j) {
      const int32_t e = route.expert[t * k + j];
      swiglu_expert(xt, w.gate[e], w.up[e], w.down[e], route.weight[t * k + j], g, u, d, yt);
    }
    const float s = sigmoid(dot_row(w.shared_expert_gate, 0, xt));
    swiglu_expert(xt, w.shared_gate, w.shared_up, w.shared_down, s, g, u, d, yt);
  }
}

}  // namespace lily::cpu
