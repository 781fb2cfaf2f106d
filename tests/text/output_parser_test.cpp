// Model-style outputs split into reasoning, content and tool calls, fed whole,
// character by character and token by token.
#include "lily/text/output_parser.h"

#include <gtest/gtest.h>

#include "lily/text/stream_decoder.h"
#include "lily/text/tokenizer.h"
#include "support/test_support.h"

namespace lily {
namespace {

using nlohmann::ordered_json;

const ordered_json kTools = ordered_json::parse(R"([
  {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {
     "city": {"type": "string"}, "days": {"type": "integer"}, "metric": {"type": "boolean"},
     "opts": {"type": "object"}, "tags": {"type": "array"}, "ratio": {"type": "number"}}}}},
  {"type": "function", "function": {"name": "run", "parameters": {"type": "object", "properties": {
     "code": {"type": "string"}}}}}])");

const Tokenizer& tokenizer() {
  static auto t = Tokenizer::load(test::tiny_model_dir() + "/tokenizer.json");
  return *t;
}

// Feeds `text` in the three ways and checks they agree; returns the whole result.
ParsedDelta parse_all_ways(const std::string& text, bool in_reasoning) {
  OutputParser whole(in_reasoning, kTools);
  ParsedDelta a = whole.push(text);
  a.append(whole.finish());

  OutputParser by_char(in_reasoning, kTools);
  ParsedDelta b;
  for (char c : text) b.append(by_char.push(std::string(1, c)));
  b.append(by_char.finish());

  OutputParser by_token(in_reasoning, kTools);
  StreamDecoder dec(tokenizer());
  ParsedDelta c;
  for (int32_t id : tokenizer().encode(text)) c.append(by_token.push(dec.push(id)));
  c.append(by_token.push(dec.finish()));
  c.append(by_token.finish());

  for (const ParsedDelta* d : {&b, &c}) {
    EXPECT_EQ(d->reasoning, a.reasoning);
    EXPECT_EQ(d->content, a.content);
    EXPECT_EQ(d->tool_calls.size(), a.tool_calls.size());
    for (size_t i = 0; i < std::min(d->tool_calls.size(), a.tool_calls.size()); ++i) {
      EXPECT_EQ(d->tool_calls[i].name, a.tool_calls[i].name);
      EXPECT_EQ(d->tool_calls[i].arguments, a.tool_calls[i].arguments);
    }
  }
  return a;
}

TEST(OutputParser, ReasoningThenAnswer) {
  const auto d = parse_all_ways("The user greets me.\nI should greet back.\n</think>\n\nHello! How can I help?", true);
  EXPECT_EQ(d.reasoning, "The user greets me.\nI should greet back.\n");
  EXPECT_EQ(d.content, "Hello! How can I help?");
  EXPECT_TRUE(d.tool_calls.empty());
}

TEST(OutputParser, NoThinkingAndSelfOpenedThink) {
  auto d = parse_all_ways("Just an answer with a < sign and <b>tags</b>.", false);
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "Just an answer with a < sign and <b>tags</b>.");
  d = parse_all_ways("<think>\nhmm\n</think>\n\nok", false);
  EXPECT_EQ(d.reasoning, "\nhmm\n");
  EXPECT_EQ(d.content, "ok");
  d = parse_all_ways("\n\n</think>\n\nempty reasoning", true);
  EXPECT_EQ(d.content, "empty reasoning");
}

TEST(OutputParser, ToolCallsTypedBySchema) {
  const std::string text =
      "Let me check.\n</think>\n\nI'll look that up.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nSan "
      "Francisco\n</parameter>\n<parameter=days>\n3\n</parameter>\n<parameter=metric>\ntrue\n</parameter>\n"
      "<parameter=opts>\n{\"lang\": \"en\", \"n\": [1, 2]}\n</parameter>\n<parameter=tags>\n[\"a\"]\n</parameter>\n"
      "<parameter=ratio>\n0.5\n</parameter>\n</function>\n</tool_call>\n<tool_call>\n<function=run>\n"
      "<parameter=code>\nprint(1)\nprint(2)\n</parameter>\n</function>\n</tool_call>";
  const auto d = parse_all_ways(text, true);
  EXPECT_EQ(d.reasoning, "Let me check.\n");
  EXPECT_EQ(d.content, "I'll look that up.\n");
  ASSERT_EQ(d.tool_calls.size(), 2u);
  EXPECT_EQ(d.tool_calls[0].name, "get_weather");
  EXPECT_EQ(d.tool_calls[0].arguments, ordered_json::parse(R"({"city": "San Francisco", "days": 3, "metric": true,
      "opts": {"lang": "en", "n": [1, 2]}, "tags": ["a"], "ratio": 0.5})"));
  EXPECT_EQ(d.tool_calls[1].arguments["code"], "print(1)\nprint(2)");
}

TEST(OutputParser, ValuesThatDoNotFitTheSchemaStayText) {
  const auto d = parse_all_ways(
      "<tool_call>\n<function=get_weather>\n<parameter=days>\nthree\n</parameter>\n<parameter=city>\n42\n</parameter>\n"
      "<parameter=unknown>\n{\"x\": 1}\n</parameter>\n</function>\n</tool_call>",
      false);
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments["days"], "three");
  EXPECT_EQ(d.tool_calls[0].arguments["city"], "42");  // strings are kept raw
  EXPECT_EQ(d.tool_calls[0].arguments["unknown"], "{\"x\": 1}");
}

TEST(OutputParser, MalformedOrUnfinishedCallsComeBackAsText) {
  const std::string bad = "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</function>\n</tool_call>";
  auto d = parse_all_ways("before " + bad + " after", false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, "before " + bad + " after");
  const std::string unfinished = "text <tool_call>\n<function=run>\n<parameter=code>\nx = 1";
  d = parse_all_ways(unfinished, false);
  EXPECT_TRUE(d.tool_calls.empty());
  EXPECT_EQ(d.content, unfinished);
  d = parse_all_ways("<tool_call>just words</tool_call>", false);
  EXPECT_EQ(d.content, "<tool_call>just words</tool_call>");
}

TEST(OutputParser, StreamsWithoutHoldingOrdinaryText) {
  OutputParser p(false, nullptr);
  EXPECT_EQ(p.push("Hello wor").content, "Hello wor");
  EXPECT_EQ(p.push("ld <tool").content, "ld ");  // could be a tag: held
  EXPECT_EQ(p.push("box>").content, "<toolbox>");
  OutputParser r(true, nullptr);
  EXPECT_EQ(r.push("thinking </thi").reasoning, "thinking ");
  const auto d = r.push("nk>\n\nanswer");
  EXPECT_EQ(d.reasoning, "");
  EXPECT_EQ(d.content, "answer");
}

}  // namespace
}  // namespace lily

namespace lily {
namespace {

TEST(OutputParser, ArgumentsNestedTooDeeplyStayText) {
  // A model can write any nesting; a value deeper than the JSON bound stays
  // the model's text instead of a structure later code would recurse into.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  OutputParser p(false, kTools);
  ParsedDelta d = p.push("<tool_call>\n<function=get_weather>\n<parameter=tags>\n" + deep +
                         "\n</parameter>\n</function>\n</tool_call>");
  d.append(p.finish());
  ASSERT_EQ(d.tool_calls.size(), 1u);
  EXPECT_EQ(d.tool_calls[0].arguments["tags"], deep);
  EXPECT_EQ(d.tool_calls[0].arguments.dump(), "{\"tags\":\"" + deep + "\"}");
}

}  // namespace
}  // namespace lily
