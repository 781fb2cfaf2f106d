// CPU ops against plain double-precision computations written out here.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <thread>

#include <algorithm>
#include <cmath>
#include <random>

#include "lily/backend/cpu/attention.h"
#include "lily/backend/cpu/elementwise.h"
#include "lily/backend/cpu/matmul.h"
#include "lily/backend/cpu/moe.h"
#include "lily/backend/cpu/thread_pool.h"
#include "lily/quant/affine.h"
#include "support/test_support.h"

namespace lily::cpu {
namespace {

TEST(Matmul, AllStorageTypesAgainstDouble) {
  std::mt19937 rng(1);
  std::normal_distribution<float> n(0.f, 1.f);
  const int64_t R = 13, C = 37, T = 5;
  std::vector<float> w(R * C), x(T * C);
  for (auto& a : w) a = n(rng);
  for (auto& a : x) a = n(rng);
  std::vector<uint16_t> wb(R * C), wh(R * C);
  for (int64_t i = 0; i < R * C; ++i) {
    wb[i] = float_to_bf16(w[i]);
    wh[i] = float_to_f16(w[i]);
  }
  struct V {
    DType t;
    const void* p;
  };
  for (Isa isa : isas_here())
  for (V v : {V{DType::F32, w.data()}, V{DType::BF16, wb.data()}, V{DType::F16, wh.data()}}) {
    const CpuContext ctx = test::cpu_context(isa);
    Matrix m{v.t, v.p, R, C};
    std::vector<float> y(T * R), want(T * R), rowf(C);
    matmul(ctx, x.data(), T, m, y.data());
    for (int64_t r = 0; r < R; ++r) {
      convert_to_float(v.t, m.row(r), rowf.data(), C);
      for (int64_t t = 0; t < T; ++t) {
        double s = 0;
        for (int64_t c = 0; c < C; ++c) s += static_cast<double>(rowf[c]) * x[t * C + c];
        want[t * R + r] = static_cast<float>(s);
      }
    }
    EXPECT_LE(test::max_row_relative_error(y, want, R), 1e-6) << dtype_name(v.t) << " at " << isa_name(isa);
    EXPECT_NEAR(dot_row(isa, m, 4, x.data()), want[4], 1e-4);
  }
}

TEST(Norms, RmsnormAndGatedRmsnorm) {
  const float x[4] = {1, -2, 3, -4}, w[4] = {1, 0.5f, 2, 1}, z[4] = {0, 1, -1, 2};
  float y[4], g[4];
  rmsnorm(x, 1, 4, w, 1e-6f, y);
  const double inv = 1.0 / std::sqrt((1 + 4 + 9 + 16) / 4.0 + 1e-6);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(y[i], x[i] * inv * w[i], 1e-6);
  gated_rmsnorm(x, z, 1, 4, w, 1e-6f, g);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(g[i], y[i] * z[i] / (1 + std::exp(-z[i])), 1e-6);
  float v[3] = {3, 4, 0};
  l2norm_scale(v, 3, 0.f, 2.f);
  EXPECT_FLOAT_EQ(v[0], 1.2f);
  EXPECT_FLOAT_EQ(v[1], 1.6f);
}

TEST(Rope, RotatesPairsOfTheRotaryPart) {
  const int64_t hd = 8, rot = 4;
  const auto inv = rope_inv_freq(10000.0, rot);
  ASSERT_EQ(inv.size(), 2u);
  EXPECT_FLOAT_EQ(inv[0], 1.0f);
  EXPECT_FLOAT_EQ(inv[1], 0.01f);
  float x[hd] = {1, 2, 3, 4, 5, 6, 7, 8};
  float x0[hd];
  std::copy(x, x + hd, x0);
  apply_rope(x, 1, hd, rot, inv.data(), 0);
  for (int i = 0; i < hd; ++i) EXPECT_FLOAT_EQ(x[i], x0[i]);  // position 0 is the identity
  apply_rope(x, 1, hd, rot, inv.data(), 3);
  // pair (0, 2) turns by 3 radians, pair (1, 3) by 0.03; dims 4.. pass through
  EXPECT_NEAR(x[0], 1 * std::cos(3.0) - 3 * std::sin(3.0), 1e-5);
  EXPECT_NEAR(x[2], 3 * std::cos(3.0) + 1 * std::sin(3.0), 1e-5);
  EXPECT_NEAR(x[1], 2 * std::cos(0.03) - 4 * std::sin(0.03), 1e-5);
  for (int i = 4; i < hd; ++i) EXPECT_EQ(x[i], x0[i]);
}

TEST(Attention, CausalGroupedQueryAgainstDouble) {
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.f, 1.f);
  const int64_t heads = 4, kvh = 2, hd = 3, p0 = 2, T = 3, P = p0 + T;
  std::vector<float> q(T * heads * hd), K(P * kvh * hd), V(P * kvh * hd), out(T * heads * hd);
  for (auto* v : {&q, &K, &V})
    for (auto& a : *v) a = n(rng);
  for (Isa isa : isas_here()) {
  causal_attention(test::cpu_context(isa), q.data(), T, p0, K.data(), V.data(), heads, kvh, hd, 0.5f, out.data());
  for (int64_t t = 0; t < T; ++t)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kh = h / 2, np = p0 + t + 1;
      std::vector<double> s(np);
      double mx = -1e30, sum = 0;
      for (int64_t p = 0; p < np; ++p) {
        s[p] = 0;
        for (int64_t d = 0; d < hd; ++d) s[p] += q[(t * heads + h) * hd + d] * K[(p * kvh + kh) * hd + d] * 0.5;
        mx = std::max(mx, s[p]);
      }
      for (auto& a : s) sum += (a = std::exp(a - mx));
      for (int64_t d = 0; d < hd; ++d) {
        double o = 0;
        for (int64_t p = 0; p < np; ++p) o += s[p] / sum * V[(p * kvh + kh) * hd + d];
        EXPECT_NEAR(out[(t * heads + h) * hd + d], o, 1e-5) << isa_name(isa);
      }
    }
  }
}

