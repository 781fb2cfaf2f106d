// The JSON-object prefix check behind response_format json_object.
#include "lily/text/json_prefix.h"
#include "lily/io/bounded_input.h"

#include <gtest/gtest.h>

namespace lily {
namespace {

bool valid_prefix(const std::string& s) {
  JsonPrefix j;
  return j.push(s);
}
bool complete(const std::string& s) {
  JsonPrefix j;
  return j.push(s) && j.complete();
}

TEST(JsonPrefix, AcceptsEveryPrefixOfValidObjects) {
  for (const std::string doc :
       {R"({})", R"({"a": 1})", R"( {"a": [1, -2.5e+3, 0.25, true, false, null], "b": {"c": "x\"\\\u00e9y"}} )",
        R"({"k":[],"l":[{}],"m":"€ü"})", "{\n  \"n\": -0\n}"}) {
    for (size_t i = 0; i <= doc.size(); ++i) EXPECT_TRUE(valid_prefix(doc.substr(0, i))) << doc.substr(0, i);
    EXPECT_TRUE(complete(doc)) << doc;
  }
}

TEST(JsonPrefix, RefusesWhatCannotBecomeAnObject) {
  for (const std::string bad : {"[", "\"a\"", "1", "{a", "{\"a\" 1", "{\"a\":}", "{\"a\":01", "{\"a\":1.}",
                                "{\"a\":tru}", "{\"a\":[1,]", "{\"a\":1}}", "{\"a\":1} x", "{\"a\":\"\x01\"}",
                                "{\"a\":\"\\q\"}", "{\"a\":\"\\u12g4\"}", "{,", "{\"a\":1,}", "{\"a\":-}"})
    EXPECT_FALSE(valid_prefix(bad)) << bad;
}

TEST(JsonPrefix, AFailedPushChangesNothing) {
  JsonPrefix j;
  ASSERT_TRUE(j.push("{\"a\": "));
  EXPECT_FALSE(j.push("}"));
  EXPECT_TRUE(j.accepts("12"));
  EXPECT_TRUE(j.push("12}"));
  EXPECT_TRUE(j.complete());
  EXPECT_FALSE(j.accepts("{}"));  // nothing but whitespace may follow the finished object
}

TEST(JsonPrefix, EndlessWhitespaceIsCut) {
  JsonPrefix j;
  EXPECT_TRUE(j.push(std::string(JsonPrefix::kMaxWhitespaceRun, ' ')));
  EXPECT_FALSE(j.push(" "));
  EXPECT_TRUE(j.push("{\"s\": \"" + std::string(100, ' ') + "\"}"));  // inside strings spaces are content
}

}  // namespace
}  // namespace lily

namespace lily {
namespace {

TEST(JsonPrefix, NestingIsBounded) {
  JsonPrefix p;
  std::string open = "{\"a\":";
  for (int i = 1; i < kMaxJsonDepth; ++i) open += "[";
  EXPECT_TRUE(p.push(open));
  EXPECT_FALSE(p.push("["));  // one level more would pass the bound
  EXPECT_TRUE(p.push("1"));
}

}  // namespace
}  // namespace lily

namespace lily {
namespace {

// Found by fuzz_json_prefix: bytes that are not UTF-8 inside a string were
// accepted, so a "complete" object could fail to parse.
TEST(JsonPrefix, StringsHoldOnlyUtf8) {
  JsonPrefix p;
  EXPECT_TRUE(p.push("{\"a"));
  EXPECT_FALSE(p.push("\xbe"));          // a continuation byte with no lead
  EXPECT_FALSE(p.push("\xc0\x80"));      // an overlong form
  EXPECT_FALSE(p.push("\xed\xa0\x80"));  // a surrogate
  EXPECT_FALSE(p.push("\xf4\x90\x80\x80"));  // past U+10FFFF
  EXPECT_TRUE(p.push("\xc3"));           // half a character may wait for the next token
  EXPECT_FALSE(p.push("\""));            // but nothing else may come before its end
  EXPECT_TRUE(p.push("\xa9\xe2\x82\xac\xf0\x9f\x98\x80\": 1}"));
  EXPECT_TRUE(p.complete());
}

}  // namespace
}  // namespace lily

namespace lily {
namespace {

// Found by fuzz_json_prefix: a lone surrogate escape (\ude00) was accepted;
// strict parsers, nlohmann's among them, refuse it.
TEST(JsonPrefix, SurrogateEscapesComeInPairs) {
  JsonPrefix p;
  EXPECT_TRUE(p.push("{\"a\": \"\\ud"));
  EXPECT_FALSE(p.push("e"));  // \ude.. would be a low surrogate on its own
  EXPECT_TRUE(p.push("83d"));
  EXPECT_FALSE(p.push("\""));  // the high one needs its low one
  EXPECT_FALSE(p.push("\\n"));
  EXPECT_FALSE(p.push("\\u0"));
  EXPECT_FALSE(p.push("\xd8\x98"));  // nor may a character come between them
  EXPECT_TRUE(p.push("\\ude00\\u00e9\"}"));
  EXPECT_TRUE(p.complete());
}

}  // namespace
}  // namespace lily
