#include "lily/io/safetensors.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "lily/error.h"
#include "lily/io/mapped_file.h"
#include "lily/io/safetensors_writer.h"
#include "support/test_support.h"

namespace lily {
namespace {

using test::TempDir;

std::string header_file(const std::string& header, const std::string& data) {
  std::string s(8, '\0');
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>((n >> (8 * i)) & 0xff);
  return s + header + data;
}

void expect_error(const std::string& path, const std::string& needle) {
  try {
    SafetensorsFile f(path);
    FAIL() << "expected an error mentioning '" << needle << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

TEST(Safetensors, WriterAndReaderRoundTrip) {
  TempDir dir;
  SafetensorsWriter w;
  const float a[6] = {1, 2, 3, 4, 5, 6};
  const uint16_t b[3] = {0x3f80, 0x4000, 0xc040};
  w.add("a", DType::F32, {2, 3}, a, sizeof a);
  w.add("b", DType::BF16, {3}, b, sizeof b);
  w.set_metadata("format", "pt");
  w.write(dir.str() + "/x.safetensors");

  SafetensorsFile f(dir.str() + "/x.safetensors");
  ASSERT_EQ(f.tensors().size(), 2u);
  const TensorView& ta = f.tensors().at("a");
  EXPECT_EQ(ta.dtype, DType::F32);
  EXPECT_EQ(ta.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(std::memcmp(ta.data, a, sizeof a), 0);
  const TensorView& tb = f.tensors().at("b");
  EXPECT_EQ(tb.nbytes, sizeof b);
  EXPECT_EQ(f.metadata().at("format"), "pt");
  // data are 8-byte aligned after the padded header
  EXPECT_EQ(reinterpret_cast<uintptr_t>(ta.data) % 8, 0u);
}

TEST(Safetensors, TruncatedFileNamesTheTensor) {
  TempDir dir;
  SafetensorsWriter w;
  std::vector<float> v(100, 1.f);
  w.add("weight", DType::F32, {100}, v.data(), v.size() * 4);
  const std::string path = dir.str() + "/t.safetensors";
  w.write(path);
  std::filesystem::resize_file(path, std::filesystem::file_size(path) - 10);
  expect_error(path, "truncated safetensors file: tensor 'weight'");
}

// Read into memory of its own (--no-mmap), a file gives the same tensors, and
// a truncated one the same error.
TEST(Safetensors, OwnedFilesReadTheSameAndFailTheSame) {
  TempDir dir;
  SafetensorsWriter w;
  std::vector<float> v(1000);
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) * 0.5f;
  w.add("weight", DType::F32, {10, 100}, v.data(), v.size() * 4);
  const std::string path = dir.str() + "/o.safetensors";
  w.write(path);
  set_residency(Residency::Owned);
  {
    SafetensorsFile f(path);
    const TensorView& t = f.tensors().at("weight");
    EXPECT_EQ(std::memcmp(t.data, v.data(), v.size() * 4), 0);
    std::filesystem::resize_file(path, std::filesystem::file_size(path) - 10);
    EXPECT_EQ(std::memcmp(t.data, v.data(), v.size() * 4), 0) << "owned bytes do not follow the file";
  }
  expect_error(path, "truncated safetensors file: tensor 'weight'");
  set_residency(Residency::Mapped);
}

TEST(Safetensors, TooShortForAHeader) {
  TempDir dir;
  test::write_file(dir.str() + "/s.safetensors", "abc");
  expect_error(dir.str() + "/s.safetensors", "truncated safetensors file");
}

TEST(Safetensors, MalformedHeaders) {
  TempDir dir;
  const std::string p = dir.str() + "/m.safetensors";
  test::write_file(p, header_file("{not json", ""));
  expect_error(p, "malformed safetensors header");
  test::write_file(p, header_file("[1,2]", ""));
  expect_error(p, "not a JSON object");
  test::write_file(p, header_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "12345678"));
  expect_error(p, "holds 4 bytes but shape [2] of F32 needs 8");
  test::write_file(p, header_file(R"({"w":{"dtype":"Q9","shape":[2],"data_offsets":[0,8]}})", "12345678"));
  expect_error(p, "unknown dtype");
  test::write_file(p, header_file(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", "12345678"));
  expect_error(p, "negative or non-integer dimension");
  test::write_file(p, header_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", "12345678"));
  expect_error(p, "wrong order");
  test::write_file(p, header_file(R"({"w":{"dtype":"F32","shape":[2]}})", "12345678"));
  expect_error(p, "needs dtype, shape and data_offsets");
  // header length larger than the file
  std::string s = header_file("{}", "");
  s[0] = '\x7f';
  s[3] = '\x01';
  test::write_file(p, s);
  expect_error(p, "does not fit");
}

TEST(Safetensors, ShardedIndexIsChecked) {
  TempDir dir;
  SafetensorsWriter w1, w2;
  const float x = 1.f;
  w1.add("a", DType::F32, {1}, &x, 4);
  w2.add("b", DType::F32, {1}, &x, 4);
  w1.write(dir.str() + "/model-1.safetensors");
  w2.write(dir.str() + "/model-2.safetensors");
  test::write_file(dir.str() + "/model.safetensors.index.json",
                   R"({"weight_map": {"a": "model-1.safetensors", "b": "model-2.safetensors"}})");
  auto archive = SafetensorsArchive::open_dir(dir.str());
  EXPECT_NE(archive->find("a"), nullptr);
  EXPECT_NE(archive->find("b"), nullptr);
  EXPECT_EQ(archive->files().size(), 2u);

  test::write_file(dir.str() + "/model.safetensors.index.json",
                   R"({"weight_map": {"a": "model-2.safetensors", "b": "model-2.safetensors"}})");
  EXPECT_THROW(SafetensorsArchive::open_dir(dir.str()), Error);

  test::write_file(dir.str() + "/model.safetensors.index.json", R"({"weight_map": {"a": "missing.safetensors"}})");
  try {
    SafetensorsArchive::open_dir(dir.str());
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("missing.safetensors"), std::string::npos) << e.what();
  }
  test::write_file(dir.str() + "/model.safetensors.index.json", R"({"weight_map": {"a": "../x.safetensors"}})");
  EXPECT_THROW(SafetensorsArchive::open_dir(dir.str()), Error);
  test::write_file(dir.str() + "/model.safetensors.index.json", "{oops");
  EXPECT_THROW(SafetensorsArchive::open_dir(dir.str()), Error);
}

TEST(Safetensors, DirectoryWithoutWeights) {
  TempDir dir;
  EXPECT_THROW(SafetensorsArchive::open_dir(dir.str()), Error);
}

}  // namespace
}  // namespace lily