// The model's shapes (16 heads on 2 kv heads of 256): against double, and a
// position's output the same whether computed with the others or alone.
TEST(Attention, RealShapesAgainstDoubleAndAlone) {
  std::mt19937 rng(6);
  std::normal_distribution<float> n(0.f, 1.f);
  const int64_t heads = 16, kvh = 2, hd = 256, p0 = 37, T = 21, P = p0 + T;
  std::vector<float> q(T * heads * hd), K(P * kvh * hd), V(P * kvh * hd), out(T * heads * hd), last(heads * hd);
  for (auto* v : {&q, &K, &V})
    for (auto& a : *v) a = n(rng);
  const float scale = 1.f / 16.f;
  for (Isa isa : isas_here()) {
  const CpuContext ctx = test::cpu_context(isa);
  causal_attention(ctx, q.data(), T, p0, K.data(), V.data(), heads, kvh, hd, scale, out.data());
  causal_attention(ctx, q.data() + (T - 1) * heads * hd, 1, P - 1, K.data(), V.data(), heads, kvh, hd, scale, last.data());
  EXPECT_TRUE(std::equal(last.begin(), last.end(), out.begin() + (T - 1) * heads * hd)) << isa_name(isa);
  double worst = 0;
  for (int64_t t = 0; t < T; t += 5)
    for (int64_t h = 0; h < heads; ++h) {
      const int64_t kh = h / (heads / kvh), np = p0 + t + 1;
      std::vector<double> s(np);
      double mx = -1e30, sum = 0;
      for (int64_t p = 0; p < np; ++p) {
        s[p] = 0;
        for (int64_t d = 0; d < hd; ++d) s[p] += double(q[(t * heads + h) * hd + d]) * K[(p * kvh + kh) * hd + d] * scale;
        mx = std::max(mx, s[p]);
      }
      for (auto& a : s) sum += (a = std::exp(a - mx));
      for (int64_t d = 0; d < hd; ++d) {
        double o = 0;
        for (int64_t p = 0; p < np; ++p) o += s[p] / sum * V[(p * kvh + kh) * hd + d];
        worst = std::max(worst, std::abs(out[(t * heads + h) * hd + d] - o));
      }
    }
  EXPECT_LT(worst, 1e-5) << isa_name(isa);
  }
}

