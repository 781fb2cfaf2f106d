// The chunked delta rule against the token-by-token recurrence on random
// inputs of awkward sizes, starting from a non-zero state; and the causal
// conv fed whole against fed in pieces; at each ISA level this CPU has.
#include "lily/backend/cpu/gated_delta.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "lily/backend/cpu/elementwise.h"
#include "support/test_support.h"

namespace lily::cpu {
namespace {

// Each test runs at every ISA level this CPU has.
class GatedDelta : public ::testing::TestWithParam<Isa> {};
class CausalConv : public ::testing::TestWithParam<Isa> {
 protected:
  CpuContext ctx_ = test::cpu_context(GetParam());
};

struct HeadData {
  std::vector<float> q, k, v, g, beta;
};

HeadData random_head(int64_t T, int64_t dk, int64_t dv, std::mt19937& rng) {
  std::normal_distribution<float> n(0.f, 1.f);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  HeadData h;
  h.q.resize(T * dk);
  h.k.resize(T * dk);
  h.v.resize(T * dv);
  h.g.resize(T);
  h.beta.resize(T);
  for (auto& x : h.q) x = n(rng);
  for (auto& x : h.k) x = n(rng);
  for (auto& x : h.v) x = n(rng);
  for (int64_t t = 0; t < T; ++t) {
    l2norm_scale(&h.q[t * dk], dk, 1e-6f, 1.0f / std::sqrt(static_cast<float>(dk)));
    l2norm_scale(&h.k[t * dk], dk, 1e-6f, 1.0f);
    h.g[t] = -3.0f * u(rng);  // decays from 1 down to e^-3
    h.beta[t] = u(rng);
  }
  return h;
}

TEST_P(GatedDelta, ChunkedEqualsRecurrent) {
  std::mt19937 rng(7);
  for (auto [T, dk, dv, chunk] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t>>{
           {1, 4, 4, 64}, {7, 3, 5, 4}, {64, 16, 8, 64}, {65, 8, 16, 64}, {130, 12, 7, 64}, {33, 5, 9, 8}}) {
    HeadData h = random_head(T, dk, dv, rng);
    DeltaHeadInputs in{h.q.data(), h.k.data(), h.v.data(), h.g.data(), h.beta.data(), dk, dk, dv, 1, 1};
    std::normal_distribution<float> n(0.f, 0.5f);
    std::vector<float> s0(dk * dv);
    for (auto& x : s0) x = n(rng);
    std::vector<float> s_rec = s0, s_chunk = s0, o_rec(T * dv), o_chunk(T * dv, NAN);
    gated_delta_recurrent(GetParam(), in, T, dk, dv, s_rec.data(), o_rec.data(), dv);
    gated_delta_chunked(GetParam(), in, T, dk, dv, chunk, chunk, s_chunk.data(), o_chunk.data(), dv);
    EXPECT_LE(test::max_row_relative_error(o_chunk, o_rec, dv), 1e-5) << "T=" << T << " dk=" << dk << " dv=" << dv;
    EXPECT_LE(test::max_row_relative_error(s_chunk, s_rec, dk * dv), 1e-5) << "T=" << T;
  }
}

TEST_P(GatedDelta, ShortFirstChunkComputesTheSameRule) {
  std::mt19937 rng(11);
  const int64_t T = 100, dk = 8, dv = 8;
  HeadData h = random_head(T, dk, dv, rng);
  DeltaHeadInputs in{h.q.data(), h.k.data(), h.v.data(), h.g.data(), h.beta.data(), dk, dk, dv, 1, 1};
  std::vector<float> s_rec(dk * dv, 0.f), o_rec(T * dv);
  gated_delta_recurrent(GetParam(), in, T, dk, dv, s_rec.data(), o_rec.data(), dv);
  for (int64_t first : {1, 5, 63, 64}) {
    std::vector<float> s(dk * dv, 0.f), o(T * dv, NAN);
    gated_delta_chunked(GetParam(), in, T, dk, dv, 64, first, s.data(), o.data(), dv);
    EXPECT_LE(test::max_row_relative_error(o, o_rec, dv), 1e-5) << first;
  }
}

TEST_P(GatedDelta, RecurrenceMatchesTheDeltaRuleByHand) {
  // dk = dv = 1: S' = S e^g + beta k (v - S e^g k), o = S' q
  const float q = 0.5f, k = 1.0f, v = 2.0f, g = -0.5f, beta = 0.25f;
  DeltaHeadInputs in{&q, &k, &v, &g, &beta, 1, 1, 1, 1, 1};
  float S = 1.0f, o = 0.f;
  gated_delta_recurrent(GetParam(), in, 1, 1, 1, &S, &o, 1);
  const float decayed = std::exp(g);
  const float want = decayed + beta * k * (v - decayed * k);
  EXPECT_FLOAT_EQ(S, want);
  EXPECT_FLOAT_EQ(o, want * q);
}

TEST_P(CausalConv, PiecewiseEqualsWhole) {
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.f, 1.f);
  for (int64_t K : {2, 3, 4}) {
    const int64_t T = 11, C = 5;
    std::vector<float> x(T * C), w(C * K);
    for (auto& a : x) a = n(rng);
    for (auto& a : w) a = n(rng);
    std::vector<float> state_whole((K - 1) * C, 0.f), y_whole(T * C);
    causal_conv_silu(ctx_, x.data(), T, C, w.data(), K, state_whole.data(), y_whole.data());
    // by hand for the first output of channel 0: only the last tap sees x[0]
    EXPECT_FLOAT_EQ(y_whole[0], silu(w[K - 1] * x[0]));
    std::vector<float> state((K - 1) * C, 0.f), y(T * C);
    int64_t t = 0;
    for (int64_t piece : {1, 2, 1, 4, 3}) {
      causal_conv_silu(ctx_, x.data() + t * C, piece, C, w.data(), K, state.data(), y.data() + t * C);
      t += piece;
    }
    ASSERT_EQ(t, T);
    EXPECT_EQ(y, y_whole) << "K=" << K;
    EXPECT_EQ(state, state_whole);
  }
}

// Enough channels to be split over the threads, an awkward count, and a
// state that is not zero: against plain sums in double.
TEST_P(CausalConv, ManyChannelsAgainstPlainSums) {
  std::mt19937 rng(4);
  std::normal_distribution<float> n(0.f, 1.f);
  const int64_t T = 7, C = 3001, K = 4;
  std::vector<float> x(T * C), w(C * K), state((K - 1) * C), y(T * C);
  for (auto* v : {&x, &w, &state})
    for (auto& a : *v) a = n(rng);
  const std::vector<float> state0 = state;
  causal_conv_silu(ctx_, x.data(), T, C, w.data(), K, state.data(), y.data());
  auto in = [&](int64_t r, int64_t c) { return r < K - 1 ? state0[r * C + c] : x[(r - K + 1) * C + c]; };
  for (int64_t t = 0; t < T; ++t)
    for (int64_t c = 0; c < C; ++c) {
      double s = 0;
      for (int64_t j = 0; j < K; ++j) s += double(w[c * K + j]) * in(t + j, c);
      ASSERT_NEAR(y[t * C + c], s / (1 + std::exp(-s)), 1e-5 * (1 + std::abs(s))) << "t " << t << " c " << c;
    }
  for (int64_t r = 0; r < K - 1; ++r)
    for (int64_t c = 0; c < C; ++c) ASSERT_EQ(state[r * C + c], x[(T - K + 1 + r) * C + c]);
}

std::string isa_label(const ::testing::TestParamInfo<Isa>& info) { return isa_name(info.param); }
INSTANTIATE_TEST_SUITE_P(Isa, GatedDelta, ::testing::ValuesIn(isas_here()), isa_label);
INSTANTIATE_TEST_SUITE_P(Isa, CausalConv, ::testing::ValuesIn(isas_here()), isa_label);

}  // namespace
}  // namespace lily::cpu
