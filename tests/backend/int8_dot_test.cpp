// The int8-activation decode path, at each ISA level with a kernel (AVX2,
// VNNI, Arm's SDOT and I8MM),
// against the exact product of the same weights: within the rounding of the
// inputs it makes, never more, and a batched call equal to single ones.
#include "lily/backend/cpu/int8_dot.h"
#include "lily/backend/cpu/int8_tile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "lily/backend/cpu/matmul.h"
#include "lily/io/dtype.h"
#include "lily/error.h"
#include "support/int8_bound.h"
#include "support/test_support.h"

namespace lily::cpu {
namespace {

TEST(Int8Dot, WithinTheInputRoundingOfTheExactProduct) {
  if (!has_int8_kernels(best_isa())) GTEST_SKIP() << "this CPU has no int8 kernel";
  for (Isa isa : isas_here()) {  // each ISA with an int8 kernel: AVX2's and VNNI's, or SDOT's and I8MM's
    if (int8::kernel_for(isa) == int8::Kernel::None) continue;
    const CpuContext ctx = test::cpu_context(isa, true);
    const int8::Kernel k = int8::kernel_for(isa);
    std::mt19937 rng(5);
    // scales and biases in each stored type; 2304 inputs span more than sixteen groups
    for (DType sd : {DType::F32, DType::BF16, DType::F16})
      for (int bits : {4, 8})
        for (int gs : {64, 128})
          for (int64_t C : {256, 512, 2304}) {
            const int64_t R = 37, T = 3;
            const auto [w, x] = test::int8_case(rng, R, C, T, gs);
            const test::QuantizedMatrix qw(w, R, C, bits, gs, sd);
            ASSERT_TRUE(int8::supports(qw.m));
            std::vector<float> y(T * R), one(R);
            matmul(ctx, x.data(), T, qw.m, y.data(), Rows::Tokens);
            for (int64_t t = 0; t < T; ++t) {
              matmul(ctx, x.data() + t * C, 1, qw.m, one.data(), Rows::Tokens);
              EXPECT_TRUE(std::equal(one.begin(), one.end(), y.begin() + t * R)) << "a batched row differs";
            }
            // AVX2 prompts of 8-bit rows: pairs of tokens per unpacked chunk,
            // each as alone (4-bit rows take the tiles, int8_tile_test.cpp)
            if (k == int8::Kernel::Avx2 && !int8::tile_supported(k, qw.m)) {
              std::vector<float> prompt(T * R);
              matmul(ctx, x.data(), T, qw.m, prompt.data(), Rows::Prompt);
              EXPECT_TRUE(prompt == y) << "a prompt's row differs from the token's";
            }
            EXPECT_TRUE(test::within_int8_rounding(qw.m, x.data(), T, y.data()))
                << isa_name(isa) << " " << dtype_name(sd) << " bits " << bits << " gs " << gs
                << " C " << C;
          }
  }
}

TEST(Int8Dot, ExtremeCodesAndInputsSumExactly) {
  // 8-bit codes 0 and 255 and 4-bit 0 and 15 against inputs rounded to
  // +-127: the largest products any kernel's pieces hold (Arm's SDOT meets
  // 8-bit codes as code - 128 and adds 128 x the inputs back), in decode
  // and prompt products alike
  if (!has_int8_kernels(best_isa())) GTEST_SKIP() << "this CPU has no int8 kernel";
  for (Isa isa : isas_here()) {
    if (!has_int8_kernels(isa)) continue;
    const CpuContext ctx = test::cpu_context(isa, true);
    for (int bits : {4, 8}) {
      const int64_t R = 20, C = 512, T = 5;
      const float top = bits == 4 ? 15.f : 255.f;
      std::vector<float> w(R * C), x(T * C);
      for (int64_t i = 0; i < R * C; ++i) w[i] = (i / 3 + i / C) % 2 ? top : 0.f;
      for (int64_t i = 0; i < T * C; ++i) x[i] = (i / 7 + i / C) % 2 ? 1.f : -1.f;
      const test::QuantizedMatrix qw(w, R, C, bits, 64, DType::F32);
      for (Rows kind : {Rows::Tokens, Rows::Prompt}) {
        std::vector<float> y(T * R);
        matmul(ctx, x.data(), T, qw.m, y.data(), kind);
        EXPECT_TRUE(test::within_int8_rounding(qw.m, x.data(), T, y.data()))
            << isa_name(isa) << " bits " << bits << (kind == Rows::Prompt ? " prompt" : " decode");
      }
    }
  }
}

TEST(Int8Dot, InputsAreRoundedPerGroup) {
  std::vector<float> x = {0.f, 1.f, -2.f, 127.f};
  x.resize(64, 0.5f);
  for (Isa isa : isas_here()) {
  const int8::Input in = int8::quantize_input(isa, x.data(), 64, 64, true);
  EXPECT_FLOAT_EQ(in.step[0], 1.f);
  EXPECT_EQ(in.q[0], 0);     // x[0], even half
  EXPECT_EQ(in.q[32], 1);    // x[1], odd half
  EXPECT_EQ(in.q[1], -2);    // x[2]
  EXPECT_EQ(in.q[33], 127);  // x[3]
  EXPECT_FLOAT_EQ(in.sum[0], 0.f + 1 - 2 + 127 + 60 * 0.5f);
  }
  // a context without an int8 kernel refuses to be asked for one
  CpuOptions o;
  o.isa = Isa::Portable;
  o.int8 = CpuOptions::Int8::On;
  EXPECT_THROW(make_cpu_context(o), Error);
  o.int8 = CpuOptions::Int8::Auto;
  EXPECT_FALSE(make_cpu_context(o).int8);
}

}  // namespace
}  // namespace lily::cpu
