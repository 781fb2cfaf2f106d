// MLX affine quantization kernels: the bit packing against a bit stream built
// here, and quantize/dequantize against the bounds the grid implies.
#include "lily/quant/affine.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace lily::quant {
namespace {

TEST(Affine, UnpackReadsALittleEndianBitStream) {
  std::mt19937 rng(3);
  for (int bits : {2, 3, 4, 5, 6, 8}) {
    const int n = 64;
    std::vector<uint32_t> q(n);
    std::vector<uint8_t> bytes(n * bits / 8, 0);
    for (int i = 0; i < n; ++i) {
      q[i] = rng() & ((1u << bits) - 1);
      for (int b = 0; b < bits; ++b)  // bit b of value i is stream bit i*bits + b
        if (q[i] >> b & 1) bytes[(i * bits + b) / 8] |= static_cast<uint8_t>(1u << ((i * bits + b) % 8));
    }
    for (int i = 0; i < n; ++i) EXPECT_EQ(unpack(bytes.data(), i, bits), q[i]) << bits << "-bit value " << i;
  }
  // 4-bit: element 0 in the low nibble of the first byte, as mlx's uint32 words
  const uint8_t w[4] = {0x21, 0x43, 0x65, 0x87};
  for (int i = 0; i < 8; ++i) EXPECT_EQ(unpack(w, i, 4), static_cast<uint32_t>(i + 1));
}

// mlx puts the edge of larger magnitude exactly on the grid (scale = edge /
// round(edge / scale)), so the grid may stop short of the other edge: values
// beyond it clamp to the grid's end, and everything on the grid's span comes
// back within half a step.
TEST(Affine, QuantizeRoundTripsWithinHalfAStepOfTheGrid) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (int bits : {2, 3, 4, 5, 6, 8})
    for (int gs : {32, 64, 128}) {
      const int64_t rows = 3, cols = 256;
      std::vector<float> w(rows * cols);
      for (auto& x : w) x = nd(rng);
      const QuantizedRows q = quantize(w.data(), rows, cols, bits, gs);
      ASSERT_EQ(q.packed.size(), static_cast<size_t>(rows) * packed_row_bytes(cols, bits));
      std::vector<float> back(cols);
      for (int64_t r = 0; r < rows; ++r) {
        dequantize_row(q.packed.data() + r * packed_row_bytes(cols, bits), q.scales.data() + r * (cols / gs),
                       q.biases.data() + r * (cols / gs), DType::F32, cols, bits, gs, back.data());
        for (int64_t c = 0; c < cols; ++c) {
          const float s = q.scales[r * (cols / gs) + c / gs], b = q.biases[r * (cols / gs) + c / gs];
          const float end = b + s * static_cast<float>((1 << bits) - 1);
          const float on_grid = std::clamp(w[r * cols + c], std::min(b, end), std::max(b, end));
          EXPECT_LE(std::abs(back[c] - on_grid), 0.5f * std::abs(s) * 1.0001f + 1e-6f)
              << bits << "-bit gs " << gs << " at " << r << "," << c;
        }
      }
    }
}

TEST(Affine, TheLargerEdgeIsExactAndGridValuesRoundTrip) {
  // values on a 4-bit grid with step 0.5 from -2: recovered exactly
  std::vector<float> w(32);
  for (int i = 0; i < 32; ++i) w[i] = -2.0f + 0.5f * static_cast<float>(i % 16);
  const QuantizedRows q = quantize(w.data(), 1, 32, 4, 32);
  std::vector<float> back(32);
  dequantize_row(q.packed.data(), q.scales.data(), q.biases.data(), DType::F32, 32, 4, 32, back.data());
  for (int i = 0; i < 32; ++i) EXPECT_FLOAT_EQ(back[i], w[i]) << i;
  // a constant group stays constant
  std::vector<float> c(32, 0.75f);
  const QuantizedRows qc = quantize(c.data(), 1, 32, 3, 32);
  dequantize_row(qc.packed.data(), qc.scales.data(), qc.biases.data(), DType::F32, 32, 3, 32, back.data());
  for (int i = 0; i < 32; ++i) EXPECT_FLOAT_EQ(back[i], 0.75f);
}

TEST(Affine, SupportedSizes) {
  for (int b : {2, 3, 4, 5, 6, 8}) EXPECT_TRUE(supported_bits(b));
  for (int b : {1, 7, 16}) EXPECT_FALSE(supported_bits(b));
  EXPECT_TRUE(supported_group_size(128));
  EXPECT_FALSE(supported_group_size(48));
}

}  // namespace
}  // namespace lily::quant
