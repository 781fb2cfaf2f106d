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

void check_tiles(Isa isa, std::initializer_list<int> bit_widths) {
  const CpuContext ctx = test::cpu_context(isa, true);
  std::mt19937 rng(11);
  for (DType sd : {DType::F32, DType::BF16, DType::F16})
    for (int bits : bit_widths)
      for (int gs : {64, 128})
        for (int64_t C : {256, 2304}) {
          // 37 rows: two whole tiles and a short one (of eight rows and five
          // with AVX2); 7 tokens: inputs four, two and one at a time
          const int64_t R = 37, T = 7;
          const auto [w, x] = test::int8_case(rng, R, C, T, gs);
          const test::QuantizedMatrix qw(w, R, C, bits, gs, sd);
          ASSERT_TRUE(int8::tile_supported(int8::kernel_for(ctx.isa), qw.m));
          const std::string what = std::string(isa_name(isa)) + " " + std::string(dtype_name(sd)) + " bits " +
                                   std::to_string(bits) + " gs " + std::to_string(gs) + " C " + std::to_string(C);
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

TEST(Int8Tile, PromptTilesKeepTheDecodeKernelsSums) {
  if (!cpu_has(Isa::Avx512Vnni)) GTEST_SKIP() << "this CPU has no AVX-512 VNNI";
  check_tiles(Isa::Avx512Vnni, {4, 8});
}

TEST(Int8Tile, Avx2TilesOfFourBitRowsKeepTheDecodeKernelsSums) {
  if (!cpu_has(Isa::Avx2)) GTEST_SKIP() << "this CPU has no AVX2";
  check_tiles(Isa::Avx2, {4});
}

TEST(Int8Tile, ArmI8mmTilesKeepTheDecodeKernelsSums) {
  if (!cpu_has(Isa::ArmI8mm)) GTEST_SKIP() << "this CPU has no Arm I8MM";
  check_tiles(Isa::ArmI8mm, {4, 8});
}

TEST(Int8Tile, Avx2TilesSumExtremeCodesWithoutOverflow) {
  // codes 15 against inputs that round to +-127: a 16-bit piece of a lane
  // then holds up to 16 products of 15 x 127, the most it ever holds. (The
  // group's first weight, 15, is its edge of larger magnitude: code 0, bias
  // 15 and scale -1, so the zeros get code 15.)
  if (!cpu_has(Isa::Avx2)) GTEST_SKIP() << "this CPU has no AVX2";
  const CpuContext ctx = test::cpu_context(Isa::Avx2, true);
  const int64_t R = 8, C = 256, T = 2;
  std::vector<float> w(R * C), x(T * C);
  for (int64_t i = 0; i < R * C; ++i) w[i] = i % 64 == 0 ? 15.f : 0.f;
  for (int64_t c = 0; c < C; ++c) x[c] = 1.f, x[C + c] = -1.f;
  const test::QuantizedMatrix qw(w, R, C, 4, 64, DType::F32);
  std::vector<float> y(T * R);
  ASSERT_EQ(static_cast<const uint8_t*>(qw.m.data)[1], 0xFF);
  matmul(ctx, x.data(), T, qw.m, y.data(), Rows::Prompt);
  EXPECT_TRUE(test::within_int8_rounding(qw.m, x.data(), T, y.data()));
}

TEST(Int8Tile, RefusesWhatItCannotTake) {
  std::vector<float> w(16 * 256, 0.5f);
  const test::QuantizedMatrix q4(w, 16, 256, 4, 64, DType::BF16), q8(w, 16, 256, 8, 64, DType::BF16);
  EXPECT_TRUE(int8::tile_supported(int8::Kernel::Avx2, q4.m));
  EXPECT_FALSE(int8::tile_supported(int8::Kernel::Avx2, q8.m));  // 8-bit codes would saturate its 16-bit sums
  EXPECT_FALSE(int8::tile_supported(int8::Kernel::None, q4.m));
  EXPECT_FALSE(int8::tile_supported(int8::Kernel::ArmDot, q4.m));  // SDOT alone: the decode kernel, tokens in turn
  EXPECT_TRUE(int8::tile_supported(int8::Kernel::ArmI8mm, q8.m));
  EXPECT_THROW(int8::tile_rows(int8::Kernel::Vnni, q4.m, 0, 17, nullptr, 0, nullptr, 16), Error);
}

}  // namespace
}  // namespace lily::cpu
