// Lily's decoding of ggml's block formats is bit-identical to llama.cpp's
// gguf-py on random blocks (tools/make_gguf_block_refs.py wrote them and
// gguf-py's decodings), zero blocks and 0xff blocks included; the affine
// form of the blocks (what the GPU binds) holds the same values.
#include "lily/quant/gguf_blocks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "lily/error.h"
#include "lily/quant/affine.h"
#include "support/test_support.h"

namespace lily::quant {
namespace {

std::vector<uint8_t> slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  EXPECT_TRUE(in) << path;
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class GgufBlocks : public ::testing::TestWithParam<std::pair<const char*, GgmlType>> {};

TEST_P(GgufBlocks, BitIdenticalToGgufPy) {
  const auto [name, type] = GetParam();
  const std::string base = test::data_dir() + "/gguf_blocks/" + name;
  const std::vector<uint8_t> blocks = slurp(base + ".blocks"), expected_bytes = slurp(base + ".f32");
  int64_t elems = 0, bytes = 0;
  ASSERT_TRUE(ggml_block_layout(type, &elems, &bytes));
  ASSERT_EQ(blocks.size() % bytes, 0u);
  const int64_t n = static_cast<int64_t>(blocks.size()) / bytes * elems;
  ASSERT_EQ(expected_bytes.size(), static_cast<size_t>(n) * 4);
  std::vector<float> expected(n), got(n);
  std::memcpy(expected.data(), expected_bytes.data(), expected_bytes.size());
  ASSERT_TRUE(gguf_type_supported(type));
  dequantize_gguf(type, blocks.data(), got.data(), n);
  int64_t mismatches = 0, nans = 0;
  for (int64_t i = 0; i < n; ++i) {
    if (std::isnan(expected[i])) {
      ++nans;
      mismatches += !std::isnan(got[i]);
      continue;
    }
    uint32_t a, b;
    std::memcpy(&a, &expected[i], 4);
    std::memcpy(&b, &got[i], 4);
    if (a != b && mismatches++ < 5)
      ADD_FAILURE() << name << " element " << i << " (block " << i / elems << "): gguf-py " << expected[i] << ", Lily "
                    << got[i];
  }
  EXPECT_EQ(mismatches, 0);
  EXPECT_LT(nans, n / 2);  // the references are mostly finite values
}

// The affine form a backend without block kernels binds holds each decoded
// value to a few units in the last place of its group's magnitude.
TEST_P(GgufBlocks, AffineFormHoldsTheDecodedValues) {
  const auto [name, type] = GetParam();
  const std::vector<uint8_t> blocks = slurp(test::data_dir() + "/gguf_blocks/" + name + ".blocks");
  int64_t elems = 0, bytes = 0;
  ASSERT_TRUE(ggml_block_layout(type, &elems, &bytes));
  // two rows of half the blocks each
  const int64_t nblocks = static_cast<int64_t>(blocks.size()) / bytes / 2 * 2, cols = nblocks / 2 * elems;
  std::vector<float> want(static_cast<size_t>(2 * cols)), got(want.size());
  dequantize_gguf(type, blocks.data(), want.data(), 2 * cols);
  const AffineForm a = gguf_to_affine(type, blocks.data(), 2, cols);
  ASSERT_TRUE(a.bits == 4 || a.bits == 6 || a.bits == 8) << a.bits;
  ASSERT_EQ(cols % a.group_size, 0);
  const int64_t groups = cols / a.group_size;
  int64_t checked = 0;
  for (int64_t r = 0; r < 2; ++r) {
    dequantize_row(a.packed.data() + r * packed_row_bytes(cols, a.bits), a.scales.data() + r * groups,
                   a.biases.data() + r * groups, DType::F32, cols, a.bits, a.group_size, got.data() + r * cols);
    for (int64_t g = 0; g < groups; ++g) {
      const float scale = a.scales[r * groups + g], bias = a.biases[r * groups + g];
      const double mag = std::fabs(scale) * ((1 << a.bits) - 1) + std::fabs(bias);
      if (!std::isfinite(mag)) continue;  // the 0xff blocks' NaN and infinite scales
      for (int64_t c = g * a.group_size; c < (g + 1) * a.group_size; ++c) {
        const size_t i = static_cast<size_t>(r * cols + c);
        ASSERT_LE(std::fabs(double(got[i]) - want[i]), 4 * 1.2e-7 * mag)
            << name << " row " << r << " column " << c << ": decoded " << want[i] << ", affine " << got[i];
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, cols);
}

INSTANTIATE_TEST_SUITE_P(Formats, GgufBlocks,
                         ::testing::Values(std::pair{"Q4_0", GgmlType::Q4_0}, std::pair{"Q4_1", GgmlType::Q4_1},
                                           std::pair{"Q5_0", GgmlType::Q5_0}, std::pair{"Q5_1", GgmlType::Q5_1},
                                           std::pair{"Q8_0", GgmlType::Q8_0}, std::pair{"Q2_K", GgmlType::Q2_K},
                                           std::pair{"Q3_K", GgmlType::Q3_K}, std::pair{"Q4_K", GgmlType::Q4_K},
                                           std::pair{"Q5_K", GgmlType::Q5_K}, std::pair{"Q6_K", GgmlType::Q6_K},
                                           std::pair{"IQ4_NL", GgmlType::IQ4_NL},
                                           std::pair{"IQ4_XS", GgmlType::IQ4_XS}),
                         [](const auto& info) { return std::string(info.param.first); });

TEST(GgufBlocksErrors, PartialBlocksAndUnknownTypesAreRefused) {
  std::vector<uint8_t> raw(64, 0);
  std::vector<float> out(64);
  EXPECT_THROW(dequantize_gguf(GgmlType::Q4_0, raw.data(), out.data(), 40), Error);
  EXPECT_THROW(dequantize_gguf(GgmlType::IQ2_XXS, raw.data(), out.data(), 256), Error);
  EXPECT_FALSE(gguf_type_supported(GgmlType::IQ2_XXS));
}

}  // namespace
}  // namespace lily::quant
