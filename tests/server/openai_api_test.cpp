// The OpenAI layer without HTTP: requests read into prompts and parameters
// (or refused with the field named), and recorded model-style answers
// turned into responses and stream chunks, tool calls included.
#include <gtest/gtest.h>

#include "lily/server/api_error.h"
#include "lily/server/openai_request.h"
#include "lily/server/openai_response.h"
#include "server/job_events.h"
#include "support/test_support.h"

namespace lily::server {
namespace {

using json = nlohmann::ordered_json;
using namespace test_events;

const json kTools = json::parse(R"([{"type": "function", "function": {"name": "get_weather", "parameters":
  {"type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}}])");

TEST(OpenAIRequest, ReadsAChatRequest) {
  const json body = json::parse(R"({"model": "x", "messages": [
      {"role": "developer", "content": "Be brief."},
      {"role": "user", "content": [{"type": "text", "text": "Hel"}, {"type": "text", "text": "lo"}]},
      {"role": "system", "content": "Late rule."}],
    "temperature": 0.5, "top_k": 5, "seed": 7, "stop": "END", "max_completion_tokens": 9,
    "logit_bias": {"11": -100}, "logprobs": true, "top_logprobs": 2, "reasoning_effort": "none"})");
  const ApiRequest r = parse_chat_request(body, engine());
  EXPECT_EQ(r.params.sampling.temperature, 0.5);
  EXPECT_EQ(r.params.sampling.top_k, 5);
  EXPECT_EQ(r.params.sampling.seed, 7u);
  EXPECT_EQ(r.params.sampling.logit_bias.at(11), -100.f);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.max_tokens, 9);
  EXPECT_EQ(r.params.top_logprobs, 2);
  EXPECT_FALSE(r.reasoning);
  // system messages merged into one leading turn, parts joined, thinking off
  EXPECT_NE(r.prompt_text.find("<|im_start|>system\nBe brief.\n\nLate rule.<|im_end|>"), std::string::npos);
  EXPECT_NE(r.prompt_text.find("<|im_start|>user\nHello<|im_end|>"), std::string::npos);
  EXPECT_NE(r.prompt_text.find("<think>\n\n</think>\n\n"), std::string::npos);
  EXPECT_EQ(r.prompt, engine().tokenizer().encode(r.prompt_text));
}

TEST(OpenAIRequest, ToolCallArgumentsReachTheTemplateAsObjects) {
  const json msgs = normalize_messages(json::parse(R"([{"role": "user", "content": "w?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "c1", "type": "function",
      "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\", \"days\": 3}"}}]},
    {"role": "tool", "tool_call_id": "c1", "content": "cold"}])"));
  EXPECT_EQ(msgs[1]["tool_calls"][0]["function"]["arguments"], json::parse(R"({"city": "Oslo", "days": 3})"));
  EXPECT_EQ(msgs[1]["content"], "");
  EXPECT_THROW(normalize_messages(json::parse(R"([{"role": "assistant", "tool_calls": [{"function":
      {"name": "f", "arguments": "{not json"}}]}])")), ApiError);
}

TEST(OpenAIRequest, RefusesBadFieldsByName) {
  auto refused = [](const std::string& body) -> std::string {
    try {
      parse_chat_request(json::parse(body), engine());
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      return e.what();
    }
    return "accepted";
  };
  const std::string msgs = R"("messages": [{"role": "user", "content": "x"}])";
  EXPECT_NE(refused("{}").find("'messages'"), std::string::npos);
  EXPECT_NE(refused("{" + msgs + R"(, "top_p": 0})").find("'top_p'"), std::string::npos);
  EXPECT_NE(refused("{" + msgs + R"(, "stop": [1]})").find("'stop'"), std::string::npos);
  EXPECT_NE(refused("{" + msgs + R"(, "seed": "x"})").find("'seed'"), std::string::npos);
  EXPECT_NE(refused("{" + msgs + R"(, "tool_choice": "required"})").find("no tools"), std::string::npos);
  EXPECT_NE(refused("{" + msgs + R"(, "tools": [{"type": "function"}]})").find("'tools'"), std::string::npos);
  EXPECT_NE(refused("{" + msgs + R"(, "response_format": {"type": "yaml"}})").find("'response_format'"), std::string::npos);
  EXPECT_NE(refused("{" + msgs + R"(, "reasoning_effort": "max"})").find("'reasoning_effort'"), std::string::npos);
  EXPECT_NE(refused(R"({"messages": [{"content": "x"}]})").find("role"), std::string::npos);
  // found by fuzz_openai_request: a tool whose "type" is an object escaped as a 500
  EXPECT_NE(refused("{" + msgs + R"(, "tools": [{"type": {"type": "function"}, "function": {"name": "f"}}]})").find("'tools'"),
            std::string::npos);
  try {
    parse_completion_request(json::parse(R"({"prompt": [1, 99999999]})"), engine());
    FAIL();
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("token ids"), std::string::npos);
  }
}

