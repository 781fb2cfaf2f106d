// Files and JSON a checkpoint or a client brings, read within bounds: a FIFO
// or a device in place of a file, an oversized file, deep JSON, or a model
// directory that is not one each get an error naming the problem at once.
#include "lily/io/bounded_input.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>

#include "lily/error.h"
#include "lily/io/safetensors.h"
#include "lily/model/config.h"
#include "lily/runtime/sampler.h"
#include "lily/text/tokenizer.h"
#include "support/test_support.h"

namespace lily {
namespace {

namespace fs = std::filesystem;

std::string error_of(const std::function<void()>& f) {
  try {
    f();
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(BoundedInput, AFifoIsRefusedWithoutWaitingForAWriter) {
  test::TempDir d;
  ASSERT_EQ(::mkfifo((d.str() + "/config.json").c_str(), 0600), 0);
  const auto t0 = std::chrono::steady_clock::now();
  EXPECT_NE(error_of([&] { ModelConfig::load(d.str()); }).find("is not a regular file"), std::string::npos);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

TEST(BoundedInput, AFifoCheckpointIsRefusedToo) {
  test::TempDir d;
  ASSERT_EQ(::mkfifo((d.str() + "/model.safetensors").c_str(), 0600), 0);
  EXPECT_NE(error_of([&] { SafetensorsFile f(d.str() + "/model.safetensors"); }).find("is not a regular file"),
            std::string::npos);
}

TEST(BoundedInput, ADeviceIsRefusedNotReadForever) {
  test::TempDir d;
  fs::create_symlink("/dev/zero", d.path() / "config.json");
  EXPECT_NE(error_of([&] { ModelConfig::load(d.str()); }).find("is not a regular file"), std::string::npos);
  fs::create_symlink("/dev/zero", d.path() / "tokenizer.json");
  EXPECT_NE(error_of([&] { Tokenizer::load(d.str() + "/tokenizer.json"); }).find("is not a regular file"),
            std::string::npos);
}

TEST(BoundedInput, AFileLargerThanItsBoundIsRefused) {
  test::TempDir d;
  test::write_file(d.str() + "/config.json", std::string(ModelConfig::kMaxConfigBytes + 1, ' '));
  EXPECT_NE(error_of([&] { ModelConfig::load(d.str()); }).find("more than the"), std::string::npos);
}

TEST(BoundedInput, DeepJsonIsRefusedBeforeParsing) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_NE(error_of([&] { parse_json(deep, "x.json"); }).find("x.json: JSON nested deeper than 64"), std::string::npos);
  // brackets inside strings do not count
  EXPECT_NO_THROW(parse_json("{\"a\": \"" + std::string(1000, '[') + "\"}", "y.json"));
  EXPECT_NE(error_of([&] { ModelConfig::parse(deep, "config.json"); }).find("nested deeper"), std::string::npos);
}

TEST(BoundedInput, WrongTypesInAConfigNameTheFile) {
  EXPECT_NE(error_of([&] { ModelConfig::parse(R"({"model_type": 5})", "/m/config.json"); }).find("/m/config.json"),
            std::string::npos);
}

TEST(BoundedInput, AModelPathThatIsNotADirectorySaysSo) {
  test::TempDir d;
  test::write_file(d.str() + "/file", "x");
  EXPECT_NE(error_of([&] { ModelConfig::load(d.str() + "/file"); }).find("is not a directory"), std::string::npos);
  EXPECT_NE(error_of([&] { ModelConfig::load(d.str() + "/missing"); }).find("no such directory"), std::string::npos);
  EXPECT_NE(error_of([&] { ModelConfig::load(d.str()); }).find("no config.json"), std::string::npos);
}

TEST(BoundedInput, BadGenerationConfigValuesNameTheFile) {
  test::TempDir d;
  test::write_file(d.str() + "/generation_config.json", R"({"temperature": -1})");
  const std::string e = error_of([&] { SamplingParams::from_generation_config(d.str()); });
  EXPECT_NE(e.find("generation_config.json"), std::string::npos) << e;
  EXPECT_NE(e.find("temperature"), std::string::npos) << e;
  test::write_file(d.str() + "/generation_config.json", R"({"top_p": "high"})");
  EXPECT_NE(error_of([&] { SamplingParams::from_generation_config(d.str()); }).find("generation_config.json: top_p"),
            std::string::npos);
}

}  // namespace
}  // namespace lily
