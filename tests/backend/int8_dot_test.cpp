// The int8-activation decode path, each kernel the CPU has (VNNI, AVX2),
// against the exact product of the same weights: within the rounding of the
// inputs it makes, never more, and a batched call equal to single ones.
#include "lily/backend/cpu/int8_dot.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "lily/backend/cpu/matmul.h"
#include "lily/io/dtype.h"
#include "lily/quant/affine.h"

namespace lily::cpu {
namespace {

TEST(Int8Dot, WithinTheInputRoundingOfTheExactProduct) {
  if (!int8::available()) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512 VNNI";
  ASSERT_TRUE(int8::enable(true));
  const int8::Kernel best = int8::kernel();
  int kernels_run = 0;
  for (int8::Kernel k : {int8::Kernel::Vnni, int8::Kernel::Avx2}) {  // each kernel this CPU has
  if (!int8::use_kernel(k)) continue;
  ++kernels_run;
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.f, 1.f);
  // scales and biases in each stored type; 2304 inputs span more than sixteen groups
  for (DType sd : {DType::F32, DType::BF16, DType::F16})
  for (int bits : {4, 8})
    for (int gs : {64, 128})
      for (int64_t C : {256, 512, 2304}) {
        const int64_t R = 37, T = 3;
        std::vector<float> w(R * C), x(T * C);
        for (auto& a : w) a = n(rng);
        for (auto& a : x) a = n(rng);
        for (int64_t c = 0; c < gs; ++c) x[c] = 0.f;                // a group of zeros (step 0)
        for (int64_t c = gs; c < 2 * gs; ++c) x[c + C] *= 1000.f;  // and one of large inputs
        const auto q = quant::quantize(w.data(), R, C, bits, gs);
        Matrix m{DType::U32, q.packed.data(), R, C};
        m.bits = bits;
        m.group_size = gs;
        std::vector<uint16_t> sc16, bi16;
        for (size_t i = 0; i < q.scales.size(); ++i) {
          sc16.push_back(sd == DType::BF16 ? float_to_bf16(q.scales[i]) : float_to_f16(q.scales[i]));
          bi16.push_back(sd == DType::BF16 ? float_to_bf16(q.biases[i]) : float_to_f16(q.biases[i]));
        }
        m.scale_dtype = sd;
        m.scales = sd == DType::F32 ? static_cast<const void*>(q.scales.data()) : sc16.data();
        m.biases = sd == DType::F32 ? static_cast<const void*>(q.biases.data()) : bi16.data();
        ASSERT_TRUE(int8::supports(m));
        std::vector<float> y(T * R), one(R), row(C);
        matmul(x.data(), T, m, y.data(), Rows::Tokens);
        for (int64_t t = 0; t < T; ++t) {
          matmul(x.data() + t * C, 1, m, one.data(), Rows::Tokens);
          EXPECT_TRUE(std::equal(one.begin(), one.end(), y.begin() + t * R)) << "a batched row differs";
          const int8::Input in = int8::quantize_input(x.data() + t * C, C, gs, false);
          for (int64_t r = 0; r < R; ++r) {
            m.row_to_float(r, row.data());
            double exact = 0, mag = 0, bound = 0;
            for (int64_t c = 0; c < C; ++c) {
              exact += double(row[c]) * x[t * C + c];
              mag += std::abs(double(row[c]) * x[t * C + c]);
              bound += std::abs(double(row[c])) * in.step[c / gs] / 2;
            }
            EXPECT_LE(std::abs(y[t * R + r] - exact), bound * 1.001 + 1e-5 * mag)
                << (k == int8::Kernel::Vnni ? "VNNI " : "AVX2 ") << dtype_name(sd) << " bits " << bits << " gs " << gs << " C " << C << " row " << r << " token " << t;
          }
        }
      }
  }
  EXPECT_GE(kernels_run, 1);
  int8::use_kernel(best);
  int8::enable(false);
}

TEST(Int8Dot, InputsAreRoundedPerGroup) {
  std::vector<float> x = {0.f, 1.f, -2.f, 127.f};
  x.resize(64, 0.5f);
  const int8::Input in = int8::quantize_input(x.data(), 64, 64, true);
  EXPECT_FLOAT_EQ(in.step[0], 1.f);
  EXPECT_EQ(in.q[0], 0);     // x[0], even half
  EXPECT_EQ(in.q[32], 1);    // x[1], odd half
  EXPECT_EQ(in.q[1], -2);    // x[2]
  EXPECT_EQ(in.q[33], 127);  // x[3]
  EXPECT_FLOAT_EQ(in.sum[0], 0.f + 1 - 2 + 127 + 60 * 0.5f);
  if (!int8::available()) {
    EXPECT_FALSE(int8::enable(true));
  }
}

}  // namespace
}  // namespace lily::cpu
