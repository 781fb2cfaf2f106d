// The Gated DeltaNet rule of one value head at the model's shapes (dk = dv =
// 128): a prompt's chunked form (chunks of 64) and the token-by-token
// recurrence of decode, one thread, at the best ISA this CPU has. A 512-token
// prompt of the real model runs this 32 heads x 30 layers times.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

#include "lily/backend/cpu/gated_delta.h"

namespace {

using namespace lily::cpu;

struct HeadInputs {
  int64_t T, dk = 128, dv = 128;
  std::vector<float> q, k, v, g, beta, state, out;
  explicit HeadInputs(int64_t tokens) : T(tokens) {
    std::mt19937 rng(3);
    std::normal_distribution<float> n(0.f, 1.f);
    q.resize(T * dk), k.resize(T * dk), v.resize(T * dv), g.resize(T), beta.resize(T);
    state.resize(dk * dv), out.resize(T * dv);
    auto unit = [&](float* x) {
      float s = 0.f;
      for (int64_t i = 0; i < dk; ++i) s += x[i] * x[i];
      for (int64_t i = 0; i < dk; ++i) x[i] /= std::sqrt(s);
    };
    for (int64_t t = 0; t < T; ++t) {
      for (int64_t i = 0; i < dk; ++i) q[t * dk + i] = n(rng), k[t * dk + i] = n(rng);
      unit(&q[t * dk]), unit(&k[t * dk]);
      for (int64_t i = 0; i < dv; ++i) v[t * dv + i] = n(rng);
      g[t] = -0.1f * std::abs(n(rng));
      beta[t] = 1.f / (1.f + std::exp(-n(rng)));
    }
  }
  DeltaHeadInputs view() const { return {q.data(), k.data(), v.data(), g.data(), beta.data(), dk, dk, dv, 1, 1}; }
};

void BM_DeltaRuleChunked(benchmark::State& state) {
  HeadInputs h(state.range(0));
  const DeltaHeadInputs in = h.view();
  for (auto _ : state) {
    std::fill(h.state.begin(), h.state.end(), 0.f);  // each pass from a fresh sequence
    gated_delta_chunked(best_isa(), in, h.T, h.dk, h.dv, 64, 64, h.state.data(), h.out.data(), h.dv);
    benchmark::DoNotOptimize(h.out.data());
  }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(h.T) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DeltaRuleChunked)->Arg(64)->Arg(512);

void BM_DeltaRuleRecurrent(benchmark::State& state) {
  HeadInputs h(state.range(0));
  const DeltaHeadInputs in = h.view();
  for (auto _ : state) {
    std::fill(h.state.begin(), h.state.end(), 0.f);
    gated_delta_recurrent(best_isa(), in, h.T, h.dk, h.dv, h.state.data(), h.out.data(), h.dv);
    benchmark::DoNotOptimize(h.out.data());
  }
  state.counters["tokens/s"] = benchmark::Counter(static_cast<double>(h.T) * state.iterations(), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_DeltaRuleRecurrent)->Arg(1)->Arg(64);

}  // namespace

BENCHMARK_MAIN();
