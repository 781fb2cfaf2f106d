// The Responses, Messages and Ollama layers without HTTP: requests read into
// the engine's form (or refused with the field named in the API's own
// terms), and recorded model-style answers with reasoning, text and a tool
// call turned into each API's output items, blocks, events and lines.
#include <gtest/gtest.h>

#include "lily/server/api_dialect.h"
#include "lily/server/messages_api.h"
#include "lily/server/ollama_api.h"
#include "lily/server/responses_api.h"
#include "server/job_events.h"
#include "support/test_support.h"

namespace lily::server {
namespace {

using json = nlohmann::ordered_json;
using namespace test_events;

// A model-style answer: reasoning, text, then a call, cut into pieces at awkward places.
const std::string kAnswer =
    "Let me look.\n</think>\n\nChecking.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nOslo\n"
    "</parameter>\n</function>\n</tool_call>";

template <class Format>
std::string feed(Format& f, const std::string& answer, const JobEvent& end) {
  std::string out;
  for (size_t i = 0; i < answer.size(); i += 7) out += f.frames(text(answer.substr(i, 7)));
  return out + f.frames(end);
}

// The `data:` objects of a Server-Sent Events stream, with their event names.
std::vector<std::pair<std::string, json>> events(const std::string& sse) {
  std::vector<std::pair<std::string, json>> out;
  std::string name;
  size_t at = 0;
  while (at < sse.size()) {
    const size_t end = sse.find('\n', at);
    const std::string line = sse.substr(at, end - at);
    at = end + 1;
    if (line.rfind("event: ", 0) == 0)
      name = line.substr(7);
    else if (line.rfind("data: ", 0) == 0)
      out.emplace_back(name, json::parse(line.substr(6))), name.clear();
  }
  return out;
}

const json kFlatTool = json::parse(R"({"type": "function", "name": "get_weather",
  "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}})");

TEST(ResponsesApi, InputItemsBecomeMessages) {
  EXPECT_EQ(responses_input_to_messages("hi"), json::parse(R"([{"role": "user", "content": "hi"}])"));
  const json input = json::parse(R"([
    {"role": "user", "content": [{"type": "input_text", "text": "Weather "}, {"type": "input_text", "text": "in Oslo?"}]},
    {"type": "reasoning", "id": "rs_1", "summary": [], "content": [{"type": "reasoning_text", "text": "Use the tool."}]},
    {"type": "function_call", "call_id": "c1", "name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"},
    {"type": "function_call", "call_id": "c2", "name": "get_weather", "arguments": "{\"city\": \"Bergen\"}"},
    {"type": "function_call_output", "call_id": "c1", "output": "rain"},
    {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "It rains."}]}])");
  const json m = responses_input_to_messages(input);
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0]["content"], "Weather in Oslo?");
  EXPECT_EQ(m[1]["role"], "assistant");
  EXPECT_EQ(m[1]["reasoning_content"], "Use the tool.");
  ASSERT_EQ(m[1]["tool_calls"].size(), 2u);  // both calls in one assistant turn
  EXPECT_EQ(m[1]["tool_calls"][1]["function"]["name"], "get_weather");
  EXPECT_EQ(m[2], json::parse(R"({"role": "tool", "tool_call_id": "c1", "content": "rain"})"));
  EXPECT_EQ(m[3]["content"], "It rains.");
  for (const auto& [bad, field] : std::vector<std::pair<std::string, std::string>>{
           {R"([{"type": "function_call", "name": "f", "arguments": "{}"}])", "'input[0].call_id'"},
           {R"([{"type": "web_search_call"}])", "'input[0].type'"},
           {R"([{"role": "user", "content": [{"type": "input_file"}]}])", "'input[0].content[0].type'"},
           {R"([{"role": "tool", "content": "x"}])", "'input[0].role'"}}) {
    try {
      responses_input_to_messages(json::parse(bad));
      ADD_FAILURE() << bad;
    } catch (const ApiError& e) {
      EXPECT_EQ(e.status(), 400);
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  }
}