TEST(Moe, RouteTakesTopKAndRenormalises) {
  const float logits[2 * 4] = {0.f, 2.f, 1.f, 2.f, /* tie between 1 and 3 */ 5.f, -1.f, 4.f, 0.f};
  Route r = moe_route(logits, 2, 4, 2);
  EXPECT_EQ(r.expert[0], 1);
  EXPECT_EQ(r.expert[1], 3);
  EXPECT_FLOAT_EQ(r.weight[0], 0.5f);
  EXPECT_FLOAT_EQ(r.weight[0] + r.weight[1], 1.f);
  EXPECT_EQ(r.expert[2], 0);
  EXPECT_EQ(r.expert[3], 2);
  EXPECT_NEAR(r.weight[2], 1.0 / (1.0 + std::exp(-1.0)), 1e-6);
}

}  // namespace
}  // namespace lily::cpu

namespace lily::cpu {
namespace {

TEST(Matmul, FastEqualsReferenceOnAwkwardSizes) {
  std::mt19937 rng(9);
  std::normal_distribution<float> n(0.f, 1.f);
  for (Isa isa : isas_here()) {
  const CpuContext ctx = test::cpu_context(isa, false, 3);
  for (int64_t R : {1, 37, 130})
    for (int64_t C : {64, 192}) {
      std::vector<float> w(R * C);
      for (auto& a : w) a = n(rng);
      std::vector<uint16_t> wb(R * C), wh(R * C);
      for (int64_t i = 0; i < R * C; ++i) wb[i] = float_to_bf16(w[i]), wh[i] = float_to_f16(w[i]);
      std::vector<Matrix> mats = {Matrix{DType::F32, w.data(), R, C}, Matrix{DType::BF16, wb.data(), R, C},
                                  Matrix{DType::F16, wh.data(), R, C}};
      std::vector<quant::QuantizedRows> keep;
      for (int bits : {2, 3, 4, 5, 6, 8})
        for (int gs : {32, 64}) {
          keep.push_back(quant::quantize(w.data(), R, C, bits, gs));
          Matrix m{DType::U32, keep.back().packed.data(), R, C};
          m.bits = bits;
          m.group_size = gs;
          m.scale_dtype = DType::F32;
          m.scales = keep.back().scales.data();
          m.biases = keep.back().biases.data();
          mats.push_back(m);
        }
      for (const Matrix& m : mats)
        for (int64_t T : {1, 3, 5, 17}) {
          std::vector<float> x(T * C), fast(T * R, NAN), ref(T * R);
          for (auto& a : x) a = n(rng);
          matmul(ctx, x.data(), T, m, fast.data());
          matmul_reference(x.data(), T, m, ref.data());
          // against the exact dot of the same weights, relative to the sum of |w x| (float rounding's scale)
          std::vector<float> row(C);
          double worst = 0;
          for (int64_t r = 0; r < R; ++r) {
            m.row_to_float(r, row.data());
            for (int64_t t = 0; t < T; ++t) {
              double exact = 0, mag = 0;
              for (int64_t c = 0; c < C; ++c) exact += double(row[c]) * x[t * C + c], mag += std::abs(double(row[c]) * x[t * C + c]);
              worst = std::max({worst, std::abs(fast[t * R + r] - exact) / mag, std::abs(ref[t * R + r] - exact) / mag});
            }
          }
          EXPECT_LE(worst, 1e-6) << "R=" << R << " C=" << C << " T=" << T << " bits=" << m.bits
                                 << " dtype=" << dtype_name(m.dtype) << " at " << isa_name(isa);
        }
    }
  }
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  ThreadPool pool(3);
  for (int64_t n : {0, 1, 2, 7, 1000}) {
    std::vector<int> hits(static_cast<size_t>(n), 0);
    pool.parallel_for(n, 1, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
    });
    for (int h : hits) EXPECT_EQ(h, 1);
  }
}

// Calls back to back meet spinning workers, calls after a pause meet sleeping
// ones; either way every index is done once and the call returns only then.
TEST(ThreadPool, BackToBackAndAfterSleeping) {
  ThreadPool pool(3);
  std::atomic<int64_t> total{0};
  for (int round = 0; round < 400; ++round) {
    if (round % 100 == 99) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    std::vector<std::atomic<int>> hits(257);
    pool.parallel_for(257, 3, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[i]++;
      total += e - b;
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1) << "round " << round;
  }
  EXPECT_EQ(total.load(), 400 * 257);
}

}  // namespace
}  // namespace lily::cpu
