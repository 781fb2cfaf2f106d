// The int8-activation decode kernels for GGUF block formats, at each ISA
// level with a kernel (AVX2, VNNI), on blocks of random bytes (every code,
// scale and sign a format can hold, Q8_0's -128 and Q6_K's -128 scale
// included) against the exact product of the rows gguf-py's arithmetic
// decodes: within the rounding of the inputs, never more; a batched call
// and a prompt equal to single tokens; without int8 the float path, exact to float sums.
#include "lily/backend/cpu/ggml_int8_dot.h"
#include "lily/backend/cpu/ggml_int8_tile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "lily/backend/cpu/matmul.h"
#include "lily/io/dtype.h"
#include "lily/io/gguf.h"
#include "lily/quant/gguf_blocks.h"
#include "support/test_support.h"

namespace lily::cpu {
namespace {

struct Format {
  GgmlType type;
  int64_t elems, bytes;
  std::vector<int> halves;  // byte offsets of the f16 scales in a block
  int64_t codes_begin, codes_end;  // the code bytes, when w = code part - min (K formats)
};

const Format kFormats[] = {
    {GgmlType::Q8_0, 32, 34, {0}, 0, 0},
    {GgmlType::Q4_0, 32, 18, {0}, 0, 0},
    {GgmlType::Q4_K, 256, 144, {0, 2}, 16, 144},
    {GgmlType::Q5_K, 256, 176, {0, 2}, 16, 176},
    {GgmlType::Q6_K, 256, 210, {208}, 0, 0},
    {GgmlType::Q2_K, 256, 84, {80, 82}, 16, 80},
    {GgmlType::Q3_K, 256, 110, {108}, 0, 0},
    {GgmlType::IQ4_XS, 256, 136, {0}, 0, 0},
};

// Rows of random blocks with their f16 scales set to small random values.
std::vector<uint8_t> random_blocks(const Format& f, int64_t rows, int64_t cols, std::mt19937& rng) {
  const int64_t blocks = rows * cols / f.elems;
  std::vector<uint8_t> b(static_cast<size_t>(blocks * f.bytes));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> scale(-0.02f, 0.05f);
  for (auto& v : b) v = static_cast<uint8_t>(byte(rng));
  for (int64_t k = 0; k < blocks; ++k)
    for (int off : f.halves) {
      const uint16_t h = float_to_f16(scale(rng));
      std::memcpy(b.data() + k * f.bytes + off, &h, 2);
    }
  return b;
}

Matrix blocks_matrix(const Format& f, const std::vector<uint8_t>& b, int64_t rows, int64_t cols) {
  Matrix m{DType::U8, b.data(), rows, cols};
  m.ggml_type = static_cast<int>(f.type);
  return m;
}

// Every y[t, r] within sum over groups of 32 of (step / 2) * sum |code part|
// of the exact product, where the code part is the weight less its
// sub-block's min (K formats: the min meets the exact input sum).
::testing::AssertionResult within_rounding(const Format& f, const Matrix& W, const float* x, int64_t T,
                                           const float* y) {
  const int64_t R = W.rows, C = W.cols;
  std::vector<ggml_int8::Input> ins;
  for (int64_t t = 0; t < T; ++t) ins.push_back(ggml_int8::quantize_input(best_isa(), f.type, x + t * C, C));
  std::vector<float> row(C), base(C);
  std::vector<uint8_t> zeroed(W.row_bytes());
  for (int64_t r = 0; r < R; ++r) {
    W.row_to_float(r, row.data());
    std::fill(base.begin(), base.end(), 0.f);
    if (f.codes_end > 0) {  // the row with its codes zeroed: -min everywhere
      std::memcpy(zeroed.data(), W.row(r), zeroed.size());
      for (int64_t k = 0; k < C / f.elems; ++k)
        std::memset(zeroed.data() + k * f.bytes + f.codes_begin, 0, f.codes_end - f.codes_begin);
      quant::dequantize_gguf(f.type, zeroed.data(), base.data(), C);
    }
    for (int64_t t = 0; t < T; ++t) {
      const ggml_int8::Input& in = ins[t];
      double exact = 0, mag = 0, bound = 0;
      for (int64_t c = 0; c < C; ++c) {
        exact += double(row[c]) * x[t * C + c];
        mag += std::abs(double(row[c]) * x[t * C + c]);
        bound += std::abs(double(row[c]) - base[c]) * in.rounded.step[c / 32] / 2;
      }
      const double err = std::abs(y[t * R + r] - exact), allowed = bound * 1.001 + 1e-5 * mag;
      if (!(err <= allowed))
        return ::testing::AssertionFailure() << ggml_type_name(f.type) << " row " << r << " token " << t
                                             << ": off by " << err << ", bound " << allowed;
    }
  }
  return ::testing::AssertionSuccess();
}

TEST(GgmlInt8Dot, WithinTheInputRoundingOfTheExactProduct) {
  if (!cpu_has(Isa::Avx2)) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512 VNNI";
  for (Isa isa : isas_here()) {
    if (int8::kernel_for(isa) == int8::Kernel::None) continue;
    const CpuContext ctx = test::cpu_context(isa, true);
    std::mt19937 rng(11);
    std::normal_distribution<float> n(0.f, 1.f);
    for (const Format& f : kFormats)
      for (int64_t C : {256, 512, 2304}) {
        const int64_t R = 37, T = 7;  // seven tokens: a prompt takes them in a four, a pair and one
        const std::vector<uint8_t> b = random_blocks(f, R, C, rng);
        const Matrix W = blocks_matrix(f, b, R, C);
        ASSERT_TRUE(ggml_int8::supports(W)) << ggml_type_name(f.type);
        std::vector<float> x(T * C);
        for (auto& a : x) a = n(rng);
        for (int64_t c = 0; c < 32; ++c) x[c] = 0.f;                // a group of zeros (step 0)
        for (int64_t c = 32; c < 64; ++c) x[c + C] *= 1000.f;      // and one of large inputs
        std::vector<float> y(T * R), one(R);
        matmul(ctx, x.data(), T, W, y.data(), Rows::Tokens);
        for (int64_t t = 0; t < T; ++t) {
          matmul(ctx, x.data() + t * C, 1, W, one.data(), Rows::Tokens);
          EXPECT_TRUE(std::equal(one.begin(), one.end(), y.begin() + t * R))
              << ggml_type_name(f.type) << ": a batched row differs";
        }
        // a prompt's tokens share each decoded block, with each token's result what it gets alone
        std::vector<float> prompt(T * R);
        matmul(ctx, x.data(), T, W, prompt.data(), Rows::Prompt);
        if (!ggml_int8::tile_supported(int8::kernel_for(isa), W)) {
          EXPECT_TRUE(prompt == y) << ggml_type_name(f.type) << ": a prompt's row differs from the token's";
        } else {  // tiles (ggml_int8_tile.h): the same integer sums, their float terms added in another order
          EXPECT_TRUE(within_rounding(f, W, x.data(), T, prompt.data())) << "tiles " << isa_name(isa) << " C " << C;
          for (int64_t t = 0; t < T; ++t) {
            matmul(ctx, x.data() + t * C, 1, W, one.data(), Rows::Prompt);
            EXPECT_TRUE(std::equal(one.begin(), one.end(), prompt.begin() + t * R))
                << ggml_type_name(f.type) << ": a prompt's token alone differs";
            for (int64_t r = 0; r < R; ++r) {
              std::vector<float> row(C);
              W.row_to_float(r, row.data());
              double mag = 0;
              for (int64_t c = 0; c < C; ++c) mag += std::abs(double(row[c]) * x[t * C + c]);
              EXPECT_NEAR(prompt[t * R + r], y[t * R + r], 1e-5 * mag) << "row " << r << " token " << t;
            }
          }
        }
        EXPECT_TRUE(within_rounding(f, W, x.data(), T, y.data())) << isa_name(isa) << " C " << C;
      }
  }
}

TEST(GgmlInt8Dot, TilesSumExtremeCodesWithoutOverflow) {
  // every code 15 (and every Q4_K scale 63) against inputs that round to
  // +-127: a 16-bit piece of a tile's lane then holds 16 products of
  // 15 x 127, the most it ever holds
  if (!cpu_has(Isa::Avx2)) GTEST_SKIP() << "this CPU has no AVX2";
  const CpuContext ctx = test::cpu_context(Isa::Avx2, true);
  for (const Format& f : kFormats) {
    const int64_t R = 8, C = 512, T = 2;
    std::vector<uint8_t> b(static_cast<size_t>(R * C / f.elems * f.bytes), 0xFF);
    for (int64_t k = 0; k < R * C / f.elems; ++k)
      for (size_t h = 0; h < f.halves.size(); ++h) {  // d = 1, dmin = 0
        const uint16_t v = float_to_f16(h == 0 ? 1.f : 0.f);
        std::memcpy(b.data() + k * f.bytes + f.halves[h], &v, 2);
      }
    const Matrix W = blocks_matrix(f, b, R, C);
    if (!ggml_int8::tile_supported(int8::Kernel::Avx2, W)) continue;
    std::vector<float> x(T * C), y(T * R);
    for (int64_t c = 0; c < C; ++c) x[c] = 1.f, x[C + c] = -1.f;
    matmul(ctx, x.data(), T, W, y.data(), Rows::Prompt);
    EXPECT_TRUE(within_rounding(f, W, x.data(), T, y.data())) << ggml_type_name(f.type);
  }
}

// Whatever the inputs, the int8 products of a matrix of equal weights come
// out as the float path's up to the input rounding: no lane, block or row
// is dropped or counted twice (rows of 1..9 exercise the short row blocks).
TEST(GgmlInt8Dot, ShortRowBlocksAndBatchedProducts) {
  if (!cpu_has(Isa::Avx2)) GTEST_SKIP() << "this CPU has neither AVX2 nor AVX-512 VNNI";
  const CpuContext ctx = test::cpu_context(best_isa(), true);
  const CpuContext exact = test::cpu_context(best_isa(), false);
  std::mt19937 rng(3);
  std::normal_distribution<float> n(0.f, 1.f);
  for (const Format& f : kFormats)
    for (int64_t R = 1; R <= 9; ++R) {
      const int64_t C = 512;
      const std::vector<uint8_t> b = random_blocks(f, R, C, rng);
      const Matrix W = blocks_matrix(f, b, R, C);
      std::vector<float> x(C);
      for (auto& a : x) a = n(rng);
      std::vector<float> y(R), ref(R);
      matmul(ctx, x.data(), 1, W, y.data(), Rows::Tokens);
      matmul(exact, x.data(), 1, W, ref.data(), Rows::Tokens);  // float path: decode, then dot
      std::vector<float> reference(R);
      matmul_reference(x.data(), 1, W, reference.data());
      for (int64_t r = 0; r < R; ++r)
        EXPECT_NEAR(ref[r], reference[r], 1e-4 * (1 + std::abs(reference[r]))) << ggml_type_name(f.type);
      EXPECT_TRUE(within_rounding(f, W, x.data(), 1, y.data())) << ggml_type_name(f.type) << " R " << R;
    }
}

TEST(GgmlInt8Dot, TakesTheBlockFormatsItHasKernelsFor) {
  Matrix m{DType::U8, nullptr, 4, 256};
  for (GgmlType t : {GgmlType::Q8_0, GgmlType::Q4_0, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::Q4_K, GgmlType::Q5_K,
                     GgmlType::Q6_K, GgmlType::IQ4_XS}) {
    m.ggml_type = static_cast<int>(t);
    EXPECT_TRUE(ggml_int8::supports(m)) << ggml_type_name(t);
  }
  m.ggml_type = static_cast<int>(GgmlType::IQ4_NL);  // no kernel: the float path
  EXPECT_FALSE(ggml_int8::supports(m));
  m.ggml_type = static_cast<int>(GgmlType::Q4_K);
  m.cols = 288;  // not whole super-blocks
  EXPECT_FALSE(ggml_int8::supports(m));
  m.ggml_type = -1;  // not a GGUF block matrix
  m.cols = 256;
  EXPECT_FALSE(ggml_int8::supports(m));
}

}  // namespace
}  // namespace lily::cpu
