// GGUF models beyond the reader: a Q8_0 file gives the logits of its own
// decoded weights (written by gguf-py as a float32 checkpoint beside it), and
// the tokenizer described by tokenizer.ggml.* metadata encodes text exactly
// as the tokenizer.json it was made from.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "lily/backend/cpu/cpu_backend.h"
#include "lily/error.h"
#include "lily/model/gguf_binding.h"
#include "lily/model/qwen35moe.h"
#include "lily/text/tokenizer.h"
#include "support/gguf_builder.h"
#include "support/test_support.h"

namespace lily {
namespace {

// On the float path (float activations), with the expert choices of `log`
// (recorded by the first call, replayed by the second): the file's value
// heads are in tiled order, so its sums run in another order than the
// decoded checkpoint's, and rounding alone may flip a near-tie expert of a
// random tiny MoE.
std::vector<float> prefill(const Model& m, const std::vector<int32_t>& tokens, RouteLog& log) {
  auto backend = std::make_shared<cpu::CpuBackend>(test::cpu_context(cpu::best_isa(), false));
  backend->set_route_log(&log);
  Qwen35MoeForward fwd(m, backend);
  SequenceState state = fwd.new_state();
  return fwd.forward(tokens, state, LogitsFor::AllPositions);
}

TEST(GgufModel, Q8_0GivesTheLogitsOfItsDecodedWeights) {
  auto gguf = Model::load(test::model_dir("tiny-a-q8_0.gguf"));
  auto decoded = Model::load(test::model_dir("tiny-a-q8_0-dequant"));
  EXPECT_EQ(gguf->report().layout, CheckpointLayout::Gguf);
  EXPECT_TRUE(gguf->report().quantized);
  // the matrices whose rows are whole 32-element blocks (tools/make_gguf_fixtures.py): 45 of them
  EXPECT_EQ(gguf->report().dtype_counts.at("Q8_0"), 45);
  const test::Reference ref = test::load_reference(test::model_dir("tiny-a"));
  for (const auto& p : ref.prompts) {
    RouteLog log;
    const std::vector<float> want = prefill(*decoded, p.tokens, log);
    log.mode = RouteLog::Mode::Replay;
    const double err = test::max_row_relative_error(prefill(*gguf, p.tokens, log), want, ref.vocab);
    EXPECT_LE(err, 1e-4) << "prompt of " << p.tokens.size() << " tokens";
  }
}

TEST(GgufModel, ANonQwenArchitectureIsNamed) {
  test::TempDir dir;
  test::GgufBuilder b;
  b.str("general.architecture", "llama");
  const std::string path = dir.str() + "/llama.gguf";
  std::ofstream(path, std::ios::binary) << b.build();
  try {
    Model::load(path);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("architecture is 'llama'"), std::string::npos) << e.what();
  }
}

// The metadata llama.cpp's converter writes for a Hugging Face tokenizer.json.
std::string tokenizer_gguf(const std::string& tokenizer_json, const std::string& pre) {
  const auto j = nlohmann::json::parse(tokenizer_json);
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  auto put = [&](size_t id, const std::string& text, int32_t type) {
    if (tokens.size() <= id) {
      for (size_t i = tokens.size(); i <= id; ++i) tokens.push_back("[PAD" + std::to_string(i) + "]");
      types.resize(id + 1, 5);
    }
    tokens[id] = text;
    types[id] = type;
  };
  for (auto it = j["model"]["vocab"].begin(); it != j["model"]["vocab"].end(); ++it) put(it.value(), it.key(), 1);
  for (const auto& a : j["added_tokens"]) put(a["id"], a["content"], a.value("special", false) ? 3 : 4);
  std::vector<std::string> merges;
  for (const auto& m : j["model"]["merges"])
    merges.push_back(m.is_string() ? m.get<std::string>() : m[0].get<std::string>() + " " + m[1].get<std::string>());
  test::GgufBuilder b;
  b.str("general.architecture", "qwen35moe");
  b.str("tokenizer.ggml.model", "gpt2");
  b.str("tokenizer.ggml.pre", pre);
  b.strings("tokenizer.ggml.tokens", tokens);
  b.i32s("tokenizer.ggml.token_type", types);
  b.strings("tokenizer.ggml.merges", merges);
  return b.build();
}

TEST(GgufModel, TheMetadataTokenizerEncodesAsTokenizerJson) {
  const std::string json_text = test::read_file(test::tiny_model_dir() + "/tokenizer.json");
  test::TempDir dir;
  const std::string path = dir.str() + "/tok.gguf";
  std::ofstream(path, std::ios::binary) << tokenizer_gguf(json_text, "qwen2");
  auto g = GgufModel::open(path);
  auto from_gguf = Tokenizer::from_json_text(gguf_tokenizer_json(*g), path);
  auto from_json = Tokenizer::from_json_text(json_text, "tokenizer.json");
  for (const char* text : {"Hello, world! 123 4567", "<|im_start|>user\nWhat is 23 + 58?<|im_end|>\n",
                           "  indented\n\n\tcode();  // ok", "naïve café déjà vu — 東京 🎉", "<think>\n\n</think>\n\n",
                           "don't I'll we've THEY'RE"}) {
    EXPECT_EQ(from_gguf->encode(text), from_json->encode(text)) << text;
    EXPECT_EQ(from_gguf->decode_bytes(from_json->encode(text)), text);
  }
  EXPECT_TRUE(from_gguf->is_special(*from_json->token_id("<|im_end|>")));
  EXPECT_FALSE(from_gguf->is_special(*from_json->token_id("<think>")));
  std::ofstream(path, std::ios::binary) << tokenizer_gguf(json_text, "llama-bpe");
  EXPECT_THROW(gguf_tokenizer_json(*GgufModel::open(path)), Error);
}

}  // namespace
}  // namespace lily
