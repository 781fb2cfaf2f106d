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
#include "lily/quant/affine.h"

namespace lily::cpu {
namespace {

struct Quantized {
  quant::QuantizedRows q;
  std::vector<uint16_t> sc16, bi16;
  Matrix m;
  Quantized(const std::vector<float>& w, int64_t R, int64_t C, int bits, int gs, DType sd) {
    q = quant::quantize(w.data(), R, C, bits, gs);
    for (size_t i = 0; i < q.scales.size(); ++i) {
      sc16.push_back(sd == DType::BF16 ? float_to_bf16(q.scales[i]) : float_to_f16(q.scales[i]));
      bi16.push_back(sd == DType::BF16 ? float_to_bf16(q.biases[i]) : float_to_f16(q.biases[i]));
    }
    m = Matrix{DType::U32, q.packed.data(), R, C};
    m.bits = bits;
    m.group_size = gs;
    m.scale_dtype = sd;
    m.scales = sd == DType::F32 ? static_cast<const void*>(q.scales.data()) : sc16.data();
    m.biases = sd == DType::F32 ? static_cast<const void*>(q.biases.data()) : bi16.data();
  }
};

TEST(AmxMatmul, WithinTheInputRoundingOfTheExactProduct) {
  if (!amx::available()) GTEST_SKIP() << "this CPU (or kernel) offers no AMX tiles";
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
          const Quantized qw(w, R, C, bits, gs, sd);
          ASSERT_TRUE(amx::supports(qw.m));
          std::vector<float> y(T * R), row(C);
          amx::matmul(x.data(), T, qw.m, y.data());
          for (int64_t t = 0; t < T; ++t) {
            const int8::Input in = int8::quantize_input(x.data() + t * C, C, gs, false);
            for (int64_t r = 0; r < R; ++r) {
              qw.m.row_to_float(r, row.data());
              double exact = 0, mag = 0, bound = 0;
              for (int64_t c = 0; c < C; ++c) {
                exact += double(row[c]) * x[t * C + c];
                mag += std::abs(double(row[c]) * x[t * C + c]);
                bound += std::abs(double(row[c])) * in.step[c / gs] / 2;
              }
              ASSERT_LE(std::abs(y[t * R + r] - exact), bound * 1.001 + 1e-5 * mag)
                  << dtype_name(sd) << " bits " << bits << " gs " << gs << " C " << C << " row " << r << " token " << t;
            }
          }
        }
}

TEST(AmxMatmul, ATokensOutputsDoNotDependOnTheOthers) {
  if (!amx::available()) GTEST_SKIP() << "this CPU (or kernel) offers no AMX tiles";
  std::mt19937 rng(10);
  std::normal_distribution<float> n(0.f, 1.f);
  const int64_t R = 50, C = 256, T = 40;
  std::vector<float> w(R * C), x(T * C);
  for (auto& a : w) a = n(rng);
  for (auto& a : x) a = n(rng);
  const Quantized qw(w, R, C, 4, 64, DType::BF16);
  std::vector<float> all(T * R), part(R * 7);
  amx::matmul(x.data(), T, qw.m, all.data());
  for (int64_t t0 : {0, 5, 33}) {  // seven tokens from different places of the tiles
    amx::matmul(x.data() + t0 * C, 7, qw.m, part.data());
    for (int64_t i = 0; i < 7 * R; ++i) ASSERT_EQ(part[i], all[t0 * R + i]) << "token " << t0 + i / R;
  }
  // and the prompt product takes this path with int8 activations on
  ASSERT_TRUE(int8::enable(true));
  std::vector<float> via(T * R);
  matmul(x.data(), T, qw.m, via.data(), Rows::Prompt);
  int8::enable(false);
  EXPECT_EQ(via, all);
}

}  // namespace
}  // namespace lily::cpu
