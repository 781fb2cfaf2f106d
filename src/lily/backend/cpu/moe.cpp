#include "lily/backend/cpu/moe.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "lily/backend/cpu/elementwise.h"
#include "lily/backend/cpu/matmul.h"
#include "lily/backend/cpu/thread_pool.h"

namespace lily::cpu {

namespace {
// Tokens [t0, t1) of moe_route, into r's rows of them.
void route_rows(const float* logits, int64_t t0, int64_t t1, int64_t E, int64_t k, Route& r) {
  std::vector<float> p(static_cast<size_t>(E));
  std::vector<int32_t> idx(static_cast<size_t>(E));
  for (int64_t t = t0; t < t1; ++t) {
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
}

Route sized_route(int64_t T, int64_t k) {
  Route r;
  r.expert.resize(static_cast<size_t>(T * k));
  r.weight.resize(static_cast<size_t>(T * k));
  return r;
}
}  // namespace

Route moe_route(const float* logits, int64_t T, int64_t E, int64_t k) {
  Route r = sized_route(T, k);
  route_rows(logits, 0, T, E, k, r);
  return r;
}

namespace {
// The context's kernels on the calling thread alone: for work that is already
// spread over the pool's threads a piece at a time.
CpuContext single_thread(const CpuContext& ctx) {
  static const std::shared_ptr<ThreadPool> inline_pool = std::make_shared<ThreadPool>(1);
  CpuContext one = ctx;
  one.pool = inline_pool;
  return one;
}

// d [n, H] = down(silu(gate x) * up x) for n rows of x; g and u are scratch.
void swiglu_rows(const CpuContext& ctx, const float* x, int64_t n, const Matrix& gate, const Matrix& up, const Matrix& down, Rows rows,
                 std::vector<float>& g, std::vector<float>& u, std::vector<float>& d) {
  const int64_t I = gate.rows;
  g.resize(n * I);
  u.resize(n * I);
  d.resize(n * down.rows);
  matmul(ctx, x, n, gate, g.data(), rows);
  matmul(ctx, x, n, up, u.data(), rows);
  for (int64_t i = 0; i < n * I; ++i) g[i] = silu(g[i]) * u[i];
  matmul(ctx, g.data(), n, down, d.data(), rows);
}

// For each expert, the (token * k + rank) entries routed to it, in token order.
std::vector<std::vector<int64_t>> entries_by_expert(const Route& route, int64_t T, int64_t k, int64_t E) {
  std::vector<std::vector<int64_t>> picked(static_cast<size_t>(E));
  for (int64_t i = 0; i < T * k; ++i) picked[route.expert[i]].push_back(i);
  return picked;
}

// The input rows of the tokens behind `entries`, gathered into xs [n, H].
void gather_tokens(const float* x, const std::vector<int64_t>& entries, int64_t k, int64_t H, std::vector<float>& xs) {
  xs.resize(entries.size() * H);
  for (size_t i = 0; i < entries.size(); ++i)
    std::copy(x + (entries[i] / k) * H, x + (entries[i] / k + 1) * H, xs.begin() + i * H);
}

// Scratch of routed_experts: an expert's gathered inputs and its products.
struct ExpertScratch {
  std::vector<float> xs, g, u, d;
};

// Experts [e0, e1), each once over the entries routed to it: entry (t, j)'s
// output, scaled by its routing weight, goes to out + (t * slots + j) * H.
void routed_experts(const CpuContext& ctx, const float* x, const ExpertWeights& w, const Route& route,
                    const std::vector<std::vector<int64_t>>& picked, int64_t k, Rows rows, int64_t e0, int64_t e1,
                    int64_t slots, float* out, ExpertScratch& sc) {
  const int64_t H = w.router->cols;
  for (int64_t e = e0; e < e1; ++e) {
    const auto& ids = picked[e];
    if (ids.empty()) continue;
    gather_tokens(x, ids, k, H, sc.xs);
    swiglu_rows(ctx, sc.xs.data(), static_cast<int64_t>(ids.size()), w.gate[e], w.up[e], w.down[e], rows, sc.g, sc.u, sc.d);
    for (size_t i = 0; i < ids.size(); ++i) {
      const int64_t t = ids[i] / k, j = ids[i] % k;
      const float wt = route.weight[ids[i]];
      float* o = out + (t * slots + j) * H;
      for (int64_t h = 0; h < H; ++h) o[h] = wt * sc.d[i * H + h];
    }
  }
}

// One token: the gate and up products of the routed experts and the shared
// one form one parallel loop, their down products another, so the rows of
// all nine experts are shared among the threads however many there are.
void moe_token(const CpuContext& ctx, const float* xt, const ExpertWeights& w, const Route& route, int64_t t, int64_t k, float* yt) {
  const int64_t H = w.router->cols;
  std::vector<std::vector<float>> g(k + 1), u(k + 1), d(k + 1);
  std::vector<Product> products;
  for (int64_t j = 0; j <= k; ++j) {
    const int32_t ex = j < k ? route.expert[t * k + j] : 0;
    const Matrix& gate = j < k ? w.gate[ex] : *w.shared_gate;
    const Matrix& up = j < k ? w.up[ex] : *w.shared_up;
    g[j].resize(gate.rows);
    u[j].resize(up.rows);
    products.push_back({xt, &gate, g[j].data()});
    products.push_back({xt, &up, u[j].data()});
  }
  matmul_batch(ctx, products, 1, Rows::Tokens);
  products.clear();
  for (int64_t j = 0; j <= k; ++j) {
    for (size_t i = 0; i < g[j].size(); ++i) g[j][i] = silu(g[j][i]) * u[j][i];
    const Matrix& down = j < k ? w.down[route.expert[t * k + j]] : *w.shared_down;
    d[j].resize(down.rows);
    products.push_back({g[j].data(), &down, d[j].data()});
  }
  matmul_batch(ctx, products, 1, Rows::Tokens);
  // each expert's output scaled, then all summed in a fixed order, as moe_tokens does
  for (int64_t j = 0; j <= k; ++j) {
    const float scale = j < k ? route.weight[t * k + j] : sigmoid(dot_row(ctx.isa, *w.shared_expert_gate, 0, xt));
    for (int64_t h = 0; h < H; ++h) d[j][h] = scale * d[j][h];
  }
  for (int64_t j = 0; j <= k; ++j)
    for (int64_t h = 0; h < H; ++h) yt[h] += d[j][h];
}

// Several decode tokens: each expert runs once over the tokens routed to it,
// with per-token dots, and each token's experts are added in rank order then
// the shared one, exactly as moe_token adds them for a lone token.
void moe_tokens(const CpuContext& ctx, const float* x, int64_t T, const ExpertWeights& w, const Route& route, int64_t k, float* y) {
  const int64_t H = w.router->cols, E = w.router->rows;
  std::vector<float> outs(static_cast<size_t>(T * (k + 1) * H));  // [token, rank (k = shared), H]
  const auto picked = entries_by_expert(route, T, k, E);
  ExpertScratch sc;
  routed_experts(ctx, x, w, route, picked, k, Rows::Tokens, 0, E, k + 1, outs.data(), sc);
  swiglu_rows(ctx, x, T, *w.shared_gate, *w.shared_up, *w.shared_down, Rows::Tokens, sc.g, sc.u, sc.d);
  for (int64_t t = 0; t < T; ++t) {
    const float s = sigmoid(dot_row(ctx.isa, *w.shared_expert_gate, 0, x + t * H));
    float* o = outs.data() + (t * (k + 1) + k) * H;
    for (int64_t h = 0; h < H; ++h) o[h] = s * sc.d[t * H + h];
  }
  for (int64_t t = 0; t < T; ++t)
    for (int64_t j = 0; j <= k; ++j) {
      const float* o = outs.data() + (t * (k + 1) + j) * H;
      for (int64_t h = 0; h < H; ++h) y[t * H + h] += o[h];
    }
}
}  // namespace

void moe_block(const CpuContext& ctx, const float* x, int64_t T, const ExpertWeights& w, int64_t k, float* y, Rows rows, RouteLog* log) {
  const int64_t H = w.router->cols, E = w.router->rows;
  std::vector<float> logits(static_cast<size_t>(T * E));
  matmul(ctx, x, T, *w.router, logits.data(), rows);
  Route route = sized_route(T, k);  // a prompt's tokens routed on every thread
  ctx.threads().parallel_for(T, 32, [&](int64_t t0, int64_t t1) { route_rows(logits.data(), t0, t1, E, k, route); });
  if (log) log->apply(route.expert, route.weight);
  std::fill(y, y + T * H, 0.f);
  if (rows == Rows::Tokens) {
    if (T == 1)
      moe_token(ctx, x, w, route, 0, k, y);
    else
      moe_tokens(ctx, x, T, w, route, k, y);
    return;
  }
  // A prompt: each expert runs once over the tokens routed to it, whole
  // experts to each thread (an expert's share of a prompt is a few tokens,
  // too little to split its rows among many threads, and 768 products a
  // layer each waiting for every thread would serialise on the waits). Each
  // (token, rank) output goes to a slot of its own; a token's slots are then
  // added in expert order, as one expert after another added them.
  const auto picked = entries_by_expert(route, T, k, E);
  thread_local std::vector<float> slots;  // kept between layers
  slots.resize(static_cast<size_t>(T * k * H));
  float* outs = slots.data();  // [T * k, H]; the workers see the caller's slots through it
  const CpuContext one = single_thread(ctx);
  ctx.threads().parallel_for(E, 1, [&](int64_t e0, int64_t e1) {
    thread_local ExpertScratch sc;  // kept: freed, it would be faulted in again for every expert
    routed_experts(one, x, w, route, picked, k, Rows::Prompt, e0, e1, k, outs, sc);
  });
  std::vector<float> g, u, d;
  swiglu_rows(ctx, x, T, *w.shared_gate, *w.shared_up, *w.shared_down, Rows::Prompt, g, u, d);
  ctx.threads().parallel_for(T, 16, [&](int64_t t0, int64_t t1) {
    std::vector<int64_t> ranks(static_cast<size_t>(k));
    for (int64_t t = t0; t < t1; ++t) {
      std::iota(ranks.begin(), ranks.end(), 0);
      std::sort(ranks.begin(), ranks.end(), [&](int64_t a, int64_t b) { return route.expert[t * k + a] < route.expert[t * k + b]; });
      float* yt = y + t * H;
      for (int64_t j : ranks) {
        const float* o = outs + (t * k + j) * H;
        for (int64_t h = 0; h < H; ++h) yt[h] += o[h];
      }
      const float s = sigmoid(dot_row(ctx.isa, *w.shared_expert_gate, 0, x + t * H));
      for (int64_t h = 0; h < H; ++h) yt[h] += s * d[t * H + h];
    }
  });
}

}  // namespace lily::cpu
