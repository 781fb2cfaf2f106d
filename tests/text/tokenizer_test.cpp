// The tokenizer against ids from the Hugging Face tokenizers library on the
// real Qwen3 tokenizer.json, over a committed suite of texts.
#include "lily/text/tokenizer.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "lily/error.h"
#include "lily/text/stream_decoder.h"
#include "lily/text/utf8.h"
#include "support/test_support.h"

namespace lily {
namespace {

using nlohmann::json;

const std::string kTokDir = test::data_dir() + "/tokenizer";

class TokenizerSuite : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    tok_ = Tokenizer::load(test::tiny_model_dir() + "/tokenizer.json").release();
    suite_ = new json(json::parse(test::read_file(kTokDir + "/suite.json")));
    refs_ = new json(json::parse(test::read_file(kTokDir + "/qwen3_ids.json")));
  }
  static Tokenizer* tok_;
  static json* suite_;
  static json* refs_;
};
Tokenizer* TokenizerSuite::tok_ = nullptr;
json* TokenizerSuite::suite_ = nullptr;
json* TokenizerSuite::refs_ = nullptr;

TEST_F(TokenizerSuite, IdsMatchHuggingFace) {
  int cases = 0;
  for (const auto& c : *suite_) {
    const std::string name = c["name"], text = c["text"];
    const auto want = (*refs_)["ids"]["qwen3"][name].get<std::vector<int32_t>>();
    EXPECT_EQ(tok_->encode(text), want) << name;
    ++cases;
  }
  EXPECT_GE(cases, 50);
}

TEST_F(TokenizerSuite, RegexComesFromTheFile) {
  // The same vocabulary with the Qwen3.5/3.6 Split regex (with \p{M}) tokenizes differently where marks occur.
  json spec = json::parse(test::read_file(test::tiny_model_dir() + "/tokenizer.json"));
  for (auto& p : spec["pre_tokenizer"]["pretokenizers"])
    if (p["type"] == "Split") p["pattern"]["Regex"] = (*refs_)["qwen35_regex"];
  auto tok35 = Tokenizer::from_json_text(spec.dump(), "patched tokenizer.json");
  int differing = 0;
  for (const auto& c : *suite_) {
    const std::string name = c["name"], text = c["text"];
    const auto want = (*refs_)["ids"]["qwen35_regex"][name].get<std::vector<int32_t>>();
    EXPECT_EQ(tok35->encode(text), want) << name;
    differing += want != (*refs_)["ids"]["qwen3"][name].get<std::vector<int32_t>>();
  }
  EXPECT_GT(differing, 0);
}

TEST_F(TokenizerSuite, DecodeRoundTripsToNfc) {
  for (const auto& c : *suite_) {
    const std::string text = c["text"];
    EXPECT_EQ(tok_->decode_bytes(tok_->encode(text)), nfc(text)) << c["name"];
  }
}

TEST_F(TokenizerSuite, SpecialTokensAndConfig) {
  EXPECT_EQ(tok_->token_id("<|im_start|>"), 151644);
  EXPECT_EQ(tok_->token_id("<|im_end|>"), 151645);
  EXPECT_TRUE(tok_->is_special(151645));
  EXPECT_EQ(tok_->eos_token, "<|im_end|>");
  EXPECT_EQ(tok_->encode("<|im_start|>"), std::vector<int32_t>{151644});
  EXPECT_EQ(tok_->token_bytes(151645), "<|im_end|>");
}

TEST_F(TokenizerSuite, StreamingDecoderNeverSplitsACharacter) {
  for (const char* text : {"emoji 👨‍👩‍👧 and 中文 and é", "🍕🍕🍕", "plain"}) {
    StreamDecoder dec(*tok_);
    std::string joined;
    for (int32_t id : tok_->encode(text)) {
      const std::string piece = dec.push(id);
      EXPECT_EQ(find_invalid_utf8(piece), std::string::npos) << text;
      joined += piece;
    }
    joined += dec.finish();
    EXPECT_EQ(joined, text);
  }
  // a token list that ends inside a character yields the replacement character at the end
  StreamDecoder dec(*tok_);
  const auto ids = tok_->encode("🍕");
  std::string s;
  for (size_t i = 0; i + 1 < ids.size(); ++i) s += dec.push(ids[i]);
  if (ids.size() > 1) {
    EXPECT_EQ(s, "");
    EXPECT_EQ(dec.finish(), "\xEF\xBF\xBD");
  }
}

