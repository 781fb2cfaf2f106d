#include "lily/backend/cpu/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "lily/backend/cpu/elementwise.h"
#include "lily/backend/cpu/matmul.h"
#include "lily/backend/cpu/thread_pool.h"

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
                   std::vector<float>& g, std::vector<float>& u, std::vector<float>& d, float* out,
                   bool parallel = true) {
  const int64_t I = gate.rows;
  g.resize(I);
  u.resize(I);
  d.resize(down.rows);
  matmul(x, 1, gate, g.data(), parallel);
  matmul(x, 1, up, u.data(), parallel);
  for (int64_t i = 0; i < I; ++i) g[i] = silu(g[i]) * u[i];
  matmul(g.data(), 1, down, d.data(), parallel);
  for (int64_t h = 0; h < down.rows; ++h) out[h] += scale * d[h];
}

// One token: the routed experts and the shared expert run side by side on the
// pool, each on one thread, rather than each small product being split.
void moe_token(const float* xt, const MoeWeights& w, const Route& route, int64_t t, int64_t k, float* yt) {
  const int64_t H = w.router.cols;
  std::vector<std::vector<float>> outs(static_cast<size_t>(k + 1), std::vector<float>(static_cast<size_t>(H), 0.f));
  ThreadPool::global().parallel_for(k + 1, 1, [&](int64_t b, int64_t e) {
    std::vector<float> g, u, d;
    for (int64_t j = b; j < e; ++j) {
      if (j < k) {
        const int32_t ex = route.expert[t * k + j];
        swiglu_expert(xt, w.gate[ex], w.up[ex], w.down[ex], route.weight[t * k + j], g, u, d, outs[j].data(), false);
      } else {
        const float s = sigmoid(dot_row(w.shared_expert_gate, 0, xt));
        swiglu_expert(xt, w.shared_gate, w.shared_up, w.shared_down, s, g, u, d, outs[j].data(), false);
      }
    }
  });
  // summed in a fixed order, so the result does not depend on the thread count
  for (int64_t j = 0; j <= k; ++j)
    for (int64_t h = 0; h < H; ++h) yt[h] += outs[j][h];
}

// Several decode tokens: each expert runs once over the tokens routed to it,
// with per-token dots, and each token's experts are added in rank order then
// the shared one, exactly as moe_token adds them for a lone token.
void moe_tokens(const float* x, int64_t T, const MoeWeights& w, const Route& route, int64_t k, float* y) {
  const int64_t H = w.router.cols, E = w.router.rows;
  std::vector<float> outs(static_cast<size_t>(T * (k + 1) * H));  // [token, rank (k = shared), H]
  std::vector<std::vector<int64_t>> picked(static_cast<size_t>(E));
  for (int64_t i = 0; i < T * k; ++i) picked[route.expert[i]].push_back(i);
  std::vector<float> xs, g, u, d;
  auto run_expert = [&](const Matrix& gate, const Matrix& up, const Matrix& down, int64_t n, const float* in,
                        auto&& place) {
    const int64_t I = gate.rows;
    g.resize(n * I);
    u.resize(n * I);
    d.resize(n * H);
    matmul(in, n, gate, g.data(), Rows::Tokens);
    matmul(in, n, up, u.data(), Rows::Tokens);
    for (int64_t i = 0; i < n * I; ++i) g[i] = silu(g[i]) * u[i];
    matmul(g.data(), n, down, d.data(), Rows::Tokens);
    for (int64_t i = 0; i < n; ++i) place(i, d.data() + i * H);
  };
  for (int64_t e = 0; e < E; ++e) {
    const auto& ids = picked[e];
    if (ids.empty()) continue;
    const int64_t n = static_cast<int64_t>(ids.size());
    xs.resize(n * H);
    for (int64_t i = 0; i < n; ++i) std::copy(x + (ids[i] / k) * H, x + (ids[i] / k + 1) * H, xs.begin() + i * H);
    run_expert(w.gate[e], w.up[e], w.down[e], n, xs.data(), [&](int64_t i, const float* de) {
      const int64_t t = ids[i] / k, j = ids[i] % k;
      const float wt = route.weight[ids[i]];
      float* o = outs.data() + (t * (k + 1) + j) * H;
      for (int64_t h = 0; h < H; ++h) o[h] = wt * de[h];
    });
  }
  run_expert(w.shared_gate, w.shared_up, w.shared_down, T, x, [&](int64_t t, const float* de) {
    const float s = sigmoid(dot_row(w.shared_expert_gate, 0, x + t * H));
    float* o = outs.data() + (t * (k + 1) + k) * H;
    for (int64_t h = 0; h < H; ++h) o[h] = s * de[h];
  });
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j <= k; ++j) {
      const float* o = outs.data() + (t * (k + 1) + j) * H;
      for (int64_t h = 0; h < H; ++h) y[t * H + h] += o[h];
    }
}
}  // namespace

void moe_block(const float* x, int64_t T, const MoeWeights& w, int64_t k, float* y, Rows rows) {
  const int64_t H = w.router.cols, E = w.router.rows;
  std::vector<float> logits(static_cast<size_t>(T * E));
  matmul(x, T, w.router, logits.data(), rows);
  const Route route = moe_route(logits.data(), T, E, k);
  std::fill(y, y + T * H, 0.f);
  if (rows == Rows::Tokens) {
    if (T == 1)
      moe_token(x, w, route, 0, k, y);
    else
      moe_tokens(x, T, w, route, k, y);
    return;
  }
  // A prompt: each expert runs once over the tokens routed to it.
  std::vector<std::vector<int64_t>> picked(static_cast<size_t>(E));
  for (int64_t i = 0; i < T * k; ++i) picked[route.expert[i]].push_back(i);
  std::vector<float> xs, g, u, d;
  for (int64_t e = 0; e < E; ++e) {
    const auto& ids = picked[e];
    if (ids.empty()) continue;
    const int64_t n = static_cast<int64_t>(ids.size()), I = w.gate[e].rows;
    xs.resize(n * H);
    for (int64_t i = 0; i < n; ++i) std::copy(x + (ids[i] / k) * H, x + (ids[i] / k + 1) * H, xs.begin() + i * H);
    g.resize(n * I);
    u.resize(n * I);
    d.resize(n * H);
    matmul(xs.data(), n, w.gate[e], g.data(), Rows::Prompt);
    matmul(xs.data(), n, w.up[e], u.data(), Rows::Prompt);
    for (int64_t i = 0; i < n * I; ++i) g[i] = silu(g[i]) * u[i];
    matmul(g.data(), n, w.down[e], d.data(), Rows::Prompt);
    for (int64_t i = 0; i < n; ++i) {
      const float wt = route.weight[ids[i]];
      float* yt = y + (ids[i] / k) * H;
      for (int64_t h = 0; h < H; ++h) yt[h] += wt * d[i * H + h];
    }
  }
  const int64_t S = w.shared_gate.rows;
  g.resize(T * S);
  u.resize(T * S);
  d.resize(T * H);
  matmul(x, T, w.shared_gate, g.data(), Rows::Prompt);
  matmul(x, T, w.shared_up, u.data(), Rows::Prompt);
  for (int64_t i = 0; i < T * S; ++i) g[i] = silu(g[i]) * u[i];
  matmul(g.data(), T, w.shared_down, d.data(), Rows::Prompt);
  for (int64_t t = 0; t < T; ++t) {
    const float s = sigmoid(dot_row(w.shared_expert_gate, 0, x + t * H));
    for (int64_t h = 0; h < H; ++h) y[t * H + h] += s * d[t * H + h];
  }
}

}  // namespace lily::cpu
