// Splits a streamed model answer into reasoning, visible content and tool
// calls, as Qwen3.6 writes them: the generation prompt opens <think>, so the
// first </think> ends the reasoning; tool calls are
//   <tool_call>\n<function=NAME>\n<parameter=P>\nVALUE\n</parameter>\n</function>\n</tool_call>
// with values typed by the tool's JSON schema. Text is held back only while
// it could still be the start of a tag, so streaming never emits half a tag;
// a malformed or unfinished call comes back as content, never dropped.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace lily {

struct ToolCall {
  std::string name;
  nlohmann::ordered_json arguments = nlohmann::ordered_json::object();
};

struct ParsedDelta {
  std::string reasoning;
  std::string content;
  std::vector<ToolCall> tool_calls;
  bool empty() const { return reasoning.empty() && content.empty() && tool_calls.empty(); }
  void append(const ParsedDelta& d);
};

class OutputParser {
 public:
  // `in_reasoning`: the prompt already opened <think>. `tools`: the request's
  // tool list (OpenAI format) used to type argument values; may be null.
  OutputParser(bool in_reasoning, nlohmann::ordered_json tools);

  ParsedDelta push(const std::string& text);
  // End of the stream: flushes held text; an unfinished tool call becomes content.
  ParsedDelta finish();

 private:
  enum class Mode { Reasoning, Content, ToolCall };
  void drain(ParsedDelta& out, bool final);
  bool parse_call(const std::string& body, ToolCall* call) const;
  nlohmann::ordered_json typed_value(const std::string& fn, const std::string& param, const std::string& raw) const;

  Mode mode_;
  bool content_started_ = false;  // leading newlines after </think> are dropped
  bool after_call_ = false;       // just after a complete tool call
  std::string buf_;
  nlohmann::ordered_json tools_;
};

}  // namespace lily