TEST_F(TokenizerSuite, InvalidUtf8IsRefused) {
  try {
    tok_->encode("ok \xC3\x28 bad");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not valid UTF-8 (byte 3)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(tok_->encode("\xED\xA0\x80"), Error);  // surrogate
  EXPECT_THROW(tok_->encode("\xC0\xAF"), Error);      // overlong
}

TEST(Tokenizer, CorruptFilesGetClearErrors) {
  test::TempDir d;
  EXPECT_THROW(Tokenizer::load(d.str() + "/missing.json"), Error);
  for (const std::string& bad : {std::string("{not json"), std::string("{}"),
                                 std::string(R"({"model": {"type": "WordPiece"}})"),
                                 std::string(R"({"model": {"type": "BPE", "vocab": {}, "merges": []}})"),
                                 std::string(R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
                                    "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(unclosed"}}})")}) {
    test::write_file(d.str() + "/tokenizer.json", bad);
    try {
      Tokenizer::load(d.str() + "/tokenizer.json");
      FAIL() << bad;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("tokenizer.json"), std::string::npos) << e.what();
    }
  }
}

}  // namespace
}  // namespace lily

namespace lily {
namespace {

// A tokenizer.json with one vocabulary entry and the given added tokens.
std::string tokenizer_with_added(const std::string& added) {
  return R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": []},
             "pre_tokenizer": {"type": "Split", "pattern": {"Regex": "."}, "behavior": "Isolated"},
             "added_tokens": [)" +
         added + "]}";
}

std::string load_error(const std::string& text) {
  try {
    Tokenizer::from_json_text(text, "tokenizer.json");
    return "";
  } catch (const Error& e) {
    return e.what();
  }
}

TEST(TokenizerFile, AddedTokenIdsOutOfRangeAreErrorsNotHeapCorruption) {
  EXPECT_EQ(load_error(tokenizer_with_added(R"({"id": 1, "content": "<x>"})")), "");
  for (const char* id : {"-1", "1000000000", "4294967297", "18446744073709551615", "1.5", "\"7\""}) {
    SCOPED_TRACE(id);
    const std::string e = load_error(tokenizer_with_added(std::string(R"({"id": )") + id + R"(, "content": "<x>"})"));
    EXPECT_NE(e.find("tokenizer.json"), std::string::npos) << e;
  }
  EXPECT_NE(load_error(tokenizer_with_added(R"({"id": -1, "content": "<x>"})")).find("has id -1"), std::string::npos);
  EXPECT_NE(load_error(tokenizer_with_added(R"({"id": 16000000, "content": "<x>"})")).find("for only 2 tokens"),
            std::string::npos);
  EXPECT_NE(load_error(R"({"model": {"type": "BPE", "vocab": {"a": -3}, "merges": []}})").find("no valid id"),
            std::string::npos);
  EXPECT_NE(load_error(R"({"model": {"type": 7}})").find("tokenizer.json"), std::string::npos);
}

// Found by fuzz_tokenizer_json: text the vocabulary cannot spell is an
// error, and the regex match data of that encode was leaked (the sanitizer
// build's leak checker fails this test without the fix).
TEST(TokenizerFile, AnEncodeErrorLeaksNothing) {
  auto t = Tokenizer::from_json_text(tokenizer_with_added(R"({"id": 1, "content": "<x>"})"), "tokenizer.json");
  EXPECT_EQ(t->encode("a<x>a"), (std::vector<int32_t>{0, 1, 0}));
  EXPECT_THROW(t->encode("b"), Error);
}

}  // namespace
}  // namespace lily