TEST(ResponsesApi, ARecordedAnswerBecomesItemsEventsAndAStoredTurn) {
  ResponseStore store(8, 1 << 20);
  auto req = std::make_shared<const ResponsesRequest>(parse_responses_request(
      {{"input", "weather?"}, {"tools", json::array({kFlatTool})}, {"stream", true}, {"instructions", "Terse."}},
      engine(), store));
  ResponsesFormat f(req, engine(), "m", &store);
  const auto evs = events(feed(f, kAnswer, done("stop", 30)));
  std::vector<std::string> types;
  for (const auto& [name, data] : evs) {
    EXPECT_EQ(name, data["type"].get<std::string>());
    EXPECT_EQ(data["sequence_number"], types.size());
    types.push_back(name);
  }
  ASSERT_GE(types.size(), 6u);
  EXPECT_EQ(types[0], "response.created");
  EXPECT_EQ(types[1], "response.in_progress");
  EXPECT_EQ(types.back(), "response.completed");
  std::string reasoning, content, args;
  for (const auto& [name, data] : evs) {
    if (name == "response.reasoning_text.delta") reasoning += data["delta"].get<std::string>();
    if (name == "response.output_text.delta") content += data["delta"].get<std::string>();
    if (name == "response.function_call_arguments.delta") args += data["delta"].get<std::string>();
  }
  EXPECT_EQ(reasoning, "Let me look.\n");
  EXPECT_EQ(content, "Checking.\n");
  EXPECT_EQ(json::parse(args), json::parse(R"({"city": "Oslo"})"));

  const json r = f.whole(done("stop", 30));
  EXPECT_EQ(r["status"], "completed");
  EXPECT_EQ(r["instructions"], "Terse.");
  ASSERT_EQ(r["output"].size(), 3u);
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"][1]["content"][0]["text"], "Checking.\n");
  const json& call = r["output"][2];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(json::parse(call["arguments"].get<std::string>())["city"], "Oslo");
  EXPECT_EQ(r["usage"]["input_tokens_details"]["cached_tokens"], 4);
  EXPECT_EQ(evs.back().second["response"], r);

  // the follow-up starts from the stored conversation, answer included, and answers the call
  auto stored = store.get(r["id"].get<std::string>());
  ASSERT_TRUE(stored);
  ASSERT_EQ(stored->conversation.size(), 2u);  // the instructions are not carried over
  EXPECT_EQ(stored->conversation[1]["tool_calls"][0]["id"], call["call_id"]);
  const ResponsesRequest next = parse_responses_request(
      {{"previous_response_id", r["id"]},
       {"input", {{{"type", "function_call_output"}, {"call_id", call["call_id"]}, {"output", "sunny"}}}}},
      engine(), store);
  EXPECT_NE(next.api.prompt_text.find("<parameter=city>\nOslo\n</parameter>"), std::string::npos);
  EXPECT_NE(next.api.prompt_text.find("<tool_response>\nsunny\n</tool_response>"), std::string::npos);
  EXPECT_EQ(next.api.prompt_text.find("Terse."), std::string::npos);
}

TEST(ResponsesApi, TheStoreIsBoundedAndLeastRecentlyUsedGoesFirst) {
  ResponseStore store(2, 1 << 20);
  store.put("a", {json::array(), json::object()});
  store.put("b", {json::array(), json::object()});
  EXPECT_TRUE(store.get("a"));  // a is now the most recent
  store.put("c", {json::array(), json::object()});
  EXPECT_TRUE(store.get("a"));
  EXPECT_FALSE(store.get("b"));
  EXPECT_TRUE(store.get("c"));
  ResponseStore small(100, 64);
  small.put("big", {json::array({std::string(100, 'x')}), json::object()});
  EXPECT_EQ(small.size(), 0u);
}

