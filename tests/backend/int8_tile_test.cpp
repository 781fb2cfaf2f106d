// Prompt products in int8 tiles of sixteen rows, against the exact product
// and against the decode kernel: within the rounding of the inputs, the
// same sums as the decode kernel but for the order of the groups' float
// terms, and each token's result the same whatever shares the call.
#include "lily/backend/cpu/int8_tile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "lily/backend/cpu/matmul.h"
#include "lily/error.h"
#include "lily/io/dtype.h"
#include "support/int8_bound.h"
#include "support/test_support.h"

namespace lily::cpu {
namespace {

TEST(Int8Tile, PromptTilesKeepTheDecodeKernelsSums) {
  if (best_isa() < Isa::Avx512Vnni) GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
  const CpuContext ctx = test::cpu_context(Isa::Avx512Vnni, true);
  std::mt19937 rng(11);
  for (DType sd : {DType::F32, DType::BF16, DType::F16})
    for (int bits : {4, 8})
      for (int gs : {64, 128})
        for (int64_t C : {256, 2304}) {
          // 37 rows: two whole tiles and a short one; 7 tokens: a tile of four inputs and one of three
          const int64_t R = 37, T = 7;
          const auto [w, x] = test::int8_case(rng, R, C, T, gs);
          const test::QuantizedMatrix qw(w, R, C, bits, gs, sd);
          ASSERT_TRUE(int8::tile_supported(int8::kernel_for(ctx.isa), qw.m));
          const std::string what = std::string(dtype_name(sd)) + " bits " + std::to_string(bits) + " gs " +
                                   std::to_string(gs) + " C " + std::to_string(C);
          std::vector<float> y(T * R), decode(T * R), one(R);
          matmul(ctx, x.data(), T, qw.m, y.data(), Rows::Prompt);
          matmul(ctx, x.data(), T, qw.m, decode.data(), Rows::Tokens);
          EXPECT_TRUE(test::within_int8_rounding(qw.m, x.data(), T, y.data())) << what;
          for (int64_t t = 0; t < T; ++t) {
            matmul(ctx, x.data() + t * C, 1, qw.m, one.data(), Rows::Prompt);
            EXPECT_TRUE(std::equal(one.begin(), one.end(), y.begin() + t * R)) << what << ": token " << t << " alone differs";
            for (int64_t r = 0; r < R; ++r) {
              // the same integer sums, scaled and added per group in another order
              double mag = 0;
              for (int64_t c = 0; c < C; ++c) mag += std::abs(double(w[r * C + c]) * x[t * C + c]);
              EXPECT_NEAR(y[t * R + r], decode[t * R + r], 1e-5 * mag) << what << ": row " << r << " token " << t;
            }
          }
        }
}

TEST(Int8Tile, RefusesWhatItCannotTake) {
  std::vector<float> w(16 * 256, 0.5f);
  const test::QuantizedMatrix qw(w, 16, 256, 4, 64, DType::BF16);
  EXPECT_FALSE(int8::tile_supported(int8::Kernel::Avx2, qw.m));
  EXPECT_THROW(int8::tile_rows(qw.m, 0, 17, nullptr, 0, nullptr, 16), Error);
}

}  // namespace
}  // namespace lily::cpu
