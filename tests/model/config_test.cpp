#include "lily/model/config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "lily/error.h"
#include "support/test_support.h"

namespace lily {
namespace {

using nlohmann::json;

json base_text_config() {
  return json::parse(test::read_file(test::model_dir("tiny-a") + "/config.json"));
}

std::string error_of(const json& j) {
  try {
    ModelConfig::parse(j.dump(), "config.json");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, ReadsTheTextModelConfig) {
  const ModelConfig c = ModelConfig::load(test::model_dir("tiny-a"));
  EXPECT_EQ(c.model_type, "qwen3_5_moe_text");
  EXPECT_EQ(c.hidden_size, 64);
  EXPECT_EQ(c.num_layers, 4);
  EXPECT_EQ(c.layer_kinds[3], LayerKind::FullAttention);
  EXPECT_EQ(c.rotary_dim, 8);
  EXPECT_EQ(c.rope_theta, 1e7);
  EXPECT_EQ(c.gdn_conv_dim(), 2 * 2 * 16 + 4 * 16);
  EXPECT_EQ(c.eos_token_ids, std::vector<int64_t>{2});
}

TEST(Config, ReadsTheNestedReleaseConfig) {
  const ModelConfig c = ModelConfig::load(test::model_dir("tiny-b-release"));
  EXPECT_EQ(c.model_type, "qwen3_5_moe");
  EXPECT_EQ(c.num_layers, 5);
  EXPECT_EQ(c.layer_kinds[0], LayerKind::FullAttention);
  EXPECT_EQ(c.rotary_dim, 8);
}

TEST(Config, DerivesLayerTypesFromTheInterval) {
  json j = base_text_config();
  j.erase("layer_types");
  j["num_hidden_layers"] = 8;
  j["full_attention_interval"] = 4;
  const ModelConfig c = ModelConfig::parse(j.dump(), "config.json");
  EXPECT_EQ(c.layer_kinds[3], LayerKind::FullAttention);
  EXPECT_EQ(c.layer_kinds[7], LayerKind::FullAttention);
  EXPECT_EQ(c.layer_kinds[4], LayerKind::LinearAttention);
}

TEST(Config, RejectsUnsupportedModelType) {
  json j = base_text_config();
  j["model_type"] = "llama";
  EXPECT_NE(error_of(j).find("unsupported model_type 'llama'"), std::string::npos) << error_of(j);
  j["model_type"] = "qwen3_5_moe";  // nested form without text_config
  EXPECT_NE(error_of(j).find("text_config"), std::string::npos);
}

TEST(Config, NamesTheBadField) {
  json j = base_text_config();
  j.erase("hidden_size");
  EXPECT_NE(error_of(j).find("'hidden_size' is missing"), std::string::npos) << error_of(j);
  j = base_text_config();
  j["num_experts"] = "eight";
  EXPECT_NE(error_of(j).find("'num_experts' must be a positive integer"), std::string::npos);
  j = base_text_config();
  j["num_experts_per_tok"] = 99;
  EXPECT_NE(error_of(j).find("'num_experts_per_tok' exceeds num_experts"), std::string::npos);
  j = base_text_config();
  j["layer_types"] = {"linear_attention"};
  EXPECT_NE(error_of(j).find("'layer_types' has 1 entries for 4 layers"), std::string::npos);
  j = base_text_config();
  j["layer_types"][0] = "sliding_attention";
  EXPECT_NE(error_of(j).find("unknown entry"), std::string::npos);
  j = base_text_config();
  j["num_key_value_heads"] = 3;
  EXPECT_NE(error_of(j).find("'num_key_value_heads' must divide"), std::string::npos);
  j = base_text_config();
  j["linear_num_value_heads"] = 3;
  EXPECT_NE(error_of(j).find("linear_num_value_heads"), std::string::npos);
  j = base_text_config();
  j["hidden_act"] = "gelu";
  EXPECT_NE(error_of(j).find("'hidden_act' must be silu"), std::string::npos);
  j = base_text_config();
  j["rope_parameters"]["rope_type"] = "yarn";
  EXPECT_NE(error_of(j).find("rope_type"), std::string::npos);
}

// A layer count sizes lists before any tensor is read: a hostile one is
// refused by name instead of exhausting memory.
TEST(Config, RefusesAHostileLayerCount) {
  json j = base_text_config();
  j.erase("layer_types");
  j["num_hidden_layers"] = 2147483653LL;
  EXPECT_NE(error_of(j).find("'num_hidden_layers' is 2147483653; Lily takes at most 1024"), std::string::npos)
      << error_of(j);
}

TEST(Config, RejectsMalformedJson) {
  EXPECT_THROW(ModelConfig::parse("{\"model_type\": ", "config.json"), Error);
  EXPECT_THROW(ModelConfig::parse("[]", "config.json"), Error);
  test::TempDir d;
  EXPECT_THROW(ModelConfig::load(d.str()), Error);
}

}  // namespace
}  // namespace lily