TEST(MessagesApi, BlocksBecomeMessagesAndTheDefaultIsNoThinking) {
  const json body = json::parse(R"({"max_tokens": 5, "system": [{"type": "text", "text": "Terse."}],
    "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
    "tool_choice": {"type": "any", "disable_parallel_tool_use": true},
    "stop_sequences": ["END"], "top_k": 3,
    "messages": [{"role": "user", "content": "weather?"},
      {"role": "assistant", "content": [{"type": "thinking", "thinking": "Look it up.", "signature": "x"},
        {"type": "tool_use", "id": "t1", "name": "get_weather", "input": {"city": "Oslo"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1",
        "content": [{"type": "text", "text": "rain"}], "is_error": true}]}]})");
  const ApiRequest r = parse_messages_request(body, engine());
  EXPECT_EQ(r.max_tokens, 5);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"END"});
  EXPECT_EQ(r.params.sampling.top_k, 3);
  EXPECT_EQ(r.tool_choice, ToolChoice::Required);
  EXPECT_FALSE(r.parallel_tool_calls);
  EXPECT_FALSE(r.reasoning);
  EXPECT_NE(r.prompt_text.find("<|im_start|>system\n"), std::string::npos);
  EXPECT_NE(r.prompt_text.find("Terse."), std::string::npos);
  EXPECT_NE(r.prompt_text.find("<parameter=city>\nOslo\n</parameter>"), std::string::npos);
  EXPECT_NE(r.prompt_text.find("<tool_response>\nError: rain\n</tool_response>"), std::string::npos);
  const ApiRequest thinking = parse_messages_request({{"max_tokens", 5},
                                                      {"thinking", {{"type", "enabled"}, {"budget_tokens", 100}}},
                                                      {"messages", {{{"role", "user"}, {"content", "hi"}}}}},
                                                     engine());
  EXPECT_TRUE(thinking.reasoning);
}

TEST(MessagesApi, ARecordedAnswerBecomesBlocksAndEvents) {
  auto req = std::make_shared<const ApiRequest>(parse_messages_request(
      json::parse(R"({"max_tokens": 50, "stream": true, "thinking": {"type": "enabled", "budget_tokens": 10},
        "tools": [{"name": "get_weather", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}}}],
        "messages": [{"role": "user", "content": "weather?"}]})"),
      engine()));
  MessagesFormat f(req, "m");
  const auto evs = events(feed(f, kAnswer, done("stop", 30)));
  ASSERT_FALSE(evs.empty());
  EXPECT_EQ(evs.front().first, "message_start");
  EXPECT_EQ(evs.back().first, "message_stop");
  std::map<int, std::string> deltas;
  std::vector<std::string> starts;
  for (const auto& [name, data] : evs) {
    EXPECT_EQ(name, data["type"].get<std::string>());
    if (name == "content_block_start") starts.push_back(data["content_block"]["type"].get<std::string>());
    if (name == "content_block_delta") {
      const json& d = data["delta"];
      deltas[data["index"]] += d.contains("thinking") ? d["thinking"]
                               : d.contains("text")   ? d["text"]
                                                      : d["partial_json"];
    }
    if (name == "message_delta") {
      EXPECT_EQ(data["delta"]["stop_reason"], "tool_use");
      EXPECT_EQ(data["usage"]["cache_read_input_tokens"], 4);
    }
  }
  EXPECT_EQ(starts, (std::vector<std::string>{"thinking", "text", "tool_use"}));
  EXPECT_EQ(deltas[0], "Let me look.\n");
  EXPECT_EQ(deltas[1], "Checking.\n");
  EXPECT_EQ(json::parse(deltas[2]), json::parse(R"({"city": "Oslo"})"));
  const json m = f.whole(done("stop", 30));
  EXPECT_EQ(m["stop_reason"], "tool_use");
  EXPECT_EQ(m["content"][2]["input"]["city"], "Oslo");
  EXPECT_EQ(m["usage"]["input_tokens"], 6);  // the tokens not read from the cache
  // a stop sequence is named
  MessagesFormat g(req, "m");
  g.frames(text("abc"));
  const json s = (g.frames(done("stop", 3, "END")), g.whole(done("stop", 3, "END")));
  EXPECT_EQ(s["stop_reason"], "stop_sequence");
  EXPECT_EQ(s["stop_sequence"], "END");
}

TEST(MessagesApi, ErrorsHaveAnthropicsShape) {
  const json e = error_body(Dialect::Anthropic, ApiError(404, "gone"));
  EXPECT_EQ(e, json::parse(R"({"type": "error", "error": {"type": "not_found_error", "message": "gone"}})"));
  EXPECT_EQ(error_body(Dialect::Ollama, ApiError(400, "bad")), json::parse(R"({"error": "bad"})"));
  EXPECT_EQ(dialect_of("/v1/messages/count_tokens"), Dialect::Anthropic);
  EXPECT_EQ(dialect_of("/api/chat"), Dialect::Ollama);
  EXPECT_EQ(dialect_of("/v1/responses"), Dialect::OpenAI);
}

