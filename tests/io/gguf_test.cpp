// The GGUF reader: metadata of every value type and tensors where they lie;
// split models; and every kind of damage (truncation at any byte, a bad
// magic or version, offsets, shapes, types, counts) an error naming the
// file, never a crash.
#include "lily/io/gguf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>

#include "lily/error.h"
#include "support/gguf_builder.h"
#include "support/test_support.h"

namespace lily {
namespace {

std::string write(const test::TempDir& dir, const std::string& name, const std::string& bytes) {
  const std::string path = dir.str() + "/" + name;
  std::ofstream(path, std::ios::binary).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  return path;
}

std::string error_opening(const std::string& path) {
  try {
    GgufModel::open(path);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

test::GgufBuilder sample() {
  test::GgufBuilder b;
  b.str("general.architecture", "qwen35moe");
  b.u32("qwen35moe.block_count", 40);
  b.i64("big", -5);
  b.f32("qwen35moe.rope.freq_base", 1e7f);
  b.boolean("flag", true);
  b.strings("tokenizer.ggml.tokens", {"a", "b", "<|im_end|>"});
  std::string f32s(4 * 8, '\0');
  for (int i = 0; i < 8; ++i) {
    const float v = static_cast<float>(i) * 0.5f;
    std::memcpy(&f32s[4 * i], &v, 4);
  }
  b.tensor("output_norm.weight", {8}, 0, f32s);
  b.tensor("blk.0.ffn_gate_exps.weight", {64, 2}, 8, std::string(2 * 2 * 34, '\x01'));  // Q8_0: 2 blocks a row
  return b;
}

TEST(Gguf, ReadsMetadataAndTensorsWhereTheyLie) {
  test::TempDir dir;
  const std::string path = write(dir, "m.gguf", sample().build());
  EXPECT_TRUE(is_gguf_file(path));
  auto m = GgufModel::open(path);
  EXPECT_EQ(m->first().version(), 3u);
  EXPECT_EQ(m->find("general.architecture")->as_string("a"), "qwen35moe");
  EXPECT_EQ(m->find("qwen35moe.block_count")->as_int("b"), 40);
  EXPECT_EQ(m->find("big")->as_int("big"), -5);
  EXPECT_FLOAT_EQ(static_cast<float>(m->find("qwen35moe.rope.freq_base")->as_float("r")), 1e7f);
  EXPECT_EQ(m->find("tokenizer.ggml.tokens")->as_array("t").at(2).as_string("t"), "<|im_end|>");
  EXPECT_THROW(m->find("general.architecture")->as_int("general.architecture"), Error);
  const GgufTensor* norm = m->tensor("output_norm.weight");
  ASSERT_NE(norm, nullptr);
  EXPECT_EQ(norm->nbytes, 32u);
  float v;
  std::memcpy(&v, norm->data + 12, 4);
  EXPECT_EQ(v, 1.5f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(norm->data) % 32, 0u);
  const GgufTensor* q8 = m->tensor("blk.0.ffn_gate_exps.weight");
  ASSERT_NE(q8, nullptr);
  EXPECT_EQ(q8->type, GgmlType::Q8_0);
  EXPECT_EQ(q8->numel(), 128);
  EXPECT_EQ(q8->nbytes, 136u);
}

TEST(Gguf, EveryTruncationIsAnErrorNamingTheFile) {
  test::TempDir dir;
  const std::string whole = sample().build();
  for (size_t n = 0; n < whole.size(); n += (n < 400 ? 1 : 7)) {
    const std::string path = write(dir, "cut.gguf", whole.substr(0, n));
    const std::string e = error_opening(path);
    EXPECT_NE(e.find("cut.gguf"), std::string::npos) << "cut at " << n << ": " << e;
  }
}

TEST(Gguf, DamageIsNamed) {
  test::TempDir dir;
  auto err = [&](test::GgufBuilder b) { return error_opening(write(dir, "bad.gguf", b.build())); };
  std::string notgguf = sample().build();
  notgguf[0] = 'X';
  EXPECT_NE(error_opening(write(dir, "x.gguf", notgguf)).find("not a GGUF file"), std::string::npos);
  test::GgufBuilder v1 = sample();
  v1.version = 1;
  EXPECT_NE(err(v1).find("version 1 is not supported"), std::string::npos);
  test::GgufBuilder past = sample();
  past.tensor("far", {32}, 0, "", 1 << 20);
  EXPECT_NE(err(past).find("tensor 'far'"), std::string::npos);
  test::GgufBuilder misaligned = sample();
  misaligned.tensor("odd", {1}, 0, "abcd", 36);
  EXPECT_NE(err(misaligned).find("not a multiple of the alignment"), std::string::npos);
  test::GgufBuilder partial = sample();
  partial.tensor("q", {40}, 2, std::string(36, '\0'));  // 40 is not whole Q4_0 blocks of 32
  EXPECT_NE(err(partial).find("not whole Q4_0 blocks"), std::string::npos);
  test::GgufBuilder unknown = sample();
  unknown.tensor("u", {4}, 99, std::string(16, '\0'));
  EXPECT_NE(err(unknown).find("unknown type 99"), std::string::npos);
  test::GgufBuilder dims = sample();
  dims.tensor("five", {1, 1, 1, 1, 1}, 0, "abcd");
  EXPECT_NE(err(dims).find("5 dimensions"), std::string::npos);
  test::GgufBuilder twice = sample();
  twice.u32("qwen35moe.block_count", 41);
  EXPECT_NE(err(twice).find("appears twice"), std::string::npos);
  test::GgufBuilder badtype = sample();
  std::string kv;
  test::GgufBuilder::put_str(kv, "k");
  test::GgufBuilder::put<uint32_t>(kv, 77);
  badtype.raw_kv(kv, 1);
  EXPECT_NE(err(badtype).find("unknown value type 77"), std::string::npos);
  test::GgufBuilder huge = sample();
  kv.clear();
  test::GgufBuilder::put_str(kv, "arr");
  test::GgufBuilder::put<uint32_t>(kv, 9);
  test::GgufBuilder::put<uint32_t>(kv, 0);
  test::GgufBuilder::put<uint64_t>(kv, uint64_t(1) << 62);
  huge.raw_kv(kv, 1);
  EXPECT_NE(err(huge).find("an array of"), std::string::npos);
  test::GgufBuilder align = sample();
  align.u32("general.alignment", 24);
  EXPECT_NE(err(align).find("general.alignment"), std::string::npos);
}

TEST(Gguf, SplitModelsOpenFromAnyPart) {
  test::TempDir dir;
  test::GgufBuilder a = sample(), b;
  a.u32("split.no", 0);
  a.u32("split.count", 2);
  b.u32("split.no", 1);
  b.u32("split.count", 2);
  b.tensor("token_embd.weight", {32, 2}, 8, std::string(2 * 34, '\0'));
  write(dir, "model-00001-of-00002.gguf", a.build());
  const std::string second = write(dir, "model-00002-of-00002.gguf", b.build());
  auto m = GgufModel::open(second);
  EXPECT_EQ(m->files().size(), 2u);
  EXPECT_NE(m->tensor("token_embd.weight"), nullptr);
  EXPECT_NE(m->tensor("output_norm.weight"), nullptr);
  EXPECT_EQ(m->find("general.architecture")->as_string("a"), "qwen35moe");  // the first part's metadata
  // Parts 1 and 2 of 3 present: the missing third is named.
  for (uint32_t part : {0u, 1u}) {
    test::GgufBuilder p;
    p.u32("split.no", part);
    p.u32("split.count", 3);
    write(dir, "three-0000" + std::to_string(part + 1) + "-of-00003.gguf", p.build());
  }
  EXPECT_NE(error_opening(dir.str() + "/three-00001-of-00003.gguf").find("three-00003-of-00003.gguf"),
            std::string::npos);
  b.tensor("output_norm.weight", {8}, 0, std::string(32, '\0'));
  write(dir, "model-00002-of-00002.gguf", b.build());
  EXPECT_NE(error_opening(second).find("also in an earlier part"), std::string::npos);
}

}  // namespace
}  // namespace lily