TEST(OpenAIResponse, ARecordedToolCallBecomesToolCalls) {
  json body = {{"messages", {{{"role", "user"}, {"content", "weather?"}}}}, {"tools", kTools}, {"stream", true}};
  const ApiRequest req = parse_chat_request(body, engine());
  AnswerBuilder b(req, engine(), "m");
  // a model-style answer cut at awkward places, as tokens arrive
  const std::string answer =
      "Let me look.\n</think>\n\nChecking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n"
      "</parameter>\n<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>";
  std::vector<json> chunks;
  for (size_t i = 0; i < answer.size(); i += 7)
    for (auto& c : b.chunks(text(answer.substr(i, 7)))) chunks.push_back(c);
  for (auto& c : b.chunks(done("stop", 30))) chunks.push_back(c);
  for (auto& c : b.closing_chunks(done("stop", 30))) chunks.push_back(c);
  std::string reasoning, content;
  json calls = json::array();
  ASSERT_EQ(chunks[0]["choices"][0]["delta"]["role"], "assistant");
  for (const auto& c : chunks) {
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    const json& d = c["choices"][0]["delta"];
    reasoning += d.value("reasoning_content", "");
    content += d.value("content", "");
    if (d.contains("tool_calls"))
      for (const auto& t : d["tool_calls"]) calls.push_back(t);
  }
  EXPECT_EQ(reasoning, "Let me look.\n");
  EXPECT_EQ(content, "Checking.\n");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["index"], 0);
  EXPECT_EQ(calls[0]["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(calls[0]["function"]["arguments"].get<std::string>()), json::parse(R"({"city": "Oslo", "days": 3})"));
  EXPECT_EQ(chunks.back()["choices"][0]["finish_reason"], "tool_calls");

  const json whole = b.response(done("stop", 30));
  const json& msg = whole["choices"][0]["message"];
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(msg["tool_calls"][0]["type"], "function");
  EXPECT_EQ(whole["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(whole["usage"]["prompt_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(whole["usage"]["total_tokens"], 40);
}

TEST(OpenAIResponse, SeveralCallsOrOneWhenParallelCallsAreOff) {
  const std::string two =
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nA\n</parameter>\n</function>\n</tool_call>\n"
      "<tool_call>\n<function=get_weather>\n<parameter=city>\nB\n</parameter>\n</function>\n</tool_call>";
  for (bool parallel : {true, false}) {
    json body = {{"messages", {{{"role", "user"}, {"content", "w"}}}}, {"tools", kTools},
                 {"parallel_tool_calls", parallel}, {"chat_template_kwargs", {{"enable_thinking", false}}}};
    const ApiRequest req = parse_chat_request(body, engine());
    AnswerBuilder b(req, engine(), "m");
    b.chunks(text(two));
    b.chunks(done("stop", 5));
    const json r = b.response(done("stop", 5));
    EXPECT_EQ(r["choices"][0]["message"]["tool_calls"].size(), parallel ? 2u : 1u);
    EXPECT_TRUE(r["choices"][0]["message"]["content"].is_null());
  }
}

TEST(OpenAIResponse, AnUnfinishedCallIsKeptAsText) {
  json body = {{"messages", {{{"role", "user"}, {"content", "w"}}}}, {"tools", kTools},
               {"chat_template_kwargs", {{"enable_thinking", false}}}};
  const ApiRequest req = parse_chat_request(body, engine());
  AnswerBuilder b(req, engine(), "m");
  b.chunks(text("<tool_call>\n<function=get_weather>\n<parameter=ci"));
  b.chunks(done("length", 5));
  const json r = b.response(done("length", 5));
  EXPECT_EQ(r["choices"][0]["finish_reason"], "length");
  EXPECT_NE(r["choices"][0]["message"]["content"].get<std::string>().find("<function=get_weather>"), std::string::npos);
}

TEST(OpenAIResponse, CompletionChunksAndLegacyLogprobs) {
  const ApiRequest req = parse_completion_request(json::parse(R"({"prompt": "abc", "logprobs": 1, "stream": true,
      "stream_options": {"include_usage": true}})"), engine());
  AnswerBuilder b(req, engine(), "m");
  JobEvent e = text("de");
  e.logprobs.push_back(TokenLogprob{451, -0.5f, {{451, -0.5f}}});
  const auto c = b.chunks(e);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0]["object"], "text_completion");
  EXPECT_EQ(c[0]["choices"][0]["text"], "de");
  EXPECT_EQ(c[0]["choices"][0]["logprobs"]["token_logprobs"][0], -0.5);
  const auto end = b.closing_chunks(done("length", 1));
  ASSERT_EQ(end.size(), 2u);
  EXPECT_EQ(end[0]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(end[1]["usage"]["completion_tokens"], 1);
  EXPECT_TRUE(end[1]["choices"].empty());
}

}  // namespace
}  // namespace lily::server