TEST(OllamaApi, OptionsReachTheSampler) {
  const ApiRequest r = parse_ollama_chat(json::parse(R"({"model": "m", "messages": [{"role": "user", "content": "x"}],
    "think": false, "format": "json", "keep_alive": "5m",
    "options": {"temperature": 0.3, "top_k": 7, "top_p": 0.5, "repeat_penalty": 1.2, "seed": 9,
                "num_predict": 12, "stop": ["Z"], "num_ctx": 4096}})"),
                                         engine());
  EXPECT_TRUE(r.stream);  // Ollama streams unless told not to
  EXPECT_EQ(r.params.sampling.temperature, 0.3);
  EXPECT_EQ(r.params.sampling.top_k, 7);
  EXPECT_EQ(r.params.sampling.top_p, 0.5);
  EXPECT_EQ(r.params.sampling.repetition_penalty, 1.2);
  EXPECT_EQ(r.params.sampling.seed, 9u);
  EXPECT_EQ(r.max_tokens, 12);
  EXPECT_EQ(r.params.stop, std::vector<std::string>{"Z"});
  EXPECT_TRUE(r.params.json_object);
  EXPECT_FALSE(r.reasoning);
  EXPECT_FALSE(parse_ollama_chat(json::parse(R"({"messages": [{"role": "user", "content": "x"}],
    "options": {"num_predict": -1}})"),
                                 engine())
                   .max_tokens);
  try {
    parse_ollama_chat(json::parse(R"({"messages": [{"role": "user", "content": "x"}],
      "options": {"repeat_penalty": 0}})"),
                      engine());
    ADD_FAILURE();
  } catch (const ApiError& e) {
    EXPECT_NE(std::string(e.what()).find("'options.repeat_penalty'"), std::string::npos) << e.what();
  }
}

TEST(OllamaApi, ARecordedAnswerBecomesLinesWithToolCallsAndContext) {
  auto req = std::make_shared<const ApiRequest>(parse_ollama_chat(json::parse(R"({"messages":
    [{"role": "user", "content": "weather?"}], "tools": [{"type": "function", "function": {"name": "get_weather",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}]})"),
                                                                  engine()));
  OllamaFormat f(req, "m", true);
  const std::string out = feed(f, kAnswer, done("stop", 30));
  std::string thinking, content;
  json calls = json::array(), last;
  for (size_t at = 0; at < out.size();) {
    const size_t end = out.find('\n', at);
    last = json::parse(out.substr(at, end - at));
    at = end + 1;
    thinking += last["message"].value("thinking", "");
    content += last["message"]["content"].get<std::string>();
    for (const auto& c : last["message"].value("tool_calls", json::array())) calls.push_back(c);
  }
  EXPECT_EQ(thinking, "Let me look.\n");
  EXPECT_EQ(content, "Checking.\n");
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_EQ(calls[0]["function"]["arguments"], json::parse(R"({"city": "Oslo"})"));
  EXPECT_TRUE(last["done"]);
  EXPECT_EQ(last["eval_count"], 30);
  EXPECT_EQ(last["prompt_eval_count"], 6);
  const json whole = f.whole(done("stop", 30));
  EXPECT_EQ(whole["message"]["tool_calls"][0]["function"]["name"], "get_weather");

  // generate hands back prompt + answer as context, and takes it back
  auto gen = std::make_shared<const ApiRequest>(
      parse_ollama_generate(json::parse(R"({"prompt": "hi", "context": [5, 6]})"), engine()));
  EXPECT_EQ(gen->prompt[0], 5);
  EXPECT_EQ(gen->prompt[1], 6);
  OllamaFormat g(gen, "m", false);
  g.frames(text("x"));
  g.frames(done("length", 3));
  json ctx = g.whole(done("length", 3))["context"];
  ASSERT_EQ(ctx.size(), gen->prompt.size() + 3);
  EXPECT_EQ(ctx.back(), 3);
}

}  // namespace
}  // namespace lily::server
