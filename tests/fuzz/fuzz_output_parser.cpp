// A model's answer split into reasoning, content and tool calls: fed whole
// and byte by byte, both ways give the same result.
#include <cstdlib>

#include "fuzz_support.h"
#include "lily/text/output_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const nlohmann::ordered_json tools = nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {
      "s": {"type": "string"}, "n": {"type": "integer"}, "b": {"type": "boolean"}, "o": {"type": "object"},
      "a": {"type": "array"}, "x": {"type": "number"}}}}}])");
  if (size == 0) return 0;
  const bool reasoning = data[0] & 1;
  const std::string s(lily::fuzz::text(data + 1, size - 1));
  lily::OutputParser whole(reasoning, tools);
  lily::ParsedDelta a = whole.push(s);
  a.append(whole.finish());
  lily::OutputParser bytes(reasoning, tools);
  lily::ParsedDelta b;
  for (char c : s) b.append(bytes.push(std::string(1, c)));
  b.append(bytes.finish());
  if (a.reasoning != b.reasoning || a.content != b.content || a.tool_calls.size() != b.tool_calls.size()) std::abort();
  for (const auto& call : a.tool_calls) call.arguments.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  return 0;
}
