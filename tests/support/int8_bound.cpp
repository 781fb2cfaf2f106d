#include "support/int8_bound.h"

#include <cmath>

#include "lily/backend/cpu/int8_dot.h"
#include "lily/io/dtype.h"

namespace lily::test {

QuantizedMatrix::QuantizedMatrix(const std::vector<float>& w, int64_t rows, int64_t cols, int bits, int group_size,
                                 DType scale_dtype)
    : q(quant::quantize(w.data(), rows, cols, bits, group_size)) {
  for (size_t i = 0; i < q.scales.size(); ++i) {
    const bool bf16 = scale_dtype == DType::BF16;
    scales16.push_back(bf16 ? float_to_bf16(q.scales[i]) : float_to_f16(q.scales[i]));
    biases16.push_back(bf16 ? float_to_bf16(q.biases[i]) : float_to_f16(q.biases[i]));
  }
  const bool f32 = scale_dtype == DType::F32;
  m = Matrix{DType::U32, q.packed.data(), rows, cols};
  m.bits = bits;
  m.group_size = group_size;
  m.scale_dtype = scale_dtype;
  m.scales = f32 ? static_cast<const void*>(q.scales.data()) : scales16.data();
  m.biases = f32 ? static_cast<const void*>(q.biases.data()) : biases16.data();
}

Int8Case int8_case(std::mt19937& rng, int64_t rows, int64_t cols, int64_t tokens, int group_size) {
  std::normal_distribution<float> n(0.f, 1.f);
  Int8Case c{std::vector<float>(static_cast<size_t>(rows * cols)), std::vector<float>(static_cast<size_t>(tokens * cols))};
  for (auto& a : c.w) a = n(rng);
  for (auto& a : c.x) a = n(rng);
  for (int64_t i = 0; i < group_size; ++i) c.x[i] = 0.f;
  if (tokens > 1)
    for (int64_t i = group_size; i < 2 * group_size; ++i) c.x[i + cols] *= 1000.f;
  return c;
}

::testing::AssertionResult within_int8_rounding(const Matrix& W, const float* x, int64_t T, const float* y) {
  const int64_t R = W.rows, C = W.cols, gs = W.group_size;
  std::vector<float> row(static_cast<size_t>(C));
  for (int64_t t = 0; t < T; ++t) {
    const cpu::int8::Input in = cpu::int8::quantize_input(cpu::best_isa(), x + t * C, C, static_cast<int>(gs), false);
    for (int64_t r = 0; r < R; ++r) {
      W.row_to_float(r, row.data());
      double exact = 0, mag = 0, bound = 0;
      for (int64_t c = 0; c < C; ++c) {
        exact += double(row[c]) * x[t * C + c];
        mag += std::abs(double(row[c]) * x[t * C + c]);
        bound += std::abs(double(row[c])) * in.step[c / gs] / 2;
      }
      const double err = std::abs(y[t * R + r] - exact), allowed = bound * 1.001 + 1e-5 * mag;
      if (!(err <= allowed))
        return ::testing::AssertionFailure() << "row " << r << " token " << t << ": off by " << err << ", bound "
                                             << allowed;
    }
  }
  return ::testing::AssertionSuccess();
}

}  // namespace lily::test
