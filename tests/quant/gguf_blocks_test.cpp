// Lily's decoding of ggml's block formats is bit-identical to llama.cpp's
// gguf-py on random blocks (tools/make_gguf_block_refs.py wrote them and
// gguf-py's decodings), zero blocks and 0xff blocks included.
#include "lily/quant/gguf_blocks.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>

#include "lily/error.h"
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
