// Prompt products on AMX tiles against the exact product of the same
// weights: within the rounding of the inputs they make (the decode int8
// path's bound), and each token's outputs the same whatever else shares the
// call, as prompt products must be for resumed prompts to be bit-exact.
#include "lily/backend/cpu/amx_matmul.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "lily/backend/cpu/int8_dot.h"
#include "lily/backend/cpu/matmul.h"
#include "lily/io/dtype.h"
#include "support/int8_bound.h"
#include "support/test_support.h"

namespace lily::cpu {
namespace {

TEST(AmxMatmul, WithinTheInputRoundingOfTheExactProduct) {
  if (!cpu_has(Isa::Amx)) GTEST_SKIP() << "this CPU (or kernel) offers no AMX tiles";
  const CpuContext ctx = test::cpu_context(Isa::Amx, true);
  std::mt19937 rng(9);
  std::normal_distribution<float> n(0.f, 1.f);
  for (DType sd : {DType::F32, DType::BF16, DType::F16})
    for (int bits : {4, 8})
      for (int gs : {64, 128})
        for (int64_t C : {128, 384, 2304}) {
          if (C % gs) continue;
          const int64_t R = 37, T = 21;  // a short block of rows and a short tile of tokens
          std::vector<float> w(R * C), x(T * C);
          for (auto& a : w) a = n(rng);
          for (auto& a : x) a = n(rng);
          for (int64_t c = 0; c < gs; ++c) x[c] = 0.f;                // a group of zeros (step 0)
          for (int64_t c = 0; c < gs; ++c) x[c + 3 * C] *= 1000.f;    // and one of large inputs
          const test::QuantizedMatrix qw(w, R, C, bits, gs, sd);
          ASSERT_TRUE(amx::supports(qw.m));
          std::vector<float> y(T * R);
          amx::matmul(ctx, x.data(), T, qw.m, y.data());
          ASSERT_TRUE(test::within_int8_rounding(qw.m, x.data(), T, y.data()))
              << dtype_name(sd) << " bits " << bits << " gs " << gs << " C " << C;
        }
}

TEST(AmxMatmul, ATokensOutputsDoNotDependOnTheOthers) {
  if (!cpu_has(Isa::Amx)) GTEST_SKIP() << "this CPU (or kernel) offers no AMX tiles";
  const CpuContext ctx = test::cpu_context(Isa::Amx, true);
  std::mt19937 rng(10);
  std::normal_distribution<float> n(0.f, 1.f);
  const int64_t R = 50, C = 256, T = 40;
  std::vector<float> w(R * C), x(T * C);
  for (auto& a : w) a = n(rng);
  for (auto& a : x) a = n(rng);
  const test::QuantizedMatrix qw(w, R, C, 4, 64, DType::BF16);
  std::vector<float> all(T * R), part(R * 7);
  amx::matmul(ctx, x.data(), T, qw.m, all.data());
  for (int64_t t0 : {0, 5, 33}) {  // seven tokens from different places of the tiles
    amx::matmul(ctx, x.data() + t0 * C, 7, qw.m, part.data());
    for (int64_t i = 0; i < 7 * R; ++i) ASSERT_EQ(part[i], all[t0 * R + i]) << "token " << t0 + i / R;
  }
  // and the prompt product takes this path with int8 activations on
  std::vector<float> via(T * R);
  matmul(ctx, x.data(), T, qw.m, via.data(), Rows::Prompt);
  EXPECT_EQ(via, all);
}

}  // namespace
}  // namespace lily::cpu
